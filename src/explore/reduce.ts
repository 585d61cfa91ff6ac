// The reduced search of race explore, with no database: pure and tested by itself (test/pure/reduce.test.ts; on
// several jobs, ReducedJobs in reduce-jobs.ts: test/pure/reduce-jobs.test.ts; the simplest order of a class: switches.ts).
//
// Two runs that differ only in the order of steps that cannot affect each other (a SELECT of one session and a
// BEGIN of another; reads of a table nobody writes; writes to different tables) end the same way: running both
// tells nothing new. The search below runs one order of each class of orders that differ only by such swaps, and
// every order that puts two conflicting steps the other way round: a dynamic partial-order reduction (DPOR, Flanagan
// and Godefroid 2005, with Abdulla et al.'s source sets, 2014), stateless (each run from a fresh state).
//
// What a step touched is learned after it ran (its footprint: what it read and wrote, from the server's own facts,
// see engine/footprint.ts, observed as a trial goes by engine/footprint-observer.ts). A step race cannot classify
// has the footprint 'all': it conflicts with every step, and then the search runs every order around it (with
// every step 'all', exactly the orders the full search runs).
//
// After each run, for every pair of conflicting steps of different sessions with nothing in between ordering them
// (a race), the search makes sure that, at the point where the first ran, some session whose step could start the
// reversed order is tried there too. Sound as long as the footprints over-approximate what steps really do to each
// other (two steps said not to conflict must commute, from any state they both run in).

import type { Pick, Strategy } from './enumerate.js'

/** What a step touched: resources (tables, locks, 'snapshot') it read and wrote; 'all': it conflicts with every step. */
export type Footprint = 'all' | { readonly reads: readonly string[]; readonly writes: readonly string[] }

/**
 * Two steps conflict when either is 'all', or one writes what the other reads or writes. A resource `X#k` is a part
 * of `X` (row k of a table, engine/footprint-rows.ts): it overlaps `X` and itself, not `X#j`.
 */
export function conflicts(a: Footprint, b: Footprint): boolean {
  if (a === 'all' || b === 'all') return true
  const hits = (w: readonly string[], x: Footprint & object) => w.some((r) => x.reads.some((y) => overlap(r, y)) || x.writes.some((y) => overlap(r, y)))
  return hits(a.writes, b) || hits(b.writes, a)
}

function overlap(a: string, b: string): boolean {
  if (a === b) return true
  const i = a.indexOf('#')
  const j = b.indexOf('#')
  return (i >= 0 && j < 0 && a.slice(0, i) === b) || (j >= 0 && i < 0 && b.slice(0, j) === a)
}

/** How many times a run that went otherwise than its replayed choices is run again before the search goes on from it. */
export const RETRIES = 5

interface Node {
  /** The sessions that could launch a step here. */
  ready: number[]
  /** The one the current path takes. */
  at: number
  /** Sessions to try here (the search adds to it after each run), and those tried already with their step's footprint. */
  todo: Set<number>
  tried: Map<number, Footprint>
  /**
   * Sessions asleep here (a sleep set): each was tried at a node above and what ran since commutes with its step, so
   * every order starting with it here was covered there. Never chosen here.
   */
  sleep: Map<number, Footprint>
}

/**
 * The reduced search: a Strategy told each launched step's footprint, through step() before its next choice (that
 * choice may then put sessions to sleep) and through done() for the last ones. A footprint not given is 'all'.
 * `dependent` is the conflict relation (a test passes a deliberately wrong one to see the soundness check fail).
 *
 * `sessionOf`: the session a choice is a step of. A session may offer its next step in several variants (an
 * application race's query with an injected fault, --inject: choice n * (1 + f) + s, beside s itself): they are steps
 * of one session, so they are ordered with its other steps and never sleep past its own step; and its own choice
 * between them, local to it, is tried wherever the session is: a node that tries a session tries each variant it
 * offers there (none is reached by reordering the others).
 */
export class Reduced implements Strategy {
  protected path: Node[] = []
  private prefix: number[] = []
  private over = false
  /** The current run's footprints so far, and the depth where every ready session was asleep (the run is redundant from there). */
  private fps: (Footprint | undefined)[] = []
  private blockedAt: number | undefined
  runs = 0
  /** Runs that went otherwise than their replayed choices, each tried again RETRIES times without repeating itself. */
  diverged = 0
  /** Runs run again because they went otherwise than their choices (the server's timing: a waiter woke later). */
  retried = 0
  private saved: { path: Node[]; prefix: number[] } | undefined
  private went = false
  private tries = 0
  /** Runs that reached a point where every ready session was asleep (finished only because a run must end). */
  redundant = 0
  constructor(
    private readonly dependent: (a: Footprint, b: Footprint) => boolean = conflicts,
    private readonly sessionOf: (choice: number) => number = (x) => x,
  ) {}

  /** Footprints the current run has been told of so far. */
  get known(): number {
    return this.fps.length
  }

  /** The ready choices at `depth` of the path. */
  readyAt(depth: number): readonly number[] {
    return this.path[depth]?.ready ?? []
  }

  /** Takes on the state of `other` (a copy that took a run). */
  adopt(other: Reduced): void {
    Object.assign(this, other)
  }

  /** The search has no run left. */
  get finished(): boolean {
    return this.over
  }

  /** The choices the next run replays (then it chooses afresh). */
  get replays(): readonly number[] {
    return this.prefix
  }

  /** A copy of the search as it stands (runs made ahead on several jobs each choose from a copy; ReducedJobs). */
  copy(): Reduced {
    // Every field as it is (counts, flags), the mutable ones copied.
    const saved = this.saved && { path: this.saved.path.map(copyNode), prefix: [...this.saved.prefix] }
    return Object.assign(new Reduced(this.dependent, this.sessionOf), this, { path: this.path.map(copyNode), prefix: [...this.prefix], fps: [...this.fps], saved })
  }

  /**
   * The runs waiting after the next one, in the order this search would make them if no run added any: at each node
   * of the path, deepest first, the sessions still to try there, each with the choices that lead to it.
   */
  frontier(): { depth: number; choice: number; prefix: number[] }[] {
    if (this.over) return []
    const out: { depth: number; choice: number; prefix: number[] }[] = []
    for (let d = this.path.length - 1; d >= 0; d--) {
      const node = this.path[d]
      for (const s of node.ready) {
        if (s === node.at || !node.todo.has(s) || node.tried.has(s) || node.sleep.has(s)) continue
        out.push({ depth: d, choice: s, prefix: [...this.path.slice(0, d).map((x) => x.at), s] })
      }
    }
    return out
  }

  /**
   * A copy whose next run is the one that tries `choice` at `depth` of the path (an entry of frontier()), as if the
   * runs before it had tried `before` there (each a session and its step's footprint, a guess).
   */
  aheadAt(depth: number, choice: number, before: readonly (readonly [number, Footprint])[]): Reduced {
    const c = this.copy()
    c.path.length = depth + 1
    const node = c.path[depth]
    for (const [q, f] of before) node.tried.set(q, f)
    node.at = choice
    c.prefix = c.path.map((x) => x.at)
    c.tries = 0
    c.saved = undefined
    return c
  }

  /** What the node the next run chooses afresh from holds (its sleeping and tried sessions): the same, the same run. */
  startState(): string {
    const node = this.path[this.prefix.length - 1]
    if (!node) return ''
    const show = (m: ReadonlyMap<number, Footprint>) => JSON.stringify([...m].sort((a, b) => a[0] - b[0]))
    return `${show(node.sleep)}|${show(node.tried)}`
  }

  /** The choices of `ready` that are variants of choice `x`'s session (x among them), none asleep: tried together. */
  private variants(ready: readonly number[], x: number, sleep: ReadonlyMap<number, Footprint>): number[] {
    const s = this.sessionOf(x)
    return ready.filter((y) => y === x || (this.sessionOf(y) === s && !sleep.has(y)))
  }

  /** The footprint of the current run's last launched step. */
  step(fp: Footprint | undefined): void {
    this.fps.push(fp)
  }

  next(): Pick | undefined {
    if (this.over) return undefined
    let depth = 0
    this.fps = []
    this.blockedAt = undefined
    this.went = false
    this.saved = { path: this.path.map((x) => ({ ...x, todo: new Set(x.todo), tried: new Map(x.tried), sleep: new Map(x.sleep) })), prefix: [...this.prefix] }
    return (ready) => {
      const d = depth++
      if (this.blockedAt !== undefined) return ready[0]
      if (d > 0) {
        const parent = this.path[d - 1]
        parent.tried.set(parent.at, this.fps[d - 1] ?? 'all')
      }
      if (d < this.prefix.length) {
        const was = this.path[d].ready
        if (ready.length === was.length && ready.every((x) => was.includes(x))) {
          this.path[d].at = this.prefix[d]
          return this.prefix[d]
        }
        this.went = true
        this.path.length = d
        this.prefix.length = d
      }
      const sleep = new Map<number, Footprint>()
      if (d > 0) {
        const parent = this.path[d - 1]
        const took = this.fps[d - 1] ?? 'all'
        const own = this.sessionOf(parent.at)
        for (const [q, f] of [...parent.sleep, ...parent.tried]) if (this.sessionOf(q) !== own && !this.dependent(f, took)) sleep.set(q, f)
      }
      const at = ready.find((s) => !sleep.has(s))
      if (at === undefined) {
        this.blockedAt = d
        return ready[0]
      }
      this.path[d] = { ready: [...ready], at, todo: new Set(this.variants(ready, at, sleep)), tried: new Map(), sleep }
      return at
    }
  }

  done(launched: readonly number[], footprints?: readonly (Footprint | undefined)[]): void {
    this.runs++
    if (launched.length < this.prefix.length) this.went = true
    if (this.went && this.saved && this.tries < RETRIES) {
      // The same choices again: the run is not part of the search.
      this.tries++
      this.retried++
      this.path = this.saved.path
      this.prefix = this.saved.prefix
      return
    }
    if (this.went) this.diverged++
    this.tries = 0
    if (footprints) this.fps = [...footprints]
    if (this.blockedAt !== undefined) this.redundant++
    this.path.length = Math.min(this.path.length, launched.length, this.blockedAt ?? Infinity)
    const n = this.path.length
    const fp = (i: number): Footprint => this.fps[i] ?? 'all'
    if (n > 0) this.path[n - 1].tried.set(this.path[n - 1].at, fp(n - 1))
    const who = (i: number) => launched[i]
    const same = (i: number, j: number) => this.sessionOf(launched[i]) === this.sessionOf(launched[j])
    // before[j][i]: step i happens before step j (i < j): same session, or conflicting, or through steps between.
    const before: boolean[][] = []
    for (let j = 0; j < n; j++) {
      const row = new Array<boolean>(n).fill(false)
      for (let i = j - 1; i >= 0; i--) {
        if (row[i]) continue
        if (same(i, j) || this.dependent(fp(i), fp(j))) {
          row[i] = true
          for (let k = 0; k < i; k++) if (before[i][k]) row[k] = true
        }
      }
      before.push(row)
    }
    for (let j = 0; j < n; j++) {
      for (let i = j - 1; i >= 0; i--) {
        if (same(i, j) || !this.dependent(fp(i), fp(j))) continue
        // A race only if no step between orders them already (i before k before j).
        let direct = true
        for (let k = i + 1; k < j && direct; k++) if (before[k][i] && before[j][k]) direct = false
        if (!direct) continue
        // The steps after i not ordered after it, then j: the reversed race starts with one of their first steps.
        const v: number[] = []
        for (let k = i + 1; k < j; k++) if (!before[k][i]) v.push(k)
        v.push(j)
        const initials = new Set<number>()
        for (let x = 0; x < v.length; x++) if (!v.slice(0, x).some((y) => before[v[x]][y])) initials.add(who(v[x]))
        const node = this.path[i]
        if ([...initials].some((s) => node.todo.has(s) || node.tried.has(s) || node.sleep.has(s))) continue
        const can = [...initials].filter((s) => node.ready.includes(s))
        if (can.length) for (const x of this.variants(node.ready, can.includes(who(j)) ? who(j) : can[0], node.sleep)) node.todo.add(x)
        else for (const s of node.ready) if (!node.sleep.has(s)) node.todo.add(s)
      }
    }
    this.advance(n)
  }

  /** The next run: the first session left to try at the deepest node above depth `n` with one; none: the search is over. */
  protected advance(n: number): void {
    for (let d = n - 1; d >= 0; d--) {
      const node = this.path[d]
      const left = node.ready.find((s) => node.todo.has(s) && !node.tried.has(s) && !node.sleep.has(s) && !this.skips(d, s))
      if (left !== undefined) {
        node.at = left
        this.path.length = d + 1
        this.prefix = this.path.map((x) => x.at)
        return
      }
    }
    this.over = true
  }

  /** Whether trying `s` at depth `d` is left to another part of a split search (ShardReduced, reduce-shard.ts). */
  protected skips(_d: number, _s: number): boolean {
    return false
  }
}

function copyNode(x: Node): Node {
  return { ready: [...x.ready], at: x.at, todo: new Set(x.todo), tried: new Map(x.tried), sleep: new Map(x.sleep) }
}
