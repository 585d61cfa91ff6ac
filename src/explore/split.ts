// An exhaustive search's tree split into branches (race explore --exhaustive with --jobs or --shard), with no
// database: pure and tested by itself (test/pure/explore.test.ts).
import type { Pick } from './enumerate.js'

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
