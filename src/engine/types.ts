// Facts the engine records; judge/ and report/ read them and never touch the database.
import type { Verdict } from '../scenario.js'

export type Outcome = 'committed' | 'rejected' | 'failed' | 'lost' | 'timeout'

export type EventKind = 'run' | 'wait' | 'woke' | 'ok' | 'error' | 'reject' | 'retry' | 'timeout' | 'lost'

export interface TimelineEvent {
  /** Milliseconds since the barrier (or, for step-by-step schedules, since the first step). */
  t: number
  session: string
  step: string
  kind: EventKind
  detail?: string
}

export interface SessionReport {
  name: string
  pid: number
  outcome: Outcome
  /** For rejected: the application's reason; for failed/lost/timeout: what happened. */
  reason: string | null
  sqlstate: string | null
  condition: string | null
  /** The step the session ended in (failed, lost, timeout) or was rejected at. */
  step: string | null
  /** Time spent in steps that were seen blocked by another session. */
  waitedMs: number
  /** From the barrier to the session's end. */
  ms: number
  retries: number
  /** SQLSTATEs raised along the way, including those a retry recovered from. */
  errors: string[]
  /** For timeout: the backends this session was waiting for when it was given up. */
  blockedBy?: number[]
}

export interface InvariantReport {
  description: string
  observed: string
  /** null: could not be evaluated. */
  held: boolean | null
  error?: string
}

export interface TrialResult {
  sessions: SessionReport[]
  invariant: InvariantReport
  verdict: Verdict
  /** Why the verdict is what it is, in a few words. */
  why: string
  events: TimelineEvent[]
}
