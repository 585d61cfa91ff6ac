// race spec FILE.spec ...: PostgreSQL's isolationtester without a PostgreSQL build. Each spec runs in a
// database of its own on the target (embedded PostgreSQL 18 by default; a guarded schema when the role may not
// create databases) and prints the transcript
// isolationtester prints; --results writes DIR/<name>.out, --expected compares with DIR/<name>.out (or an
// alternate <name>_1.out ... as pg_regress accepts) and prints ok / FAILED and the differences.
import fs from 'node:fs'
import type { Command } from 'commander'
import { PostgresLab } from '../db/postgres.js'
import { UsageError } from '../errors.js'
import { REGRESS_SERVER_SETTINGS } from '../tester/database.js'
import type { Outcome, Status } from '../tester/one-spec.js'
import { compareExpected, readSpecs, runSpecs } from '../tester/suite.js'
import type { RunContext as Context } from '../lifecycle.js'
import { parseWhole } from '../parse.js'
import { plain, type Style } from '../report/color.js'
import { withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'
import { addTargetOptions, eachPg, type TargetOptions } from './common.js'
import { addOptions, type Options } from '../run/options.js'

export interface SpecOptions extends TargetOptions {
  results?: string
  expected?: string
  n?: string
  keep?: boolean
  /** Each spec in a guarded schema instead of a database of its own. */
  schema?: boolean
}

/** race spec's own options, declared once (the form is run/options.ts's): commander's, and docs/options.md's table. */
export const SPEC_OWN = [
  { flag: '--results <dir>', name: 'results', kind: 'text', help: 'write each transcript to DIR/<name>.out instead of printing it' },
  { flag: '--expected <dir>', name: 'expected', kind: 'text', help: 'compare each transcript with DIR/<name>.out (or <name>_1.out ...): ok or FAILED, and the differences' },
  { flag: '--n <n>', name: 'n', kind: 'whole', help: 'sessions each template session (session s*) becomes (default 2)', defaultNote: '2' },
  { flag: '--schema', name: 'schema', kind: 'switch', help: 'each spec in a schema of its own, its setup and teardown checked to change nothing outside it, instead of a database of its own (as pg_isolation_regress runs it)' },
] as const satisfies Options

export function registerSpec(program: Command, exit: (code: number) => void, ctx: Context): Command {
  const cmd = program
    .command('spec')
    .description("run isolation-test spec files as PostgreSQL's isolationtester does, with the same transcript")
    .argument('<files...>', 'spec files (PostgreSQL isolation-test format)')
  addOptions(cmd, SPEC_OWN)
  addTargetOptions(cmd, ctx, { stepTimeout: false, pg: true })
  const runTimeout = cmd.options.find((x) => x.long === '--run-timeout')
  if (runTimeout) runTimeout.default('30m')
  cmd.action(async (files: string[], o: SpecOptions) => exit(await eachPg(ctx, o, () => specCommand(ctx, files, o))))
  cmd.addHelpText(
    'after',
    `
Like libpq, race reads PGOPTIONS, PGDATESTYLE, PGTZ and PGAPPNAME (pg_regress runs isolation tests with
PGDATESTYLE='Postgres, MDY', PGTZ=America/Los_Angeles, PGOPTIONS='-c intervalstyle=postgres_verbose' and
PGAPPNAME=isolation/<test>, which race uses when PGAPPNAME is not set). A step is cancelled as the server's
own isolationtester would cancel it: after twice PG_TEST_TIMEOUT_DEFAULT seconds on PostgreSQL 16 and later
(default 360 s), after PGISOLATIONTIMEOUT seconds before (default 300 s).

Each spec runs as pg_isolation_regress runs it: in a database of its own (from template0, with pg_regress's
settings), dropped afterwards with the roles the spec created; race's own server has pg_regress's configuration
(max_prepared_transactions = 2). On --database-url, when the role may not create databases, each spec runs in a
schema of its own instead, and a setup or teardown block that would change anything outside it is refused.
In a call of several specs, one that is refused or fails does not stop the others: the summary says what
happened to each, and the exit code is the worst (1 failed, 2 refused, 3 could not run).

Examples:
  $ race spec orders.spec
  $ race spec specs/*.spec --results out/
  $ race spec specs/*.spec --expected expected/ --database-url postgres://postgres@127.0.0.1:5432/test`,
  )
  return cmd
}

export async function specCommand(ctx: Context, files: string[], o: SpecOptions): Promise<number> {
  const n = o.n === undefined ? 2 : parseWhole('--n', o.n, 1, 1000)
  const multi = files.length > 1
  const items = readSpecs(files, n)
  for (const dir of [o.results, o.expected]) {
    if (dir !== undefined && !fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
      if (dir === o.results) fs.mkdirSync(dir, { recursive: true })
      else throw new UsageError(`--expected ${dir} is not a directory`)
    }
  }
  const bounds = parseBounds(o)
  const streaming = o.results === undefined && o.expected === undefined && !o.json
  return withLab(
    ctx,
    o.databaseUrl,
    bounds,
    async (driver, target) => {
      // isolationtester's format is PostgreSQL's: its SQL, its messages, pg_isolation_test_session_is_blocked.
      if (!(driver instanceof PostgresLab)) throw new UsageError(`race spec runs on PostgreSQL: give a postgres:// URL (or none, for the embedded PostgreSQL 18)`)
      const lab = driver
      const { outcomes, inDatabase } = await runSpecs(lab, target.kind === 'embedded', items, {
        keep: Boolean(o.keep),
        schema: Boolean(o.schema),
        results: o.results,
        connectTimeoutMs: bounds.connectTimeoutMs,
        streaming,
      })
      const diffs = o.expected !== undefined ? compareExpected(outcomes, o.expected, multi) : []
      const worst = Math.max(0, ...outcomes.map((x) => x.code))
      if (o.json) {
        printJson(lab, inDatabase, outcomes, o)
        return worst
      }
      printSummary(ctx.style ?? plain, outcomes, diffs, worst, o, streaming, multi)
      return worst
    },
    undefined,
    { settings: REGRESS_SERVER_SETTINGS },
  )
}

function printJson(lab: PostgresLab, inDatabase: boolean, outcomes: Outcome[], o: SpecOptions): void {
  const results = outcomes.map((x) => ({
    spec: x.file,
    name: x.name,
    transcript: Buffer.from(x.text, 'latin1').toString('utf8'),
    status: x.status,
    exitCode: x.code,
    ...(x.reason !== undefined ? { error: x.reason } : {}),
    ms: x.ms,
    ...(o.expected !== undefined ? { matched: x.status === 'ok' } : {}),
  }))
  process.stdout.write(JSON.stringify({ server: { version: lab.server.version }, target: lab.target.label, in: inDatabase ? 'database' : 'schema', results }, null, 2) + '\n')
}

/** The summary: one line per spec, as pg_regress's. On stdout when the transcripts are not there, else on stderr. */
function printSummary(c: Style, outcomes: Outcome[], diffs: string[], worst: number, o: SpecOptions, streaming: boolean, multi: boolean): void {
  const summarize = o.expected !== undefined || o.results !== undefined || multi || outcomes.some((x) => x.status === 'error')
  if (!summarize) return
  const w = streaming ? process.stderr : process.stdout
  const mark = (x: Outcome) => (x.status === 'ok' ? c.green('ok') : x.status === 'FAILED' ? c.red('FAILED') : c.red('error'))
  for (const x of outcomes) {
    const why = x.status === 'error' ? `: ${x.reason}` : x.status === 'FAILED' && o.expected === undefined ? ' (isolationtester would exit 1)' : ''
    w.write(`${x.name.padEnd(24)} ... ${mark(x)}${why}  ${x.ms} ms\n`)
  }
  for (const d of diffs) w.write(Buffer.from(d, 'latin1'))
  const count = (s: Status) => outcomes.filter((x) => x.status === s).length
  const parts = [`${count('ok')} ok`, ...(count('FAILED') ? [`${count('FAILED')} FAILED`] : []), ...(count('error') ? [`${count('error')} error`] : [])]
  const line = o.expected !== undefined && !count('FAILED') && !count('error') ? `all ${outcomes.length} specs as expected` : `${outcomes.length} spec${outcomes.length === 1 ? '' : 's'}: ${parts.join(', ')}${o.expected !== undefined ? ` (compared with ${o.expected})` : ''}`
  w.write((worst ? c.red(line) : c.green(line)) + '\n')
}
