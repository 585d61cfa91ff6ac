/* eslint-disable @typescript-eslint/no-explicit-any -- the libraries are the user's, untyped here */
// Application races through the Node data layers people ship (issue 30): each library's own count-then-insert
// (examples/app/orders-<library>.mjs, written as its docs write it), handed the session's connection through the seam
// the library supports (ctx.pg for those built on node-postgres), raced: violated in lockstep and at the barrier, the
// advisory-lock fix holding, and race explore counting the same interleavings as the node-postgres version where
// the library sends the same queries. That the library really used the session's connection is checked by race
// itself (app/foreign.ts: any query on a connection race did not hand out makes the run undecided), and shown able
// to fail. Against a real server (DATABASE_URL, else embedded PostgreSQL 18).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { before, after, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { appScenario } from '../../src/app/scenario.js'
import type { AppRace } from '../../src/app/types.js'
import type { Schedule } from '../../src/scenario.js'
import { ROOT, count, openLab, race, runScenario, useServer, type TestServer } from '../support/server.js'
import type { PostgresLab } from '../../src/db/postgres.js'
import { exploreJson, type Explored } from '../support/explore.js'
import { until } from '../support/procs.js'

const ctx = {} as { server: TestServer; lab: PostgresLab }
const EX = path.join(ROOT, 'examples', 'app')
const pending409 = '409: an order is already pending'
let admin: Sql
let pgExplored: Explored
let pgOrder: string[]

const load = async (file: string): Promise<any> => import(pathToFileURL(path.join(EX, file)).href)
const race1 = (s: ReturnType<typeof appScenario>, n: number, schedule: Schedule, trials = 1) => runScenario(ctx.lab, s, { n, schedule, trials })

/**
 * `prisma generate` for the Prisma example (its client is generated, not committed). The CLI fetches its schema engine
 * from Prisma's own binary host (not the npm registry) before any command, though generate never runs it: where only
 * the npm registry is reachable, PRISMA_SCHEMA_ENGINE_BINARY pointing at any existing file skips the download.
 */
function prismaGenerate(): void {
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', path.join(EX, 'prisma', 'schema.prisma')], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
    timeout: 60_000,
  })
}

before(async () => {
  prismaGenerate()
  ctx.server = await useServer()
  ctx.lab = await openLab(ctx.server.url)
  admin = postgres(ctx.server.url, { max: 1, onnotice: () => {} })
  // The yardstick: the same function over bare node-postgres (examples/app/orders.mjs).
  pgExplored = (await exploreJson(ctx.server.url, admin, [path.join(EX, 'orders.race.mjs')])).j
  const { createOrder } = await load('orders.mjs')
  const base = (await load('orders.race.mjs')).default as AppRace
  const { trials: [t] } = await race1(appScenario({ ...base, session: (db, c) => createOrder(db, c.user, 42) }, path.join(EX, 'orders.race.mjs')), 2, 'lockstep')
  pgOrder = t.order!
})
after(async () => {
  await admin?.end()
  await ctx.lab?.close()
  await ctx.server?.stop()
})

/** The libraries whose queries are the node-postgres version's: BEGIN (or START TRANSACTION), count, insert, COMMIT. */
const SAME = ['typeorm', 'sequelize', 'knex', 'pg-promise', 'prisma', 'mikro-orm']

for (const lib of SAME) {
  test(`${lib}: count-then-insert violates in lockstep and at the barrier over 5 sessions; the advisory lock holds; explore counts what node-postgres does`, async () => {
    const file = path.join(EX, `orders-${lib}.race.mjs`)
    const race = (await load(`orders-${lib}.race.mjs`)).default as AppRace
    const { createOrder } = await load(`orders-${lib}.mjs`)
    const bad = appScenario(race, file)
    const { trials: [t] } = await race1(bad, 5, 'lockstep')
    // A query on any connection but the sessions' would have made the run undecided (or thrown): it was decided.
    assert.notEqual(t.verdict, 'unknown')
    assert.equal(t.invariant.held, false)
    assert.equal(count(t.sessions, (x) => x.outcome === 'committed'), 5)
    assert.equal(new Set(t.sessions.map((x) => x.pid)).size, 5, 'five distinct backends')
    assert.equal(t.comparison.matched, true)
    const barrier = await race1(bad, 5, 'barrier', 3)
    assert.ok(barrier.trials.some((x) => x.invariant.held === false), 'violated in at least one of 3 barrier trials')
    const fixed = appScenario({ ...race, session: (db, c) => createOrder(db, c.user, 42, { locked: true }), expect: 'held' }, file)
    for (const schedule of ['lockstep', 'barrier'] as const) {
      const { trials: [u] } = await race1(fixed, 5, schedule)
      assert.equal(u.invariant.held, true, schedule)
      assert.equal(count(u.sessions, (x) => x.outcome === 'committed'), 1, schedule)
      assert.equal(count(u.sessions, (x) => x.outcome === 'rejected' && x.reason === pending409), 4, schedule)
      if (schedule === 'lockstep') assert.ok(u.sessions.some((x) => x.waitedMs > 0), 'the lock was seen awaited from the control connection')
    }
    // Two sessions in lockstep take the same steps as the node-postgres version, and explore finds the same tree.
    const { trials: [two] } = await race1(bad, 2, 'lockstep')
    assert.deepEqual(two.order, pgOrder)
    const { code, j } = await exploreJson(ctx.server.url, admin, [file])
    assert.equal(code, 0, 'the module expects violated, and interleavings violate')
    assert.equal(j.complete, true)
    assert.equal(j.unknown, 0)
    assert.deepEqual([j.interleavings, j.violating], [pgExplored.interleavings, pgExplored.violating])
  })
}

test("typeorm given its own connection options instead of ctx.pg: race refuses to decide (never a green run)", async () => {
  const file = path.join(EX, 'orders-typeorm.race.mjs')
  const race = (await load('orders-typeorm.race.mjs')).default as AppRace
  const { makeDataSource } = await load('orders-typeorm.mjs')
  // The DataSource the application would make from a URL: TypeORM's own pg Pool, not the session's connection.
  const own = appScenario({ ...race, open: (_c, o) => makeDataSource({ url: ctx.server.url, extra: { options: `-c search_path=${o.schema}` } }).initialize() }, file)
  // Over TCP the server names its backend (app/foreign.ts: its client port is one of this process's); over the
  // embedded server's Unix socket it cannot, and race says instead that nothing came through the sessions' connections.
  await assert.rejects(race1(own, 2, 'lockstep'), /a connection race did not hand out queried the run's tables \(pid \d+ queried orders|no session's function sent a query through the connection race gave it/)
})

test('a race module in TypeScript (.ts, .mts) importing the application\'s TypeScript code: race run and race explore take it as they take .mjs', async () => {
  const url = ctx.server.url
  const bad = await race(['run', path.join(EX, 'orders.race.ts'), '--n', '3', '--schedule', 'lockstep', '--json'], { url })
  assert.equal(bad.code, 0, bad.stderr)
  const j = JSON.parse(bad.stdout) as { verdict: string; order: string }
  assert.equal(j.verdict, 'anomaly')
  assert.equal(j.order, 's1.q1 s2.q1 s3.q1 s1.q2 s2.q2 s3.q2 s1.q3 s2.q3 s3.q3 s1.q4 s2.q4 s3.q4')
  const fixed = await race(['run', path.join(EX, 'orders-locked.race.mts'), '--n', '3', '--schedule', 'lockstep'], { url })
  assert.equal(fixed.code, 0, fixed.stderr)
  assert.match(fixed.stdout, /expected\s+held\s+MATCH/)
  // Prisma 7's own generator writes its client in TypeScript: a TypeScript race module imports it as it is.
  const prisma = await race(['run', path.join(EX, 'orders-prisma.race.ts'), '--n', '3', '--schedule', 'lockstep', '--json'], { url })
  assert.equal(prisma.code, 0, prisma.stderr)
  assert.equal((JSON.parse(prisma.stdout) as { verdict: string }).verdict, 'anomaly')
  const { code, j: e } = await exploreJson(url, admin, [path.join(EX, 'orders.race.ts')])
  assert.equal(code, 0, 'expects violated, and interleavings violate')
  assert.deepEqual([e.interleavings, e.violating], [pgExplored.interleavings, pgExplored.violating])
})

test("what open() SET on a kept connection (Sequelize's session time zone) is there again in every trial after race's reset", async () => {
  const file = path.join(EX, 'orders-sequelize.race.mjs')
  const race = (await load('orders-sequelize.race.mjs')).default as AppRace
  const seen: string[] = []
  const s = appScenario(
    {
      ...race,
      setup: ['create table t (k int)'],
      session: async (sequelize: any) => {
        const [[row]] = await sequelize.query("select current_setting('TimeZone') as tz")
        seen.push(row.tz)
      },
      invariant: 'select true',
      expect: 'held',
    },
    file,
  )
  const { trials } = await runScenario(ctx.lab, s, { n: 2, schedule: 'lockstep', trials: 3 })
  assert.deepEqual(trials[2].sessions.map((x) => x.pid), trials[0].sessions.map((x) => x.pid), 'the connections were kept (reset between trials)')
  const [{ tz }] = await ctx.lab.query("select current_setting('TimeZone') as tz")
  assert.notEqual(seen[0], tz, "Sequelize's time zone differs from the server's default")
  assert.deepEqual(seen, Array(6).fill(seen[0]))
})

test('race show names what open() builds once per connection, apart from what runs in every trial', async () => {
  const show = await race(['show', path.join(EX, 'orders-typeorm.race.mjs')])
  assert.equal(show.code, 0, show.stderr)
  assert.match(show.stdout, /first, once per connection .*\n {2}open: \(_client, ctx\) => makeDataSource\(\{ driver: ctx\.pg \}\)\.initialize\(\)\n.*then, in every trial:\n {2}\(dataSource, ctx\) => createOrder\(dataSource, ctx\.user, 42\)/)
})

test("listeners an ORM puts on ctx.pg's clients do not pile up on a kept connection, whether it is built in every trial or once in open()", async () => {
  const file = path.join(EX, 'orders-pg-promise.race.mjs')
  const race = (await load('orders-pg-promise.race.mjs')).default as AppRace
  const { makeDb } = await load('orders-pg-promise.mjs')
  // pg-pool puts an 'error' listener on every client it makes; each trial's function reads how many there are.
  const built: number[] = []
  const everyTrial = appScenario(
    {
      ...race,
      open: undefined,
      close: undefined,
      setup: [],
      session: async (_c: unknown, c: any) => {
        // Never ended, as code that makes its database object per request leaves it (its idle timer lets the process exit).
        const db = makeDb({ Client: c.pg.Client, allowExitOnIdle: true }, `${c.session} ${c.user}`)
        await db.one('select 1 as one')
        built.push(c.client.listenerCount('error'))
      },
      invariant: 'select true',
      expect: 'held',
    },
    file,
  )
  const a = await runScenario(ctx.lab, everyTrial, { n: 1, schedule: 'serial', trials: 12 })
  assert.deepEqual(new Set(a.trials.map((t) => t.sessions[0].pid)).size, 1, 'one kept connection')
  assert.deepEqual(built, Array(12).fill(built[0]), 'as many listeners in the twelfth trial as in the first')
  const kept: number[] = []
  const once = appScenario(
    {
      ...race,
      setup: [],
      session: async (db: any, c: any) => {
        await db.one('select 1 as one')
        kept.push(c.client.listenerCount('error'))
      },
      invariant: 'select true',
      expect: 'held',
    },
    file,
  )
  await runScenario(ctx.lab, once, { n: 1, schedule: 'serial', trials: 12 })
  assert.deepEqual(kept, Array(12).fill(kept[0]), "open()'s pool keeps its one client, and its listener, across trials")
})

test('a unique index as the fix: each ORM throws its own error for the 23505 (wrapping the driver\'s, or copying its code), and race reads it as the prevention the module declares', async () => {
  const index = "create unique index one_pending on orders (user_id) where status = 'pending'"
  for (const lib of SAME) {
    const file = path.join(EX, `orders-${lib}.race.mjs`)
    const race = (await load(`orders-${lib}.race.mjs`)).default as AppRace
    const s = appScenario({ ...race, setup: [...(race.setup ?? []), index], prevention: ['23505'], expect: 'held' }, file)
    const { trials: [t] } = await race1(s, 2, 'lockstep')
    assert.deepEqual(t.sessions.map((x) => [x.outcome, x.sqlstate]), [['committed', null], ['failed', '23505']], lib)
    assert.equal(t.verdict, 'prevented', lib)
    assert.equal(t.invariant.held, true, lib)
  }
})

test("a session still connecting when another's open() fails is ended with the run: nothing of the run is left when it rejects", async () => {
  // Before, the trial ended at the first failure, and its cleanup (the run's role dropped) ran while the others
  // connected: a connection opened after it stayed open until its session's own timeout, or for good when its login
  // met the dropped role (seen under load: race's first query on it failed, and nothing closed it).
  const file = path.join(EX, 'orders-typeorm.race.mjs')
  const race = (await load('orders-typeorm.race.mjs')).default as AppRace
  // The first session to reach open() throws; the other nine, some of them still connecting then, wait in theirs.
  let first = true
  const open = () => (first ? ((first = false), Promise.reject(new TypeError('no DataSource today'))) : new Promise(() => {}))
  const mixed = appScenario({ ...race, open }, file)
  await assert.rejects(runScenario(ctx.lab, mixed, { n: 10, schedule: 'lockstep', stepTimeoutMs: 4000 }), /open\(\) of s\d+ threw TypeError: no DataSource today/)
  // Well inside s2's 4 s: what is left now, the run left.
  await until("the sessions' backends gone", async () => {
    const rows = (await ctx.lab.query("select count(*)::int as n from pg_stat_activity where application_name like 'race orders-typeorm %'")) as unknown as { n: number }[]
    return rows[0].n === 0
  }, 1000)
})

test('open() that throws, or never returns, ends the run undecided with one line naming the session; nothing is left open', async () => {
  const file = path.join(EX, 'orders-typeorm.race.mjs')
  const race = (await load('orders-typeorm.race.mjs')).default as AppRace
  const throws = appScenario({ ...race, open: () => Promise.reject(new TypeError('no DataSource today')) }, file)
  await assert.rejects(race1(throws, 2, 'lockstep'), /open\(\) of s\d threw TypeError: no DataSource today/)
  const hangs = appScenario({ ...race, open: () => new Promise(() => {}) }, file)
  await assert.rejects(runScenario(ctx.lab, hangs, { n: 2, schedule: 'lockstep', stepTimeoutMs: 500 }), /open\(\) of s\d did not return within 500ms/)
  // A backend ended by race leaves pg_stat_activity as it exits: waited for, bounded.
  await until("the sessions' backends gone", async () => {
    const rows = (await ctx.lab.query("select count(*)::int as n from pg_stat_activity where application_name like 'race orders-typeorm %'")) as unknown as { n: number }[]
    return rows[0].n === 0
  }, 5000)
})
