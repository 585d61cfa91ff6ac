// The parts of a search run in pieces (--shard i/n) joined into one result, as one run of the whole would have made
// it: the draws of a sample, or the subtrees of an exhaustive search (enumerate.ts SplitDfs).
import { UsageError } from '../errors.js'
import { exitCode, summarize } from '../judge/index.js'
import { compareKeys } from './enumerate.js'
import { exitFromFindings } from './findings.js'
import { assertOneSearch } from './one-search.js'
import { better, groupsOf, sampleFallsShort, type ExploreResult, type Interleaving } from './result.js'

/**
 * One result from the --json of every shard of one sample (--shard 1/n .. n/n, the same scenario, sessions, seed,
 * size and depth): the draws together, as one race explore --sample would have made them (bar shrinking, which each
 * shard did on its own: the shortest is the best of theirs). Bad input (parts of another race's text, racelab or
 * server version, a shard missing or twice, results of different samples) is a UsageError; `names` (the parts'
 * files) name them in it.
 */
export function mergeShards(parts: readonly ExploreResult[], names?: readonly string[]): ExploreResult {
  if (!parts.length) throw new UsageError('merge: give the --json of every shard')
  assertOneSearch(parts, names)
  const first = parts[0]
  if (first.shard) return mergeSearchShards(parts)
  const s0 = first.sample
  if (!s0?.shard) throw new UsageError('merge: these are not shards of a sample or an exhaustive search (no sample.shard or shard: run race explore --sample K --seed S --shard i/n --json, or --exhaustive --shard i/n --json)')
  const same = (x: ExploreResult) => x.scenario === first.scenario && x.n === first.n && x.sample?.seed === s0.seed && x.sample?.size === s0.size && x.sample?.depth === s0.depth && x.sample?.shard?.count === s0.shard!.count
  const bad = parts.find((x) => !same(x))
  if (bad) throw new UsageError(`merge: ${bad.scenario} (seed ${bad.sample?.seed}, size ${bad.sample?.size}) is not a shard of the same sample as ${first.scenario} (seed ${s0.seed}, size ${s0.size})`)
  const got = parts.map((x) => x.sample!.shard!.index).sort((a, b) => a - b)
  const want = Array.from({ length: s0.shard.count }, (_, i) => i + 1)
  if (got.join() !== want.join()) throw new UsageError(`merge: shards ${got.join(', ')} given; a sample in ${s0.shard.count} needs each of ${want.join(', ')} once`)
  const seen = new Map<string, Interleaving>()
  for (const x of parts) for (const it of x.every) {
    const had = seen.get(it.line)
    if (had) had.runs += it.runs
    else seen.set(it.line, { ...it })
  }
  const every = [...seen.values()]
  const steps = Math.max(...parts.map((x) => x.sample!.steps))
  const counted = parts.reduce((a, x) => a + (x.sample!.steps === steps ? x.sample!.counted : 0), 0)
  const once = 1 / (first.n * steps ** (s0.depth - 1))
  const violating = every.filter((x) => x.held === false).length
  const expect = first.expected === 'held' || first.expected === 'violated' ? first.expected : undefined
  const judged = every.map((x) => ({ verdict: x.verdict, comparison: { matched: x.verdict !== 'unknown', deviations: [], ...(x.verdict === 'unknown' ? { undecided: true } : {}) } }))
  const summary = summarize(judged, [], expect)
  const best = parts.filter((x) => x.shortest).sort((a, b) => (better(a.shortest!, b.shortest!) ? -1 : better(b.shortest!, a.shortest!) ? 1 : 0))[0]
  const runs = parts.reduce((a, x) => a + x.runs, 0)
  const ms = Math.max(...parts.map((x) => x.ms))
  const sample = { size: s0.size, seed: s0.seed, depth: s0.depth, steps, counted, probability: 1 - (1 - once) ** counted, ...(s0.accept !== undefined ? { accept: s0.accept } : {}) }
  const short = sampleFallsShort(sample, violating, expect)
  const failing = mergedFailure(parts, every)
  const code = exitFromFindings(short ? 3 : exitCode(summary), { expect, violating, failed: failing.failed, stopped: false })
  return {
    ...first,
    sample,
    runs,
    interleavings: every.length,
    violating,
    unknown: every.filter((x) => x.verdict === 'unknown' && !x.failure).length,
    groups: groupsOf(every),
    shortest: best?.shortest ?? null,
    replay: best?.replay ?? null,
    ...(best?.replayNote ? { replayNote: best.replayNote } : {}),
    ...failing,
    diverged: 0,
    every,
    matched: code === 0,
    exitCode: code,
    ms,
    perSecond: parts.reduce((a, x) => a + x.perSecond, 0),
  }
}

/**
 * One result from the --json of every shard of one exhaustive search (--exhaustive --shard 1/n .. n/n): each shard
 * reported the interleavings of its own subtrees (enumerate.ts SplitDfs), so together they are the whole search's.
 * They are put in the whole search's order (the sessions' order of each line: the depth-first order of the choices),
 * so the groups, their lines and the shortest come out as one run of the whole search gives them.
 */
function mergeSearchShards(parts: readonly ExploreResult[]): ExploreResult {
  const first = parts[0]
  const count = first.shard!.count
  const same = (x: ExploreResult) => x.scenario === first.scenario && x.n === first.n && x.search === first.search && x.orders === first.orders && x.shard?.count === count && JSON.stringify(x.params) === JSON.stringify(first.params)
  const bad = parts.find((x) => !same(x))
  if (bad) throw new UsageError(`merge: ${bad.scenario} (${bad.search}${bad.shard ? `, shard ${bad.shard.index}/${bad.shard.count}` : ''}) is not a shard of the same search as ${first.scenario} (shard ${first.shard!.index}/${count})`)
  const got = parts.map((x) => x.shard!.index).sort((a, b) => a - b)
  const want = Array.from({ length: count }, (_, i) => i + 1)
  if (got.join() !== want.join()) throw new UsageError(`merge: shards ${got.join(', ')} given; a search in ${count} needs each of ${want.join(', ')} once`)
  const reduced = first.search === 'reduced'
  const split = reduced && parts.find((x) => x.shard?.reduced?.split !== first.shard?.reduced?.split)
  if (split) throw new UsageError(`merge: ${split.scenario} shard ${split.shard!.index}/${count} split the reduced search at other branches than shard ${first.shard!.index}/${count} (a run went otherwise in one part: the server's timing): run every part again`)
  const names = Object.keys(first.every[0]?.outcomes ?? {})
  const keyOf = (line: string) => line.split(' ').map((t) => names.indexOf(t.slice(0, t.indexOf('.'))))
  const seen = new Map<string, Interleaving>()
  for (const x of parts) for (const it of x.every) {
    const had = seen.get(it.line)
    // Parts of the reduced search repeat some runs (reduce-shard.ts): a repeat is not counted twice.
    if (had) had.runs = reduced ? Math.max(had.runs, it.runs) : had.runs + it.runs
    else seen.set(it.line, { ...it })
  }
  const every = [...seen.values()].sort((a, b) => compareKeys(keyOf(a.line), keyOf(b.line)))
  let shortest: Interleaving | undefined
  for (const it of every) if (it.held === false && (!shortest || better(it, shortest))) shortest = it
  // The reduced search shows a violation as the simplest order of its class, run once to confirm it (not one of its runs).
  if (reduced) for (const x of parts) if (x.shortest && (!shortest || better(x.shortest, shortest))) shortest = x.shortest
  const repeated = parts.reduce((a, x) => a + x.every.length, 0) - every.length
  const from = shortest && parts.find((x) => x.shortest?.line === shortest!.line)
  const expect = first.expected === 'held' || first.expected === 'violated' ? first.expected : undefined
  const judged = every.map((x) => ({ verdict: x.verdict, comparison: { matched: x.verdict !== 'unknown', deviations: [], ...(x.verdict === 'unknown' ? { undecided: true } : {}) } }))
  const summary = summarize(judged, [], expect)
  const diverged = parts.reduce((a, x) => a + x.diverged, 0)
  const complete = parts.every((x) => x.complete)
  const violating = every.filter((x) => x.held === false).length
  const incomplete = (diverged > 0 || !complete) && violating === 0 && expect === 'held'
  const failing = mergedFailure(parts, every)
  const code = exitFromFindings(incomplete ? 3 : exitCode(summary), { expect, violating, failed: failing.failed, stopped: false })
  const { shard: _, replayNote: __, ...rest } = first
  return {
    ...rest,
    complete,
    runs: parts.reduce((a, x) => a + x.runs, 0),
    interleavings: every.length,
    violating,
    unknown: every.filter((x) => x.verdict === 'unknown' && !x.failure).length,
    groups: groupsOf(every),
    shortest: shortest ? { ...shortest } : null,
    replay: from?.replay ?? null,
    ...(from?.replayNote ? { replayNote: from.replayNote } : {}),
    ...failing,
    diverged,
    every,
    matched: code === 0,
    exitCode: code,
    ms: Math.max(...parts.map((x) => x.ms)),
    perSecond: parts.reduce((a, x) => a + x.perSecond, 0),
    jobs: Math.max(...parts.map((x) => x.jobs ?? 1)),
    ...(reduced ? { merged: { parts: count, repeated } } : {}),
  }
}


/** The merged interleavings' failures: how many, the fewest switches among them, and the replay the part that ran it gave. */
function mergedFailure(parts: readonly ExploreResult[], every: readonly Interleaving[]): { failed: number; shortestFailure: Interleaving | null; failureReplay: string | null } {
  const failures = every.filter((x) => x.failure)
  const shortestFailure = failures.reduce<Interleaving | null>((a, x) => (!a || better(x, a) ? x : a), null)
  const from = shortestFailure && parts.find((x) => x.shortestFailure?.line === shortestFailure.line)
  return { failed: failures.length, shortestFailure: shortestFailure ? { ...shortestFailure } : null, failureReplay: from?.failureReplay ?? null }
}
