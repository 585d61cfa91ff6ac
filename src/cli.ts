// The commander program: the only place that prints errors and calls process.exit.
import { Command, CommanderError } from 'commander'
import { createRequire } from 'node:module'
import { Interrupted, RunError, UsageError } from './errors.js'
import { abortSignal, cleanupAll, installSignalHandlers } from './lifecycle.js'
import { setColor } from './report/color.js'
import { addScenarioParamOptions, addTargetOptions } from './commands/common.js'
import { listCommand } from './commands/list.js'
import { showCommand } from './commands/show.js'
import { runCommand } from './commands/run.js'
import { checkCommand } from './commands/check.js'
import { keyCommand } from './commands/key.js'
import { locksCommand } from './commands/locks.js'
import { matrixCommand } from './commands/matrix.js'
import { benchCommand } from './commands/bench.js'

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string }

/**
 * postgres.js 3.4.9 throws an uncatchable TypeError from connection.js nextWrite when a backend is
 * terminated while a query is in flight (upstream #1208, #1154). That session is already recorded as
 * lost, so exactly this error is ignored; anything else is a bug in race and ends the run with exit 3.
 */
function isPostgresJsNextWriteBug(err: unknown): boolean {
  return (
    err instanceof TypeError &&
    /reading 'write'/.test(err.message) &&
    /nextWrite/.test(err.stack ?? '') &&
    /postgres[\\/]src[\\/]connection\.js/.test(err.stack ?? '')
  )
}

/**
 * postgres.js 3.4.9 fetches array types right after login in an async function whose promise nobody holds
 * (connection.js ReadyForQuery: `return fetchArrayTypes()`). When race ends a connection that is still in
 * that phase (its run failed while others were connecting, e.g. 53300), the fetch rejects with
 * CONNECTION_DESTROYED as an unhandled rejection. race asked for that ending, so exactly this is ignored.
 */
function isPostgresJsDestroyedFetch(err: unknown): boolean {
  return (
    err instanceof Error &&
    (err as { code?: string }).code === 'CONNECTION_DESTROYED' &&
    /at Object\.terminate .*postgres[\\/]src[\\/]connection\.js/.test(err.stack ?? '')
  )
}

let finishing = false
async function finish(code: number, message?: string): Promise<never> {
  if (finishing) return new Promise<never>(() => {})
  finishing = true
  const errors = await cleanupAll()
  // A signal that arrived while the command was already finishing (its last reply and the signal came in the
  // same turn of the event loop) still decides the exit code: the user asked to stop.
  const late = !message && abortSignal.reason instanceof Interrupted ? abortSignal.reason : undefined
  return late ? finish2(late.exitCode, describe(late).message, errors) : finish2(code, message, errors)
}

function finish2(code: number, message: string | undefined, errors: Error[]): never {
  if (message) process.stderr.write(`race: ${message}\n`)
  for (const e of errors) process.stderr.write(`race: ${e.message}\n`)
  process.exit(errors.length && code === 0 ? 3 : code)
}

function describe(err: unknown): { code: number; message: string } {
  if (err instanceof UsageError || err instanceof RunError) return { code: err.exitCode, message: err.message }
  if (err instanceof Interrupted) return { code: err.exitCode, message: `${err.message}: stopped, ${err.leftover ?? 'cleaned up'}` }
  const e = err as Error
  if (process.env.RACE_DEBUG) process.stderr.write(`${e?.stack ?? e}\n`)
  return { code: 3, message: `internal error: ${e?.message ?? e} (RACE_DEBUG=1 shows the stack; please report it)` }
}

function program(): Command {
  const p = new Command('race')
    .description('A race laboratory for PostgreSQL: make a concurrency bug happen on purpose, then watch the fix hold.')
    .version(version)
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ outputError: (str, write) => write(str.replace(/^error: /, 'race: ')) })
    .addHelpText(
      'after',
      `
Examples:
  $ race list
  $ race run broken --n 2 --timeline           the race, drawn step by step
  $ race run advisory --n 5 --max-pending 3    3 committed, 2 rejected, invariant HELD
  $ race check --database-url $DATABASE_URL    CI: this database behaves as documented
  $ race matrix                                the anomaly x isolation-level grid
  $ race bench --vs-pgbench                    isolation cost on this server, next to pgbench

With no --database-url, DATABASE_URL or PG* variables, race starts a throwaway PostgreSQL 18.
Exit codes: 0 as documented, 1 a deviation, 2 bad input, 3 could not run or decide.`,
    )

  p.command('list')
    .description('every scenario, one line each')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .action((o) => setExit(listCommand(o)))
    .addHelpText('after', '\nExamples:\n  $ race list\n  $ race list --json | jq -r \'.[].id\'')

  p.command('show')
    .description("a scenario's story, schema, steps, race point and documented outcome")
    .argument('<scenario>', 'scenario id (race list)')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .action((id, o) => setExit(showCommand(id, o)))
    .addHelpText('after', '\nExamples:\n  $ race show advisory\n  $ race show repeatable-read --json')

  const run = p
    .command('run')
    .description('run one scenario over N real connections and judge the invariant')
    .argument('<scenario>', 'scenario id (race list)')
    .option('--n <n>', 'number of sessions (connections); default per scenario, usually 2')
    .option(
      '--schedule <schedule>',
      'barrier (default: all begin, then run free), lockstep (step k of every session before step k+1), serial, or a permutation "s1.begin s2.begin s1.check ..."',
    )
    .option('--window <duration>', "sleep at the scenario's race point (between check and write), e.g. 300ms")
    .option('--trials <k>', 'repeat the race K times and report the rate', '1')
    .option('--timeline', 'draw the interleaving: one column per session, ms since the barrier')
    .option('--expect <held|violated>', 'exit 0 when the invariant held (or was violated), whatever the documentation says')
    .option('--user <uuid>', 'act for this user (fixes the advisory keys, e.g. to watch them with race locks); default a fresh uuid per trial')
    .option('--hold <duration>', "keep the race's locks held (before the first commit) this long, for race locks in another terminal")
  addScenarioParamOptions(run)
  addTargetOptions(run)
  run
    .action(async (id, o, cmd) => setExit(await runCommand(id, o, cmd)))
    .addHelpText(
      'after',
      `
Examples:
  $ race run broken --n 2 --timeline
  $ race run broken --schedule lockstep --trials 20
  $ race run advisory --n 5 --max-pending 3
  $ race run advisory --n 50 --max-pending 3 --trials 200
  $ race run serializable --retries 3 --timeline
  $ race run repeatable-read --no-guard
  $ race run unique-index --window 300ms --json
  $ race run deadlock --ordered --timeline
  $ race run shared-lock --hold 30s             then, in another terminal: race locks --watch
  $ race run write-skew --isolation serializable --timeline
  $ race run lost-update --schedule "t1.begin t2.begin t1.read t2.read t1.update t2.update t1.commit t2.commit"
  $ race run skip-locked --n 8 --no-skip-locked`,
    )

  const check = p
    .command('check')
    .description('every scenario in lockstep against one database: exit 0 only if all behave as documented')
    .argument('[scenarios...]', 'scenario ids (default: all)')
  addTargetOptions(check)
  check
    .action(async (ids, o) => setExit(await checkCommand(ids, o)))
    .addHelpText('after', '\nExamples:\n  $ race check\n  $ race check --database-url postgres://app@db:5432/app --json\n  $ race check advisory unique-index')

  p.command('key')
    .description('the advisory key of namespace:id, as the article derives it (sha256, first 8 bytes, big-endian, signed)')
    .argument('<namespace>', "what the key is for, e.g. setup_request")
    .argument('<id>', 'the resource, e.g. a user id')
    .option('--sql', 'print the matching SELECT pg_advisory_xact_lock(...)')
    .option('--json', 'print JSON (the key as a string, and how pg_locks shows it)')
    .action((ns, id, o) => setExit(keyCommand(ns, id, o)))
    .addHelpText('after', '\nExamples:\n  $ race key setup_request 42                  7844923485908670055\n  $ race key setup_request 1 --sql\n  $ race key account 3fa85f64-5717-4562-b3fc-2c963f66afa6 --json')

  const locks = p
    .command('locks')
    .description('advisory locks held or awaited in a database right now (pg_locks joined with pg_stat_activity), waiting first')
    .option('--watch', 'redraw every --interval until Ctrl-C (or --run-timeout)')
    .option('--interval <duration>', 'with --watch: how often to redraw (default 1s)')
  addTargetOptions(locks)
  locks
    .action(async (o) => setExit(await locksCommand(o)))
    .addHelpText(
      'after',
      '\nExamples:\n  $ race locks --database-url postgres://app@db:5432/app\n  $ race locks --watch --interval 500ms\n  $ race run deadlock --hold 20s      (its output says how to point race locks at it)',
    )

  const matrix = p
    .command('matrix')
    .description('every isolation anomaly at READ COMMITTED, REPEATABLE READ and SERIALIZABLE: one grid, what happened next to what PostgreSQL documents; exit 1 on any deviation')
    .argument('[anomalies...]', 'rows to run (default: all anomalies of the matrix)')
  addTargetOptions(matrix)
  matrix
    .action(async (ids, o) => setExit(await matrixCommand(ids, o)))
    .addHelpText(
      'after',
      `
Each anomaly runs with its default interleaving (race show <anomaly> prints it) at each level.
A cell reads: anomaly (the invariant was violated), prevented <SQLSTATE> (PostgreSQL raised it and the
invariant held), serialized (held because a session waited), clean (held, nobody waited or failed).

Examples:
  $ race matrix
  $ race matrix write-skew lost-update
  $ race matrix --database-url $DATABASE_URL --json     CI: exit 1 on any deviation`,
    )

  const bench = p
    .command('bench')
    .description("throughput and latency by isolation level and contention, beside the isolation article's published ratios (and pgbench)")
    .option('--workload <list>', 'oltp (80% point reads, 15% read-modify-write, 5% range sums) and/or advisory (check-then-insert under pg_advisory_xact_lock, advisory article §4)', 'oltp')
    .option('--isolation <levels>', 'one or more of read-committed, repeatable-read, serializable (rc, rr, ser), comma-separated', 'rc,rr,serializable')
    .option('--hot <percents>', 'oltp: percent of accesses that go to the hot rows, one cell each', '1,10,50')
    .option('--hot-rows <n>', 'oltp: size of the hot set', '100')
    .option('--rows <n>', 'oltp: rows in the accounts table', '100000')
    .option('--users <k>', 'advisory: users the requests are spread over (fewer = more contention)', '100')
    .option('--clients <n>', 'concurrent clients, one connection (backend) each', '8')
    .option('--duration <duration>', 'measured time per cell', '10s')
    .option('--warmup <duration>', 'unmeasured time before each cell', '1s')
    .option('--max-tries <n>', 'tries per transaction on 40001/40P01, retried as a whole (pgbench --max-tries)', '10')
    .option('--lock-timeout <duration>', "advisory: lock_timeout set with set_config(..., true), as in the article", '2s')
    .option('--vs-pgbench', 'also run each cell through pgbench (same script, clients, duration, level) and print race/pgbench')
    .option('--html <file>', 'also write a self-contained HTML page with the charts')
    .option('--driver <driver>', "race's load connections: wire (its own minimal protocol client) or postgres.js", 'wire')
  addTargetOptions(bench)
  bench
    .action(async (o, cmd) => setExit(await benchCommand(o, cmd)))
    .addHelpText(
      'after',
      `
Each cell runs --clients connections for --duration after --warmup; 40001/40P01 are retried as a whole up to
--max-tries and counted (like pgbench); other errors are failures, counted by SQLSTATE. --step-timeout is each
statement's statement_timeout. Everything happens in a schema race_bench_<hex>, dropped at the end.

Examples:
  $ race bench
  $ race bench --workload oltp --hot 1,10,50 --duration 5s --vs-pgbench
  $ race bench --workload advisory --users 20 --isolation rc,serializable
  $ race bench --isolation rc,rr --clients 16 --html bench.html
  $ race bench --database-url postgres://app@db:5432/app --json`,
    )

  p.hook('preAction', (_p, action) => setColor(action.opts().color !== false))
  return p
}

let exitWith = 0
function setExit(code: number): void {
  exitWith = code
}

async function main(): Promise<void> {
  installSignalHandlers()
  process.on('uncaughtException', (err) => {
    if (isPostgresJsNextWriteBug(err)) return
    const d = describe(err)
    void finish(3, d.message)
  })
  process.on('unhandledRejection', (err) => {
    if (isPostgresJsDestroyedFetch(err)) return
    const d = describe(err)
    void finish(3, d.message)
  })
  try {
    await program().parseAsync(process.argv)
    if (abortSignal.aborted) throw abortSignal.reason
    await finish(exitWith)
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version exit 0; every parse error (already printed by commander) is bad input: 2.
      await finish(err.exitCode === 0 ? 0 : 2)
    }
    // An abort (Ctrl-C, run timeout) explains a failure better than the error it caused.
    const d = describe(abortSignal.aborted ? abortSignal.reason : err)
    await finish(d.code, d.message)
  }
}

void main()
