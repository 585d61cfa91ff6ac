// A trial run's configuration (engine/runner.ts RunConfig), built in one place for `race run` and run() (execute.ts),
// race check and race matrix (judge.ts runOnce) and race explore: what every run shares (its context and plan, whose
// SQL it is, the bounds on every wait) is set here, and each caller adds only what is its own.
import type { RunConfig } from '../engine/runner.js'
import type { RunContext } from '../lifecycle.js'
import type { Plan } from '../plan.js'
import { isBuiltIn } from '../registry.js'
import type { Bounds } from './params.js'

/** What a caller adds to the shared part; schedule, trials and keep default to one lockstep trial, nothing kept. */
export type OwnConfig = Omit<RunConfig, 'context' | 'plan' | 'ownSql' | 'stepTimeoutMs' | 'connectTimeoutMs' | 'schedule' | 'trials' | 'keep'> &
  Partial<Pick<RunConfig, 'schedule' | 'trials' | 'keep'>>

/** The run's configuration: the plan's scenario's SQL runs as race's own when the scenario is built in (registry.isBuiltIn). */
export function runConfig(ctx: RunContext, p: Plan, bounds: Pick<Bounds, 'stepTimeoutMs' | 'connectTimeoutMs'>, own: OwnConfig = {}): RunConfig {
  return {
    ...own,
    ownSql: isBuiltIn(p.scenario),
    context: ctx,
    plan: p,
    schedule: own.schedule ?? 'lockstep',
    trials: own.trials ?? 1,
    stepTimeoutMs: bounds.stepTimeoutMs,
    connectTimeoutMs: bounds.connectTimeoutMs,
    keep: own.keep ?? false,
  }
}
