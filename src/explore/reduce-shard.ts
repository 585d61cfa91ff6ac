// The reduced search split over several runs of race explore (--shard i/n), with no communication between them: pure
// and tested by itself (test/pure/reduce-shard.test.ts); the parts' results are joined by merge.ts.
import { Reduced, type Footprint } from './reduce.js'

/** What a part of a split reduced search ran: ExploreResult.shard's reduced fields. */
export interface ShardWork {
  /** Runs made while other parts made them too (before the split), in this part's own branches, and in branches it found above a split. */
  before: number
  owned: number
  found: number
  /** Branches waiting when the search was first split (0: it ended first, and every part ran all of it); those last dealt to this part. */
  branches: number
  mine: number
  /** The first split's branches (their choices), hashed: every part of one search splits at the same ones. */
  split: string
}

/**
 * Part `index` of `count` of the reduced search (reduce.ts), with no communication between the parts. Every part
 * runs the same search from the start (the search is deterministic: they make the same runs) until two or more
 * branches wait (runs waiting, frontier(), and the next run); then the branches are dealt out: with m branches and g
 * parts in the group, the parts are dealt into min(m, g) groups and branch k is group k % min(m, g)'s. A part skips
 * the branches that are not its group's; a group of several parts goes on together (still making the same runs) and
 * is dealt out again the next time two branches wait. A part alone explores its branches fully. A branch its runs
 * add at a node above a split (a race reversed there) was dealt to no one: the part that found it runs it itself
 * (another part may find and run it too: the merge drops the repeats and counts them). A skipped branch leaves no
 * footprint among the part's tried sessions, so the sessions after it at that node sleep less: the part explores
 * more, never less; and every branch skipped is run by the group it was dealt to, from the same node.
 */
export class ShardReduced extends Reduced {
  private readonly others = new Set<string>()
  /** The branches dealt to this part when it was last dealt out, and the parts it shares its runs with. */
  private mine = new Set<string>()
  private group: number[]
  private first: { branches: number; digest: string } | undefined
  /** Runs made while this part shared them with others of its group; then its own, and those found above a split. */
  private shared = 0
  private owned = 0
  private found = 0
  constructor(
    private readonly shard: { index: number; count: number },
    dependent?: (a: Footprint, b: Footprint) => boolean,
    sessionOf?: (choice: number) => number,
  ) {
    super(dependent, sessionOf)
    this.group = Array.from({ length: shard.count }, (_, i) => i + 1)
  }

  override done(launched: readonly number[], footprints?: readonly (Footprint | undefined)[]): void {
    const p = this.replays
    if (this.group.length > 1) this.shared++
    else if (p.some((_, k) => this.mine.has(p.slice(0, k + 1).join(',')))) this.owned++
    else this.found++
    super.done(launched, footprints)
    if (this.group.length > 1 && !this.finished) this.deal()
  }

  /** The branches waiting now (not skipped), once two or more wait: each one group's; this part goes on from its group's first. */
  private deal(): void {
    const all = [[...this.replays], ...this.frontier().filter((f) => !this.skips(f.depth, f.choice)).map((f) => f.prefix)].map((p) => p.join(','))
    if (all.length < 2) return
    const m = Math.min(all.length, this.group.length)
    const j = this.group.indexOf(this.shard.index) % m
    this.mine = new Set(all.filter((_, k) => k % m === j))
    for (const k of all) if (!this.mine.has(k)) this.others.add(k)
    this.group = this.group.filter((_, i) => i % m === j)
    this.first ??= { branches: all.length, digest: fnv(all.join(';')) }
    if (this.others.has(all[0])) this.advance(this.path.length)
  }

  protected override skips(d: number, s: number): boolean {
    return this.others.size > 0 && this.others.has([...this.path.slice(0, d).map((x) => x.at), s].join(','))
  }

  /** What this part ran (runs counts every run, those shared with other parts too). */
  get work(): ShardWork {
    return { before: this.shared, owned: this.owned, found: this.found, branches: this.first?.branches ?? 0, mine: this.mine.size, split: this.first?.digest ?? '' }
  }
}

/** FNV-1a of a string, as 8 hex digits: the same on every platform. */
function fnv(s: string): string {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0
  return h.toString(16).padStart(8, '0')
}
