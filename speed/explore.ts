// npm run bench:explore [-- --database-url URL] [--only a,b] [--check]: race explore's reduced search beside its
// exhaustive one (--exhaustive), on the same server in one run: runs, wall time, and whether the reduced search found
// every outcome group (the verdict and each session's ending) and the same fewest switches of a violating order.
// Each race is run reduced then exhaustive, one after the other. --check exits 1 when any race's groups differ.
import { performance } from 'node:perf_hooks'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { explore } from '../src/api.js'
import type { ExploreOptions } from '../src/explore/index.js'

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

/** The outcome groups of a result (verdict and every session's ending), and its fewest switches of a violation. */
export function outcomes(r: { groups: { key: string }[]; shortest: { switches: number } | null }): { groups: string[]; shortest: number | null } {
  return { groups: r.groups.map((g) => g.key).sort(), shortest: r.shortest?.switches ?? null }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const at = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined)
  const databaseUrl = at('--database-url') ?? process.env.DATABASE_URL
  const only = at('--only')?.split(',')
  const races = only ? RACES.filter((r) => only.some((o) => r.name.includes(o))) : RACES
  const rows: string[] = []
  let differ = 0
  const pad = (x: string, k: number) => x.padEnd(k)
  console.log(`race explore: reduced beside --exhaustive${databaseUrl ? ` on ${databaseUrl.replace(/:[^:@/]*@/, ':***@')}` : ' on the embedded server'}`)
  console.log(`${pad('race', 28)} ${pad('reduced', 16)} ${pad('exhaustive', 16)} same groups, same shortest`)
  for (const race of races) {
    const o = { ...race.options, databaseUrl, shrink: 100 }
    const t0 = performance.now()
    const red = await explore(race.scenario, o)
    const t1 = performance.now()
    const all = await explore(race.scenario, { ...o, reduce: undefined, exhaustive: true })
    const t2 = performance.now()
    const a = outcomes(red)
    const b = outcomes(all)
    const same = JSON.stringify(a.groups) === JSON.stringify(b.groups)
    const short = a.shortest === b.shortest
    if (!same || !short) differ++
    const cell = (runs: number, ms: number) => pad(`${runs} runs ${(ms / 1000).toFixed(1)} s`, 16)
    const line = `${pad(race.name, 28)} ${cell(red.runs, t1 - t0)} ${cell(all.runs, t2 - t1)} ${same ? 'yes' : 'NO'}, ${short ? 'yes' : 'NO'} (${b.groups.length} groups${b.shortest ? `, ${b.shortest} switches` : ''})`
    console.log(line)
    rows.push(line)
    if (!same) console.log(`  reduced: ${a.groups.join(' | ')}\n  exhaustive: ${b.groups.join(' | ')}`)
  }
  if (args.includes('--check') && differ) process.exit(1)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    console.error(e)
    process.exit(2)
  })
}
