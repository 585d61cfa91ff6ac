// How a run's trials are carried out: one interface, two implementations. The engine's run (run.ts) makes the run's
// schema, runs the setup on control before every trial and collects the facts; a trial runner opens the sessions'
// connections, runs one trial under the schedule (or a chooser) and ends what it holds when the run ends. Statement
// scenarios (built-in, .spec files, .mjs scenario modules) are run by the engine's own (statements.ts); an
// application race brings its own (src/app/runner.ts), named by its scenario's kind (scenario.ts, ScenarioKind): the
// engine knows nothing else of it.
import { performance } from 'node:perf_hooks'
import type { Driver } from '../db/driver.js'
import type { Entry } from '../permutation.js'
import type { RunContext } from '../lifecycle.js'
import type { Plan } from '../plan.js'
import type { Rows, Schedule } from '../scenario.js'
import type { Words } from './refusals.js'
import type { Chooser, InvariantReport, StepPause, TimelineEvent, TrialFacts } from './types.js'

/** What a run is asked to do (engine/run.ts run()): the plan, the schedule or a chooser, the bounds, the callbacks. */
export interface RunConfig {
  /** The run's context: its abort (Ctrl-C, --run-timeout) ends every wait; a timeout names what is stuck. */
  context: RunContext
  plan: Plan
  schedule: Schedule
  /** With schedule 'permutation': the order, as text ("s1.begin s2.begin ..."). */
  permutation?: string
  /** The steps' order for a step-by-step schedule, as the run service parsed it (absent: derived from schedule and permutation). */
  order?: Entry[]
  trials: number
  /**
   * The scenario is one of race's own (registry.isBuiltIn): its SQL is race's and runs as the control role. Absent
   * or false: the SQL is a user's (a spec, a module, an application race) and runs as the run's own role where the
   * driver makes one (db/run-role.ts).
   */
  ownSql?: boolean
  stepTimeoutMs: number
  connectTimeoutMs: number
  keep: boolean
  /** The user every session acts for; default a fresh uuid per trial (so no two runs share advisory keys). */
  user?: string
  /**
   * --hold: before the first session runs its last step (commit or rollback), keep everything as it is for
   * this long, so `race locks` in another terminal sees the race's locks held and awaited. 0: no hold.
   */
  holdMs?: number
  /** Called when the hold starts, with the backends of the trial. */
  onHold?: (pids: number[], ms: number) => void
  onTrial?: (done: number, facts: TrialFacts) => void
  /**
   * --step: called before each step of a step-by-step schedule (not barrier) is launched, with where every
   * session stands; the step waits until it resolves. A rejection ends the run like an abort.
   */
  beforeStep?: (pause: StepPause) => Promise<void>
  /** Every event as the engine records it (a presenter redraws while it waits). */
  onEvent?: (e: TimelineEvent) => void
  /**
   * --fresh-connections: every trial opens its sessions' connections after its setup and closes them when it ends.
   * Default: they are opened while control runs the setup, and kept across trials where the driver can reset them.
   */
  freshConnections?: boolean
  /**
   * The chooser of trial k (0-based), which decides at every quiet moment which ready session's step goes next
   * (types.ts, Chooser); it replaces the schedule. An application race's facts carry `order`, the labels as they
   * were released. For an explorer.
   */
  chooser?: (trial: number) => Chooser
  /**
   * race explore: trial k's order is chosen while it runs, step by step, by what this returns for k (schedule.ts
   * runChosen); the run ends, whatever `trials` says, at the first k it returns undefined for. Called after
   * onTrial of trial k-1, so a trial's order may depend on what the trials before it did. It may wait (a promise: race
   * explore --jobs waits for a branch another run finds); the wait must end when the run's context aborts.
   */
  choose?: (trial: number) => Chooser | undefined | Promise<Chooser | undefined>
  /** With choose: the order each trial's steps were launched in, after its onTrial. */
  onOrder?: (trial: number, order: Entry[]) => void
  /**
   * The caller's words for what the run refuses or could not do (refusals.ts), in its own options' names (the
   * CLI's: commands/words.ts). Absent, or undefined for a refusal: the engine's own, which name no option.
   */
  word?: Words
  /**
   * engine/oracle.ts's serial runs (--oracle serial): trial k runs the sessions one after another in `orders[k]`,
   * the tables read each time one more has ended (`prefix`) and after the trial (TrialFacts.tables). Set only by
   * serialSet; a run with it judges nothing by an oracle itself.
   */
  serial?: { orders: readonly string[][]; prefix: (trial: number, ended: number, tables: Record<string, string[]>) => void }
}

/** What a step of a session returned, for the invariant's `:session.step.column` binds. */
export type SeenBy = (session: string, step: string) => Rows | undefined

/** What the run gives every runner: the driver, the run's configuration, and its one abort signal. */
export interface TrialContext {
  lab: Driver
  cfg: RunConfig
  /** The run's abort signal (Ctrl-C, the run timeout), read once by run(): a trial ends its sessions when it fires. */
  signal: AbortSignal
  /** Rejects with the abort's reason when the run is aborted (for Promise.race). */
  whenAborted(): Promise<never>
  /** Says what is in flight, so that the run timeout's message can name the stuck session and step. */
  describeStuck(describe: () => string): void
  /** The invariant's SQL on control, once the trial's sessions have ended: `held` true, false, or null. */
  evaluate(user: string, seen: SeenBy): Promise<InvariantReport>
}

/** One trial to run: its number (0-based), the run's schema, the user it acts for, and an explorer's chooser. */
export interface TrialCall {
  k: number
  space: string
  user: string
  /** Replaces the schedule: at every quiet moment it picks which ready session's step goes next. */
  chooser?: Chooser
}

export interface TrialResult {
  facts: TrialFacts
  /** With a chooser: the order the steps were launched in (session index, step index). */
  ran?: Entry[]
}

export interface TrialRunner {
  /**
   * It opens the next trial's connections ahead, while control makes the schema and runs the setup (open). False:
   * a trial opens (or takes back) its own in run.
   */
  readonly connectsAhead: boolean
  /** Starts opening the next trial's session connections into `space` (nothing when connectsAhead is false). */
  open(space: string): void
  /** Once the connections open started are open (rejects with the first failure). Absent: not told. */
  whenOpen?(): Promise<void>
  /** One trial, its setup already run on control. Throws only when the run cannot go on (an abort, a lost server). */
  run(trial: TrialCall): Promise<TrialResult>
  /** The run is being aborted: end at once what is held for a next trial (a trial in flight ends its own). */
  abort(): void
  /**
   * The run is over (`failed`: it failed or was aborted): ends every connection held for a next trial around the
   * schema's drop, which it is given, and returns what the drop returned. What could hold up the drop ends before it.
   */
  close<T>(failed: boolean, drop: () => Promise<T>): Promise<T>
  /** Session connections opened, and handed from one trial to the next. */
  readonly connections: { opened: number; kept: number }
}

/**
 * Makes the runner of one run. It refuses what it cannot do (a schedule, an option) by throwing before any schema
 * or connection exists.
 */
export type TrialRunnerFactory = (ctx: TrialContext) => TrialRunner

/**
 * A trial's clock and its events, for both runners: times in milliseconds from the trial's start (restart: the
 * barrier, or the first step), rounded to a tenth.
 */
export class TrialClock {
  /** The events recorded so far (emptied when the barrier falls: what led there is not the race). */
  readonly events: TimelineEvent[] = []
  private t0 = performance.now()
  constructor(private readonly onEvent?: (e: TimelineEvent) => void) {}
  readonly now = (): number => performance.now() - this.t0
  restart(): void {
    this.t0 = performance.now()
  }
  readonly record = (e: Omit<TimelineEvent, 't'>): TimelineEvent => {
    const ev: TimelineEvent = { t: Math.round(this.now() * 10) / 10, ...e }
    this.events.push(ev)
    this.onEvent?.(ev)
    return ev
  }
  /**
   * A wait learnt after the step had its result (an isolated session's worker is told of it by the main thread, whose
   * word can come after the server's answer: app/session.ts markBlocked): 'wait' is put after the step's 'run', at
   * its time, and 'woke' before its result, at that one's, as a wait seen while the step ran would have been.
   */
  readonly recordLateWait = (session: string, step: string): void => {
    const mine = (e: TimelineEvent) => e.session === session && e.step === step
    const run = this.events.findIndex((e) => mine(e) && e.kind === 'run')
    if (run < 0) return
    let end = this.events.length - 1
    while (end > run && !(mine(this.events[end]) && this.events[end].kind !== 'run')) end--
    if (end === run) return
    const woke: TimelineEvent = { t: this.events[end].t, session, step, kind: 'woke' }
    const wait: TimelineEvent = { t: this.events[run].t, session, step, kind: 'wait' }
    this.events.splice(end, 0, woke)
    this.events.splice(run + 1, 0, wait)
    this.onEvent?.(wait)
    this.onEvent?.(woke)
  }
}

/**
 * Waits until every one of `opening` has settled, then fails with the first failure (the earliest in time), if any.
 * A trial's connect phase uses it: ending at the first failure would leave the connections still being opened to
 * arrive after the trial's cleanup, with nobody to close them. Each must be bounded (a connect timeout).
 */
export function settleAll(opening: Promise<unknown>[]): Promise<void> {
  let first: { e: unknown } | undefined
  return Promise.allSettled(opening.map((p) => p.catch((e) => ((first ??= { e }), Promise.reject(e))))).then(() => {
    if (first) throw first.e
  })
}

/**
 * A trial's abort handling, for both runners: while `body` runs, an abort of the run calls `onAbort` (which ends the
 * trial's sessions at once, so that nothing waits on them); if `body` fails (an abort included), every session is
 * abandoned (`abandon`, with why) and its connection ended for good (`kill`) before the error goes on.
 */
export async function abortable<T>(signal: AbortSignal, o: { onAbort(): void; abandon(why: string): void; kill(): Promise<void> }, body: () => Promise<T>): Promise<T> {
  const onAbort = () => o.onAbort()
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    return await body()
  } catch (e) {
    o.abandon(signal.aborted ? 'the run was aborted' : 'the run failed')
    await o.kill()
    throw e
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}
