// The API: a race from a test runner (node:test, vitest, jest...), in the caller's process, without the CLI.
//
//   import { run } from 'racelab'
//   const r = await run('advisory', { n: 5, params: { maxPending: 3 } })
//   assert.ok(r.ok, r.text)
//
// run() takes what `race run` takes (a built-in id, a .spec file, a .mjs module, or a scenario object made with
// defineScenario) and resolves to the document `race run --json` prints, plus `ok` (exit code 0: as documented, or
// as `expect` asks) and `text` (the report `race run` prints, without colours). Bad input rejects with a RaceError
// whose exitCode is 2, a run that could not be carried out or decided with exitCode 3: the same one line the CLI
// prints. Races in one process may run at the same time: each has its own context (abort, cleanup, embedded server,
// colours; lifecycle.ts RunContext). Everything a run creates (its schema, the embedded server, a PgBouncer) is
// removed before run() settles, also when it fails.
import { RunError, UsageError, Interrupted } from './errors.js'
import { isMariadbKillOfGoneThread, isPostgresJsDestroyedFetch, isPostgresJsNextWriteBug } from './known-bugs.js'
import { RunContext } from './lifecycle.js'
import { containError } from './app/contain.js'
import type { Scenario } from './scenario.js'
import type { RunOptions } from './run/options.js'
import type { ExploreApiOptions } from './explore/options.js'

/** What a race is: a built-in scenario's id (race list), a path to a .spec file, a .mjs module or a TypeScript module (.ts, .mts: loaded through tsx), or a scenario object. */
export type ScenarioRef = string | Scenario

/**
 * run()'s options: race run's, by their API names (n, schedule, window, trials, expect, databaseUrl, pg, user,
 * freshConnections, connectTimeout, stepTimeout, runTimeout, oracle) and params, typed from their one declaration
 * (run/options.ts RUN_OPTIONS; docs/options.md lists each with its flag, meaning and default).
 */
export type { RunOptions }

/**
 * explore()'s options: race explore's, by their API names (connectTimeout, stepTimeout, runTimeout as for run(): '5s'
 * or milliseconds; connectTimeoutMs, stepTimeoutMs, runTimeoutMs still taken, deprecated) and params, name,
 * onProgress, typed from their one declaration (explore/options.ts EXPLORE_OPTIONS; docs/options.md).
 */
export interface ExploreOptions extends ExploreApiOptions {}

/** The error run() rejects with: the CLI's one line, and the exit code race would give (2 bad input, 3 could not run, 130/143 interrupted). */
export class RaceError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message)
    this.name = 'RaceError'
  }
}

/** What run() resolves to: `race run --json`'s document, with `ok` and the printed report. */
export type RunResult = import('./report/json.js').RunDocument & {
  /** exitCode 0: the run was as documented (or as `expect` asked). */
  ok: boolean
  /** The report `race run --timeline` prints, without colours. */
  text: string
}

/** Runs one race and judges it; see the module comment. */
export function run(scenario: ScenarioRef, options: RunOptions = {}): Promise<RunResult> {
  return guarded((ctx) => runOnce(ctx, scenario, options))
}

/**
 * Every interleaving of the race's steps, each judged (race explore): how many violate, grouped, and the shortest
 * violating one as a permutation `run(..., { schedule })` replays. Like run(): a context of its own, cleaned up, RaceError.
 */
export function explore(scenario: ScenarioRef, options: ExploreOptions = {}): Promise<import('./explore/result.js').ExploreResult> {
  return guarded(async (ctx) => {
    const [{ explore: exploreOnce }, { userScenario }, { embeddedVersion }] = await inTurn([() => import('./explore/execute.js'), () => import('./load.js'), () => import('./run/params.js')])
    const { oracle, pg, ...rest } = options
    // pg: the embedded server's major version, as run() and race explore --pg take it.
    ctx.embedded.pg = embeddedVersion(pg, options.databaseUrl)
    const s = typeof scenario === 'string' ? scenario : userScenario(scenario, `explore(): scenario ${typeof scenario?.id === 'string' ? scenario.id : ''}`.trim())
    if (!('oracle' in options)) return exploreOnce(ctx, s, rest)
    // oracle: 'serial': the race judged against its serial orders too (engine/oracle.ts).
    const [{ findScenario, judgedBy }, { parseOracle, refuseUnjudged }] = await inTurn([() => import('./registry.js'), () => import('./engine/oracle.js')])
    const judged = await judgedBy(typeof s === 'string' ? await findScenario(s) : s, parseOracle(oracle, 'explore(): oracle'))
    refuseUnjudged(judged)
    return exploreOnce(ctx, judged, { ...(typeof s === 'string' && rest.name === undefined ? { name: s } : {}), ...rest })
  })
}

/** What replay() resolves to: race replay --json's document, with `ok` and the printed report. */
export type ReplayResult = import('./evidence/replay.js').ReplayOutcome & {
  /** exitCode 0: the code now passes the counterexample. */
  ok: boolean
  /** The report race replay prints (the run, then the comparison), without colours. */
  text: string
  /** race run --json's document of the replay (absent when changed code could not be followed at all). */
  run?: import('./report/json.js').RunDocument
}

/**
 * Runs a counterexample file (race explore --save, race run --save) again, as race replay does: resolves with
 * exitCode 1 while it still fails, 0 once the code passes it, 3 when the replay could not be followed or judged.
 * A bad file, or changed code without `guided`, rejects with a RaceError whose exitCode is 2.
 */
export function replay(file: string, options: import('./evidence/replay.js').ReplayOptions = {}): Promise<ReplayResult> {
  return guarded(async (ctx) => {
    if (typeof file !== 'string' || !file.trim()) throw new UsageError(`replay(): give the counterexample file's path, got ${JSON.stringify(file)}`)
    const known = new Set(['guided', 'databaseUrl', 'connectTimeout', 'stepTimeout', 'runTimeout'])
    for (const k of Object.keys(options ?? {})) if (!known.has(k)) throw new UsageError(`replay(): unknown option '${k}': it takes ${[...known].join(', ')}`)
    const [{ replayFile }, { NAMES }] = await inTurn([() => import('./evidence/replay.js'), () => import('./run/params.js')])
    const { outcome, view } = await replayFile(ctx, file, options ?? {}, NAMES)
    const [json, table, timeline, color, report, width] = await inTurn([() => import('./report/json.js'), () => import('./report/table.js'), () => import('./report/timeline.js'), () => import('./report/color.js'), () => import('./report/run.js'), () => import('./report/width.js')])
    ctx.style ??= color.styleFor(false)
    const text = [...(view ? [report.render(ctx.style, view, 'race', false, table, timeline.timeline), ''] : []), ...outcome.notes.map((n) => `note: ${n}`), ...width.hang(`replay ${file}: ${{ 'still-fails': 'STILL FAILS', passes: 'PASSES', unknown: 'UNKNOWN' }[outcome.result]}  ${outcome.summary}`, width.columns(), 2)].join('\n')
    return { ...outcome, ok: outcome.exitCode === 0, text, ...(view ? { run: json.toJson(view, { timeline: false, exitCode: outcome.exitCode, kept: false }) } : {}) }
  })
}

async function runOnce(ctx: RunContext, ref: ScenarioRef, o: RunOptions): Promise<RunResult> {
  const [{ findScenario, judgedBy }, { userScenario }, { engineFor, assertRunsOn }, { paramsOf, embeddedVersion, NAMES }, { validateRun }, { executeRun }, { parseOracle, refuseUnjudged }, { refuseUnknown, RUN_OPTIONS, CONNECT_TIMEOUT, STEP_TIMEOUT, RUN_TIMEOUT }] = await inTurn([
    () => import('./registry.js'),
    () => import('./load.js'),
    () => import('./run/lab.js'),
    () => import('./run/params.js'),
    () => import('./run/request.js'),
    () => import('./run/execute.js'),
    () => import('./engine/oracle.js'),
    () => import('./run/options.js'),
  ])
  if (typeof ref !== 'string' && (typeof ref !== 'object' || ref === null)) throw new UsageError(`run(): the scenario is a built-in id, a .spec/.mjs path or a defineScenario({...}) object, got ${ref === null ? 'null' : typeof ref}`)
  // An option run() does not take (RUN_OPTIONS) is bad input, never run with the defaults.
  refuseUnknown('run()', RUN_OPTIONS, o)
  const found = typeof ref === 'string' ? await findScenario(ref) : userScenario(ref, `run(): scenario ${typeof ref.id === 'string' ? ref.id : ''}`.trim())
  // oracle: 'serial': every trial judged against the serial orders too (engine/oracle.ts).
  const scenario = await judgedBy(found, parseOracle(o.oracle, 'run(): oracle'))
  refuseUnjudged(scenario)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(scenario, engine)
  ctx.embedded.pg = embeddedVersion(o.pg, o.databaseUrl)
  const given = paramsOf(scenario, o.params ?? {}, engine)
  const checked = validateRun(
    { scenario, engine, params: given, databaseUrl: o.databaseUrl, n: o.n, schedule: o.schedule, window: o.window, trials: o.trials, expect: o.expect, user: o.user, freshConnections: o.freshConnections, connectTimeout: o.connectTimeout ?? CONNECT_TIMEOUT.default, stepTimeout: o.stepTimeout ?? STEP_TIMEOUT.default, runTimeout: o.runTimeout ?? RUN_TIMEOUT.default },
    NAMES,
  )
  const { view, code } = await executeRun(ctx, checked)
  const [json, table, timeline, color, report] = await inTurn([() => import('./report/json.js'), () => import('./report/table.js'), () => import('./report/timeline.js'), () => import('./report/color.js'), () => import('./report/run.js')])
  const doc = json.toJson(view, { timeline: true, exitCode: code, kept: false })
  // Without colours, whatever the process's own (a CLI in the same process) are.
  ctx.style ??= color.styleFor(false)
  return { ...doc, ok: code === 0, text: report.render(ctx.style, view, 'race', false, table, timeline.timeline) }
}


/**
 * Runs fn with a context of its own (abort, cleanup, embedded server, colours), its cleanup always done,
 * Ctrl-C/SIGTERM in the caller's process ending the race cleanly (then passed on when nobody else listens), and
 * race's own errors as RaceError. The signal listeners are this call's: added for it, removed when it settles; a
 * race that runs beside it has its own. Uncaught exceptions and unhandled rejections are watched by one pair of
 * listeners while any race runs (processErrors): one from an application race's session is that session's failure;
 * any other is not race's to swallow, and goes on as it would without race.
 */
async function guarded<T>(fn: (ctx: RunContext) => Promise<T>): Promise<T> {
  const ctx = new RunContext()
  let signalled: NodeJS.Signals | undefined
  const onSignal = (sig: NodeJS.Signals) => {
    signalled = sig
    ctx.abort(new Interrupted(sig))
  }
  const signals = ['SIGINT', 'SIGTERM'] as const
  for (const s of signals) process.on(s, onSignal)
  const unwatch = processErrors.watch(ctx)
  let result: { ok: true; value: T } | { ok: false; error: unknown }
  try {
    result = { ok: true, value: await fn(ctx) }
  } catch (e) {
    result = { ok: false, error: e }
  }
  const errors = await ctx.cleanupAll()
  for (const s of signals) process.off(s, onSignal)
  unwatch()
  if (signalled && process.listenerCount(signalled) === 0) process.kill(process.pid, signalled)
  if (!result.ok || ctx.signal.aborted) throw asRaceError(ctx.signal.aborted ? ctx.signal.reason : (result as { error: unknown }).error)
  if (errors.length) throw new RaceError(errors.map((e) => e.message).join('; '), 3)
  return result.value
}

/**
 * The caller's process's uncaught exceptions and unhandled rejections while races run. An error from a session's
 * code under test is contained (app/contain.ts: the session fails with it). Any other comes from elsewhere in the
 * caller's process (its own code, another test): race does not make it the race's failure. The process's other
 * listeners get it as they would; with none, Node's default is kept: the process ends with the error (race first
 * kills what its running races started, synchronously, as a second Ctrl-C does).
 */
const processErrors = (() => {
  const running = new Set<RunContext>()
  const onUncaught = (err: unknown) => {
    if (isPostgresJsNextWriteBug(err) || isMariadbKillOfGoneThread(err) || containError(err, 'uncaught exception')) return
    if (process.listenerCount('uncaughtException') > 1) return // someone else listens: Node calls them too
    fatal(err)
  }
  const onUnhandled = (reason: unknown, promise: Promise<unknown>) => {
    if (isPostgresJsDestroyedFetch(reason) || isMariadbKillOfGoneThread(reason) || containError(reason, 'unhandled rejection')) return
    if (process.listenerCount('unhandledRejection') > 1) return
    // Without a listener, Node (--unhandled-rejections=throw, its default) raises it as an uncaught exception.
    const others = process.listeners('uncaughtException').filter((l) => l !== onUncaught)
    if (others.length) for (const l of others) (l as (e: unknown, origin: string) => void).call(process, reason, 'unhandledRejection')
    else fatal(reason, promise)
  }
  const fatal = (err: unknown, _promise?: Promise<unknown>) => {
    for (const ctx of running) ctx.forceAll()
    running.clear()
    process.off('uncaughtException', onUncaught)
    process.off('unhandledRejection', onUnhandled)
    // Thrown again with race's listeners gone: Node prints it and exits as it would have without race.
    process.nextTick(() => {
      throw err
    })
  }
  return {
    watch(ctx: RunContext): () => void {
      if (running.size === 0) {
        process.on('uncaughtException', onUncaught)
        process.on('unhandledRejection', onUnhandled)
      }
      running.add(ctx)
      return () => {
        if (!running.delete(ctx) || running.size) return
        process.off('uncaughtException', onUncaught)
        process.off('unhandledRejection', onUnhandled)
      }
    },
  }
})()

function asRaceError(err: unknown): RaceError {
  if (err instanceof RaceError) return err
  if (err instanceof UsageError || err instanceof RunError) return new RaceError(err.message, err.exitCode)
  if (err instanceof Interrupted) return new RaceError(`${err.message}: stopped, ${err.leftover ?? 'cleaned up'}`, err.exitCode)
  const e = err as Error
  const out = new RaceError(`internal error: ${e?.message ?? e} (please report it)`, 3)
  out.cause = err
  return out
}

/**
 * Dynamic imports one after another, not at once: Jest's ESM loader (--experimental-vm-modules) fails two imports in
 * flight that share a module ("request for '../registry.js' is not in cache"). The modules are small and cached.
 */
async function inTurn<const T extends readonly (() => Promise<unknown>)[]>(loads: T): Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }> {
  const out: unknown[] = []
  for (const load of loads) out.push(await load())
  return out as { -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }
}
