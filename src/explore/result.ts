// What race explore returns: each interleaving run, the groups they fall into, and the whole search's result; and the
// pure helpers that build and order them (an interleaving from a trial, groups, which violation is simpler).
import type { ServerInfo } from '../db/driver.js'
import type { TrialFacts } from '../engine/types.js'
import { codeFailure } from '../judge/failure.js'
import { labelOf, type ExpectOverride } from '../judge/index.js'
import { formatPermutation, type Entry } from '../permutation.js'
import type { Plan } from '../plan.js'
import type { Trial } from '../run/judge.js'
import { kindOf, type Params, type Verdict } from '../scenario.js'
import type { Stopped } from './findings.js'
import type { ShardWork } from './reduce-shard.js'

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
   * The reduced search on several jobs: the runs the jobs made, and those of them the one-job search did not need
   * (made ahead of it, from a guess of what it would run, and it ran otherwise): `runs` is the one-job search's,
   * `made` = `runs` + `wasted`.
   */
  ahead?: { made: number; wasted: number }
  /**
   * Why the default search of declared steps ran as it did where they have more orders than --max: the reduced search ran first,
   * and either covered them within --max runs (`search: 'reduced'`) or passed --max runs with orders left, and a PCT
   * sample followed (`search: 'sample'`; `reducedRuns`: the reduced search's runs, whose findings are kept). Absent
   * when the orders are within --max, a search was asked for by name (--exhaustive, --sample, --preemptions), and for
   * an application race (its reduced search stops at --max runs, complete: false).
   */
  chosen?: { search: 'reduced' | 'sample'; max: number; reducedRuns: number; why: string }
  /**
   * How many orders of the steps keep each session's own order (isolationtester's count), as a decimal string. An
   * application race's steps are discovered as its functions run: then the orders of the queries its first run sent
   * (each session's count along that run), which decided between every interleaving and a sample.
   */
  orders: string
  /**
   * An application race: how its sessions ran. isolated: each in a worker thread of its own, sharing nothing but the
   * database (the reduced search by default, --inject too); shared: in race's one process (the race module's
   * sharedState, or a race object), where they may share JavaScript state (every interleaving unless --reduce). `assumes`: what that means.
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
   * shard's (enumerate.ts SplitDfs); `passed`: runs made only on the way to them (another shard reports those). Of
   * the reduced search: `reduced`, what the part ran (reduce-shard.ts); it reports every run, and merge drops repeats.
   */
  shard?: { index: number; count: number; passed: number; reduced?: ShardWork }
  /** The parts of a split reduced search joined (merge.ts): how many, and the interleavings more than one of them ran. */
  merged?: { parts: number; repeated: number }
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
/** Fewer switches, then fewer steps. */
export function better(a: Interleaving, b: Interleaving): boolean {
  const steps = (x: Interleaving) => x.line.split(' ').length
  return a.switches < b.switches || (a.switches === b.switches && steps(a) < steps(b))
}

/**
 * A sample is not a certificate: one that found no violation passes expect held only when the user asked for a
 * level of evidence (--accept-sample P) and its stated probability reached it. Else held is not known (exit 3).
 */
export function sampleFallsShort(sample: { probability: number; accept?: number } | undefined, violating: number, expect: ExpectOverride): boolean {
  if (!sample || violating > 0 || expect !== 'held') return false
  return sample.accept === undefined || sample.probability < sample.accept
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

/**
 * A run as an interleaving: its launch order as a permutation line (steps a session never ran, because it ended,
 * last). An application race's line is the labels its queries were released under (s1.q1 s2.q1 ...): the steps
 * that exist are the ones its functions sent.
 */
export function interleavingOf(p: Plan, ran: Entry[], facts: TrialFacts, trial: Trial, sw: number, expected: ReadonlySet<string>): Interleaving {
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

export function groupsOf(every: Interleaving[]): Group[] {
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

/** What an application race's isolated sessions assume (ExploreResult.sessionsRan). */
export const ISOLATED_ASSUMES = 'each session ran in a worker thread of its own, sharing nothing but the database: what the server saw is all they share (a race module whose sessions share process state says sharedState: true)'
/** What an application race's sessions in one process assume. */
export const SHARED_ASSUMES = 'the sessions ran in one process (sharedState, or a race object, not its file) and may share JavaScript state the server never sees: the search is not reduced unless --reduce, which assumes they share none'
