// PCT, the probabilistic concurrency testing sampler of race explore --sample, with no database: pure and tested by
// itself (test/pure/reduce.test.ts). Each draw's choices depend only on the seed and the draw's number.
import { random, type Pick, type Strategy } from './enumerate.js'

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
