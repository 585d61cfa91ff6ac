// A run, its input checked: the plan made and the schedule parsed once, the target opened, the engine run with the
// parsed order, every trial judged. What `race run` and the API's run() both run; nothing is printed here.
import { parseAppPermutation } from '../app/labels.js'
import type { Words } from '../engine/refusals.js'
import type { Driver } from '../db/driver.js'
import type { Target } from '../db/target.js'
import { UsageError } from '../errors.js'
import { exitCode, summarize, type ExpectOverride } from '../judge/index.js'
import type { RunContext } from '../lifecycle.js'
import type { Entry } from '../permutation.js'
import { assertSound, orderFor, plan, type Plan } from '../plan.js'
import type { RunView } from './view.js'
import type { Engine, Params, Pool, Scenario, Schedule } from '../scenario.js'
import { qualifyPermutation, specFailure } from '../specfile/common.js'
import { docsFor, judgeTrial, type Trial } from './judge.js'
import { runConfig } from './config.js'
import { withLab } from './lab.js'
import { sizePool, type Bounds } from './params.js'

export const SCHEDULES: readonly Schedule[] = ['barrier', 'lockstep', 'serial']

/**
 * A schedule name, or a permutation ("s1.begin s2.begin ..."), checked against the plan's sessions. `order`: the
 * steps in the order a step-by-step schedule launches them (absent for a barrier and an application race), parsed
 * here once and handed to the engine.
 */
export function parseSchedule(raw: string, p: Plan): { schedule: Schedule; permutation?: string; order?: Entry[] } {
  if (p.scenario.kind?.type === 'application') {
    const v = String(raw).trim()
    if ((SCHEDULES as readonly string[]).includes(v)) return { schedule: v as Schedule }
    if (v.includes('.')) {
      parseAppPermutation(v, p.sessions.map((s) => s.name))
      return { schedule: 'permutation', permutation: v }
    }
    throw new UsageError(`unknown schedule '${raw}': use barrier, lockstep (query k of every session before k+1), serial, or a permutation of query labels like "s1.q1 s2.q1 s1.q2 ..."`)
  }
  const v = qualifyPermutation(p, String(raw).trim())
  if (v === 'barrier') return { schedule: v }
  if (v === 'lockstep' || v === 'serial') return { schedule: v, order: orderFor(p, v) }
  if (v.includes('.')) return { schedule: 'permutation', permutation: v, order: orderFor(p, 'permutation', v) }
  throw new UsageError(
    `unknown schedule '${raw}': use barrier (all start together, run free), lockstep (step by step), serial (one after another), or a permutation like "s1.begin s2.begin s1.check ..."`,
  )
}

/** --hold extends the scenario's own wait bounds (lock_timeout kept as a safety net) by the hold. */
export function extendForHold(s: Scenario, params: Params, holdMs: number): Params {
  if (!holdMs) return params
  const out = { ...params }
  for (const [k, p] of Object.entries(s.params)) if (p.holdExtends) out[k] = Number(out[k]) + holdMs
  return out
}

/** One race, its input checked: what `race run` and the API's run() both run. Nothing is printed here. */
export interface RunInput {
  scenario: Scenario
  engine: Engine
  /** The params the run uses (lock timeouts extended by --hold), and as given. */
  params: Params
  given: Params
  n: number
  windowMs: number
  trials: number
  override: ExpectOverride
  bounds: Bounds
  user?: string
  holdMs: number
  /** The pooler the sessions go through (parsed), if any. */
  pool?: Pool
  /** --schedule as given: a name or a permutation; absent: the scenario's default. */
  scheduleText?: string
  keep: boolean
  freshConnections: boolean
  databaseUrl?: string
  onHold?: (pids: number[], ms: number, lab: Driver, target: Target) => void
  /** --step: the presenter, made once the server is known. */
  presenter?: (lab: Driver, target: Target, p: Plan, schedule: Schedule) => { beforeStep: RunOptionsOf['beforeStep']; onEvent: RunOptionsOf['onEvent'] }
  /** After each trial: how many ran, how many violated the invariant. */
  onTrial?: (done: number, violations: number) => void
  /** The caller's words for what the run refuses (engine/refusals.ts): the CLI's name its flags; absent, the engine's own. */
  word?: Words
}

type RunOptionsOf = Parameters<typeof import('../engine/run.js').run>[1]

/** Runs the checked input on its target (the embedded server when none is given) and judges every trial. */
export async function executeRun(ctx: RunContext, input: RunInput): Promise<{ view: RunView; code: 0 | 1 | 3 }> {
  const { scenario, engine, params, given, n, windowMs, trials, override, bounds, holdMs } = input
  // The pooler's code (PgBouncer, the pooled driver) is loaded only when one is asked for.
  const pooler = input.pool ? await import('./pooler.js') : undefined
  pooler?.requirePooler(input.pool)
  const pool = input.pool && sizePool(input.pool, scenario, plan(scenario, { params, n, engine, pool: input.pool }).sessions.length)
  assertSound(scenario, params, n, engine, pool)
  const p = plan(scenario, { params, n, engine, ...(pool ? { pool } : {}) }, windowMs)
  const { schedule, permutation, order } = parseSchedule(input.scheduleText ?? scenario.defaultSchedule ?? 'barrier', p)
  if (pool?.size && schedule === 'barrier' && pool.mode !== 'statement' && pool.size < p.sessions.length) {
    throw new UsageError(
      `--schedule barrier holds all ${p.sessions.length} sessions' transactions open at once, which needs --pool-size ${p.sessions.length} or more (got ${pool.size}): raise it, or use --schedule lockstep`,
    )
  }
  const docs = docsFor(scenario, p, schedule, windowMs)
  let violations = 0
  // The engine loads while withLab connects.
  const engineModule = import('../engine/run.js')
  engineModule.catch(() => {}) // awaited once connected
  return withLab(ctx, input.databaseUrl, bounds, async (lab, target, via) => {
    const { run } = await engineModule
    const judged: Trial[] = []
    const presenter = input.presenter?.(lab, target, p, schedule)
    // Through a pooler the sessions are its clients (race's own PgBouncer, or the one at --database-url).
    const pooled = pool ? pooler!.pooledDriver(pool, lab, bounds.connectTimeoutMs, via) : undefined
    const out = await run(pooled ?? lab, runConfig(ctx, p, bounds, {
      schedule,
      permutation,
      order,
      trials,
      keep: input.keep,
      freshConnections: input.freshConnections,
      user: input.user,
      holdMs,
      onHold: (pids, ms) => input.onHold?.(pids, ms, lab, target),
      beforeStep: presenter?.beforeStep,
      onEvent: presenter?.onEvent,
      word: input.word,
      onTrial: (done, facts) => {
        const t = judgeTrial(facts, docs, p)
        judged.push(t)
        if (t.verdict === 'anomaly') violations++
        input.onTrial?.(done, violations)
      },
    })).catch((e) => {
      throw specFailure(scenario, e)
    })
    const summary = summarize(judged, docs, override)
    const representative =
      judged.find((t) => !t.comparison.matched && !override) ?? judged.find((t) => t.verdict === summary.verdict) ?? judged[judged.length - 1]
    const view: RunView = { scenario, params, given, n, schedule, windowMs, holdMs, plan: p, target: target.label, schema: out.schema, server: out.server, trials: judged, summary, docs, representative, ...(pooled?.describe ? { pooled: pooled.describe } : {}) }
    return { view, code: exitCode(summary) }
  }, scenario, { pooled: pool?.kind === 'external', sessions: p.sessions.length })
}

