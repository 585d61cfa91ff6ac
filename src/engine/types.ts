// Facts the engine records; judge/ and report/ read them and never touch the database.
import type { Target } from '../db/target.js'

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
  /** Through a pooler: the server backend that ran the step, when known (see SessionReport.steps). */
  backend?: number
}

/** Through a pooler: the backend a step ran on (null: an autocommit statement race did not see linked). */
export interface StepBackend {
  step: string
  backend: number | null
}

/**
 * Sessions through a connection pooler: each is a client of the pooler, and its statements run on whatever
 * server connection the pooler lends it. What the engine needs to know where each step ran.
 */
export interface PoolRoute {
  /** Where the sessions connect. */
  target: Target
  /** Added to each session's application_name, so the pooler's and the server's views name this run's clients. */
  tag: string
  /** Startup parameters every session sends (a pooler the user runs must pass search_path on). */
  startup?: Record<string, string>
  /** e.g. 'PgBouncer 1.18.0, transaction mode, pool size 2'. */
  describe: string
  /** The backend each of this run's clients (by application_name) is linked to right now. */
  links(): Promise<Map<string, number>>
  /** The server backends this run's clients may have used: the pool's, for block detection and for ending them. */
  backends(): Promise<number[]>
  /** Between trials and at the end: nothing of a trial's session state (a leaked lock, a SET) may outlive it. */
  recycle(): Promise<void>
  close(): Promise<void>
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
  /** Through a pooler: where each step ran (pid is then the backend of its last known step). */
  steps?: StepBackend[]
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
