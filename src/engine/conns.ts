// The session connections of a run between its trials. A trial's sessions are opened while the control connection
// runs its setup, and where the driver can make a connection what a fresh one would be (SessionConn.reset: the
// PostgreSQL driver, direct), a session's connection is kept for the same session of the next trial instead of
// being closed and opened again. A connection is kept only when nothing about it is in doubt (see fitToKeep);
// otherwise it is closed as before and the next trial opens a fresh one. Whatever happens, every connection held
// here is closed at the end of the run, or its socket destroyed at once when the run fails or is aborted.
import type { Driver, SessionConn, SessionOptions } from '../db/driver.js'
import { sqlstateOf } from '../db/sqlstate.js'
import type { Session } from './session.js'

export class SessionConns {
  /** By session index: a kept connection, or one being opened for the next trial. */
  private readonly ready = new Map<number, Promise<SessionConn>>()
  /** The connections in `ready` that served a trial already. */
  private readonly kept = new Set<SessionConn>()
  /** Every connection held here right now (not yet taken by a trial's session). */
  private readonly held = new Set<SessionConn>()
  private ended = false
  /** How many connections were opened, and how many times a trial's session took one a trial before it had used. */
  readonly counts = { opened: 0, kept: 0 }

  constructor(private readonly lab: Driver) {}

  /** Starts opening a connection for each of these sessions that has none here (kept or already opening). */
  prepare(wanted: readonly { index: number; options: SessionOptions }[]): void {
    for (const { index, options } of wanted) {
      if (this.ready.has(index)) continue
      const p = this.open(options)
      p.catch(() => {}) // its failure reaches the trial that takes it
      this.ready.set(index, p)
    }
  }

  private async open(o: SessionOptions): Promise<SessionConn> {
    const c = await this.lab.openSession(o)
    this.counts.opened++
    if (this.ended) {
      await c.destroy()
      throw Object.assign(new Error('the run ended while a session connection was being opened'), { code: 'CONNECTION_DESTROYED' })
    }
    this.held.add(c)
    return c
  }

  /** Once every connection being opened here is open (rejects with the first that could not be). */
  async whenOpen(): Promise<void> {
    await Promise.all([...this.ready.values()])
  }

  /**
   * The connection for session `index`: the one kept or opened for it, else a new one. A kept connection the server
   * has closed meanwhile (idle_session_timeout, an administrator) is replaced by a fresh one.
   */
  async take(index: number, o: SessionOptions): Promise<SessionConn> {
    const p = this.ready.get(index)
    this.ready.delete(index)
    if (!p) return this.open(o).then((c) => (this.held.delete(c), c))
    const c = await p
    this.held.delete(c)
    const again = this.kept.delete(c)
    const unfit = this.failed.delete(c)
    if (!c.closed && !c.fatal && !unfit) {
      if (again) this.counts.kept++
      return c
    }
    await c.destroy()
    // Its reset was not shown complete: its backend is ended too (it may still be running what the reset sent).
    if (unfit && c.pid) await this.lab.terminate([c.pid])
    return this.open(o).then((c) => (this.held.delete(c), c))
  }

  /**
   * Keeps a connection reset for session `index` of the next trial. `complete`: the reset's last part, still under
   * way (SessionConn.resetInTwo); the connection serves again only if it says true, else it is ended for good (its
   * backend too) and the session that would have taken it gets a fresh one.
   */
  give(index: number, c: SessionConn, complete?: Promise<boolean>): void {
    if (this.ended) {
      void c.destroy()
      return
    }
    this.kept.add(c)
    this.held.add(c)
    this.ready.set(index, complete ? complete.then((ok) => (ok ? c : this.unfit(c))) : Promise.resolve(c))
  }

  /** A kept connection whose reset was not shown complete: marked so that take ends it rather than hand it over. */
  private unfit(c: SessionConn): SessionConn {
    this.failed.add(c)
    return c
  }

  /** Kept connections whose reset was not shown complete. */
  private readonly failed = new Set<SessionConn>()

  /** The run is over: closes every connection held here (politely, bounded). */
  async close(): Promise<void> {
    await Promise.all(this.end().map((c) => c.close()))
  }

  /**
   * The run failed or was aborted: closes every socket held here now. Their backends are idle (reset, or just
   * opened) and hold nothing, so they end by themselves; none is terminated from control, which may be busy then.
   */
  async kill(): Promise<void> {
    await Promise.all(this.end().map((c) => c.destroy()))
  }

  /** Ends the run here: forgets every connection and returns the ones it held, for close or kill to end. */
  private end() {
    this.ended = true
    const all = [...this.held]
    this.held.clear()
    this.ready.clear()
    this.kept.clear()
    this.failed.clear()
    return all
  }
}

/**
 * Whether a session's connection may serve the next trial: its session (and every session that borrowed it) ran
 * to an end of its own, none of them timed out, was lost or saw its connection fail, race never signalled its
 * backend (a cancel can land late, on the next statement), and no SQLSTATE of class 57 (operator intervention:
 * cancelled, terminated, shut down) or 08 (connection exception) was raised on it.
 */
export function fitToKeep(users: readonly Session[], c: SessionConn, signalled: ReadonlySet<number>): boolean {
  if (!c.reset || c.closed || c.fatal || signalled.has(c.pid)) return false
  return users.every(
    (s) => s.finished && !s.busy && s.outcome !== 'timeout' && s.outcome !== 'lost' && !s.errors.some((code) => /^(57|08)/.test(sqlstateOf(code))),
  )
}
