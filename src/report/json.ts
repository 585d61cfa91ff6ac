// The --json document: one stable shape, documented in the README. Times in milliseconds.
import type { InvariantReport, SessionReport, TimelineEvent } from '../engine/types.js'
import { sourceText } from '../registry.js'
import type { Documented, Params, Schedule, Verdict } from '../scenario.js'
import type { Level } from '../levels.js'
import type { RunView } from '../run/view.js'



/** The run's JSON document (race run --json, and what the API's run() resolves to besides ok and text). */
export interface RunDocument {
  scenario: string
  title: string
  source: string
  server: { version: string }
  target: string
  /** The pooler the sessions went through, described (absent: direct). */
  pooler?: string
  params: Params
  n: number
  schedule: Schedule
  windowMs: number
  holdMs: number
  /** The level each session is documented at; each session's own `isolation` is what the server said. */
  isolation: Record<string, Level | null>
  sessions: SessionReport[]
  /** An application race: the labels in the order they ran, a permutation --schedule replays (unless `overlap`). */
  order?: string
  /** A barrier run: two queries that were on the server at once; `order` is then the order they were sent, not a replay. */
  overlap?: [string, string]
  /** A replay (--schedule) whose named steps never came. */
  unfollowed?: string
  invariant: InvariantReport
  verdict: Verdict
  why: string
  documented: Documented[]
  expected: string[]
  matched: boolean
  deviations: string[]
  trials: number
  violations: number
  deviating: number
  verdicts: Partial<Record<Verdict, number>>
  /** With more than one trial: each trial's verdict. */
  trialVerdicts?: Verdict[]
  /** With --timeline (the API: always): the representative trial's events. */
  timeline?: TimelineEvent[]
  schema: string
  kept: boolean
  exitCode: number
}

export function toJson(r: RunView, o: { timeline: boolean; exitCode: number; kept: boolean }): RunDocument {
  const t = r.representative
  return {
    scenario: r.scenario.id,
    title: r.scenario.title,
    source: sourceText(r.scenario.source),
    server: { version: r.server.version },
    target: r.target,
    ...(r.pooled ? { pooler: r.pooled } : {}),
    params: r.params,
    n: r.n,
    schedule: r.schedule,
    windowMs: r.windowMs,
    holdMs: r.holdMs,
    /** The level each session is documented at; each session's own `isolation` is what the server said. */
    isolation: r.plan.isolation,
    sessions: t.sessions,
    // An application race: the labels in the order they ran, a permutation --schedule replays; with `overlap` (a
    // barrier run), the order they were sent, two of them (the pair) on the server at once: no permutation replays it.
    ...(t.order ? { order: t.order.join(' ') } : {}),
    ...(t.overlap ? { overlap: t.overlap } : {}),
    ...(t.unfollowed ? { unfollowed: t.unfollowed } : {}),
    invariant: t.invariant,
    verdict: r.summary.verdict,
    why: t.why,
    documented: r.docs,
    expected: r.summary.expected,
    matched: r.summary.matched,
    deviations: r.summary.deviations,
    trials: r.summary.trials,
    violations: r.summary.violations,
    deviating: r.summary.deviating,
    verdicts: r.summary.tally,
    ...(r.summary.trials > 1 ? { trialVerdicts: r.trials.map((x) => x.verdict) } : {}),
    ...(o.timeline ? { timeline: t.events } : {}),
    schema: r.schema,
    kept: o.kept,
    exitCode: o.exitCode,
  }
}
