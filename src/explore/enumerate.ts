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
 * PCT (Burckhardt et al., ASPLOS 2010): each run gives the sessions random distinct priorities and picks `depth - 1`
 * change points among the run's steps; the highest-priority ready session always goes, and at the j-th change point
 * the session about to go drops below every other (priority depth - j). A violation that needs `depth` steps to
 * happen in a given order (its depth) is found in one run with probability at least 1 / (n k^(depth-1)), n sessions,
 * k steps: so after R runs that found none, one of depth `depth` was missed with probability at most
 * (1 - 1/(n k^(depth-1)))^R. `k`: the steps in a run, when known; else the most seen so far (runs drawn with fewer
 * than a run took do not count towards the bound).
 */
export class Pct implements Strategy {
  runs = 0
  /** The draw the next run makes (0-based, of `size` over every shard). */
  private draw: number
  /** The most steps a run took, and per run the step count its change points were drawn over. */
  private most: number
  private drawn: number[] = []
  private kNow = 0
  constructor(
    readonly size: number,
    readonly seed: number,
    readonly depth: number,
    readonly sessions: number,
    k?: number,
    /** Run only the draws j with j % count === index - 1 (--shard index/count): shards together make the sample. */
    readonly shard: { index: number; count: number } = { index: 1, count: 1 },
  ) {
    this.most = k ?? 0
    this.draw = shard.index - 1
  }

  next(): Pick | undefined {
    const d = this.nextDraw()
    if (!d) return undefined
    this.kNow = d.k
    return d.pick
  }

  /**
   * The next draw: its number (0-based, of the whole sample), the step count its change points were drawn over, and
   * its choices. Each draw's choices depend only on the seed, the draw's number and k: several may run at once (--jobs).
   */
  nextDraw(): { draw: number; k: number; pick: Pick } | undefined {
    if (this.draw >= this.size) return undefined
    const draw = this.draw
    // Each draw has its own generator (the seed and the draw's number): a shard draws the same runs as the whole.
    const rnd = random((this.seed + Math.imul(this.draw + 1, 0x9e3779b1)) >>> 0)
    this.draw += this.shard.count
    const n = this.sessions
    const k = Math.max(1, this.most || 2 * n)
    // Priorities depth .. depth+n-1, shuffled; change points: depth-1 distinct steps of 1..k.
    const prio = Array.from({ length: n }, (_, i) => this.depth + i)
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1))
      ;[prio[i], prio[j]] = [prio[j], prio[i]]
    }
    const points = new Map<number, number>()
    while (points.size < Math.min(this.depth - 1, k)) {
      const at = 1 + Math.floor(rnd() * k)
      if (!points.has(at)) points.set(at, this.depth - 1 - points.size)
    }
    let step = 0
    // A choice beyond the sessions (index n*(1+f) + s: session s's query with an injected fault, --inject) has its
    // session's priority; where the chosen session is offered with and without faults, one is drawn at random.
    const base = (i: number) => i % n
    const pick: Pick = (ready) => {
      step++
      const top = () => base(ready.reduce((a, b) => ((prio[base(b)] ?? 0) > (prio[base(a)] ?? 0) ? b : a)))
      const low = points.get(step)
      if (low !== undefined) prio[top()] = low
      const chosen = top()
      const offered = ready.filter((i) => base(i) === chosen)
      return offered.length === 1 ? offered[0] : offered[Math.floor(rnd() * offered.length)]
    }
    return { draw, k, pick }
  }

  /** `k`: the step count the run's draw was made over (nextDraw's); default the last next()'s. */
  done(launched: readonly number[], k: number = this.kNow): void {
    this.runs++
    this.drawn.push(k)
    this.most = Math.max(this.most, launched.length)
  }

  /** What the runs so far cover: the depth, the step count k, the runs counted, and the least probability p. */
  coverage(): { depth: number; k: number; runs: number; probability: number } {
    const k = Math.max(1, this.most)
    const counted = this.drawn.filter((x) => x >= k).length
    const once = 1 / (this.sessions * k ** (this.depth - 1))
    return { depth: this.depth, k, runs: counted, probability: 1 - (1 - once) ** counted }
  }
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

/** One branch of a SplitDfs: the choices to replay (and the ready sessions seen at each), then the first ready ones. */
interface Branch {
  choices: number[]
  readies: number[][]
}

/** A run handed out by SplitDfs: its choices, and whether this shard reports its interleaving. */
export interface SplitRun {
  pick: Pick
  branch: Branch
  readies: number[][]
  off: boolean
  /** False for a run this shard makes only to reach its part of the tree (another shard reports its interleaving). */
  report?: boolean
}

/** FNV-1a of a list of numbers, mixed: the same on every platform. */
function hash(xs: readonly number[]): number {
  let h = 0x811c9dc5
  for (const x of xs) {
    h ^= x + 1
    h = Math.imul(h, 0x01000193) >>> 0
  }
  // murmur3's finaliser: every bit of the input reaches the low bits (the shard is h mod n).
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b) >>> 0
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * Every interleaving, as Dfs, but as branches that can run at once (--jobs) and be split over shards (--shard i/n).
 * A branch is a prefix of choices; its run replays them, then takes the first ready session at each choice; after
 * it, every other ready session at every choice past the prefix becomes a branch. Each leaf of Dfs's tree is one
 * branch's run, whatever order they run in: so the runs are Dfs's, and sorting them by their choices (compareKeys)
 * gives Dfs's order. A replayed choice whose ready sessions are not the ones seen before counts in `diverged`, and
 * the run goes on from the first ready session (as in Dfs).
 *
 * Shards: a subtree is known by the choices at its first `depth` branching choices (a choice among more than one
 * ready session); it belongs to shard hash(those) % count + 1. Branches that have not yet made `depth` branching
 * choices are run by every shard (they lead to every subtree); each run is reported by the shard its own subtree
 * belongs to. So every leaf is reported by exactly one shard, and the shards' runs together are the whole search's.
 */
export class SplitDfs {
  private queue: Branch[] = [{ choices: [], readies: [] }]
  runs = 0
  diverged = 0
  /** Runs made only to reach this shard's subtrees (reported by another shard). */
  passed = 0
  readonly depth: number
  constructor(readonly shard: { index: number; count: number } = { index: 1, count: 1 }) {
    // Enough subtrees for every shard to get several: 2^depth >= 4 * count in a two-way tree.
    this.depth = shard.count === 1 ? 0 : Math.ceil(Math.log2(shard.count)) + 2
  }

  /** The shard (1-based) the subtree of these choices belongs to, or undefined while they have made too few branching choices. */
  private owner(choices: readonly number[], readies: readonly (readonly number[])[]): number | undefined {
    if (this.shard.count === 1) return this.shard.index
    const key: number[] = []
    for (let d = 0; d < choices.length && key.length < 2 * this.depth; d++) if (readies[d].length > 1) key.push(d, choices[d])
    return key.length < 2 * this.depth ? undefined : (hash(key) % this.shard.count) + 1
  }

  /** The next branch to run, or undefined when none is waiting (more may come from runs in flight). */
  next(): SplitRun | undefined {
    const branch = this.queue.pop()
    if (!branch) return undefined
    const run: SplitRun = { branch, readies: [], off: false, pick: () => 0 }
    run.pick = (ready) => {
      const d = run.readies.length
      run.readies.push([...ready])
      if (d < branch.choices.length && !run.off) {
        const was = branch.readies[d]
        if (ready.length === was.length && ready.every((x) => was.includes(x))) return branch.choices[d]
        this.diverged++
        run.off = true
      }
      return ready[0]
    }
    return run
  }

  /** The run just made (the sessions in the order they launched steps): its branches join the queue. */
  done(run: SplitRun, launched: readonly number[]): void {
    this.runs++
    const { branch, readies } = run
    if (!run.off && launched.length < branch.choices.length) this.diverged++
    // This shard reports the run when its subtree is this shard's (a run of fewer branching choices: by all of them).
    const own = this.owner(launched, readies)
    run.report = (own ?? (hash(launched) % this.shard.count) + 1) === this.shard.index
    if (!run.report) this.passed++
    const found: Branch[] = []
    for (let d = run.off ? launched.length : branch.choices.length; d < Math.min(launched.length, readies.length); d++) {
      for (const alt of readies[d]) {
        if (alt === launched[d]) continue
        const next = { choices: [...launched.slice(0, d), alt], readies: readies.slice(0, d + 1) }
        const o = this.owner(next.choices, next.readies)
        if (o === undefined || o === this.shard.index) found.push(next)
      }
    }
    // Deepest last: the queue is a stack, so the search goes depth first (the fewest branches waiting).
    this.queue.push(...found)
  }
}

/** Dfs's order of two runs: their choices compared one by one (a prefix first). */
export function compareKeys(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i]
  return a.length - b.length
}
