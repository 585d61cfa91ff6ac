// npm run bench:reset [-- --database-url URL] [--rounds K]: what a trial's reset costs (the run's schema made again and
// the setup run, engine/run.ts) beside cheaper ways, on race's own control connection (db/postgres.ts), each reset then
// checked to leave the same rows. Rounds alternate the ways (A B C D, B C D A, ...) so noise hits each alike; each
// figure is the median ms of one reset [min-max]. Without --database-url: PostgreSQL 15 at 127.0.0.1:5432 when it
// answers, and race's embedded PostgreSQL 18.
//
//  today     drop schema cascade + create schema (and its mark) + search_path: one round trip; then each setup
//            statement: a round trip each (they may have binds; the user's run with the run role's rights)
//  batched   the same, every setup statement sent with the drop and create in one simple query: one round trip
//  truncate  truncate every table of the schema (restart identity), then the setup's inserts again (not general:
//            a setup that updates, makes functions or sequences' state would not be reset)
//  spare     a schema made and set up ahead (off the trial's path, by another connection), renamed into place:
//            drop + rename, one round trip (the setup's cost still paid, beside the trial)
import { performance } from 'node:perf_hooks'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { PostgresLab } from '../src/db/postgres.js'
import { resolveTarget } from '../src/db/target.js'
import { findScenario } from '../src/registry.js'
import { plan } from '../src/plan.js'
import { defaultParams } from '../src/scenario.js'
import { startEmbedded } from '../src/servers/embedded.js'

const SCENARIOS = ['lost-update', 'write-skew', 'deadlock', 'phantom', 'read-skew', 'for-update']
const WAYS = ['today', 'batched', 'truncate', 'spare'] as const
type Way = (typeof WAYS)[number]

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function measure(url: string, label: string, rounds: number): Promise<Record<Way, number[]>> {
  const lab = await PostgresLab.open(resolveTarget(url), 5000)
  const side = postgres(url, { max: 1, onnotice: () => {} })
  const total: Record<Way, number[]> = { today: [], batched: [], truncate: [], spare: [] }
  try {
    console.log(`${label}: PostgreSQL ${lab.server.version}`)
    console.log(`  ${'scenario'.padEnd(14)} ${WAYS.map((w) => w.padEnd(20)).join(' ')}`)
    for (const id of SCENARIOS) {
      const s = await findScenario(id)
      const p = plan(s, { params: defaultParams(s, {}), n: s.sessionCount.default, engine: 'postgres' })
      const setup = p.setup
      const name = `race_reset_bench_${process.pid}`
      const spare = `${name}_spare`
      lab.trustSpace(name)
      const space = await lab.createSpace(id, false, undefined, name)
      const use = lab.useSql(name)
      const inserts = setup.filter((x) => /^\s*insert\b/i.test(x))
      const snapshot = async () => JSON.stringify(await lab.query(`select table_name, (xpath('/row/c/text()', query_to_xml(format('select count(*) as c from %I.%I', table_schema, table_name), false, true, '')))[1]::text as rows from information_schema.tables where table_schema = '${name}' order by 1`))
      await lab.query(`${use}; ${setup.join('; ')}`)
      const want = await snapshot()
      const prepareSpare = () => side.unsafe(`drop schema if exists "${spare}" cascade; create schema "${spare}"; set search_path to "${spare}"; ${setup.join('; ')}`)
      const ways: Record<Way, () => Promise<void>> = {
        today: async () => {
          await lab.query(`${lab.recreateSql(name, false)}; ${use}`)
          for (const x of setup) await lab.query(x)
        },
        batched: async () => {
          await lab.query(`${lab.recreateSql(name, false)}; ${use}; ${setup.join('; ')}`)
        },
        truncate: async () => {
          const tables = await lab.query(`select string_agg(format('%I.%I', schemaname, tablename), ', ') as t from pg_tables where schemaname = '${name}'`)
          await lab.query(`truncate ${tables[0].t} restart identity cascade`)
          for (const x of inserts) await lab.query(x)
        },
        spare: async () => {
          await lab.query(`drop schema "${name}" cascade; alter schema "${spare}" rename to "${name}"; ${use}`)
        },
      }
      const per: Record<Way, number[]> = { today: [], batched: [], truncate: [], spare: [] }
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < WAYS.length; i++) {
          const way = WAYS[(r + i) % WAYS.length]
          if (way === 'spare') await prepareSpare()
          const t0 = performance.now()
          await ways[way]()
          per[way].push(performance.now() - t0)
          const got = await snapshot()
          if (got !== want) throw new Error(`${id}: ${way} left ${got}, not ${want}`)
        }
      }
      await side.unsafe(`drop schema if exists "${spare}" cascade`)
      await space.drop()
      const cell = (xs: number[]) => `${median(xs).toFixed(2)} [${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}]`.padEnd(20)
      console.log(`  ${id.padEnd(14)} ${WAYS.map((w) => cell(per[w])).join(' ')}`)
      for (const w of WAYS) total[w].push(median(per[w]))
    }
    const sum = (w: Way) => total[w].reduce((a, b) => a + b, 0) / total[w].length
    console.log(`  ${'mean'.padEnd(14)} ${WAYS.map((w) => `${sum(w).toFixed(2)} ms (${(sum(w) / sum('today')).toFixed(2)}x)`.padEnd(20)).join(' ')}`)
  } finally {
    await side.end({ timeout: 1 })
    await lab.close()
  }
  return total
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const at = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined)
  const rounds = Number(at('--rounds') ?? 30)
  const given = at('--database-url')
  console.log(`race: a trial's reset, median ms of ${rounds} rounds [min-max], ways alternated; each checked to leave the setup's rows`)
  if (given) {
    await measure(given, given.replace(/:[^:@/]*@/, ':***@'), rounds)
    return
  }
  const pg15 = 'postgres://postgres@127.0.0.1:5432/test'
  const probe = postgres(pg15, { max: 1, connect_timeout: 3, onnotice: () => {} })
  const up = await probe`select 1`.then(() => true, () => false)
  await probe.end({ timeout: 1 })
  if (up) await measure(pg15, pg15, rounds)
  else console.log(`${pg15}: does not answer, skipped`)
  const server = await startEmbedded()
  try {
    await measure(server.url, 'embedded', rounds)
  } finally {
    await server.stop()
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    console.error(e)
    process.exit(2)
  })
}
