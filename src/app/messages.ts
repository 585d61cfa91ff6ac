// What an isolated session's worker (session-host.ts) and the main thread (app/isolated.ts) tell each other.
import type { SessionReport, TimelineEvent } from '../engine/types.js'
import type { FaultCode } from './labels.js'
import type { AppState } from './session.js'
import type { Target } from '../db/target.js'

/** What the main thread tells a session's worker. */
export type ToHost =
  | { t: 'trial'; schema: string; user: string; target: Target; isolation?: string; split: boolean; stepTimeoutMs: number; connectTimeoutMs: number; fresh: boolean }
  | { t: 'start' }
  | { t: 'go'; seq: number; fault?: FaultCode }
  /** The query labelled `label` was seen waiting on a lock (it may have ended by the time the worker reads this). */
  | { t: 'blocked'; label: string }
  | { t: 'unblocked'; label: string }
  | { t: 'end'; outcome: 'timeout' | 'lost'; reason: string; record?: boolean }
  | { t: 'finish'; rollback: boolean; keep: boolean; destroy: boolean; lateMs: number }
  | { t: 'close' }

/** The session as the main thread sees it: posted at every change. */
export interface HostState {
  t: 'state'
  /** The releases ("go") this worker had received when it posted this. */
  seq: number
  state: AppState
  pending?: { label: string; sql: string; point: boolean }
  current?: { label: string }
  errors: number
  lastLabel?: string
  /** Stopped at maxQueries: its function never resumes, so its worker never says 'ended'. */
  parked?: boolean
}

/** What the worker tells the main thread. */
export type FromHost =
  | HostState
  | { t: 'opened'; pid: number }
  | { t: 'released'; label: string }
  | { t: 'timeout'; reason: string }
  | { t: 'ended' }
  | { t: 'finished'; report: SessionReport; events: TimelineEvent[]; outcome?: string; crashed: boolean; sent: number; inTx: boolean; parked: boolean; lostConnection: boolean; own: { session: string; to: string }[]; destroyed: boolean }
  | { t: 'failed'; message: string; code?: string }
  | { t: 'closed' }
  | { t: 'socket'; port: number; session: string; open: boolean }
