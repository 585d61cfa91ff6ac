// --inject at a trial's quiet moments, once for both modes of an application trial (trial.ts in race's process,
// isolated.ts with each session in a worker): a ready session whose next query is a fault's site is offered again
// with the fault, as a choice of index n * (1 + f) + s beside the session's own s. The explorer's pick between the
// two is a branch like any other (the reduced search takes it as a step of that session: explore/reduce.ts sessionOf).
import type { Moment, ReadyStep, TrialFacts } from '../engine/types.js'
import { faultAt, parseAppPermutation, type Fault, type FaultCode } from './labels.js'

/** A session ready at its gate, as the offers see it. */
export interface ReadyAt {
  name: string
  index: number
  pending: { label: string; sql: string; point: boolean }
}

/** A ready step offered to the chooser; `fault`: which of the faults it carries (-1: a permutation's own). */
export type Offer = ReadyStep & { fault?: number }

/** One trial's faults: those not yet used, and what became of each (offered, injected where). */
export class FaultOffers {
  private readonly left: Set<number>
  readonly injections: NonNullable<TrialFacts['injections']>
  /** A permutation's own faults (s1.q5!40001, a replay), by label. */
  private readonly named = new Map<string, string>()
  constructor(
    private readonly n: number,
    private readonly inject: readonly Fault[] = [],
    permutation?: { text: string; names: readonly string[] },
  ) {
    this.left = new Set(inject.map((_, i) => i))
    this.injections = inject.map((f) => ({ fault: f.text, offered: false }))
    if (permutation) for (const e of parseAppPermutation(permutation.text, permutation.names)) if (e.inject) this.named.set(e.label, e.inject)
  }

  /** Every ready session's step, each followed by its variants with a fault. */
  offer(ready: readonly ReadyAt[]): Offer[] {
    return ready.flatMap((s): Offer[] => {
      const label = `${s.name}.${s.pending.label}`
      const step: Offer = { session: s.name, index: s.index, label, sql: s.pending.sql }
      const faulty = [...this.left].filter((f) => !s.pending.point && faultAt(this.inject[f], s.pending.label, s.pending.sql))
      for (const f of faulty) this.injections[f].offered = true
      const offers: Offer[] = faulty.map((f) => ({ ...step, index: this.n * (1 + f) + s.index, label: `${label}!${this.inject[f].code}`, inject: this.inject[f].code, fault: f }))
      const replayed = this.named.get(label)
      if (replayed) offers.push({ ...step, index: this.n * (1 + this.inject.length) + s.index, label: `${label}!${replayed}`, inject: replayed as FaultCode, fault: -1 })
      return [step, ...offers]
    })
  }

  /** The session index of an offer. */
  sessionOf(picked: Offer): number {
    return picked.index % this.n
  }

  /** The offer picked: the fault it carries (now used), if any. */
  take(picked: Offer): FaultCode | undefined {
    if (!picked.inject) return undefined
    if (picked.fault !== undefined && picked.fault >= 0) {
      this.left.delete(picked.fault)
      this.injections[picked.fault].at = picked.label.replace(/!.*$/, '')
    }
    this.named.delete(picked.label.replace(/!.*$/, ''))
    return picked.inject as FaultCode
  }
}

/** A session as a quiet moment shows it to the chooser, in either mode. */
export interface AtMoment {
  name: string
  index: number
  state: string
  current?: { label: string; blocked: boolean }
  finished: boolean
  pid: number
}

/**
 * The moment the chooser is asked at, once for both modes: the steps offered (FaultOffers.offer's), the sessions
 * whose step waits, those that ended, the order so far, each session's pid and count of errors (`errors`).
 */
export function momentOf<S extends AtMoment>(offered: readonly Offer[], sessions: readonly S[], errors: (s: S) => number, order: readonly string[]): Moment {
  return {
    ready: offered.map(({ fault: _f, ...x }) => x),
    blocked: sessions.filter((s) => s.state === 'running' && s.current?.blocked).map((s) => ({ session: s.name, index: s.index, label: `${s.name}.${s.current!.label}` })),
    done: sessions.filter((s) => s.finished).map((s) => s.name),
    order: [...order],
    pids: sessions.map((x) => x.pid),
    errors: sessions.map(errors),
  }
}
