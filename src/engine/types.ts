// Facts the engine records; judge/ and report/ read them and never touch the database.

export type Outcome = 'committed' | 'rejected' | 'failed' | 'lost' | 'timeout'

export type EventKind = 'run' | 'wait' | 'woke' | 'ok' | 'error' | 'reject' | 'retry' | 'timeout' | 'lost'

export interface TimelineEvent {
  /** Milliseconds since the barrier (or, for step-by-step schedules, since the first step). */
  t: number
  session: string
  step: string
  kind: EventKind
  detail?: string
  /** The step is set-up (begin, SET ..., set_config): shown only with --timeline all. */
  setup?: boolean
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
  /** The isolation level the session's transaction ran at, read from the server (SHOW transaction_isolation). */
  isolation: string | null
  /** The command tag of the session's COMMIT (or ROLLBACK): COMMIT of a failed transaction answers ROLLBACK. */
  commitTag: string | null
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
  /** null: could not be decided (the query failed, or it said NULL: something it needs is missing). */
  held: boolean | null
  error?: string
}

/** What one trial did: facts only. The commands judge them. */
export interface TrialFacts {
  sessions: SessionReport[]
  invariant: InvariantReport
  events: TimelineEvent[]
}
