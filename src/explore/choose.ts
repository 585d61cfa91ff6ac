// chooseStrategy: the one pure function that picks race explore's strategy from the checked request and the counts
// (test/pure/explore-strategy.test.ts). A new strategy is a class (strategies.ts, reduced-search.ts) and a line here.
import { UsageError } from '../errors.js'
import { ReducedSearch } from './reduced-search.js'
import { AppInterleavings, Exhaustive, PreemptionBounded, Sample } from './strategies.js'
import type { SearchStrategy, StrategyAsk, StrategyFacts, Word } from './strategy.js'

/**
 * The strategy for a request and what is known of the race: a sample when asked for (--sample); --preemptions;
 * --exhaustive; else the reduced search (split by --shard too, reduce-shard.ts), whatever the count of orders (an application race's only when its sessions run
 * isolated or with --reduce; an injected fault is one more choice of its session, searched like its next query): of
 * declared steps, it is sampled only once its own runs pass --max (ReducedSearch.afterMax); else an application race's every interleaving, or a sample once
 * its first run counted more orders than --max. Bad combinations are a UsageError naming the options as `word` spells
 * them.
 */
export function chooseStrategy(a: StrategyAsk, f: StrategyFacts, word: Word): SearchStrategy {
  const s = pick(a, f)
  if (a.shard && s.mode !== 'sample' && !a.exhaustive && s.search !== 'reduced') throw new UsageError(`${word('shard')} splits a sample, an exhaustive search or the reduced search over several runs of race explore: give ${word('sample') === 'sample' ? 'sample' : '--sample K'} or ${word('exhaustive')} too (this application race's sessions share one process, and its every interleaving is not split)`)
  if (a.shard && s.mode === 'sample' && !a.seeded) throw new UsageError(`${word('shard')} needs ${word('seed')}: every part of a sample draws from the same seed`)
  return s
}

function pick(a: StrategyAsk, f: StrategyFacts): SearchStrategy {
  if (a.sample !== undefined) return new Sample(f, a)
  if (a.preemptions !== undefined) return new PreemptionBounded(f, a.preemptions)
  if (a.exhaustive) return new Exhaustive(f, a.shard)
  // The reduced search of declared steps falls back to a sample past --max runs; an application race's (whose tree is
  // learned as it runs) stops there and says so. An injected fault (--inject) is a choice of its session like its
  // next query (Reduced's sessionOf).
  if (!f.app || a.reduce || f.isolated) return new ReducedSearch(f, f.app ? undefined : a, a.shard)
  if (f.orders > BigInt(a.max)) return new Sample(f, a)
  return new AppInterleavings(f, a.shard)
}
