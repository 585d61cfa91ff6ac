// race explore: every interleaving of a scenario's sessions (or a seeded sample of them), each run from a fresh
// state through the engine's own trials and judged by the scenario's invariant; how many violate it, grouped by
// how they ended, and the shortest violating one as a permutation line `race run --schedule` replays.
//
// The engine runs the trials (engine/run.ts: the schema made again and the setup run before each, the sessions'
// connections kept and reset); each trial's order is chosen while it runs (engine/schedule.ts runChosen) by a
// strategy from enumerate.ts: depth-first over every choice, or seeded random runs, then shrinking.
import type { RunContext } from '../lifecycle.js'
import { performance } from 'node:perf_hooks'
import type { Driver, ServerInfo } from '../db/driver.js'
import { maskUrl } from '../db/target.js'
import type { Chooser, Moment, ReadyStep } from '../engine/types.js'
import type { TrialFacts } from '../engine/types.js'
import { RunError, UsageError } from '../errors.js'
import { exitCode, labelOf, summarize, type ExpectOverride } from '../judge/index.js'
import { formatPermutation, type Entry } from '../permutation.js'
import { assertSound, documentedFor, plan, type Plan } from '../plan.js'
import { findScenario, isBuiltIn, raceDigest } from '../registry.js'
import { racelabVersion } from '../home.js'
import { applicationOf, defaultParams, kindOf, type Documented, type Params, type Scenario, type Verdict } from '../scenario.js'
import { expectsOverride, isFileScenario, specFailure } from '../isolation/common.js'
import { judgeTrial, type Trial } from '../run/judge.js'
import { assertRunsOn, engineFor, openDriver, withLab } from '../run/lab.js'
import { NAMES, paramsOf, type Bounds } from '../run/params.js'
import type { Words } from '../engine/refusals.js'
import { checkExplore, DEFAULT_DEPTH, DEFAULT_SAMPLE } from './request.js'
import { compareKeys, Dfs, follow, ordersOf, Pct, Preemptive, shrinkCandidates, SplitDfs, switches, type Pick, type SplitRun, type Strategy } from './enumerate.js'
import { Handout } from './jobs.js'
import { assertOneSearch } from './one-search.js'
import { fewestSwitches, Reduced } from './reduce.js'
import { observe, sharesDatabase, touched, type Seen, type Touched } from '../engine/footprint.js'
import { commitBody, NOT_SPLIT } from '../engine/session.js'
import { levelSet, pointsOfStep, snapshotAfter } from '../engine/points.js'
import { shownBlock } from '../isolation/guard.js'
import { Doubts } from '../engine/doubt.js'
import { codeFailure } from '../judge/failure.js'
import { declaredCodes } from '../run/judge.js'
import { exitFromFindings, stopOf, type Stopped } from './findings.js'

export { Dfs, Pct, Sampler, follow, ordersOf, shrinkCandidates, switches } from './enumerate.js'
export type { Pick, Strategy } from './enumerate.js'

export { DEFAULT_MAX, DEFAULT_SAMPLE, DEFAULT_SHRINK, exploreSessions } from './request.js'

export interface ExploreOptions {
  /** postgres://... or mysql://...; default DATABASE_URL, PG* variables, else race's embedded PostgreSQL. */
  databaseUrl?: string
  /** Sessions (a template session's copies); default the scenario's. */
  n?: number
  /** The scenario's params; the rest default. */
  params?: Params
  /**
   * Declared steps with more orders than this are sampled (unless exhaustive); an application race's reduced search
   * stops after this many runs and says what it left. Default 1000. exhaustive ignores it.
   */
  max?: number
  /** Sample this many random runs (even when every interleaving would fit in --max). */
  sample?: number
  /** The sample's seed; default a random one (reported, to run the same sample again). */
  seed?: number
  /**
   * A sample that found no violation passes expect held only when it states at least this probability of finding
   * one of its depth (0 < p < 1); without it a sample that held is not known to hold (exitCode 3).
   */
  acceptSample?: number
  /**
   * Every order of the steps (today's exact enumeration, the oracle), whatever max says. Default: the reduced search,
   * which runs one order of each class of orders that differ only by swapping steps that touch nothing in common.
   */
  exhaustive?: boolean
  /**
   * An application race: the reduced search (by default its interleavings are all run, or sampled above max). It
   * assumes the sessions share no state outside the database: one that reads and writes a module-level variable, an
   * in-process cache or lock between its queries depends on the others where the server sees nothing, and orders
   * the reduction skips could end otherwise. Declared SQL steps are reduced by default.
   */
  reduce?: boolean
  /**
   * Run only this shard (index 1..count) of a sample's draws, or of an exhaustive search's tree; mergeShards joins the
   * shards' results.
   */
  shard?: { index: number; count: number }
  /**
   * Runs at once, each job in its own schema with its own connections (default the machine's cores, at most the
   * runs). An exhaustive search and a sample of declared steps use them; the reduced search, --preemptions and
   * application races run on one job (the result says how many it used).
   */
  jobs?: number
  /** Run every order with at most this many preemptions, fewest first (instead of the reduced search). */
  preemptions?: number
  /** A sample's PCT depth: the violations of this depth its stated probability is for. Default 3 (at most 2 preemptions). */
  depth?: number
  /** Runs spent at most on shrinking a sampled violation to a minimal one; 0: no shrinking. Default 100. */
  shrink?: number
  /** How the replay command names the scenario (the command passes what the user typed); default its id, or its file. */
  name?: string
  /** held: every interleaving must hold; violated: at least one must violate. Default: the scenario's own. */
  expect?: 'held' | 'violated'
  connectTimeoutMs?: number
  stepTimeoutMs?: number
  runTimeoutMs?: number
  /**
   * After each run: how many have run (shrinking's too), how many different interleavings violated, and how many runs
   * are planned: exactly (a sample), at most (every interleaving: orders with waiting steps do not run), null while
   * shrinking.
   */
  onProgress?: (p: { runs: number; violating: number; planned: number | null; exact: boolean; phase: 'explore' | 'shrink' }) => void
}

export interface Interleaving {
  /** The permutation line: `race run <scenario> --schedule "<line>"` runs this interleaving again. */
  line: string
  verdict: Verdict
  /** The invariant held (true), was violated (false), or could not be decided (null). */
  held: boolean | null
  observed: string
  /** How each session ended: committed, rejected: <reason>, a SQLSTATE, lost, timeout. */
  outcomes: Record<string, string>
  /** Sessions seen waiting for another in this interleaving. */
  waited: string[]
  /** The SQLSTATEs the server raised in it, a retry loop's recovered ones included (each once). */
  raised: string[]
  /** The level each session's transaction ran at (read from the server, or named by its own BEGIN). */
  levels: Record<string, string | null>
  /** How many times the schedule leaves one session for another (the smaller, the simpler to read). */
  switches: number
  /** How many runs had this interleaving (a sample can draw one twice). */
  runs: number
  why: string
  /**
   * A failure found in it: the code under test failed (judge/failure.ts: an error it raised or caught that neither the
   * server's concurrency control nor the scenario declares, named session by session, "s1 42P01 undefined_table"), or,
   * where every session must complete (mustComplete), a session did not. Absent when the interleaving was judged, or
   * left undecided by what race could not judge (a lost connection, a timeout).
   */
  failure?: string
  /** The failure is a session that did not complete where every session must (mustComplete). */
  incomplete?: true
  /** --inject: the faults injected in it, each as given and where (s1.q4; the line shows it as s1.q4!40001). */
  injected?: { fault: string; at: string }[]
}

export interface Group {
  /** VIOLATED, HELD or UNKNOWN, the verdict, and how the sessions ended: what the interleavings here share. */
  key: string
  held: boolean | null
  verdict: Verdict
  outcomes: Record<string, string>
  count: number
  /** Their permutation lines, fewest switches first. */
  lines: string[]
  /** A group of interleavings in which a failure was found (and the invariant was not violated): which. */
  failure?: string
}

export interface ExploreResult {
  scenario: string
  /**
   * The SHA-256 of the race's text (the spec's or module's file; a built-in's module) and racelab's version: the
   * parts of a sharded search join only when they searched one race with one race (explore/one-search.ts).
   */
  digest: string
  racelab: string
  n: number
  params: Params
  server: ServerInfo
  target: string
  invariant: string
  mode: 'all' | 'sample'
  /**
   * exhaustive: every order; reduced: one order of each class of orders that differ only by swapping steps that touch
   * nothing in common (what each step touched read from the server, explore/reduce.ts); sample: random runs.
   */
  search: 'exhaustive' | 'reduced' | 'sample' | 'preemptions'
  /**
   * --preemptions K: every order with at most `bound` preemptions (a choice that leaves a session that could go on),
   * run fewest first; `reached`: the most a run made; `complete`: every such order was run.
   */
  preemptions?: { bound: number; reached: number; complete: boolean }
  /**
   * The reduced search: the free steps it ran (over all runs), how many of them race could not classify (treated as
   * conflicting with every step: waits, errors, autocommit statements, MySQL), and runs it finished only because a run
   * must end (every ready session's next step already covered).
   */
  reduction?: { steps: number; unclassified: number; redundant: number; retried: number }
  /**
   * How many orders of the steps keep each session's own order (isolationtester's count), as a decimal string. An
   * application race's steps are discovered as its functions run: then the orders of the queries its first run sent
   * (each session's count along that run), which decided between every interleaving and a sample.
   */
  orders: string
  /**
   * An application race: how its sessions ran. isolated: each in a worker thread of its own, sharing nothing but the
   * database (the reduced search by default); shared: in race's one process (the race module's sharedState, or
   * --inject), where they may share JavaScript state (every interleaving unless --reduce). `assumes`: what that means.
   */
  sessionsRan?: { mode: 'isolated' | 'shared'; assumes: string }
  /** declared: a spec's or scenario's steps, known before; discovered: an application race's queries, as they were sent. */
  steps: 'declared' | 'discovered'
  /**
   * mode 'all': every interleaving was run. False when the search of an application race's tree reached --max runs
   * with interleavings left (its first run promised fewer); then "held in all" is not known (exit 3 if expected).
   */
  complete: boolean
  /** With mode 'sample': the sample's size and seed. */
  sample?: {
    size: number
    seed: number
    /**
     * PCT's depth d: a violation that needs d steps in a given order. With no violation found, `probability` is the
     * least chance that one of depth d would have been found by these runs (1 - (1 - 1/(n k^(d-1)))^runs, n
     * sessions, k steps a run: `steps`); `counted`: the runs that count towards it.
     */
    depth: number
    steps: number
    counted: number
    probability: number
    /**
     * 'drawn' (--inject): where a fault was offered the run took it or not at random; `probability` is for the order
     * of the steps alone, not for a violation that also needs a given fault.
     */
    faults?: 'drawn'
    /** --shard index/count: this result holds the draws j with j % count === index - 1; mergeShards joins them. */
    shard?: { index: number; count: number }
    /** --accept-sample: the least probability asked of the sample for it to pass expect held. */
    accept?: number
  }
  /**
   * --shard index/count of an exhaustive search: this result holds the interleavings of the subtrees that are this
   * shard's (enumerate.ts SplitDfs); `passed`: runs made only on the way to them (another shard reports those).
   */
  shard?: { index: number; count: number; passed: number }
  /** Runs made in the search (a sample's draws), shrinking's not counted. */
  runs: number
  /** Different interleavings among them. */
  interleavings: number
  violating: number
  /** Interleavings race could not decide (not judged held or violated, and no failure found: those are `failed`). */
  unknown: number
  /** Every session must complete (mustComplete): the interleavings in which one did not (failures, whatever the invariant said). */
  incomplete?: number
  /** Interleavings with a failure (Interleaving.failure: the code failing, or a session that did not complete where every one must): a finding, exit 1 (docs/verdicts.md). */
  failed: number
  groups: Group[]
  /** The violating interleaving with the fewest switches (after shrinking, for a sample). */
  shortest: (Interleaving & { shrunk?: { from: string; runs: number } }) | null
  /**
   * `race run ... --schedule "..."`: the command that replays the shortest, on the same database: the
   * --database-url given (its password masked as ***, see replayNote); nothing when DATABASE_URL, the PG* variables
   * or race's embedded server chose it (they choose the same again).
   */
  replay: string | null
  /** Set when the replay line cannot be pasted as it is (a password masked in it): what to put back. */
  replayNote?: string
  /** The interleaving in which the code failed with the fewest switches (not shrunk), and the command that replays it. */
  shortestFailure: Interleaving | null
  failureReplay: string | null
  /**
   * The search was stopped before its end (race explore: --run-timeout, Ctrl-C, SIGTERM): what is here is what it had
   * found by then (`complete` is false), the run in flight when it stopped left out.
   */
  stopped?: Stopped
  /** Runs whose replayed choices went otherwise than before (the database did something else that time). */
  diverged: number
  /**
   * --inject: each fault as given, in how many of the search's runs it was injected and in how many it was offered
   * (some session's next query was its site). One injected in no run makes a pass unknown (exit 3): `notFired`.
   */
  injections?: { fault: string; runs: number; offered: number }[]
  /** --inject: a line for each fault injected in no run, saying why ("--inject 40001@99 never fired: ..."). */
  notFired?: string[]
  every: Interleaving[]
  expected: string
  matched: boolean
  exitCode: 0 | 1 | 3
  ms: number
  /** Runs (search and shrinking) per second of the whole exploration. */
  perSecond: number
  /** Jobs the runs were spread over (each its own schema and connections); the result is the same with any number. */
  jobs: number
  /** Why the search ran on one job when more were asked for (the reduced search, --preemptions, an application race). */
  jobsNote?: string
  /**
   * Statements that would commit by themselves (outside a transaction), each explored as two points: it runs (in a
   * transaction race opens for it) and it commits (`s1.ins:commit`), as real sessions' statements overlap.
   * `split`: the steps run so, seen in the runs (session.step); `indivisible`: those that ran as one point because
   * PostgreSQL refuses them inside a transaction block (25001: VACUUM, CREATE INDEX CONCURRENTLY).
   */
  autocommit: { split: string[]; indivisible: string[] }
  /**
   * An application race's strings of several statements that ran as one point (session.step): real sessions'
   * statements run between theirs, which the search did not try. Any one makes a pass unknown (exit 3).
   */
  whole?: string[]
  /** Statements that lock rows without waiting at SERIALIZABLE (SessionReport.unordered): the result is unknown. */
  unordered?: string[]
}

/**
 * The expectation explore judges by: --expect, else the spec's expect line (none: report only), else, for a scenario
 * with documented outcomes (built-in or a .mjs module), violated when any documented outcome is an anomaly, else held.
 */
export function expectationOf(s: Scenario, p: Plan, given?: 'held' | 'violated'): ExpectOverride {
  if (given) return given
  const own = expectsOverride(s)
  if (own) return own
  // A spec with no expect line promises nothing: report only.
  if (s.expects === 'reported') return undefined
  const docs = (['lockstep', 'serial', 'barrier'] as const).flatMap((schedule) => {
    try {
      return documentedFor(s, { ...p.variant, schedule, windowMs: 0 })
    } catch {
      return []
    }
  })
  return docs.some((d) => d.verdict === 'anomaly') ? 'violated' : 'held'
}

/** Every outcome the scenario documents for this variant, whatever the schedule: the SQLSTATEs its trials may end with. */
function documentedAll(s: Scenario, p: Plan): Documented[] {
  return (['lockstep', 'serial', 'barrier'] as const).flatMap((schedule) => {
    try {
      return documentedFor(s, { ...p.variant, schedule, windowMs: 0 })
    } catch {
      return []
    }
  })
}

/** A spec session's own setup and teardown blocks run first and last, as isolationtester runs them: not choices. */
function pinned(s: Scenario, p: Plan, i: number, k: number): 'first' | 'last' | undefined {
  // An index beyond the sessions is an application race's query offered with a fault (--inject): never pinned.
  if (!isFileScenario(s) || !p.sessions[i]) return undefined
  const steps = p.sessions[i].steps
  if (k === 0 && steps[0]?.name === 'setup') return 'first'
  if (k === steps.length - 1 && k > 0 && steps[k].name === 'teardown') return 'last'
  return undefined
}

interface Done {
  facts: TrialFacts
  trial: Trial
}

export async function explore(ctx: RunContext, scenarioOrId: string | Scenario, o: ExploreOptions = {}): Promise<ExploreResult> {
  const scenario = typeof scenarioOrId === 'string' ? await findScenario(scenarioOrId) : scenarioOrId
  const known = ['databaseUrl', 'n', 'params', 'max', 'sample', 'acceptSample', 'seed', 'depth', 'preemptions', 'shard', 'jobs', 'shrink', 'name', 'expect', 'exhaustive', 'reduce', 'connectTimeoutMs', 'stepTimeoutMs', 'runTimeoutMs', 'onProgress']
  for (const k of Object.keys(o)) if (!known.includes(k)) throw new UsageError(`explore(): unknown option '${k}': it takes ${known.join(', ')}`)
  for (const k of ['connectTimeoutMs', 'stepTimeoutMs', 'runTimeoutMs'] as const) {
    const v = o[k]
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new UsageError(`${k} is ${JSON.stringify(v) ?? String(v)}: give a positive number of milliseconds`)
  }
  const bounds: Bounds = { connectTimeoutMs: o.connectTimeoutMs ?? 5000, stepTimeoutMs: o.stepTimeoutMs ?? 10_000, runTimeoutMs: o.runTimeoutMs ?? 30 * 60_000 }
  const { n, max, sample, acceptSample, seed, depth, preemptions, shard, jobs, shrink: shrinkBudget, expect, exhaustive, reduce } = checkExplore(scenario, o, NAMES)
  const params = paramsOf(scenario, o.params ?? {}, engineFor(o.databaseUrl), 'explore()')
  return withLab(
    ctx,
    o.databaseUrl,
    bounds,
    async (lab, target) => {
      // Called from code, nothing else ends the control connection: it would keep the caller's process alive.
      try {
        assertRunsOn(scenario, lab.engine)
        assertSound(scenario, params, n, lab.engine)
        const p = plan(scenario, { params, n, engine: lab.engine })
        return await exploreOn(ctx, lab, target.label, scenario, p, { ...o, n, max, sample, acceptSample, seed, depth, preemptions, shard, jobs, expect, exhaustive, reduce, shrink: shrinkBudget }, bounds)
      } finally {
        await lab.close()
      }
    },
    scenario,
    // Each job its own sessions and control connection (the embedded server's max_connections).
    { sessions: (n + 1) * jobs },
  )
}

interface Job {
  index: number
  lab: Driver
  /** The trial in flight: its free choices (sessions chosen by the strategy, not pinned), and their footprints. */
  free: number[]
  fps: Touched[]
  last?: Done
  /** The explore run in flight: its place in the search's order, and what the search handed out. */
  run?: Handle
}

/** A run of the search, handed to a job: its choices, its key (runs sorted by key are the one-job search's order). */
interface Handle {
  pick: Pick
  key: number[]
  split?: SplitRun
  /** A sample's draw: the step count its change points were drawn over. */
  k?: number
}

/** What an explore run came to, kept to be taken in the search's order once every run is in (several jobs). */
interface Record_ {
  key: number[]
  free: number[]
  fps: Touched[]
  it: Interleaving
}

/** What an application race's isolated sessions assume (ExploreResult.sessionsRan). */
export const ISOLATED_ASSUMES = 'each session ran in a worker thread of its own, sharing nothing but the database: what the server saw is all they share (a race module whose sessions share process state says sharedState: true)'
/** What an application race's sessions in one process assume. */
export const SHARED_ASSUMES = 'the sessions ran in one process (sharedState, --inject, or a race object, not its file) and may share JavaScript state the server never sees: the search is not reduced unless --reduce, which assumes they share none'

/** explore on an open driver (the command and the API open it with withLab). */
export async function exploreOn(ctx: RunContext, lab: Driver, targetLabel: string, scenario: Scenario, p: Plan, o: ExploreOptions & { max: number; shrink: number; word?: Words; keepOnStop?: boolean }, bounds: Bounds): Promise<ExploreResult> {
  const word = (x: 'shard' | 'sample' | 'exhaustive' | 'seed') => (o.word ? `--${x}` : x)
  const expect = expectationOf(scenario, p, o.expect)
  // The SQLSTATEs the scenario documents (a unique index's 23505) prevent, as in race run: judged by them, never compared.
  const declared = documentedAll(scenario, p)
  // The same codes, and those a session's retry loop catches: what the code failing is told apart from (judge/failure.ts).
  const expectedCodes = declaredCodes(declared, p)
  // An application race's steps are the queries its functions send, discovered as they run: a session's count may
  // differ from one interleaving to the next (count, then insert or throw). The tree's branching is known only
  // where it is reached, so the count of orders is not known before: the first run (the first ready session at every
  // choice) gives each session's queries along it, and their orders decide between every interleaving and a sample.
  const app = kindOf(scenario).type === 'application'
  const where = replayTarget(o.databaseUrl)
  const counts = app ? [] : p.sessions.map((s, i) => pointsOf(s.steps.filter((_, k) => !pinned(scenario, p, i, k)).map((x) => x.def.sql)))
  let orders = app ? 0n : ordersOf(counts)
  // --exhaustive: every order, whatever --max says; --sample K (or declared steps with more orders than --max): K
  // random runs; else the reduced search (reduce.ts), which for an application race stops at --max runs and then
  // says what it left.
  const exhaustive = o.exhaustive === true
  // --preemptions K: every order with at most K preemptions, fewest first (enumerate.ts Preemptive).
  const bounded = o.preemptions !== undefined ? new Preemptive(o.preemptions) : undefined
  let sampling = o.sample !== undefined || (!exhaustive && !bounded && !app && orders > BigInt(o.max))
  const seed = o.seed ?? Math.floor(Math.random() * 2 ** 31)
  const size = o.sample ?? DEFAULT_SAMPLE
  // Injected faults (--inject) are more choices of a session than its next query: the reduction's model (one next step
  // per session) does not hold, so every order is run.
  const faulted = Boolean(applicationOf(scenario)?.faults)
  // An application's sessions may depend on each other in JavaScript, where the server sees nothing: reduced by default
  // only when each runs isolated, in a worker of its own (app/isolated.ts); in one process (sharedState, --inject) only
  // when asked (--reduce), which says it assumes they do not.
  const isolated = applicationOf(scenario)?.isolated === true
  const reduced = !sampling && !exhaustive && !bounded && !faulted && (!app || o.reduce === true || isolated) ? new Reduced() : undefined
  // A sample is PCT's (enumerate.ts): its runs give a stated least probability of finding a violation of depth --depth.
  const depth = o.depth ?? DEFAULT_DEPTH
  const pct = () => new Pct(size, seed, depth, p.sessions.length, app ? undefined : counts.reduce((a, b) => a + b, 0), o.shard)
  let search: Strategy & { diverged?: number; runs: number } = sampling ? pct() : bounded ?? reduced ?? new Dfs()
  if (o.shard && !sampling && !exhaustive) throw new UsageError(`${word('shard')} splits a sample or an exhaustive search over several runs of race explore: give ${o.word ? '--sample K' : 'sample'} or ${word('exhaustive')} too (the reduced search is not split)`)
  if (o.shard && sampling && o.seed === undefined) throw new UsageError(`${word('shard')} needs ${word('seed')}: every part of a sample draws from the same seed`)
  const drawn = o.shard ? Math.ceil((size - (o.shard.index - 1)) / o.shard.count) : size
  // --jobs: several runs at once, each job its own schema and connections. An exhaustive search (its tree split into
  // branches, enumerate.ts SplitDfs) and a sample of declared steps (each draw its own) give the same result with any
  // number; the others choose each run from the one before, and run on one job.
  // Jobs have a schema each, but advisory keys, pg_locks, pg_stat_activity and database settings are the whole
  // database's: a step that may touch them runs on one job, or the jobs' trials would see each other (issue 38).
  // Code the setup defines (a function, trigger, view, rule...) may reach such state without naming it in a step.
  const shares = !app && (p.sessions.some((x) => x.steps.some((st) => sharesDatabase(st.def.sql))) || p.setup.map(shownBlock).some((sql) => sharesDatabase(sql) || DEFINES_CODE.test(sql)))
  const one = app ? 'an application race runs on one job' : reduced ? 'the reduced search runs on one job' : bounded ? 'a preemption-bounded search runs on one job' : undefined
  const shared = !one && shares ? "a step touches what the whole database shares (advisory keys, pg_locks, pg_stat_activity, settings), where other jobs' trials would meet it: the search runs on one job" : undefined
  let jobs = one || shared ? 1 : Math.max(1, Math.min(o.jobs ?? 1, sampling ? drawn : Number(orders)))
  // Said when more jobs were asked for than such a search runs on (with --jobs 1 the result is as it always was).
  const jobsNote = (o.jobs ?? 1) > 1 ? one ?? shared : undefined
  if (jobs > 1) {
    // Each job takes a control connection and the sessions' own: no more than the server has room for.
    const room = await lab.room()
    jobs = Math.max(1, Math.min(jobs, Math.floor(room.free / (p.sessions.length + 1))))
  }
  const split = exhaustive && !one && (jobs > 1 || o.shard) ? new SplitDfs(o.shard) : undefined
  let planned: number | null = sampling ? drawn : app || reduced || bounded || o.shard ? null : Number(orders)
  // The application race's first run: its queries give `orders` (what the report compares the runs with).
  let probing = app
  // The reduced search learns what each step touched: at every quiet moment of a trial the sessions' backends are
  // read on control (engine/footprint.ts); the footprints of the trial's free steps, in order (Job.fps).
  let touchedAll = 0
  let touchedSteps = 0
  // Every interleaving was run: false when a search of an application race's tree reached --max runs with more left.
  let complete = true

  const seen = new Map<string, Interleaving>()
  let runs = 0
  let allRuns = 0
  // Runs made but not part of the search (an application race's first run, when a sample replaces the search).
  let discarded = 0
  let violating = 0
  let phase: 'explore' | 'shrink' = 'explore'
  // Explore runs of several jobs, taken in the search's order once all are in; the violating lines seen meanwhile.
  const records: Record_[] = []
  const pending = new Set<string>()
  // Shrinking: the current violating interleaving (free choices), and the candidates left to try.
  let current: { free: number[]; it: Interleaving } | undefined
  let candidates: number[][] = []
  let shrinkRuns = 0
  let shrinkFrom: string | undefined
  // The reduced search: the simplest order of each violating run's class.
  const simplest = new Map<string, number[]>()
  // --inject: in how many of the search's runs each fault was offered, and injected (ExploreResult.injections).
  const faultTally = new Map<number, { fault: string; runs: number; offered: number }>()
  // Statements run, then committed, as two points; and those PostgreSQL kept whole (ExploreResult.autocommit).
  const splitSteps = new Set<string>()
  const indivisible = new Set<string>()
  const whole = new Set<string>()
  const unordered = new Set<string>()

  const chooserOf = (pick: Pick, learn: boolean, job: Job): Chooser => {
    const launched = p.sessions.map(() => 0)
    const free: number[] = (job.free = [])
    const fps: Touched[] = (job.fps = [])
    // The moment before the last launched step, what the backends held then, and that step (when a free one).
    let before: { m: Moment; seen: Map<number, Seen> | undefined; step?: ReadyStep } | undefined
    const stateOf = (m: Moment, i: number) => (m.ready.some((r) => r.index === i) ? 'ready' : m.blocked.some((b) => b.index === i) ? 'blocked' : m.done.includes(p.sessions[i].name) ? 'done' : 'other')
    // What locks cannot show (engine/doubt.ts): the trial's catalog facts, transactions that gave locks back.
    const doubts = new Doubts(job.lab)
    const observeAt = async (m: Moment) => {
      const seen = m.pids ? await observe(job.lab, m.pids) : undefined
      const b = before
      const was = b?.step && b.m.pids?.[b.step.index]
      await doubts.settle(m.pids, was ? b.seen?.get(was) : undefined, was ? seen?.get(m.pids![b!.step!.index]) : undefined, b?.step?.sql ?? '')
      if (b?.step) {
        const i = b.step.index
        const pid = b.m.pids?.[i]
        // A backend two sessions share (a pooled connection handed on) holds what both did: not this step's own.
        const shared = b.m.pids!.filter((x) => x === pid).length > 1 || m.pids!.filter((x) => x === m.pids![i]).length > 1
        // SSI in the trial (some session holds SIRead locks): changes are ordered against reads.
        const ssi = [b.seen, seen].some((x) => [...(x?.values() ?? [])].some((v) => v.locks.some((l) => l[1] === 'SIReadLock')))
        let fp: Touched = pid && !shared ? doubts.judge(touched(b.seen?.get(pid), seen?.get(m.pids![i]), b.step.sql, ssi), pid, b.seen?.get(pid), seen?.get(m.pids![i]), b.step.sql) : 'all'
        // It waits, raised an error, or changed how another session stands (woke it, or ended it): 'all'.
        if (stateOf(m, i) === 'blocked' || (m.errors?.[i] ?? 1) !== (b.m.errors?.[i] ?? 0)) fp = 'all'
        for (let q = 0; q < p.sessions.length; q++) if (q !== i && stateOf(m, q) !== stateOf(b.m, q)) fp = 'all'
        touchedSteps++
        if (fp === 'all') touchedAll++
        fps.push(fp)
        reduced?.step(fp)
      }
      before = { m, seen }
    }
    const choose: Chooser = async (m: Moment) => {
      if (learn) await observeAt(m)
      const i = decide(m)
      if (learn && free.length > fps.length) before!.step = m.ready[i]
      return i
    }
    if (learn) choose.settled = observeAt
    // A declared statement that would commit by itself runs, then commits, as two points: real sessions' statements
    // overlap (each takes its snapshot before the other commits). A spec session's setup/teardown blocks stay whole.
    choose.split = app ? () => true : (i, k) => !pinned(scenario, p, i, k)
    const decide = ({ ready }: Moment) => {
      const take = (s: ReadyStep) => (launched[s.index]++, ready.indexOf(s))
      // Pinned: a spec session's setup and teardown blocks, by their step's index (a commit point, or a later point
      // of a step split into points, is never one).
      const pin = (s: ReadyStep) => (s.part ? undefined : pinned(scenario, p, s.index, s.step ?? launched[s.index]))
      const first = ready.find((s) => pin(s) === 'first')
      if (first) return take(first)
      const open = ready.filter((s) => pin(s) !== 'last')
      if (!open.length) return take(ready[0])
      const idx = pick(
        open.map((s) => s.index),
        // What each session has left is known only for declared steps.
        app ? undefined : open.map((s) => counts[s.index] - free.filter((x) => x === s.index).length),
      )
      const s = open.find((x) => x.index === idx) ?? open[0]
      free.push(s.index)
      return take(s)
    }
    return choose
  }

  const nextShrink = (job: Job): Chooser | undefined => {
    if (!current || shrinkRuns >= o.shrink) return undefined
    const c = candidates.shift()
    if (!c) return undefined
    shrinkRuns++
    return chooserOf(follow(c), false, job)
  }

  // The search's runs, handed out to the jobs (one job: each run chosen after the one before it ran).
  let order = 0
  const handout = new Handout<Handle>((): Handle | undefined => {
    if (split) {
      const r = split.next()
      return r && { pick: r.pick, key: [], split: r }
    }
    if (jobs > 1 && search instanceof Pct) {
      const d = search.nextDraw()
      return d && { pick: d.pick, key: [d.draw], k: d.k }
    }
    const pick = search.next()
    return pick && { pick, key: [order++] }
  })
  const stop = () => handout.stop()
  ctx.signal.addEventListener('abort', stop, { once: true })

  /** An explore run taken into the result: runs of several jobs in the search's order, once all are in. */
  const absorb = (r: Record_) => {
    const it = r.it
    const had = seen.get(it.line)
    if (had) had.runs++
    else {
      seen.set(it.line, it)
      if (it.held === false) violating++
    }
    if (it.held === false && (!current || better(it, current.it))) current = { free: r.free, it }
    if (it.held === false && reduced) {
      const c = fewestSwitches(r.free, r.fps)
      if (c) simplest.set(c.join(','), c)
    }
  }

  const choose = async (job: Job): Promise<Chooser | undefined> => {
    // A run the engine reported no order for (none of its steps launched) is over all the same.
    if (job.run) {
      job.run = undefined
      handout.finish()
    }
    if (phase === 'explore') {
      // An application race's tree may be larger than its first run's orders said: stop at --max runs, and say
      // when interleavings were left (a search of declared steps ends by itself within the orders it counted).
      const capped = app && !sampling && !exhaustive && !bounded
      const got = capped && search.runs >= o.max ? undefined : await handout.take()
      if (got) {
        job.run = got
        return chooserOf(got.pick, reduced !== undefined, job)
      }
      // The search is over: the first job shrinks (alone), once every other job's last run is in.
      if (job.index > 0 || handout.stopped) return undefined
      await handout.idle()
      if (handout.stopped) return undefined
      if (capped && search.next()) complete = false
      records.sort((a, b) => compareKeys(a.key, b.key)).forEach(absorb)
      records.length = 0
      pending.clear()
      phase = 'shrink'
      if (reduced && current && o.shrink) {
        // The reduced search ran one order of each class: the simplest order of each violating class (fewest
        // switches) ends as its class's run did; the fewest among them is run once, to confirm it, as shown.
        shrinkFrom = current.it.line
        candidates = [...simplest.values()].filter((c) => switches(c) < current!.it.switches).sort((a, b) => switches(a) - switches(b))
        return nextShrink(job)
      }
      if (!sampling || !current || !o.shrink) return undefined
      shrinkFrom = current.it.line
      candidates = shrinkCandidates(current.free)
    }
    return nextShrink(job)
  }

  const onOrder = (job: Job, ran: Entry[]) => {
    const { facts, trial } = job.last!
    for (const s of facts.sessions) for (const x of s.indivisible ?? []) indivisible.add(`${s.name}.${x}`)
    for (const s of facts.sessions) for (const x of s.whole ?? []) whole.add(`${s.name}.${x}`)
    for (const s of facts.sessions) for (const x of s.unordered ?? []) unordered.add(`${s.name}.${x}`)
    const free = job.free
    allRuns++
    if (probing) {
      probing = false
      orders = ordersOf(p.sessions.map((_, i) => ran.filter((e) => e.session === i).length))
      if (!sampling && !exhaustive && !reduced && !bounded && orders > BigInt(o.max)) {
        // Too many to run them all: a seeded sample instead, as for declared steps. This first run is not one of its draws.
        sampling = true
        search = pct()
        planned = size
        discarded++
        handout.finish()
        return
      }
    }
    const it = interleavingOf(p, ran, facts, trial, switches(free), expectedCodes)
    for (const tok of it.line.split(' ')) if (tok.endsWith(':commit')) splitSteps.add(tok.slice(0, -':commit'.length))
    if (phase === 'explore') {
      const h = job.run!
      job.run = undefined
      if (process.env.RACE_DEBUG_FPS) console.error(JSON.stringify(free), JSON.stringify(job.fps))
      if (reduced) reduced.done(free, job.fps)
      else if (h.split) split!.done(h.split, free)
      else if (h.k !== undefined) (search as Pct).done(free, h.k)
      else search.done(free)
      // A run made only to reach this shard's part of the tree: another shard reports it.
      if (!h.split || h.split.report) {
        runs++
        for (const [i, x] of (facts.injections ?? []).entries()) {
          const t = faultTally.get(i) ?? { fault: x.fault, runs: 0, offered: 0 }
          if (x.offered) t.offered++
          if (x.at) t.runs++
          faultTally.set(i, t)
        }
        const r = { key: h.split ? [...free] : h.key, free: [...free], fps: [...job.fps], it }
        if (jobs > 1 || split) {
          records.push(r)
          if (it.held === false) pending.add(it.line)
        } else absorb(r)
      }
      handout.finish()
    } else if (it.held === false && current && better(it, current.it)) {
      // A shorter violation: shrink from it.
      current = { free: [...free], it }
      // The reduced search's candidates come fewest switches first: the first that violates is the shortest.
      candidates = reduced ? [] : shrinkCandidates(free)
    }
    o.onProgress?.({ runs: allRuns - discarded, violating: violating + pending.size, planned: phase === 'explore' ? planned : null, exact: sampling, phase })
  }

  const started = performance.now()
  const { run } = await import('../engine/run.js')
  // One lab a job: its own control connection, schema and sessions (the first is the command's).
  const labs: Driver[] = [lab]
  if (jobs > 1) {
    const opened = await Promise.allSettled(Array.from({ length: jobs - 1 }, () => openDriver(ctx, lab.target, bounds.connectTimeoutMs)))
    for (const x of opened) if (x.status === 'fulfilled') labs.push(x.value)
    const failed = opened.find((x) => x.status === 'rejected')
    if (failed) {
      await Promise.all(labs.slice(1).map((l) => l.close().catch(() => {})))
      ctx.signal.removeEventListener('abort', stop)
      throw (failed as PromiseRejectedResult).reason
    }
  }
  const runJob = (job: Job) =>
    run(job.lab, {
      ownSql: isBuiltIn(scenario),
      context: ctx,
      plan: p,
      schedule: 'lockstep',
      trials: Number.MAX_SAFE_INTEGER,
      stepTimeoutMs: bounds.stepTimeoutMs,
      connectTimeoutMs: bounds.connectTimeoutMs,
      keep: false,
      word: o.word,
      choose: () => choose(job),
      onTrial: (_k, facts) => {
        job.last = { facts, trial: judgeTrial(facts, declared, p) }
      },
      onOrder: (_k, ran) => onOrder(job, ran),
    }).catch((e) => {
      // One job failing ends the others (each ends its run at its next choice, and drops its schema).
      stop()
      throw e
    })
  let out: Awaited<ReturnType<typeof run>> | undefined
  // Stopped (--run-timeout, a signal) with the command asking to keep what was found: the runs that ended are the result.
  let stopped: Stopped | undefined
  try {
    const settled = await Promise.allSettled(labs.map((l, index) => runJob({ index, lab: l, free: [], fps: [] })))
    const failed = settled.find((x) => x.status === 'rejected')
    // A stop may also end every job at its next choice with no error (the handout stopped): not a finished search.
    stopped = o.keepOnStop ? stopOf(ctx) : undefined
    if (failed && !stopped) throw specFailure(scenario, exploreFailure((failed as PromiseRejectedResult).reason))
    out = failed ? undefined : (settled[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof run>>>).value
  } finally {
    ctx.signal.removeEventListener('abort', stop)
    await Promise.all(labs.slice(1).map((l) => l.close().catch(() => {})))
  }
  const ms = performance.now() - started
  if (stopped) {
    // The runs of several jobs that ended before the stop, taken in the search's order; the search is not complete.
    records.sort((a, b) => compareKeys(a.key, b.key)).forEach(absorb)
    records.length = 0
    complete = false
  }

  const every = [...seen.values()]
  const judged = every.map((x) => ({ verdict: x.verdict, comparison: { matched: x.verdict !== 'unknown', deviations: [], ...(x.verdict === 'unknown' ? { undecided: true } : {}) }, ...(x.failure ? { failure: x.failure } : {}) }))
  const summary = summarize(judged, [], expect)
  const incompleteRuns = every.filter((x) => x.incomplete).length
  const diverged = split ? split.diverged : search instanceof Dfs || search instanceof Reduced || search instanceof Preemptive ? search.diverged : 0
  // Every interleaving held, but some were not run as chosen, or not run at all (an application race's tree larger
  // than --max): "held in all" is not known (unknown is never a pass).
  const sampled = sampling && search instanceof Pct ? { size, seed, ...coverageOf(search), ...(o.shard ? { shard: o.shard } : {}), ...(faulted ? { faults: 'drawn' as const } : {}), ...(o.acceptSample !== undefined ? { accept: o.acceptSample } : {}) } : undefined
  // A sample is no certificate (sampleFallsShort): held is not known unless the user asked for a sample's evidence.
  const incomplete = ((diverged > 0 || !complete) && violating === 0 && expect === 'held') || sampleFallsShort(sampled, violating, expect)
  const failures = every.filter((x) => x.failure)
  // --inject: a fault injected in no run was not explored: the search is no pass (unknown), and says which and why.
  const injections = faulted ? [...faultTally.values()] : undefined
  const notFired = (injections ?? []).filter((x) => x.runs === 0).map((x) => notFiredLine(x, runs))
  // A violation or a failure is a fact whatever was left undecided (explore/findings.ts); a session that did not
  // complete where every one must is a deviation even beside the violation --expect violated asked for.
  const found = incompleteRuns ? 1 : exitFromFindings(incomplete ? 3 : exitCode(summary), { expect, violating, failed: failures.length, stopped: stopped !== undefined })
  // A string of several statements run as one point: the orders between its statements were not tried (unknown).
  // A statement locking rows without waiting at SERIALIZABLE: what SSI does inside it was not ordered (unknown).
  const code = (notFired.length || whole.size || unordered.size) && found === 0 ? 3 : found
  const shortest = current ? { ...current.it, ...(shrinkFrom && shrinkFrom !== current.it.line ? { shrunk: { from: shrinkFrom, runs: shrinkRuns } } : {}) } : null
  const shortestFailure = failures.reduce<Interleaving | null>((a, x) => (!a || better(x, a) ? x : a), null)
  const replayOf = (line: string) => replayCommand(o.name ?? (isFileScenario(scenario) ? scenario.source.section : scenario.id), scenario, p, line, where.args)
  return {
    scenario: scenario.id,
    digest: raceDigest(scenario),
    racelab: racelabVersion(),
    n: p.variant.n,
    params: p.variant.params,
    server: out?.server ?? lab.server,
    target: targetLabel,
    invariant: typeof scenario.invariant.description === 'function' ? scenario.invariant.description(p.variant.params) : scenario.invariant.description,
    mode: sampling ? 'sample' : 'all',
    search: sampling ? 'sample' : reduced ? 'reduced' : bounded ? 'preemptions' : 'exhaustive',
    ...(bounded ? { preemptions: { bound: bounded.bound, reached: bounded.reached, complete: bounded.left === 0 } } : {}),
    ...(reduced ? { reduction: { steps: touchedSteps, unclassified: touchedAll, redundant: reduced.redundant, retried: reduced.retried } } : {}),
    orders: orders.toString(),
    steps: app ? 'discovered' : 'declared',
    ...(app ? { sessionsRan: isolated ? { mode: 'isolated' as const, assumes: ISOLATED_ASSUMES } : { mode: 'shared' as const, assumes: SHARED_ASSUMES } } : {}),
    complete,
    ...(split && o.shard ? { shard: { ...o.shard, passed: split.passed } } : {}),
    ...(sampled ? { sample: sampled } : {}),
    runs,
    interleavings: every.length,
    violating,
    unknown: every.filter((x) => x.verdict === 'unknown' && !x.failure).length,
    failed: failures.length,
    ...(scenario.mustComplete ? { incomplete: incompleteRuns } : {}),
    groups: groupsOf(every),
    shortest,
    replay: current ? replayOf(current.it.line) : null,
    ...((current || shortestFailure) && where.note ? { replayNote: where.note } : {}),
    shortestFailure,
    failureReplay: shortestFailure ? replayOf(shortestFailure.line) : null,
    ...(stopped ? { stopped } : {}),
    diverged,
    ...(injections ? { injections } : {}),
    ...(notFired.length ? { notFired } : {}),
    every,
    expected: expect ?? 'reported (no expectation: use --expect held|violated)',
    matched: code === 0,
    exitCode: code,
    ms: Math.round(ms),
    perSecond: allRuns / (ms / 1000),
    jobs,
    ...(jobsNote ? { jobsNote } : {}),
    autocommit: { split: [...splitSteps].sort(), indivisible: [...indivisible].sort() },
    ...(whole.size ? { whole: [...whole].sort() } : {}),
    ...(unordered.size ? { unordered: [...unordered].sort() } : {}),
  }
}

/** Why a fault given to --inject was injected in no run: its site never came, or the search never took it. */
export function notFiredLine(x: { fault: string; offered: number }, runs: number): string {
  const site = x.fault.slice(x.fault.indexOf('@') + 1)
  const where = site === 'commit' ? 'no session sent a COMMIT' : `no session sent ${/^8/.test(site) || site === '11' || site === '18' ? 'an' : 'a'} ${ordinal(Number(site))} query (q${site})`
  return x.offered
    ? `--inject ${x.fault} never fired: its site came up in ${x.offered} of the ${runs} runs, and the search took it in none (a sample draws it at random, a search cut short by --max leaves it for later)`
    : `--inject ${x.fault} never fired: ${where} in any of the ${runs} runs, so nothing was injected`
}

const ordinal = (k: number) => `${k}${k % 100 >= 11 && k % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][k % 10] ?? 'th'}`

const shellQuote = (x: string) => (/^[\w./:@%+=,-]+$/.test(x) ? x : `'${x.replace(/'/g, `'\\''`)}'`)

/**
 * The connection options a replay line needs to run on the database this exploration ran on: an explicit
 * --database-url as given (a password in it masked, with a note: a printed line never shows it); nothing when
 * DATABASE_URL, the PG* variables or the embedded server chose it (they choose the same again where it is pasted).
 */
export function replayTarget(databaseUrl: string | undefined): { args: string[]; note?: string } {
  if (databaseUrl !== undefined) {
    const masked = maskUrl(databaseUrl.trim())
    const args = ['--database-url', shellQuote(masked)]
    return masked === databaseUrl.trim() ? { args } : { args, note: "the password in --database-url is printed as ***: put yours back in its place (or set DATABASE_URL and write --database-url \"$DATABASE_URL\")" }
  }
  // DATABASE_URL, PG* variables, the embedded server: the environment the line is pasted into chooses the same again.
  return { args: [] }
}

/** `race run <scenario> [--n N] [its params] [--database-url ...] --schedule "<line>"`, quoted for a POSIX shell. */
export function replayCommand(name: string, s: Scenario, p: Plan, line: string, target: readonly string[] = []): string {
  const q = shellQuote
  const args = ['race', 'run', q(name)]
  if (p.variant.n !== s.sessionCount.default) args.push('--n', String(p.variant.n))
  const defaults = defaultParams(s, {})
  for (const [k, spec] of Object.entries(s.params)) {
    const v = p.variant.params[k]
    if (v === defaults[k]) continue
    const flag = spec.flag.split(' ')[0]
    if (spec.kind === 'boolean') args.push(v ? flag.replace(/^--no-/, '--') : flag.startsWith('--no-') ? flag : `--no-${flag.slice(2)}`)
    else args.push(flag, q(spec.kind === 'duration' ? `${v}ms` : String(v)))
  }
  args.push(...target)
  args.push('--schedule', `"${line}"`)
  return args.join(' ')
}

/**
 * One result from the --json of every shard of one sample (--shard 1/n .. n/n, the same scenario, sessions, seed,
 * size and depth): the draws together, as one race explore --sample would have made them (bar shrinking, which each
 * shard did on its own: the shortest is the best of theirs). Bad input (parts of another race's text, racelab or
 * server version, a shard missing or twice, results of different samples) is a UsageError; `names` (the parts'
 * files) name them in it.
 */
export function mergeShards(parts: readonly ExploreResult[], names?: readonly string[]): ExploreResult {
  if (!parts.length) throw new UsageError('merge: give the --json of every shard')
  assertOneSearch(parts, names)
  const first = parts[0]
  if (first.shard) return mergeSearchShards(parts)
  const s0 = first.sample
  if (!s0?.shard) throw new UsageError('merge: these are not shards of a sample or an exhaustive search (no sample.shard or shard: run race explore --sample K --seed S --shard i/n --json, or --exhaustive --shard i/n --json)')
  const same = (x: ExploreResult) => x.scenario === first.scenario && x.n === first.n && x.sample?.seed === s0.seed && x.sample?.size === s0.size && x.sample?.depth === s0.depth && x.sample?.shard?.count === s0.shard!.count
  const bad = parts.find((x) => !same(x))
  if (bad) throw new UsageError(`merge: ${bad.scenario} (seed ${bad.sample?.seed}, size ${bad.sample?.size}) is not a shard of the same sample as ${first.scenario} (seed ${s0.seed}, size ${s0.size})`)
  const got = parts.map((x) => x.sample!.shard!.index).sort((a, b) => a - b)
  const want = Array.from({ length: s0.shard.count }, (_, i) => i + 1)
  if (got.join() !== want.join()) throw new UsageError(`merge: shards ${got.join(', ')} given; a sample in ${s0.shard.count} needs each of ${want.join(', ')} once`)
  const seen = new Map<string, Interleaving>()
  for (const x of parts) for (const it of x.every) {
    const had = seen.get(it.line)
    if (had) had.runs += it.runs
    else seen.set(it.line, { ...it })
  }
  const every = [...seen.values()]
  const steps = Math.max(...parts.map((x) => x.sample!.steps))
  const counted = parts.reduce((a, x) => a + (x.sample!.steps === steps ? x.sample!.counted : 0), 0)
  const once = 1 / (first.n * steps ** (s0.depth - 1))
  const violating = every.filter((x) => x.held === false).length
  const expect = first.expected === 'held' || first.expected === 'violated' ? first.expected : undefined
  const judged = every.map((x) => ({ verdict: x.verdict, comparison: { matched: x.verdict !== 'unknown', deviations: [], ...(x.verdict === 'unknown' ? { undecided: true } : {}) } }))
  const summary = summarize(judged, [], expect)
  const best = parts.filter((x) => x.shortest).sort((a, b) => (better(a.shortest!, b.shortest!) ? -1 : better(b.shortest!, a.shortest!) ? 1 : 0))[0]
  const runs = parts.reduce((a, x) => a + x.runs, 0)
  const ms = Math.max(...parts.map((x) => x.ms))
  const sample = { size: s0.size, seed: s0.seed, depth: s0.depth, steps, counted, probability: 1 - (1 - once) ** counted, ...(s0.accept !== undefined ? { accept: s0.accept } : {}) }
  const short = sampleFallsShort(sample, violating, expect)
  const failing = mergedFailure(parts, every)
  const code = exitFromFindings(short ? 3 : exitCode(summary), { expect, violating, failed: failing.failed, stopped: false })
  return {
    ...first,
    sample,
    runs,
    interleavings: every.length,
    violating,
    unknown: every.filter((x) => x.verdict === 'unknown' && !x.failure).length,
    groups: groupsOf(every),
    shortest: best?.shortest ?? null,
    replay: best?.replay ?? null,
    ...(best?.replayNote ? { replayNote: best.replayNote } : {}),
    ...failing,
    diverged: 0,
    every,
    matched: code === 0,
    exitCode: code,
    ms,
    perSecond: parts.reduce((a, x) => a + x.perSecond, 0),
  }
}

/**
 * One result from the --json of every shard of one exhaustive search (--exhaustive --shard 1/n .. n/n): each shard
 * reported the interleavings of its own subtrees (enumerate.ts SplitDfs), so together they are the whole search's.
 * They are put in the whole search's order (the sessions' order of each line: the depth-first order of the choices),
 * so the groups, their lines and the shortest come out as one run of the whole search gives them.
 */
function mergeSearchShards(parts: readonly ExploreResult[]): ExploreResult {
  const first = parts[0]
  const count = first.shard!.count
  const same = (x: ExploreResult) => x.scenario === first.scenario && x.n === first.n && x.search === first.search && x.orders === first.orders && x.shard?.count === count && JSON.stringify(x.params) === JSON.stringify(first.params)
  const bad = parts.find((x) => !same(x))
  if (bad) throw new UsageError(`merge: ${bad.scenario} (${bad.search}${bad.shard ? `, shard ${bad.shard.index}/${bad.shard.count}` : ''}) is not a shard of the same search as ${first.scenario} (shard ${first.shard!.index}/${count})`)
  const got = parts.map((x) => x.shard!.index).sort((a, b) => a - b)
  const want = Array.from({ length: count }, (_, i) => i + 1)
  if (got.join() !== want.join()) throw new UsageError(`merge: shards ${got.join(', ')} given; a search in ${count} needs each of ${want.join(', ')} once`)
  const names = Object.keys(first.every[0]?.outcomes ?? {})
  const keyOf = (line: string) => line.split(' ').map((t) => names.indexOf(t.slice(0, t.indexOf('.'))))
  const seen = new Map<string, Interleaving>()
  for (const x of parts) for (const it of x.every) {
    const had = seen.get(it.line)
    if (had) had.runs += it.runs
    else seen.set(it.line, { ...it })
  }
  const every = [...seen.values()].sort((a, b) => compareKeys(keyOf(a.line), keyOf(b.line)))
  let shortest: Interleaving | undefined
  for (const it of every) if (it.held === false && (!shortest || better(it, shortest))) shortest = it
  const from = shortest && parts.find((x) => x.shortest?.line === shortest!.line)
  const expect = first.expected === 'held' || first.expected === 'violated' ? first.expected : undefined
  const judged = every.map((x) => ({ verdict: x.verdict, comparison: { matched: x.verdict !== 'unknown', deviations: [], ...(x.verdict === 'unknown' ? { undecided: true } : {}) } }))
  const summary = summarize(judged, [], expect)
  const diverged = parts.reduce((a, x) => a + x.diverged, 0)
  const complete = parts.every((x) => x.complete)
  const violating = every.filter((x) => x.held === false).length
  const incomplete = (diverged > 0 || !complete) && violating === 0 && expect === 'held'
  const failing = mergedFailure(parts, every)
  const code = exitFromFindings(incomplete ? 3 : exitCode(summary), { expect, violating, failed: failing.failed, stopped: false })
  const { shard: _, replayNote: __, ...rest } = first
  return {
    ...rest,
    complete,
    runs: parts.reduce((a, x) => a + x.runs, 0),
    interleavings: every.length,
    violating,
    unknown: every.filter((x) => x.verdict === 'unknown' && !x.failure).length,
    groups: groupsOf(every),
    shortest: shortest ? { ...shortest } : null,
    replay: from?.replay ?? null,
    ...(from?.replayNote ? { replayNote: from.replayNote } : {}),
    ...failing,
    diverged,
    every,
    matched: code === 0,
    exitCode: code,
    ms: Math.max(...parts.map((x) => x.ms)),
    perSecond: parts.reduce((a, x) => a + x.perSecond, 0),
    jobs: Math.max(...parts.map((x) => x.jobs ?? 1)),
  }
}

/**
 * A sample is not a certificate: one that found no violation passes expect held only when the user asked for a
 * level of evidence (--accept-sample P) and its stated probability reached it. Else held is not known (exit 3).
 */
export function sampleFallsShort(sample: { probability: number; accept?: number } | undefined, violating: number, expect: ExpectOverride): boolean {
  if (!sample || violating > 0 || expect !== 'held') return false
  return sample.accept === undefined || sample.probability < sample.accept
}

/** The merged interleavings' failures: how many, the fewest switches among them, and the replay the part that ran it gave. */
function mergedFailure(parts: readonly ExploreResult[], every: readonly Interleaving[]): { failed: number; shortestFailure: Interleaving | null; failureReplay: string | null } {
  const failures = every.filter((x) => x.failure)
  const shortestFailure = failures.reduce<Interleaving | null>((a, x) => (!a || better(x, a) ? x : a), null)
  const from = shortestFailure && parts.find((x) => x.shortestFailure?.line === shortestFailure.line)
  return { failed: failures.length, shortestFailure: shortestFailure ? { ...shortestFailure } : null, failureReplay: from?.failureReplay ?? null }
}

function coverageOf(s: Pct): { depth: number; steps: number; counted: number; probability: number } {
  const c = s.coverage()
  return { depth: c.depth, steps: c.k, counted: c.runs, probability: c.probability }
}

/** Fewer switches, then fewer steps. */
function better(a: Interleaving, b: Interleaving): boolean {
  const steps = (x: Interleaving) => x.line.split(' ').length
  return a.switches < b.switches || (a.switches === b.switches && steps(a) < steps(b))
}

/**
 * A run as an interleaving: its launch order as a permutation line (steps a session never ran, because it ended,
 * last). An application race's line is the labels its queries were released under (s1.q1 s2.q1 ...): the steps
 * that exist are the ones its functions sent.
 */
/**
 * The points of a session's declared steps: one each, and two for a statement that would commit by itself (it runs,
 * then commits: Session.openCommit), as far as the steps' own BEGIN and COMMIT say (what the server does decides in
 * the run; this count is what the report promises before it).
 */
/** Setup SQL that defines code the server runs for a step (whose SQL then need not name what that code touches). */
const DEFINES_CODE = /\bcreate\s+(or\s+replace\s+)?(function|procedure|trigger|constraint\s+trigger|rule|view|materialized\s+view|extension|aggregate|operator|cast|event\s+trigger|server|foreign\s+table)\b/i

/** What PostgreSQL refuses inside a transaction block (25001), for the count only: the run learns it from the server. */
const WHOLE = /^\s*(vacuum|cluster|reindex|checkpoint|alter\s+system|(create|drop)\s+(database|tablespace|subscription)|(create|drop)\s+(unique\s+)?index\s+concurrently)\b/i

export function pointsOf(sqls: readonly string[]): number {
  let inTx = false
  // The transaction has taken its snapshot (a snapshot point is offered before a NOWAIT/SKIP LOCKED that takes it).
  let taken = false
  let level: string | undefined
  let n = 0
  for (const sql of sqls) {
    // Several statements (or a snapshot point): a point each (engine/points.ts), and the commit point after them.
    // The level a BEGIN names (at READ COMMITTED no snapshot point: the run asks the server where none is named).
    const opens = /^\s*(begin|start\s+transaction)\b/i.test(sql)
    if (opens || !inTx) level = levelSet(sql)
    else level = levelSet(sql) ?? level
    const plan = pointsOfStep(sql, inTx, taken, NOT_SPLIT, level !== 'read committed' && level !== 'read uncommitted')
    if (plan) {
      n += plan.points.length
      if (plan.commit || plan.implicit) {
        n++
        inTx = false
        taken = false
      } else {
        inTx = true
        taken = snapshotAfter(sql, taken)
      }
      continue
    }
    taken = snapshotAfter(sql, taken)
    n++
    // `begin; ...; commit` as one step: its run, then its COMMIT (Session.commitBody).
    if (commitBody(sql, inTx) !== undefined) {
      n++
      inTx = false
    } else if (/^\s*(begin|start\s+transaction)\b/i.test(sql)) inTx = true
    else if (/^\s*(commit|end|abort)\b/i.test(sql) || (/^\s*rollback\b/i.test(sql) && !/^\s*rollback\s+(work\s+|transaction\s+)?to\b/i.test(sql))) inTx = false
    else if (!inTx && sql.trim() !== '' && !NOT_SPLIT.test(sql) && !WHOLE.test(sql)) n++
  }
  return n
}

function interleavingOf(p: Plan, ran: Entry[], facts: TrialFacts, trial: Trial, sw: number, expected: ReadonlySet<string>): Interleaving {
  const failure = trial.failure ?? (trial.verdict === 'unknown' ? codeFailure(facts.sessions, expected) : undefined)
  const named = p.sessions.map((s) => ({ name: s.name, steps: s.steps }))
  const got = new Set(ran.map((e) => `${e.session}.${e.step}`))
  const rest = p.sessions.flatMap((s, i) => s.steps.map((_, k) => ({ session: i, step: k })).filter((e) => !got.has(`${e.session}.${e.step}`)))
  const order = (facts as TrialFacts & { order?: string[] }).order
  return {
    line: kindOf(p.scenario).type === 'application' && order ? order.join(' ') : formatPermutation([...ran, ...rest], named),
    verdict: trial.verdict,
    held: facts.invariant.held,
    observed: facts.invariant.observed,
    outcomes: Object.fromEntries(facts.sessions.map((s) => [s.name, labelOf(s)])),
    waited: facts.sessions.filter((s) => s.waitedMs > 0).map((s) => s.name),
    raised: [...new Set(facts.sessions.flatMap((s) => s.errors))],
    levels: Object.fromEntries(facts.sessions.map((s) => [s.name, s.isolation])),
    switches: sw,
    runs: 1,
    why: trial.why,
    ...(failure ? { failure } : {}),
    ...(trial.failure ? { incomplete: true as const } : {}),
    ...(facts.injections?.some((x) => x.at) ? { injected: facts.injections.filter((x) => x.at).map((x) => ({ fault: x.fault, at: x.at! })) } : {}),
  }
}

function groupsOf(every: Interleaving[]): Group[] {
  const groups = new Map<string, Group>()
  for (const it of every) {
    // A failure (the code failing, or a session that did not complete where every one must) with the invariant not
    // violated is its own group, named by how it failed.
    const failure = it.held !== false ? it.failure : undefined
    const state = failure ? 'FAILED' : it.verdict === 'unknown' ? 'UNKNOWN' : it.held === false ? 'VIOLATED' : 'HELD'
    const ends = Object.entries(it.outcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')
    const key = failure ? `FAILED failed: ${failure}` : `${state} ${it.verdict}: ${ends}`
    const g = groups.get(key) ?? { key, held: it.verdict === 'unknown' ? null : it.held, verdict: it.verdict, outcomes: it.outcomes, count: 0, lines: [], ...(failure ? { failure } : {}) }
    g.count++
    g.lines.push(it.line)
    groups.set(key, g)
  }
  const rank = (g: Group) => (g.held === false ? 0 : g.failure ? 1 : g.held === null ? 2 : 3)
  const sw = new Map(every.map((x) => [x.line, x.switches]))
  for (const g of groups.values()) g.lines.sort((a, b) => sw.get(a)! - sw.get(b)!)
  return [...groups.values()].sort((a, b) => rank(a) - rank(b) || b.count - a.count)
}

/** An interleaving that cannot finish (every session left waits for one that has run all its steps) ends the exploration: say so in explore's words. */
function exploreFailure(e: unknown): unknown {
  if (e instanceof UsageError && /^the permutation cannot finish/.test(e.message)) {
    return new RunError(`an interleaving cannot finish: ${e.message.replace(/^the permutation cannot finish: /, '').replace(/: put the waiting step.*$/, '')}; race explore needs every interleaving to end (release such locks in the sessions' last steps)`)
  }
  return e
}
