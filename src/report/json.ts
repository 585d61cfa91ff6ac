// The --json document: one stable shape, documented in the README. Times in milliseconds.
import type { RunOutput } from '../engine/run.js'
import type { TrialResult } from '../engine/types.js'
import type { Summary } from '../judge/index.js'
import type { Params, Scenario, Schedule } from '../scenario.js'

/** Everything a report of one `race run` needs. */
export interface RunView {
  scenario: Scenario
  params: Params
  n: number
  schedule: Schedule
  windowMs: number
  isolation: string
  target: string
  out: RunOutput
  summary: Summary
  /** The trial shown in full: the first whose verdict is the summary's. */
  representative: TrialResult
}

export function toJson(r: RunView, o: { timeline: boolean; exitCode: number; kept: boolean }) {
  const t = r.representative
  return {
    scenario: r.scenario.id,
    title: r.scenario.title,
    server: { version: r.out.server.version },
    target: r.target,
    params: r.params,
    n: r.n,
    schedule: r.schedule,
    windowMs: r.windowMs,
    isolation: r.isolation,
    sessions: t.sessions,
    invariant: t.invariant,
    verdict: r.summary.verdict,
    why: t.why,
    expected: r.summary.expected,
    matched: r.summary.matched,
    trials: r.summary.trials,
    violations: r.summary.violations,
    verdicts: r.summary.tally,
    ...(r.summary.trials > 1 ? { trialVerdicts: r.out.trials.map((x) => x.verdict) } : {}),
    ...(o.timeline ? { timeline: t.events } : {}),
    schema: o.kept ? r.out.schema : undefined,
    exitCode: o.exitCode,
  }
}
