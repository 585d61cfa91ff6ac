// What each step of a trial touched, observed as the trial goes (race explore's reduced search): at every quiet
// moment the sessions' backends are read on control (footprint.ts observe), and the step launched at the moment
// before is given its footprint from what its session held before and after it (footprint.ts touched), made 'all'
// where locks cannot tell (doubt.ts) or where the step changed more than its own session (it waits, raised an error,
// woke or ended another session).
import type { Driver } from '../db/driver.js'
import { Doubts } from './doubt.js'
import { endsTx, observe, touched, type Seen, type Touched } from './footprint.js'
import { narrow, RowLedger, rowTarget } from './footprint-rows.js'
import type { Moment, ReadyStep } from './types.js'

export class FootprintObserver {
  /** The moment before the last launched step, what the backends held then, and that step (when a free one). */
  private before: { m: Moment; seen: Map<number, Seen> | undefined; step?: ReadyStep } | undefined
  /** What locks cannot show (engine/doubt.ts): the trial's catalog facts, transactions that gave locks back. */
  private readonly doubts: Doubts
  /** What each open transaction changed, by rows where its steps told them (footprint-rows.ts). */
  private readonly ledger = new RowLedger()

  /**
   * `names`: the sessions' names, by index; `onStep`: each observed step's footprint, in the order the steps
   * were launched.
   */
  constructor(
    private readonly lab: Driver,
    private readonly names: readonly string[],
    private readonly onStep: (fp: Touched) => void,
  ) {
    this.doubts = new Doubts(lab)
  }

  /** A quiet moment: the step launched before it (if one is being watched) gets its footprint. */
  async at(m: Moment): Promise<void> {
    const seen = m.pids ? await observe(this.lab, m.pids) : undefined
    const b = this.before
    const was = b?.step && b.m.pids?.[b.step.index]
    await this.doubts.settle(m.pids, was || undefined, was ? b.seen?.get(was) : undefined, was ? seen?.get(m.pids![b!.step!.index]) : undefined, b?.step?.sql ?? '')
    // A step ran that was not watched (a pinned setup or teardown block): what it changed is not in the ledger, so
    // no transaction open now (it may have begun it, or run in it) has its end narrowed.
    if (b && !b.step) {
      if (!seen) this.ledger.blind = true
      else for (const [pid, v] of seen) if (v.inTx) this.ledger.step(`${pid}:${v.xact}`, v, undefined, true)
    }
    if (b?.step) this.onStep(this.footprint(b as { m: Moment; seen: Map<number, Seen> | undefined; step: ReadyStep }, m, seen))
    this.before = { m, seen }
  }

  /** The step about to launch from the last moment: the next moment gives its footprint. */
  watch(step: ReadyStep): void {
    this.before!.step = step
  }

  private footprint(b: { m: Moment; seen: Map<number, Seen> | undefined; step: ReadyStep }, m: Moment, seen: Map<number, Seen> | undefined): Touched {
    const i = b.step.index
    const pid = b.m.pids?.[i]
    // A backend two sessions share (a pooled connection handed on) holds what both did: not this step's own.
    const shared = b.m.pids!.filter((x) => x === pid).length > 1 || m.pids!.filter((x) => x === m.pids![i]).length > 1
    // SSI in the trial (some session holds SIRead locks): changes are ordered against reads.
    const ssi = [b.seen, seen].some((x) => [...(x?.values() ?? [])].some((v) => v.locks.some((l) => l[1] === 'SIReadLock')))
    let fp: Touched = pid && !shared ? this.doubts.judge(touched(b.seen?.get(pid), seen?.get(m.pids![i]), b.step.sql, ssi), pid, b.seen?.get(pid), seen?.get(m.pids![i]), b.step.sql) : 'all'
    // It waits, raised an error, or changed how another session stands (woke it, or ended it): 'all'.
    if (this.stateOf(m, i) === 'blocked' || (m.errors?.[i] ?? 1) !== (b.m.errors?.[i] ?? 0)) fp = 'all'
    for (let q = 0; q < this.names.length; q++) if (q !== i && this.stateOf(m, q) !== this.stateOf(b.m, q)) fp = 'all'
    if (pid && !shared) return this.rows(fp, pid, b.seen?.get(pid), seen?.get(m.pids![i]), b.step.sql, ssi)
    // Its transaction cannot be told: no commit is narrowed from here on.
    this.ledger.blind = true
    return fp
  }

  /**
   * The footprint `fp` of a step of SQL `sql` on backend `pid`, narrowed to rows where race can tell them
   * (footprint-rows.ts), and the ledger of its transaction kept. Never under SSI (`ssi`): the table stays the unit.
   */
  private rows(fp: Touched, pid: number, before: Seen | undefined, after: Seen | undefined, sql: string, ssi: boolean): Touched {
    if (!before) {
      this.ledger.blind = true
      return fp
    }
    const ended = endsTx(before, after)
    if (ended) {
      const out = ssi ? fp : this.ledger.end(`${pid}:${before.xact}`, fp, this.doubts.known)
      if (after?.inTx) this.ledger.step(`${pid}:${after.xact}`, after, undefined, true)
      return out
    }
    const tx = before.inTx ? `${pid}:${before.xact}` : after?.inTx ? `${pid}:${after.xact}` : undefined
    const t = fp !== 'all' && !ssi && after ? rowTarget(this.doubts.known, sql, before, after) : undefined
    const out = t && fp !== 'all' ? narrow(fp, t) : fp
    const told = t && out !== fp ? t : undefined
    if (tx) this.ledger.step(tx, after, told, fp === 'all')
    return out
  }

  private stateOf(m: Moment, i: number): 'ready' | 'blocked' | 'done' | 'other' {
    return m.ready.some((r) => r.index === i) ? 'ready' : m.blocked.some((b) => b.index === i) ? 'blocked' : m.done.includes(this.names[i]) ? 'done' : 'other'
  }
}
