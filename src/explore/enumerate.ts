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
//  - Preemptive: every order within a bound of preemptions, fewest first.
//
// PCT's sample is in pct.ts, an exhaustive search split into branches (--jobs, --shard) in split.ts.

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
 * A replayed choice whose ready sessions are not the ones seen there before (the database, or the application's
 * code, did something else this time), or a run that ends before its replayed path does, is counted in `diverged`;
 * the choice is then made afresh from the first ready session: the search goes on from what really happened, and
 * the tree it counts may miss or repeat interleavings.
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
        const was = this.path[d].options
        if (ready.length === was.length && ready.every((x) => was.includes(x))) return this.prefix[d]
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
    // The run ended before the choice it was replayed to make: the tree there is not the one seen before.
    if (launched.length < this.prefix.length) this.diverged++
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


/**
 * Every order with at most `bound` preemptions, fewest first (CHESS's iterative preemption bounding, best first): a
 * preemption is a choice that leaves a session that could have gone on. Each run replays a chosen prefix, then goes
 * on without preempting (the last session again while it can); after it, every other choice it passed becomes a
 * prefix to run, costed by its preemptions. Prefixes run cheapest first, so every run with p preemptions comes
 * after every run with fewer: the first violating run found has the fewest preemptions. A replayed choice whose ready
 * sessions are not the ones seen there before counts in `diverged`, as in Dfs.
 */
export class Preemptive implements Strategy {
  private frontier: { choices: number[]; readies: number[][]; cost: number }[] = [{ choices: [], readies: [], cost: 0 }]
  private cur: { choices: number[]; readies: number[][]; cost: number } | undefined
  private seen: number[][] = []
  runs = 0
  diverged = 0
  /** The most preemptions a run made (the bound reached). */
  reached = 0
  constructor(readonly bound: number) {}

  /** Prefixes left (within the bound) when the search stopped: 0 when every order within it was run. */
  get left(): number {
    return this.frontier.length
  }

  next(): Pick | undefined {
    if (!this.frontier.length) return undefined
    // The cheapest prefix (the first of the cheapest, so each cost is run in the order found).
    let at = 0
    for (let i = 1; i < this.frontier.length; i++) if (this.frontier[i].cost < this.frontier[at].cost) at = i
    const cur = this.frontier.splice(at, 1)[0]
    this.cur = cur
    this.seen = []
    let prev = -1
    let depth = 0
    let off = false
    return (ready) => {
      const d = depth++
      this.seen.push([...ready])
      let pick: number
      if (d < cur.choices.length && !off) {
        const was = cur.readies[d]
        if (ready.length === was.length && ready.every((x) => was.includes(x))) pick = cur.choices[d]
        else {
          this.diverged++
          off = true
          pick = ready.includes(prev) ? prev : ready[0]
        }
      } else pick = ready.includes(prev) ? prev : ready[0]
      prev = pick
      return pick
    }
  }

  done(launched: readonly number[]): void {
    this.runs++
    const cur = this.cur!
    this.reached = Math.max(this.reached, cur.cost)
    for (let d = cur.choices.length; d < launched.length && d < this.seen.length; d++) {
      const prev = d > 0 ? launched[d - 1] : -1
      for (const alt of this.seen[d]) {
        if (alt === launched[d]) continue
        const cost = cur.cost + (this.seen[d].includes(prev) && alt !== prev ? 1 : 0)
        if (cost > this.bound) continue
        this.frontier.push({ choices: [...launched.slice(0, d), alt], readies: this.seen.slice(0, d + 1), cost })
      }
    }
  }
}


/** Dfs's order of two runs: their choices compared one by one (a prefix first). */
export function compareKeys(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i]
  return a.length - b.length
}
