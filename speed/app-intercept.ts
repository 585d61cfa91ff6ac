/* eslint-disable @typescript-eslint/no-explicit-any -- driver objects */
// What racing the application's own code costs per query (issue 21): the same loop of K queries (`select $1::int`)
// on one connection, bare (the driver alone) and through race's gate, side by side, alternating A B, B A, ...
//
//   pg bare        a node-postgres Client, its own query()
//   pg gate only   the same through race's wrapped query() on a session whose gates all pass, without the engine
//                  (what the interception itself costs)
//   pg gated free  the same through the engine, gates passing (a barrier after its release), its watcher asking
//                  the control connection every 2 ms whether the session is blocked
//   pg gated step  the same, each query released by the chooser at a quiet moment (lockstep: the control
//                  connection asks whether the session is blocked while each query runs)
//   postgres.js    the same three for a postgres.js sql
//
// Usage: node dist/speed/app-intercept.js [--database-url URL] [--queries K] [--rounds R]
// Against --database-url, else DATABASE_URL, else an embedded server it starts. Prints per-query microseconds
// (median of the rounds, [min-max]) and the ratio gated/bare.
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import postgres from 'postgres'
import { openPg, openPostgresJs, running } from '../src/app/drivers.js'
import { appScenario } from '../src/app/scenario.js'
import { AppSession } from '../src/app/session.js'
import type { AppRace } from '../src/app/types.js'
import { unixSocket } from '../src/db/connect.js'
import { startEmbedded } from '../src/servers/embedded.js'
import { PostgresLab } from '../src/db/postgres.js'
import { resolveTarget } from '../src/db/target.js'
import { run } from '../src/engine/run.js'
import { plan } from '../src/plan.js'

const args = process.argv.slice(2)
const opt = (name: string, dflt: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : dflt
}
const K = Number(opt('--queries', '2000'))
const ROUNDS = Number(opt('--rounds', '5'))
const HERE = path.dirname(fileURLToPath(import.meta.url))

async function main() {
  const given = opt('--database-url', process.env.DATABASE_URL ?? '')
  const server = given ? undefined : await startEmbedded()
  const url = given || server!.url
  const lab = await PostgresLab.open(resolveTarget(url), 5000)
  try {
    const loop = async (q: (i: number) => Promise<unknown>) => {
      const t = performance.now()
      for (let i = 0; i < K; i++) await q(i)
      return ((performance.now() - t) * 1000) / K
    }
    const bare = {
      pg: async () => {
        const c = new pg.Client({ connectionString: url })
        await c.connect()
        try {
          return await loop((i) => c.query('select $1::int as i', [i]))
        } finally {
          await c.end()
        }
      },
      postgres: async () => {
        const { url: u, socket } = unixSocket(url)
        const sql = postgres(u!, { max: 1, onnotice: () => {}, ...(socket ? { path: socket } : {}) })
        try {
          await sql`select 1`
          return await loop((i) => sql`select ${i}::int as i`)
        } finally {
          await sql.end()
        }
      },
    }
    /** The same loop as an application race of one session; the loop times itself inside the function. */
    const gated = async (driver: 'pg' | 'postgres', schedule: 'barrier' | 'lockstep') => {
      let us = 0
      const race: AppRace = {
        driver,
        setup: [],
        // The barrier stands before query 1: once released, every gate passes.
        barrier: 1,
        session: async (db: any) => {
          us = driver === 'pg' ? await loop((i) => db.query('select $1::int as i', [i])) : await loop((i) => db`select ${i}::int as i`)
        },
        invariant: 'select true',
        expect: 'held',
      }
      const s = appScenario(race, path.join(HERE, 'app-intercept.race.mjs'))
      await run(lab, { context: lab.context, plan: plan(s, { params: {}, n: 1, engine: 'postgres' }), schedule, trials: 1, stepTimeoutMs: 30_000, connectTimeoutMs: 5000, keep: false })
      return us
    }
    /** The interception alone: a session whose gates all pass, no engine, no watcher asking the server. */
    const gateOnly = async (driver: 'pg' | 'postgres') => {
      const env = { record: () => undefined, now: () => performance.now(), notify: () => {}, released: () => {}, timeQuery: () => () => {} }
      const s = new AppSession('s1', 0, env)
      s.free = true
      const o = { applicationName: 'race bench', schema: 'public', params: {}, connectTimeoutMs: 5000 }
      const target = resolveTarget(url)
      const c = driver === 'pg' ? await openPg(pg, target, o, s) : await openPostgresJs(postgres, target, o, s)
      try {
        const db = c.db as any
        return driver === 'pg' ? await loop((i) => db.query('select $1::int as i', [i])) : await running.run(s, () => loop((i) => db`select ${i}::int as i`))
      } finally {
        await c.close()
      }
    }
    const rows: [string, () => Promise<number>][] = [
      ['pg bare', bare.pg],
      ['pg gate only (no engine)', () => gateOnly('pg')],
      ['pg gated free (barrier)', () => gated('pg', 'barrier')],
      ['pg gated step (lockstep)', () => gated('pg', 'lockstep')],
      ['postgres.js bare', bare.postgres],
      ['postgres.js gate only (no engine)', () => gateOnly('postgres')],
      ['postgres.js gated free (barrier)', () => gated('postgres', 'barrier')],
      ['postgres.js gated step (lockstep)', () => gated('postgres', 'lockstep')],
    ]
    const got = new Map<string, number[]>(rows.map(([k]) => [k, []]))
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 ? [...rows].reverse() : rows
      for (const [k, f] of order) got.get(k)!.push(await f())
    }
    // The gate's own bookkeeping, no server: enter (the gate passes) and the result noted, 100,000 times.
    {
      const env = { record: () => undefined, now: () => performance.now(), notify: () => {}, released: () => {}, timeQuery: () => () => {} }
      const s = new AppSession('s1', 0, env)
      s.free = true
      const M = 100_000
      const t = performance.now()
      for (let i = 0; i < M; i++) {
        await s.enter(s.nextQuery(), 'select $1::int as i')
        s.ok('SELECT', 1, [{ i }])
      }
      process.stdout.write(`the gate's bookkeeping alone (no server): ${(((performance.now() - t) * 1000) / M).toFixed(2)} us/query\n`)
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const fmt = (x: number) => x.toFixed(1)
    process.stdout.write(`${K} queries x ${ROUNDS} rounds, one connection, ${lab.server.product ?? 'PostgreSQL'} ${lab.server.version}\n`)
    for (const [k] of rows) {
      const xs = got.get(k)!
      const base = med(got.get(k.startsWith('pg') ? 'pg bare' : 'postgres.js bare')!)
      process.stdout.write(`${k.padEnd(36)} ${fmt(med(xs)).padStart(8)} us/query  [${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))}]  x${(med(xs) / base).toFixed(2)}\n`)
    }
  } finally {
    await lab.close()
    await server?.stop()
  }
}

main().catch((e) => {
  process.stderr.write(`${(e as Error)?.stack ?? e}\n`)
  process.exit(1)
})
