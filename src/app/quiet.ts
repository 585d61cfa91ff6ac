// The wait for a quiet moment of an application trial, once for both of its modes: the sessions in race's process
// (trial.ts) and the sessions each in a worker of its own (isolated.ts). Quiet: every session is at its gate, done, or
// its query is seen blocked from the control connection. A session seen blocked that is no longer (its blocker ended)
// is waited for again, as isolationtester does. Nothing is guessed from time: the server is asked, and the loop
// wakes at each change a session reports (or every POLL_MS).
import { setTimeout as sleep } from 'node:timers/promises'
import { POLL_MS } from '../engine/schedule.js'
import type { AppState } from './session.js'

/** A session as the wait sees it: its state, and whether its query in flight was seen blocked. */
export interface QuietSession {
  state: AppState
  current?: { blocked: boolean }
}

export interface QuietLoop<S extends QuietSession> {
  signal: AbortSignal
  sessions: readonly S[]
  /** A failure reported since (a worker's): thrown at the next turn. */
  failure?: () => Error | undefined
  /** Gives up on sessions running JavaScript too long without reaching a gate or returning. */
  boundApp(): void
  /** Counts changes (a session at its gate, a query ended, a session ended). */
  changes(): number
  /** Settles at the next change. */
  tick(): Promise<void>
  /** The sessions of `ask` whose query the server has waiting on a lock. */
  probe(ask: S[]): Promise<Set<S>>
  /** A session seen blocked that the server no longer has waiting. */
  unblocked(s: S): void
  /** A session whose running query the server has waiting. */
  blocked(s: S): void
  /** Once, the first time the trial is quiet. */
  firstQuiet?(): Promise<void>
}

/** The wait until nothing moves, for one trial (the first quiet moment is its own: firstQuiet). */
export function quietWait<S extends QuietSession>(q: QuietLoop<S>): () => Promise<void> {
  let looked = false
  return async () => {
    for (;;) {
      if (q.signal.aborted) throw q.signal.reason
      const failed = q.failure?.()
      if (failed) throw failed
      q.boundApp()
      const seen = q.changes()
      const waiting = q.sessions.filter((s) => s.state === 'running' && s.current?.blocked)
      if (waiting.length) {
        const still = await q.probe(waiting)
        for (const s of waiting) if (!still.has(s)) q.unblocked(s)
      }
      const runningFree = q.sessions.filter((s) => s.state === 'running' && s.current && !s.current.blocked)
      if (runningFree.length) for (const s of await q.probe(runningFree)) q.blocked(s)
      const moving = q.sessions.filter((s) => s.state === 'app' || s.state === 'starting' || (s.state === 'running' && !s.current?.blocked))
      // Something changed while the server was asked: its answer may predate it (ask again before calling it quiet).
      if (!moving.length && q.changes() !== seen && q.sessions.some((s) => s.state === 'running' && s.current?.blocked)) continue
      if (!moving.length) {
        // The first time every session waits on race or the server: a connection of their own opened before their
        // first query through race's is open now (asked once: at every step, it tripled explore's time).
        if (!looked) {
          looked = true
          await q.firstQuiet?.()
        }
        return
      }
      await Promise.race([q.tick(), sleep(POLL_MS)])
    }
  }
}
