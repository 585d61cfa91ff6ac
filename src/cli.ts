// The commander program: the only place that prints errors and calls process.exit.
import { Command, CommanderError } from 'commander'
import { createRequire } from 'node:module'
import { Interrupted, RunError, UsageError } from './errors.js'
import { abortSignal, cleanupAll, installSignalHandlers } from './lifecycle.js'
import { setColor } from './report/color.js'
import { errorDocument, writeJunit } from './report/ci.js'
import { maskUrl } from './db/target.js'
import { columns, fitLines } from './report/width.js'
import { registerBench } from './commands/bench.js'
import { registerCache } from './commands/cache.js'
import { registerCheck } from './commands/check.js'
import { registerKey } from './commands/key.js'
import { registerList } from './commands/list.js'
import { registerLocks } from './commands/locks.js'
import { registerMatrix } from './commands/matrix.js'
import { registerRun } from './commands/run.js'
import { registerShow } from './commands/show.js'
import { registerSpec } from './commands/spec.js'
import { scenarios } from './registry.js'
import type { Scenario } from './scenario.js'

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
  if (message && code !== 0) reportFailure(code, message)
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

function program(all: readonly Scenario[]): Command {
  const p = new Command('race')
    .description('A race laboratory for PostgreSQL: make a concurrency bug happen on purpose, then watch the fix hold.')
    .version(version)
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
  registerList(p, setExit)
  registerShow(p, all, setExit)
  registerRun(p, all, setExit)
  registerCheck(p, setExit)
  registerKey(p, setExit)
  registerLocks(p, setExit)
  registerMatrix(p, setExit)
  registerBench(p, setExit)
  registerSpec(p, setExit)
  registerCache(p, setExit)
  p.hook('preAction', (_p, action) => {
    setColor(action.opts().color !== false)
    active = { name: action.name(), opts: action.opts() }
  })
  return p
}

/** The command being run and its options (set before its action runs), for what CI reads when it fails. */
let active: { name: string; opts: Record<string, unknown> } | undefined

/**
 * A command that fails still gives a CI what it asked for: with --json, one JSON document on stdout (command,
 * exitCode, error); with --junit, a JUnit file with one <error> testcase. The one line on stderr stays.
 */
function reportFailure(code: number, message: string): void {
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
    await program(await scenarios()).parseAsync(process.argv)
    if (abortSignal.aborted) throw abortSignal.reason
    await finish(exitWith)
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version exit 0; every parse error (already printed by commander) is bad input: 2.
      if (err.exitCode !== 0) reportFailure(2, err.message.replace(/^error: /, ''))
      await finish(err.exitCode === 0 ? 0 : 2)
    }
    // An abort (Ctrl-C, run timeout) explains a failure better than the error it caused.
    const d = describe(abortSignal.aborted ? abortSignal.reason : err)
    await finish(d.code, d.message)
  }
}

void main()
