// How race explore chooses each run's interleaving, with no database: pure and tested by itself.
//
// A run is a series of choices "which ready session launches its next step now". Nothing here knows what a step
// is or how many a session has: a session is ready when the engine says it can launch its next step (not waiting
// in one, not ended, a step left). So sessions whose steps are discovered one at a time (application code, one
// query at a time) plug into the same enumerators as the steps of a spec.
//
//  - Dfs: every interleaving, as a depth-first search over the choices that re-runs from the start for each
//    branch (each run in a fresh state, as the engine's trials are): a stateless model checker's loop.
//  - Sampler: seeded random runs (the same seed, the same choices).
//  - Replay: one given order, with `race run --schedule`'s rule when its next step cannot start (the next listed
//    step of a session that can goes instead), so what it does is what --schedule does with the same line.
//  - shrinkCandidates: orders with fewer switches between sessions than a violating one, to try in turn.

/** Picks one of `ready` (session indices, ascending, never empty). `left`: each ready session's steps left, when known. */
export type Pick = (ready: readonly number[], left?: readonly number[]) => number

/** A source of runs: the choice function for the next run, and what that run did. */
export interface Strategy {
  /** The next run's choices, or undefined when there is nothing left to run. */
  next(): Pick | undefined
  /** The run just made: the sessions in the order they launched steps. */
  done(launched: readonly number[]): void
}

/**
 * Every interleaving, depth first. The first run takes the first ready session at each choice; each later run
 * replays the path to the deepest choice with an untried option, takes that option, then the first ones again.
 * A replayed choice that is no longer ready (the database did something else this time) is counted in
 * `diverged` and replaced by the first ready session: the search goes on from what really happened.
 */
export class Dfs implements Strategy {
  /** Per depth of the current path: the ready sessions seen there, and which one the path takes. */
  private path: { options: number[]; at: number }[] = []
  private prefix: number[] = []
  private over = false
  runs = 0
  diverged = 0

  next(): Pick | undefined {
    if (this.over) return undefined
    let depth = 0
    return (ready) => {
      const d = depth++
      if (d < this.prefix.length) {
        const want = this.prefix[d]
        if (ready.includes(want)) return want
        this.diverged++
        this.path.length = d
        this.prefix.length = d
      }
      this.path[d] = { options: [...ready], at: 0 }
      return ready[0]
    }
  }

  done(launched: readonly number[]): void {
    this.runs++
    this.path.length = Math.min(this.path.length, launched.length)
    for (let d = this.path.length - 1; d >= 0; d--) {
      const node = this.path[d]
      if (node.at + 1 < node.options.length) {
        node.at++
        this.path.length = d + 1
        this.prefix = this.path.map((x) => x.options[x.at])
        return
      }
    }
    this.over = true
  }
}

/** mulberry32: a small seeded generator, the same numbers for the same seed on every platform. */
export function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * `size` random runs from `seed`. Where the steps each session has left are known, a session is chosen with
 * probability proportional to them, which makes every order of the steps equally likely when no step waits; where
 * they are not (steps discovered as they come), each ready session is equally likely.
 */
export class Sampler implements Strategy {
  private readonly rnd: () => number
  runs = 0
  constructor(
    readonly size: number,
    readonly seed: number,
  ) {
    this.rnd = random(seed)
  }

  next(): Pick | undefined {
    if (this.runs >= this.size) return undefined
    return (ready, left) => {
      const w = left && left.length === ready.length ? left.map((x) => Math.max(1, x)) : ready.map(() => 1)
      let r = this.rnd() * w.reduce((a, b) => a + b, 0)
      for (let i = 0; i < ready.length; i++) {
        r -= w[i]
        if (r < 0) return ready[i]
      }
      return ready[ready.length - 1]
    }
  }

  done(): void {
    this.runs++
  }
}

/** Follows `order` (session indices, one per step): the first listed step whose session is ready goes next. */
export function follow(order: readonly number[]): Pick {
  const pending = [...order]
  return (ready) => {
    const i = pending.findIndex((s) => ready.includes(s))
    if (i < 0) return ready[0]
    return pending.splice(i, 1)[0]
  }
}

/** How many times an order leaves one session for another. */
export function switches(order: readonly number[]): number {
  let n = 0
  for (let i = 1; i < order.length; i++) if (order[i] !== order[i - 1]) n++
  return n
}

/**
 * Orders with fewer switches than `order`, fewest first: each moves one run of a session's consecutive steps
 * next to that session's next run (later, or that run earlier), which keeps every session's own order. An order
 * none of which still violates is minimal in that sense: no single such move keeps the violation.
 */
export function shrinkCandidates(order: readonly number[]): number[][] {
  const blocks: { s: number; k: number }[] = []
  for (const s of order) {
    const last = blocks[blocks.length - 1]
    if (last && last.s === s) last.k++
    else blocks.push({ s, k: 1 })
  }
  const flat = (bs: { s: number; k: number }[]) => bs.flatMap((b) => Array.from({ length: b.k }, () => b.s))
  const out = new Map<string, number[]>()
  for (let i = 0; i < blocks.length; i++) {
    const j = blocks.findIndex((b, x) => x > i && b.s === blocks[i].s)
    if (j < 0) continue
    const later = blocks.filter((_, x) => x !== i)
    later.splice(j - 1, 0, blocks[i])
    const earlier = blocks.filter((_, x) => x !== j)
    earlier.splice(i + 1, 0, blocks[j])
    for (const c of [flat(later), flat(earlier)]) out.set(c.join(','), c)
  }
  const now = switches(order)
  return [...out.values()].filter((c) => switches(c) < now).sort((a, b) => switches(a) - switches(b))
}

/** The number of orders of the steps that keep each session's own order: (sum n)! / prod(n!), exactly. */
export function ordersOf(counts: readonly number[]): bigint {
  let total = 0n
  let out = 1n
  for (const c of counts) {
    for (let i = 1n; i <= BigInt(c); i++) {
      total++
      out = (out * total) / i
    }
  }
  return out
}
