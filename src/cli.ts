// The commander program: the only place that prints errors and calls process.exit.
// Each command loads only what it uses: the command named on the command line is the only module imported (with
// the scenario summaries, in parallel, when it declares scenario flags); help and anything else load them all.
import type { Command } from 'commander'
import { Interrupted, RunError, UsageError } from './errors.js'
import { racelabVersion } from './home.js'
import { isMariadbKillOfGoneThread, isPostgresJsDestroyedFetch, isPostgresJsNextWriteBug } from './known-bugs.js'
import { contained, installSignalHandlers, RunContext } from './lifecycle.js'
import { prefetchScenario, summaries, type ScenarioSummary } from './registry.js'
import { columns, fitLines } from './report/width.js'

type Register = (p: Command, all: readonly ScenarioSummary[], ctx: RunContext) => unknown

/**
 * Every command, in the order help lists them. `scenarios`: it reads the scenario summaries (run and show declare
 * every scenario's flags; list prints them), read while its module loads.
 */
const COMMANDS: { name: string; scenarios?: boolean; load: () => Promise<Register> }[] = [
  { name: 'list', scenarios: true, load: async () => { const { registerList } = await import('./commands/list.js'); return (p, _all, ctx) => registerList(p, setExit, ctx) } },
  { name: 'show', scenarios: true, load: async () => { const { registerShow } = await import('./commands/show.js'); return (p, all, ctx) => registerShow(p, all, setExit, ctx) } },
  { name: 'run', scenarios: true, load: async () => { const { registerRun } = await import('./commands/run.js'); return (p, all, ctx) => registerRun(p, all, setExit, ctx) } },
  { name: 'explore', scenarios: true, load: async () => { const { registerExplore } = await import('./commands/explore.js'); return (p, all, ctx) => registerExplore(p, all, setExit, ctx) } },
  { name: 'replay', load: async () => { const { registerReplay } = await import('./commands/replay.js'); return (p, _all, ctx) => registerReplay(p, setExit, ctx) } },
  { name: 'check', load: async () => { const { registerCheck } = await import('./commands/check.js'); return (p, _all, ctx) => registerCheck(p, setExit, ctx) } },
  { name: 'key', load: async () => { const { registerKey } = await import('./commands/key.js'); return (p) => registerKey(p, setExit) } },
  { name: 'locks', load: async () => { const { registerLocks } = await import('./commands/locks.js'); return (p, _all, ctx) => registerLocks(p, setExit, ctx) } },
  { name: 'matrix', load: async () => { const { registerMatrix } = await import('./commands/matrix.js'); return (p, _all, ctx) => registerMatrix(p, setExit, ctx) } },
  { name: 'bench', load: async () => { const { registerBench } = await import('./commands/bench.js'); return (p, _all, ctx) => registerBench(p, setExit, ctx) } },
  { name: 'spec', load: async () => { const { registerSpec } = await import('./commands/spec.js'); return (p, _all, ctx) => registerSpec(p, setExit, ctx) } },
  { name: 'cache', load: async () => { const { registerCache } = await import('./commands/cache.js'); return (p, _all, ctx) => registerCache(p, setExit, ctx) } },
]


/** The command's context (one command per process): its abort, its cleanup, its embedded server, its colours. */
const context = new RunContext()

let finishing = false
async function finish(code: number, message?: string): Promise<never> {
  if (finishing) return new Promise<never>(() => {})
  finishing = true
  const errors = await context.cleanupAll()
  // A signal that arrived while the command was already finishing (its last reply and the signal came in the
  // same turn of the event loop) still decides the exit code: the user asked to stop.
  const late = !message && context.signal.reason instanceof Interrupted ? context.signal.reason : undefined
  return late ? finish2(late.exitCode, describe(late).message, errors) : finish2(code, message, errors)
}

async function finish2(code: number, message: string | undefined, errors: Error[]): Promise<never> {
  if (message) process.stderr.write(`race: ${message}\n`)
  // A command that reported what it had found when it was stopped wrote its document already: not a second one.
  if (message && code !== 0 && !context.stopReported) await reportFailure(code, message)
  for (const e of errors) process.stderr.write(`race: ${e.message}\n`)
  // What is still queued for stdout (a --json document of a few hundred kB, where stdout is a pipe that writes
  // asynchronously) is written before the process ends: process.exit would cut it. Bounded: a reader that never
  // reads does not hold race.
  await Promise.all([drained(process.stdout, 10_000), drained(process.stderr, 10_000)])
  process.exit(errors.length && code === 0 ? 3 : code)
}

/** Until `stream` has written what it queued, or `ms` passed. */
function drained(stream: NodeJS.WriteStream, ms: number): Promise<void> {
  if (!stream.writableLength) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    stream.once('drain', () => (clearTimeout(timer), resolve()))
  })
}

function describe(err: unknown): { code: number; message: string } {
  if (err instanceof UsageError || err instanceof RunError) return { code: err.exitCode, message: err.message }
  // The reader of race's output went away (race spec ... | head): stopped and cleaned up, quietly, as a command killed
  // by SIGPIPE; only what cleanup could not undo is said.
  if (err instanceof Interrupted && err.signal === 'SIGPIPE') return { code: err.exitCode, message: err.leftover ? `${err.message}: stopped, ${err.leftover}` : '' }
  if (err instanceof Interrupted) return { code: err.exitCode, message: `${err.message}: stopped, ${err.leftover ?? 'cleaned up'}` }
  const e = err as Error
  if (process.env.RACE_DEBUG) process.stderr.write(`${e?.stack ?? e}\n`)
  return { code: 3, message: `internal error: ${e?.message ?? e} (RACE_DEBUG=1 shows the stack; please report it)` }
}

/**
 * What the command line says will be needed starts loading before commander: race run/show <scenario>'s module
 * (the action imports it again, at no cost), and race run's PostgreSQL driver (loaded only: nothing connects
 * before the command has checked its input).
 */
function prefetch(argv: readonly string[]): void {
  if ((argv[2] === 'run' || argv[2] === 'show') && argv[3]) prefetchScenario(argv[3])
  if (argv[2] === 'run') import('./db/postgres.js').catch(() => {})
}

/** commander, imported once main has started the loads above. */
let commander: Promise<typeof import('commander')>

/** The program with these commands registered (every command, unless the command line names one or asks only for the version). */
async function program(argv: readonly string[]): Promise<Command> {
  const named = COMMANDS.filter((x) => x.name === argv[2])
  // `race --version` alone needs no command: none is loaded (commander prints the version as ever).
  const versionOnly = argv.length === 3 && (argv[2] === '--version' || argv[2] === '-V')
  const use = named.length ? named : versionOnly ? [] : COMMANDS
  const [registers, all] = await Promise.all([Promise.all(use.map((x) => x.load())), use.some((x) => x.scenarios) ? summaries() : []])
  const { Command } = await commander
  const p = new Command('race')
    .description('A race laboratory for PostgreSQL: make a concurrency bug happen on purpose, then watch the fix hold.')
    .version(racelabVersion())
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      outputError: (str, write) => write(str.replace(/^error: /, 'race: ')),
      // Help (and its examples) fits the terminal, or 80 columns in a pipe, like every other output.
      writeOut: (str) => process.stdout.write(fitLines(str.replace(/\n$/, '').split('\n'), columns(), 0).join('\n') + '\n'),
    })
    .configureHelp({ helpWidth: columns() })
    .addHelpText(
      'after',
      `
Examples:
  $ race list
  $ race run broken --n 2 --timeline          the race, drawn step by step
  $ race run broken --step                    the same, one step per Enter
  $ race run advisory --n 5 --max-pending 3   3 committed, 2 rejected: HELD
  $ race check --database-url $DATABASE_URL   CI: behaves as documented
  $ race matrix                               anomalies x isolation levels
  $ race bench --vs-pgbench                   isolation cost, beside pgbench
  $ race cache                                the embedded server's template

With no --database-url, DATABASE_URL or PG* variables, race starts a
throwaway PostgreSQL 18.
Exit codes: 0 as documented, 1 a deviation, 2 bad input, 3 could not run.`,
    )
  // Each command declares its own options, typed, in its own file.
  for (const register of registers) register(p, all, context)
  p.hook('preAction', async (_p, action) => {
    active = { name: action.name(), opts: action.opts() }
    const { colorWanted, loadChalk, styleFor, THEMES } = await import('./report/color.js')
    const theme = action.opts().theme
    if (theme !== undefined && !THEMES.includes(theme)) throw new UsageError(`--theme ${theme} is not a theme: use ${THEMES.join(' or ')} (presenter: bold instead of dim, for a projector)`)
    if (colorWanted(action.opts().color !== false, process.stdout)) await loadChalk()
    // The command's style: passed (ctx.style) to everything it draws, never a colour state of the process.
    context.style = styleFor(action.opts().color !== false, process.stdout, theme)
  })
  return p
}

/** The command being run and its options (set before its action runs), for what CI reads when it fails. */
let active: { name: string; opts: Record<string, unknown> } | undefined

/**
 * A command that fails still gives a CI what it asked for: with --json, one JSON document on stdout (command,
 * exitCode, error); with --junit, a JUnit file with one <error> testcase; with --html (run, explore), a page saying
 * it could not run. The one line on stderr stays.
 */
async function reportFailure(code: number, message: string): Promise<void> {
  const [{ errorDocument, writeJunit }, { maskUrl }] = await Promise.all([import('./report/ci.js'), import('./db/target.js')])
  const argv = process.argv.slice(2)
  const name = active?.name ?? argv.find((a) => !a.startsWith('-')) ?? 'race'
  const json = active ? Boolean(active.opts.json) : argv.includes('--json')
  if (json) process.stdout.write(JSON.stringify(errorDocument(name, code, message), null, 2) + '\n')
  const junit = active?.opts.junit
  if (typeof junit === 'string' && junit.trim()) {
    try {
      writeJunit(junit, `race ${name}`, [{ classname: `race.${name}`, name: 'could not run', ms: 0, error: { message, lines: [`race ${argv.map((a) => (a.includes('://') ? maskUrl(a) : a)).join(' ')}`, `exit ${code}: ${message}`] } }])
    } catch {
      /* the file was the problem: the line on stderr says what went wrong */
    }
  }
  // --html: a page saying so, never an earlier run's page left behind as if it were this one's.
  const html = active?.opts.html
  if (typeof html === 'string' && html.trim() && (name === 'run' || name === 'explore')) {
    try {
      ;(await import('./report/html.js')).writeErrorPage(html, name, code, message, argv)
    } catch {
      /* as for --junit */
    }
  }
}

let exitWith = 0
function setExit(code: number): void {
  exitWith = code
}

async function main(): Promise<void> {
  installSignalHandlers(context)
  // A closed pipe on stdout stops the command as SIGPIPE would, but with race's cleanup (databases, servers).
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') context.abort(new Interrupted('SIGPIPE'))
    else void finish(3, describe(e).message)
  })
  prefetch(process.argv)
  commander = import('commander')
  // One that comes from an application race's session (the code under test) is that session's failure, and the
  // run goes on; any other is race's own: an internal error.
  process.on('uncaughtException', (err) => {
    if (isPostgresJsNextWriteBug(err) || isMariadbKillOfGoneThread(err) || contained(err, 'uncaught exception')) return
    const d = describe(err)
    void finish(3, d.message)
  })
  process.on('unhandledRejection', (err) => {
    if (isPostgresJsDestroyedFetch(err) || isMariadbKillOfGoneThread(err) || contained(err, 'unhandled rejection')) return
    const d = describe(err)
    void finish(3, d.message)
  })
  try {
    await (await program(process.argv)).parseAsync(process.argv)
    // A command that reported what it had when it was stopped keeps its exit code (finish still gives a signal's).
    if (context.signal.aborted && !context.stopReported) throw context.signal.reason
    await finish(exitWith)
  } catch (err) {
    if (err instanceof (await commander).CommanderError) {
      // Help and --version exit 0; every parse error (already printed by commander) is bad input: 2.
      if (err.exitCode !== 0) await reportFailure(2, err.message.replace(/^error: /, ''))
      await finish(err.exitCode === 0 ? 0 : 2)
    }
    // An abort (Ctrl-C, run timeout) explains a failure better than the error it caused.
    const d = describe(context.signal.aborted ? context.signal.reason : err)
    await finish(d.code, d.message)
  }
}

void main()
