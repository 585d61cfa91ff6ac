// npm run bench:explore [-- --database-url URL] [--only a,b] [--check] [--jobs N] [--rounds K]: first the yardstick
// (speed/yardstick.ts): race explore --exhaustive --jobs 1's seconds an order beside PostgreSQL's isolationtester's
// seconds a permutation, same server, same steps (K rounds, default 3; --only yardstick runs it alone; without
// --database-url on the embedded server, started here for it). Then race explore's reduced search
// beside its exhaustive one (--exhaustive), on the same server in one run: runs, wall time, and whether the reduced
// search found every outcome group (the verdict and each session's ending) and the same fewest switches of a
// violating order. Then the exhaustive search's interleavings per second on one job (--jobs 1) beside the default
// jobs (the machine's cores; --jobs N: N), the two alternating which goes first from one race to the next, and
// whether they found the same. Then the reduced search (the default) on --jobs 1 beside --jobs N, whole seconds of
// explore() each, alternating which goes first, K rounds: the same groups and shortest, and the runs the jobs made
// ahead of the one-job search that it did not need (issue 41 item 5's goal: at most 0.75 of --jobs 1's time).
// Last, the done-when section (speed/done-when.ts): each figure of issue 41's "Done when" run as the user runs it,
// beside its yardstick and limit, met or not, and "done-when: K of M met" (`--only done-when`, or
// `--only done-when:KEY` for one figure; the yardstick's figure is taken from the first section when it ran).
// --check exits 1 when any race's groups differ or a done-when figure is not met.
import os from 'node:os'
import { performance } from 'node:perf_hooks'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { explore } from '../src/api.js'
import type { ExploreOptions } from '../src/explore/request.js'
import type { ExploreResult } from '../src/explore/result.js'
import { defaultJobs } from '../src/explore/request.js'
import { startEmbedded } from '../src/servers/embedded.js'
import { yardstick, type YardstickResult } from './yardstick.js'
import { BadOnly, doneWhen, selectKeys, type Key } from './done-when.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const ex = (f: string) => path.join(ROOT, 'examples', f)

/** The races: examples and built-in scenarios whose every order fits (the exhaustive search is the oracle). */
export const RACES: { name: string; scenario: string; options?: ExploreOptions }[] = [
  { name: 'explore-orders.spec', scenario: ex('explore-orders.spec') },
  { name: 'explore-orders-fixed.spec', scenario: ex('explore-orders-fixed.spec') },
  { name: 'app/orders (node-postgres)', scenario: ex('app/orders.race.mjs'), options: { reduce: true } },
  { name: 'app/orders-locked', scenario: ex('app/orders-locked.race.mjs'), options: { reduce: true } },
  { name: 'app/withdraw-ledger, 2 sessions', scenario: ex('app/withdraw-ledger.race.mjs'), options: { n: 2, reduce: true } },
  { name: 'app/withdraw-ledger-locked, 2', scenario: ex('app/withdraw-ledger-locked.race.mjs'), options: { n: 2, reduce: true } },
  { name: 'lost-update', scenario: 'lost-update' },
  { name: 'write-skew', scenario: 'write-skew' },
  { name: 'read-skew', scenario: 'read-skew' },
  { name: 'deadlock', scenario: 'deadlock' },
  { name: 'serializable', scenario: 'serializable' },
  { name: 'non-repeatable-read', scenario: 'non-repeatable-read' },
  { name: 'non-repeatable-read, RR', scenario: 'non-repeatable-read', options: { params: { isolation: 'repeatable read' } } },
  { name: 'phantom', scenario: 'phantom' },
  { name: 'write-skew, SERIALIZABLE', scenario: 'write-skew', options: { params: { isolation: 'serializable' } } },
  { name: 'lost-update, RR', scenario: 'lost-update', options: { params: { isolation: 'repeatable read' } } },
  { name: 'for-update', scenario: 'for-update' },
]

/**
 * Races too large for --exhaustive here, compared on --jobs alone: a seeded PCT sample (each draw its own), where
 * runs are many enough that the second job's connections are a small part of the time.
 */
export const SAMPLED: { name: string; scenario: string; options: ExploreOptions }[] = [
  { name: 'orders.spec --n 3, sample 120', scenario: ex('orders.spec'), options: { n: 3, sample: 120, seed: 1, shrink: 0 } },
  { name: 'lost-update, sample 150', scenario: 'lost-update', options: { sample: 150, seed: 1, shrink: 0 } },
]

/** Reduced searches timed on --jobs 1 beside --jobs N (the default search of declared steps). */
export const REDUCED: { name: string; scenario: string; options?: ExploreOptions }[] = [
  { name: 'explore-orders-3.spec (reduced)', scenario: ex('explore-orders-3.spec') },
  { name: 'orders.spec --n 3 (reduced)', scenario: ex('orders.spec'), options: { n: 3 } },
  { name: 'lost-update (reduced)', scenario: 'lost-update' },
]

/** The outcome groups of a result (verdict and every session's ending), and its fewest switches of a violation. */
export function outcomes(r: { groups: { key: string }[]; shortest: { switches: number } | null }): { groups: string[]; shortest: number | null } {
  return { groups: [...new Set(r.groups.map((g) => victimFreeKey(g.key)))].sort(), shortest: r.shortest?.switches ?? null }
}

/**
 * A group's key where an ending in a deadlock (40P01) does not say which session it ended: PostgreSQL cancels the
 * waiter whose deadlock_timeout runs out first, and on a busy machine the one that waited first may run its check
 * before the other has closed the cycle (finding none), so the other is cancelled instead. Which one is the server's
 * timing, not the search's (the deadlock scenario's 50 ms against 5 s makes it s2 only when the machine keeps up).
 * Every other key is compared as it is.
 */
export function victimFreeKey(k: string): string {
  if (!k.includes('40P01')) return k
  const at = k.indexOf(': ')
  return `${k.slice(0, at)}: ${k.slice(at + 2).split(', ').map((x) => x.replace(/^s\d+ /, '')).sort().join(', ')}`
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const at = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined)
  const databaseUrl = at('--database-url') ?? process.env.DATABASE_URL
  const only = at('--only')?.split(',')
  const jobs = Number(at('--jobs') ?? defaultJobs())
  const races = only ? RACES.filter((r) => only.some((o) => r.name.includes(o))) : RACES
  const rounds = Number(at('--rounds') ?? 3)
  if (!Number.isInteger(rounds) || rounds < 1) return bad(`--rounds takes a whole number from 1, got '${at('--rounds')}'`)
  let keys: Key[]
  try {
    keys = selectKeys(only)
  } catch (e) {
    if (e instanceof BadOnly) return bad(e.message)
    throw e
  }
  // undefined: the yardstick's section did not run; null: it ran and had no isolationtester for this server.
  let yard: YardstickResult | null | undefined
  if (!only || only.includes('yardstick')) {
    // The embedded server is started here for it (race explore on its own would start its own: not the same server).
    const server = databaseUrl ? undefined : await startEmbedded()
    try {
      yard = (await yardstick(databaseUrl ?? server!.url, rounds, server !== undefined)) ?? null
    } finally {
      await server?.stop()
    }
    console.log('')
  }
  const reducedOnly = only ? REDUCED.filter((r) => only.some((o) => r.name.includes(o))) : REDUCED
  const compared = !only || races.length > 0 || SAMPLED.some((r) => only.some((o) => r.name.includes(o))) || reducedOnly.length > 0
  const differ = compared ? await compare(races, reducedOnly, only, databaseUrl, jobs, rounds) : 0
  let unmet = 0
  if (keys.length) {
    if (compared) console.log('')
    const server = databaseUrl ? undefined : await startEmbedded()
    try {
      const rows = await doneWhen({ url: databaseUrl ?? server!.url, embedded: server !== undefined, keys, rounds, yardstick: yard })
      unmet = rows.filter((r) => r.met === false).length
    } finally {
      await server?.stop()
    }
  }
  if (args.includes('--check') && (differ || unmet)) process.exit(1)
}

/** Bad input: one line, exit 2. */
function bad(message: string): void {
  console.error(`bench:explore: ${message}`)
  process.exitCode = 2
}

/** The reduced search beside --exhaustive, --jobs beside --jobs 1, the reduced search on jobs: how many races differ. */
async function compare(races: typeof RACES, reducedOnly: typeof REDUCED, only: string[] | undefined, databaseUrl: string | undefined, jobs: number, rounds: number): Promise<number> {
  let differ = 0
  const pad = (x: string, k: number) => x.padEnd(k)
  const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ')
  console.log(`race explore: reduced beside --exhaustive, then --exhaustive on --jobs 1 beside --jobs ${jobs}${databaseUrl ? ` on ${databaseUrl.replace(/:[^:@/]*@/, ':***@')}` : ' on the embedded server'}`)
  console.log(`machine: ${os.availableParallelism()} cores, load average ${load()} at the start; node ${process.version}`)
  console.log(`${pad('race', 32)} ${pad('reduced', 16)} ${pad('exhaustive', 16)} ${pad('--jobs 1', 14)} ${pad(`--jobs ${jobs}`, 20)} same groups, same shortest`)
  const ratios: number[] = []
  for (const [i, race] of races.entries()) {
    const o = { ...race.options, databaseUrl, shrink: 100 }
    const t0 = performance.now()
    const red = await explore(race.scenario, o)
    const t1 = performance.now()
    const all = await explore(race.scenario, { ...o, reduce: undefined, exhaustive: true })
    const t2 = performance.now()
    // --jobs 1 and the default, alternating which goes first: the load of the machine hits both alike.
    const timed = async (j: number): Promise<{ r: ExploreResult; s: number }> => {
      const t = performance.now()
      const r = await explore(race.scenario, { ...o, reduce: undefined, exhaustive: true, jobs: j })
      return { r, s: (performance.now() - t) / 1000 }
    }
    const [one, many] = i % 2 === 0 ? [await timed(1), await timed(jobs)] : (([b, a]) => [a, b])([await timed(jobs), await timed(1)])
    const a = outcomes(red)
    const b = outcomes(all)
    const same = JSON.stringify(a.groups) === JSON.stringify(b.groups)
    const short = a.shortest === b.shortest
    const alike = JSON.stringify(outcomes(one.r)) === JSON.stringify(outcomes(many.r)) && one.r.interleavings === many.r.interleavings
    if (!same || !short || !alike) differ++
    const cell = (runs: number, ms: number) => pad(`${runs} runs ${(ms / 1000).toFixed(1)} s`, 16)
    // The report's own figure: runs a second of the exploration (the server's start is not in it).
    const rate = (x: { r: ExploreResult; s: number }) => x.r.perSecond
    const ratio = rate(many) / rate(one)
    if (many.r.jobs > 1) ratios.push(ratio)
    const jobsCell = many.r.jobs > 1 ? `${rate(many).toFixed(1)}/s ${ratio.toFixed(2)}x` : `1 job (${many.r.jobsNote?.replace(/ runs on one job$/, '').replace('an application race', 'app race') ?? 'one run'})`
    console.log(
      `${pad(race.name, 32)} ${cell(red.runs, t1 - t0)} ${cell(all.runs, t2 - t1)} ${pad(`${rate(one).toFixed(1)}/s`, 14)} ${pad(jobsCell, 20)} ${same ? 'yes' : 'NO'}, ${short ? 'yes' : 'NO'} (${b.groups.length} groups${b.shortest !== null ? `, ${b.shortest} switches` : ''})${alike ? '' : '; --jobs differ: NO'}`,
    )
    if (!same) console.log(`  reduced: ${a.groups.join(' | ')}\n  exhaustive: ${b.groups.join(' | ')}`)
  }
  const sampled = only ? SAMPLED.filter((r) => only.some((o) => r.name.includes(o))) : SAMPLED
  for (const [i, race] of sampled.entries()) {
    const timed = async (j: number) => explore(race.scenario, { ...race.options, databaseUrl, jobs: j })
    const [one, many] = i % 2 === 0 ? [await timed(1), await timed(jobs)] : (([b, a]) => [a, b])([await timed(jobs), await timed(1)])
    const alike = JSON.stringify(outcomes(one)) === JSON.stringify(outcomes(many)) && one.interleavings === many.interleavings
    if (!alike) differ++
    const ratio = many.perSecond / one.perSecond
    ratios.push(ratio)
    console.log(`${pad(race.name, 32)} ${pad('-', 16)} ${pad('-', 16)} ${pad(`${one.perSecond.toFixed(1)}/s`, 14)} ${pad(`${many.perSecond.toFixed(1)}/s ${ratio.toFixed(2)}x`, 20)} ${alike ? '' : '--jobs differ: NO '}(a sample: ${one.runs} runs, ${one.interleavings} interleavings)`)
  }
  if (ratios.length) {
    const sorted = [...ratios].sort((x, y) => x - y)
    console.log(`--jobs ${jobs} / --jobs 1, interleavings per second: median ${sorted[Math.floor(sorted.length / 2)].toFixed(2)}x [${sorted[0].toFixed(2)}-${sorted[sorted.length - 1].toFixed(2)}] over ${ratios.length} races; load average ${load()} at the end`)
  }
  if (reducedOnly.length) {
    console.log('')
    console.log(`the reduced search, --jobs ${jobs} beside --jobs 1: whole seconds of explore(), medians of ${rounds} rounds [min-max], alternating; goal: at most 0.75x`)
    console.log(`${pad('race', 32)} ${pad('--jobs 1', 18)} ${pad(`--jobs ${jobs}`, 18)} ${pad('ratio', 20)} runs (made on ${jobs} jobs, wasted), same groups, same shortest`)
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
    const span = (xs: number[], f: (x: number) => string) => `${f(median(xs))} [${f(Math.min(...xs))}-${f(Math.max(...xs))}]`
    for (const race of reducedOnly) {
      const timed = async (j: number): Promise<{ r: ExploreResult; s: number }> => {
        const t = performance.now()
        const r = await explore(race.scenario, { ...race.options, databaseUrl, jobs: j })
        return { r, s: (performance.now() - t) / 1000 }
      }
      const ones: number[] = []
      const manys: number[] = []
      const pairs: number[] = []
      let alike = true
      let last: { one: ExploreResult; many: ExploreResult } | undefined
      for (let k = 0; k < rounds; k++) {
        const [one, many] = k % 2 === 0 ? [await timed(1), await timed(jobs)] : (([b, a]) => [a, b])([await timed(jobs), await timed(1)])
        ones.push(one.s)
        manys.push(many.s)
        pairs.push(many.s / one.s)
        if (JSON.stringify(outcomes(one.r)) !== JSON.stringify(outcomes(many.r)) || one.r.runs !== many.r.runs || one.r.search !== 'reduced') alike = false
        last = { one: one.r, many: many.r }
      }
      if (!alike) differ++
      const secs = (x: number) => x.toFixed(1)
      const ratio = median(pairs)
      const a = last!.many.ahead
      console.log(
        `${pad(race.name, 32)} ${pad(span(ones, secs) + ' s', 18)} ${pad(span(manys, secs) + ' s', 18)} ${pad(span(pairs, (x) => x.toFixed(2)) + 'x', 20)} ${last!.one.runs} (${a ? `${a.made}, ${a.wasted}` : `on ${last!.many.jobs} job`}), ${alike ? 'yes, yes' : 'NO'}; goal <= 0.75x: ${ratio <= 0.75 ? 'met' : 'NOT MET'}`,
      )
    }
    console.log(`load average ${load()} at the end`)
  }
  return differ
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    console.error(e)
    process.exit(2)
  })
}
