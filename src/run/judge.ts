// A trial judged against the scenario's documentation, and race check's and race matrix's one deterministic trial.
import type { Words } from '../engine/refusals.js'
import type { Driver } from '../db/driver.js'
import type { Target } from '../db/target.js'
import type { TrialFacts } from '../engine/types.js'
import { compare, documentedCodes, judge, notCompleted, type Comparison } from '../judge/index.js'
import type { RunContext } from '../lifecycle.js'
import { documentedFor, plan, type Plan } from '../plan.js'
import type { Documented, Params, Pool, Scenario, Schedule, Verdict } from '../scenario.js'
import { runConfig } from './config.js'
import type { Bounds } from './params.js'

/**
 * The codes a run declares as its prevention: those its documented outcomes name, the scenario's `prevention` (a
 * spec's `prevented by` line), and those a session's retry loop catches (the application expects them).
 */
export function declaredCodes(docs: readonly Documented[], p: Pick<Plan, 'scenario' | 'sessions'>): Set<string> {
  const out = documentedCodes(docs)
  for (const c of p.scenario.prevention ?? []) out.add(c)
  for (const s of p.sessions) for (const c of s.spec.retry?.on ?? []) out.add(c)
  return out
}

/** A trial judged: its verdict, and how it compares with what is documented. */
export interface Trial extends TrialFacts {
  verdict: Verdict
  why: string
  comparison: Comparison
  /** Every session must complete (the scenario's mustComplete), and this one did not: a failure (judge notCompleted). */
  failure?: string
}

export function judgeTrial(facts: TrialFacts, docs: readonly Documented[], p: Plan): Trial {
  const { verdict, why } = unfollowedVerdict(facts, judge(facts.sessions, facts.invariant, declaredCodes(docs, p)))
  const failure = p.scenario.mustComplete ? notCompleted(facts.sessions) : undefined
  return { ...facts, verdict, why, comparison: compare(verdict, facts.sessions, docs, p.isolation), ...(failure ? { failure } : {}) }
}

/**
 * A replay (--schedule) some of whose steps never came ran another interleaving than the one asked for: what it
 * shows of that one is not known (unknown), except a violation, which is a fact of what ran.
 */
export function unfollowedVerdict(facts: Pick<TrialFacts, 'unfollowed'>, judged: { verdict: Verdict; why: string }): { verdict: Verdict; why: string } {
  if (!facts.unfollowed || judged.verdict === 'anomaly') return judged
  return { verdict: 'unknown', why: `${facts.unfollowed}: not the interleaving asked for (the order line is what ran; on it, ${judged.why})` }
}

/** One deterministic trial (race check, race matrix): lockstep, no window, nothing kept, judged. */
export async function runOnce(
  ctx: RunContext,
  lab: Driver,
  bounds: Bounds,
  scenario: Scenario,
  params: Params,
  n: number,
  pool?: Pool,
  via?: Target,
  word?: Words,
): Promise<{ trial: Trial; docs: Documented[]; plan: Plan; ms: number; pooled?: string }> {
  const variant = { params, n, engine: lab.engine, ...(pool ? { pool } : {}) }
  const p = plan(scenario, variant)
  const docs = documentedFor(scenario, { ...variant, schedule: 'lockstep', windowMs: 0 })
  const started = performance.now()
  // Through a pooler: the sessions go through one of race's own (or the user's, --pooled), opened for this run.
  const pooled = pool ? (await import('./pooler.js')).pooledDriver(pool, lab, bounds.connectTimeoutMs, via) : undefined
  const { run } = await import('../engine/run.js')
  const out = await run(pooled ?? lab, runConfig(ctx, p, bounds, { word }))
  return { trial: judgeTrial(out.trials[0], docs, p), docs, plan: p, ms: Math.round(performance.now() - started), ...(pooled?.describe ? { pooled: pooled.describe } : {}) }
}

/** The documented outcomes for a schedule (see plan.documentedFor). */
export function docsFor(scenario: Scenario, p: Plan, schedule: Schedule, windowMs: number): Documented[] {
  return documentedFor(scenario, { ...p.variant, schedule, windowMs })
}
