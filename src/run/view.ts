// What one run of the run service comes to (executeRun): the scenario and variant it ran, where, every trial judged
// and the summary. The reports (report/run.ts, report/json.ts) draw it; nothing here prints.
import type { ServerInfo } from '../db/driver.js'
import type { Summary } from '../judge/index.js'
import type { Plan } from '../plan.js'
import type { Documented, Params, Scenario, Schedule } from '../scenario.js'
import type { Trial } from './judge.js'

/** Everything a report of one `race run` needs. */
export interface RunView {
  scenario: Scenario
  /** The params the run used (lock timeouts extended by --hold). */
  params: Params
  /** The params as given (before --hold). */
  given: Params
  n: number
  schedule: Schedule
  windowMs: number
  holdMs: number
  plan: Plan
  target: string
  schema: string
  server: ServerInfo
  trials: Trial[]
  summary: Summary
  docs: Documented[]
  /** The trial shown in full: the first that deviates, else the first whose verdict is the summary's. */
  representative: Trial
  /** The pooler the sessions went through, described (absent: direct). */
  pooled?: string
}
