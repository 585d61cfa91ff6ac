// Application races on MySQL/MariaDB through the mariadb connector and mysql2: the user's function on N real connections,
// every query (and beginTransaction/commit/rollback) a step, blocking seen from race's watch connection by thread
// id. Against the machine's MariaDB (or MYSQL_URL); skipped, saying why, when none answers.
import assert from 'node:assert/strict'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { after, before, test } from 'node:test'
import type { Connection } from 'mariadb'
import { appScenario } from '../../src/app/scenario.js'
import type { AppRace } from '../../src/app/types.js'
import { MysqlLab } from '../../src/db/mysql.js'
import { resolveTarget } from '../../src/db/target.js'
import { ROOT, count, race } from '../support/server.js'
import { documentedFor, plan } from '../../src/plan.js'
import { run as runEngine } from '../../src/engine/run.js'
import { judgeTrial } from '../../src/run/judge.js'
import type { Scenario, Schedule } from '../../src/scenario.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

const EX = path.join(ROOT, 'examples', 'app')
const SETUP = [
  'create table orders (id bigint auto_increment primary key, user_id varchar(64) not null, amount int not null, status varchar(16) not null) engine=innodb',
  'create table users (id varchar(64) primary key) engine=innodb',
    'insert into users (id) values (:user)',
]
type Judged = ReturnType<typeof judgeTrial>
let conn: Connection | undefined
let why: string | undefined
let lab: MysqlLab | undefined

/** Runs a scenario on MySQL/MariaDB in-process, judged as race run judges it. */
async function runScenario(l: MysqlLab, s: Scenario, o: { n: number; schedule: Schedule; trials?: number }): Promise<{ trials: ReturnType<typeof judgeTrial>[] }> {
  const variant = { params: {}, n: o.n, engine: 'mysql' as const }
  const p = plan(s, variant)
  const docs = documentedFor(s, { ...variant, schedule: o.schedule, windowMs: 0 })
  const out = await runEngine(l, { context: l.context, plan: p, schedule: o.schedule, trials: o.trials ?? 1, stepTimeoutMs: 10_000, connectTimeoutMs: 5000, keep: false })
  return { trials: out.trials.map((f) => judgeTrial(f, docs, p)) }
}

before(async () => {
  ;({ conn, why } = await reachMysql())
  if (conn) lab = await MysqlLab.open(resolveTarget(MYSQL_URL), 5000)
})
after(async () => {
  await lab?.close()
  await conn?.end()
})

test('mariadb connector: count-then-insert violates in lockstep over 10 sessions; the parent-row lock (FOR UPDATE) holds, the others waiting', async (t) => {
  if (!lab) return t.skip(why)
  const { createOrder, Conflict } = await import(pathToFileURL(path.join(EX, 'orders-mariadb.mjs')).href)
  const make = (locked: boolean) =>
    appScenario(
      { driver: 'mariadb', setup: SETUP, invariant: "select count(*) <= 1 from orders where status = 'pending'", session: (c, x) => createOrder(c, x.user, 42, { locked }), rejects: [Conflict], expect: locked ? 'held' : 'violated' },
      path.join(EX, 'orders-mariadb.race.mjs'),
    )
  const run = (locked: boolean) => runScenario(lab!, make(locked), { n: 10, schedule: 'lockstep' })
  const [bad] = (await run(false)).trials
  assert.equal(bad.invariant.held, false)
  assert.equal(count(bad.sessions, (x) => x.outcome === 'committed'), 10)
  assert.equal(bad.sessions[0].isolation, 'repeatable read')
  const [good] = (await run(true)).trials
  assert.equal(good.invariant.held, true)
  assert.equal(count(good.sessions, (x) => x.outcome === 'committed'), 1)
  assert.equal(count(good.sessions, (x) => x.outcome === 'rejected' && x.reason === '409: an order is already pending'), 9)
  assert.ok(good.sessions.some((x) => x.waitedMs > 0), 'the row lock was seen awaited')
})

test('mariadb connector: a duplicate key fails the session with its SQLSTATE/errno; race run takes the module on a mysql:// URL and refuses it on PostgreSQL', async (t) => {
  if (!lab) return t.skip(why)
  const s = appScenario(
    {
      driver: 'mariadb',
      setup: ['create table t (k int primary key) engine=innodb'],
      session: async (c: { query(sql: string): Promise<unknown> }) => {
        await c.query('insert into t values (1)')
      },
      invariant: 'select count(*) = 1 from t',
      expect: 'held',
    },
    path.join(EX, 'dup.race.mjs'),
  )
  const [r] = (await runScenario(lab!, s, { n: 2, schedule: 'serial' })).trials
  assert.deepEqual(r.sessions.map((x) => x.outcome), ['committed', 'failed'])
  assert.equal(r.sessions[1].sqlstate, '23000/1062')
  const file = path.join(EX, 'orders-mariadb.race.mjs')
  const ok = await race(['run', file, '--n', '3', '--schedule', 'lockstep', '--database-url', MYSQL_URL])
  assert.equal(ok.code, 0, ok.stderr)
  const refused = await race(['run', file, '--database-url', 'postgres://nobody@127.0.0.1:1/x'])
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /mariadb connector/)
})

test('mysql2 (promise and callback APIs): count-then-insert violates in lockstep and at the barrier; the row lock holds; explore counts what the mariadb connector does', async (t) => {
  if (!lab) return t.skip(why)
  const { createOrder, createOrderCallback, Conflict } = await import(pathToFileURL(path.join(EX, 'orders-mysql2.mjs')).href)
  const file = path.join(EX, 'orders-mysql2.race.mjs')
  const invariant = "select count(*) <= 1 from orders where status = 'pending'"
  // The promise API (db), and the callback API (ctx.client: the same connection), each with and without the lock.
  const apis = {
    promise: (locked: boolean) => (c: unknown, x: { user: string }) => createOrder(c, x.user, 42, { locked }),
    callback: (locked: boolean) => (_c: unknown, x: { user: string; client?: unknown }) =>
      new Promise<void>((resolve, reject) => createOrderCallback(x.client, x.user, 42, { locked }, (e: unknown) => (e ? reject(e) : resolve()))),
  }
  for (const [api, call] of Object.entries(apis)) {
    const make = (locked: boolean): Scenario => appScenario({ driver: 'mysql2', setup: SETUP, invariant, session: call(locked) as AppRace['session'], rejects: [Conflict], expect: locked ? 'held' : 'violated' }, file)
    const [bad]: Judged[] = (await runScenario(lab!, make(false), { n: 5, schedule: 'lockstep' })).trials
    assert.equal(bad.invariant.held, false, api)
    assert.equal(count(bad.sessions, (x) => x.outcome === 'committed'), 5, api)
    assert.equal(bad.sessions[0].isolation, 'repeatable read')
    assert.deepEqual(bad.order!.slice(0, 5), bad.sessions.map((x) => `${x.name}.q1`), `${api}: beginTransaction is a step`)
    for (const schedule of ['lockstep', 'barrier'] as const) {
      const [good]: Judged[] = (await runScenario(lab!, make(true), { n: 5, schedule })).trials
      assert.equal(good.invariant.held, true, `${api} ${schedule}`)
      assert.equal(count(good.sessions, (x) => x.outcome === 'committed'), 1, `${api} ${schedule}`)
      assert.equal(count(good.sessions, (x) => x.outcome === 'rejected' && x.reason === '409: an order is already pending'), 4, `${api} ${schedule}`)
      if (schedule === 'lockstep') assert.ok(good.sessions.some((x) => x.waitedMs > 0), 'the row lock was seen awaited')
    }
  }
  const barrier = await runScenario(lab!, appScenario((await import(pathToFileURL(file).href)).default, file), { n: 5, schedule: 'barrier', trials: 3 })
  assert.ok(barrier.trials.some((x) => x.invariant.held === false), 'violated in at least one of 3 barrier trials')
  // race explore: the same tree as the mariadb connector's version of the function (the same four queries).
  const explored = async (f: string) => {
    const r = await race(['explore', path.join(EX, f), '--database-url', MYSQL_URL, '--json'], { timeoutMs: 120_000 })
    const j = JSON.parse(r.stdout) as { interleavings: number; violating: number; unknown: number; complete: boolean }
    assert.equal(j.complete, true, r.stderr)
    assert.equal(j.unknown, 0)
    return [j.interleavings, j.violating]
  }
  assert.deepEqual(await explored('orders-mysql2.race.mjs'), await explored('orders-mariadb.race.mjs'))
  // A duplicate key through mysql2 fails the session with race's SQLSTATE/errno, as the mariadb connector's does.
  const dup = appScenario(
    { driver: 'mysql2', setup: ['create table t (k int primary key) engine=innodb'], session: (c: { query(sql: string): Promise<unknown> }) => c.query('insert into t values (1)'), invariant: 'select count(*) = 1 from t', expect: 'held' },
    file,
  )
  const [d] = (await runScenario(lab!, dup, { n: 2, schedule: 'serial' })).trials
  assert.deepEqual(d.sessions.map((x) => x.outcome), ['committed', 'failed'])
  assert.equal(d.sessions[1].sqlstate, '23000/1062')
})
