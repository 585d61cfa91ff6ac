/* eslint-disable @typescript-eslint/no-explicit-any -- the drivers are the user's, untyped here */
// An application race is judged only on what race saw: a JavaScript bug is never a business rejection (only what the
// race module declares in `rejects` is), the invariant is decided from its result (never its text), a unique index
// is a prevention the module can declare, un-awaited queries are waited for, a session waiting in JavaScript on
// another is said, the order lines printed replay, and input that would be ignored is refused.
// Against a real server (DATABASE_URL, else embedded PostgreSQL), and MariaDB where it applies (skipped, saying
// why, when none answers).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { after, before, test } from 'node:test'
import type { Connection } from 'mariadb'
import { appScenario } from '../../src/app/scenario.js'
import type { AppRace } from '../../src/app/types.js'
import { MysqlLab } from '../../src/db/mysql.js'
import { resolveTarget } from '../../src/db/target.js'
import { documentedFor, plan } from '../../src/plan.js'
import { run as runEngine } from '../../src/engine/run.js'
import { judgeTrial } from '../../src/run/judge.js'
import { explore } from '../../src/explore/execute.js'
import { RunContext } from '../../src/lifecycle.js'
import { UsageError } from '../../src/errors.js'
import type { Scenario, Schedule } from '../../src/scenario.js'
import { ROOT, count, race, runScenario, useLab } from '../support/server.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

const ctx = useLab()
const EX = path.join(ROOT, 'examples', 'app')
const TABLE = 'create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'
const AT_MOST_ONE = "select count(*) <= 1 from orders where status = 'pending'"
const load = async (file: string): Promise<any> => import(pathToFileURL(path.join(EX, file)).href)

let dir: string
let my: { conn?: Connection; why?: string; lab?: MysqlLab } = {}
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-judge-'))
  const { conn, why } = await reachMysql()
  my = { conn, why, ...(conn ? { lab: await MysqlLab.open(resolveTarget(MYSQL_URL), 5000) } : {}) }
})
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  await my.lab?.close()
  await my.conn?.end()
})

/** A race module written to the test's directory (its copy of Conflict is its own, as a user's module may be). */
function moduleFile(name: string, body: string): string {
  const file = path.join(dir, name)
  fs.writeFileSync(file, body)
  return file
}

function pgRace(over: Partial<AppRace> & Pick<AppRace, 'session' | 'expect'>, name = 'judge.race.mjs'): Scenario {
  return appScenario({ driver: 'pg', setup: [TABLE], invariant: AT_MOST_ONE, ...over }, path.join(dir, name))
}

const go = (s: Scenario, n: number, schedule: Schedule, o: { permutation?: string; stepTimeoutMs?: number; trials?: number } = {}) => runScenario(ctx.lab, s, { n, schedule, ...o })

/** Runs an application race on MariaDB in-process, judged as race run judges it. */
async function onMysql(s: Scenario, n: number, schedule: Schedule) {
  const variant = { params: {}, n, engine: 'mysql' as const }
  const p = plan(s, variant)
  const docs = documentedFor(s, { ...variant, schedule, windowMs: 0 })
  const out = await runEngine(my.lab!, { context: my.lab!.context, plan: p, schedule, trials: 1, stepTimeoutMs: 10_000, connectTimeoutMs: 5000, keep: false })
  return out.trials.map((f) => judgeTrial(f, docs, p))
}

// ---- 1. a JavaScript bug is not a rejection ----------------------------------------------------------------------

test('case 1: a TypeError before COMMIT fails the session (its class and message), the trial is undecided; only declared errors reject', async () => {
  const { createOrder, Conflict } = await load('orders.mjs')
  const buggy = pgRace({
    session: async (db: any) => {
      await db.query('begin')
      const order: any = undefined
      return order.total // TypeError: a bug, not a business rule
    },
    rejects: [Conflict],
    expect: 'held',
  })
  const [t] = (await go(buggy, 2, 'lockstep')).trials
  assert.deepEqual(t.sessions.map((x) => x.outcome), ['failed', 'failed'])
  assert.match(t.sessions[0].thrown ?? '', /^TypeError: Cannot read properties of undefined/)
  assert.equal(t.verdict, 'unknown')
  assert.match(t.why, /s1 threw TypeError: .* a failure of the code under test/)
  assert.equal(t.comparison.matched, false)
  // Declared: by instanceof, by the class's name (another copy of Conflict), or by a predicate, it is a rejection.
  const copy = class Conflict extends Error {}
  for (const rejects of [[Conflict], [copy], (e: unknown) => (e as { status?: number })?.status === 409] as AppRace['rejects'][]) {
    const [u] = (await go(pgRace({ session: (db, c) => createOrder(db, c.user, 42), rejects, expect: 'violated' }), 2, 'serial')).trials
    assert.deepEqual(u.sessions.map((x) => x.outcome), ['committed', 'rejected'])
  }
  // Undeclared (no rejects): the same Conflict is a failure named with its class.
  const [v] = (await go(pgRace({ session: (db, c) => createOrder(db, c.user, 42), expect: 'violated' }), 2, 'serial')).trials
  assert.equal(v.sessions[1].outcome, 'failed')
  assert.equal(v.sessions[1].thrown, 'Conflict: 409: an order is already pending')
  assert.equal(v.verdict, 'unknown')
})

test('case 1 (CLI): race run (exit 3) and race explore (exit 1: the code failing is a finding) of a module whose function throws a ReferenceError, never a clean MATCH', async () => {
  const file = moduleFile(
    'typo.race.mjs',
    `export class Conflict extends Error {}
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (k int)'],
  session: async (db) => {
    await db.query('begin')
    await db.query('select count(*) from t')
    throw new RefrenceTypo('never defined')
  },
  rejects: [Conflict],
  invariant: 'select count(*) = 0 from t',
  expect: 'held',
}
`,
  )
  for (const cmd of ['run', 'explore']) {
    const r = await race([cmd, file], { url: ctx.server.url, timeoutMs: 240_000 })
    // explore reports the code failing as its own group, with a line to replay it (issue 39, item 8).
    assert.equal(r.code, cmd === 'run' ? 3 : 1, `${cmd}: ${r.stdout}${r.stderr}`)
    if (cmd === 'explore') assert.match(r.stdout, /FAILED failed: s1 threw ReferenceError: RefrenceTypo is not defined/)
    assert.doesNotMatch(r.stdout, /\bMATCH\b(?!.*DEVIATION)/, cmd)
    assert.match(r.stdout + r.stderr, /ReferenceError: RefrenceTypo is not defined/, cmd)
  }
})

test('case 1 (MariaDB): a TypeError in the mariadb connector race fails the session, undecided', async (t) => {
  if (!my.lab) return t.skip(my.why)
  const s = appScenario(
    {
      driver: 'mariadb',
      setup: ['create table t (k int) engine=innodb'],
      session: async (c: any) => {
        await c.beginTransaction()
        await c.query('insert into t values (1)')
        ;(c as any).nope()
      },
      invariant: 'select count(*) = 0 from t',
      expect: 'held',
    },
    path.join(dir, 'typo-maria.race.mjs'),
  )
  const [r] = await onMysql(s, 2, 'lockstep')
  assert.deepEqual(r.sessions.map((x) => x.outcome), ['failed', 'failed'])
  assert.match(r.sessions[0].thrown ?? '', /^TypeError: /)
  assert.equal(r.verdict, 'unknown')
})

// ---- 4. the invariant is decided from its result -----------------------------------------------------------------

test('case 4: an invariant is decided from its result: several rows are undecided, a held in a string literal changes nothing', async () => {
  const { createOrder, Conflict } = await load('orders.mjs')
  const base = { session: (db: any, c: any) => createOrder(db, c.user, 42), rejects: [Conflict], expect: 'violated' as const }
  // Two rows (one per status), a held column: not judged by the first row.
  const many = pgRace({ ...base, invariant: 'select status, count(*) <= 1 as held from orders group by status union all select \'x\', true' })
  const [a] = (await go(many, 2, 'lockstep')).trials
  assert.equal(a.invariant.held, null)
  assert.equal(a.invariant.error, 'the invariant query returned 2 rows: it must return exactly one (with a held column, or one boolean column)')
  assert.equal(a.verdict, 'unknown')
  // The word held in a string literal: evaluated as any other invariant (violated in lockstep), never "NULL".
  const literal = pgRace({ ...base, invariant: "select count(*) <= 1 from orders where status <> 'held'" })
  const [b] = (await go(literal, 2, 'lockstep')).trials
  assert.equal(b.invariant.held, false, b.invariant.error)
  assert.equal(b.verdict, 'anomaly')
  // A held column among others decides; with no held column, the one boolean column does.
  const [c] = (await go(pgRace({ ...base, invariant: "select count(*) as pending, count(*) <= 1 as held from orders where status = 'pending'" }), 2, 'serial')).trials
  assert.equal(c.invariant.held, true)
  assert.equal(c.invariant.observed, 'pending=1')
  const [d] = (await go(pgRace({ ...base, invariant: "select count(*) as pending, count(*) <= 1 as ok from orders where status = 'pending'" }), 2, 'lockstep')).trials
  assert.equal(d.invariant.held, false)
  // Zero rows: undecided, saying so.
  const [e] = (await go(pgRace({ ...base, invariant: 'select true as held from orders where false' }), 2, 'serial')).trials
  assert.equal(e.invariant.held, null)
  assert.match(e.invariant.error ?? '', /returned 0 rows/)
})

test('case 4 (MariaDB): several rows are undecided; one column decides', async (t) => {
  if (!my.lab) return t.skip(my.why)
  const mk = (invariant: string) =>
    appScenario(
      {
        driver: 'mariadb',
        setup: ['create table t (k int) engine=innodb'],
        session: async (c: any) => {
          await c.query('insert into t values (1)')
        },
        invariant,
        expect: 'held',
      },
      path.join(dir, 'inv-maria.race.mjs'),
    )
  const [a] = await onMysql(mk('select k, count(*) <= 1 as held from t group by k union all select 2, 1'), 2, 'serial')
  assert.equal(a.invariant.held, null)
  assert.match(a.invariant.error ?? '', /returned 2 rows/)
  const [b] = await onMysql(mk("select count(*) <= 1 from t where 'held' = 'held'"), 2, 'serial')
  assert.equal(b.invariant.held, false, b.invariant.error)
})

// ---- 5. a prevention the race module declares --------------------------------------------------------------------

test("case 5: the unique-index fix is prevented with prevention: ['23505'], and undecided without it, naming the module's field", async () => {
  const { createOrder, Conflict } = await load('orders.mjs')
  const over = {
    setup: [TABLE, "create unique index one_pending on orders (user_id) where status = 'pending'"],
    session: (db: any, c: any) => createOrder(db, c.user, 42),
    rejects: [Conflict],
    expect: 'held' as const,
  }
  const [bare] = (await go(pgRace(over), 3, 'lockstep')).trials
  assert.equal(count(bare.sessions, (x) => x.sqlstate === '23505'), 2)
  assert.equal(bare.verdict, 'unknown')
  assert.match(bare.why, /a race module's field: prevention: \['23505'\]/)
  const [fixed] = (await go(pgRace({ ...over, prevention: ['23505'] }), 3, 'lockstep')).trials
  assert.equal(fixed.verdict, 'prevented')
  assert.equal(fixed.comparison.matched, true)
  // Through the CLI: exit 0.
  const file = moduleFile(
    'unique.race.mjs',
    `import { Conflict, createOrder } from ${JSON.stringify(pathToFileURL(path.join(EX, 'orders.mjs')).href)}
export default {
  driver: 'pg',
  sessions: 3,
  setup: [${JSON.stringify(TABLE)}, "create unique index one_pending on orders (user_id) where status = 'pending'"],
  session: (db, ctx) => createOrder(db, ctx.user, 42),
  rejects: [Conflict],
  prevention: ['23505'],
  invariant: ${JSON.stringify(AT_MOST_ONE)},
  expect: 'held',
}
`,
  )
  const r = await race(['run', file, '--schedule', 'lockstep'], { url: ctx.server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
})

test("case 5 (MariaDB): a unique key's 23000/1062 is a prevention with prevention: ['23000']", async (t) => {
  if (!my.lab) return t.skip(my.why)
  const { createOrder, Conflict } = await load('orders-mariadb.mjs')
  const mk = (prevention?: string[]) =>
    appScenario(
      {
        driver: 'mariadb',
        setup: [
          'create table orders (id bigint auto_increment primary key, user_id varchar(64) not null, amount int not null, status varchar(16) not null, unique key one (user_id, status)) engine=innodb',
          'create table users (id varchar(64) primary key) engine=innodb',
          'insert into users (id) values (:user)',
        ],
        session: (c: any, x: any) => createOrder(c, x.user, 42),
        rejects: [Conflict],
        ...(prevention ? { prevention } : {}),
        invariant: AT_MOST_ONE,
        expect: 'held',
      },
      path.join(dir, 'unique-maria.race.mjs'),
    )
  const [bare] = await onMysql(mk(), 2, 'lockstep')
  assert.equal(bare.verdict, 'unknown')
  const [fixed] = await onMysql(mk(['23000']), 2, 'lockstep')
  assert.equal(fixed.verdict, 'prevented')
  assert.equal(fixed.comparison.matched, true)
})

// ---- 6. un-awaited queries ---------------------------------------------------------------------------------------

test('case 6: a query the function does not await is released and waited for; one that fails un-caught is no internal error', async () => {
  const s = pgRace({
    setup: ['create table t (k int primary key)'],
    session: async (db: any, c: any) => {
      await db.query('insert into t values ($1)', [c.index * 10])
      db.query('insert into t values ($1)', [c.index * 10 + 1]) // no await
    },
    invariant: 'select count(*) = 4 from t',
    expect: 'held',
  })
  for (const schedule of ['lockstep', 'barrier'] as const) {
    const [t] = (await go(s, 2, schedule)).trials
    assert.equal(t.invariant.held, true, `${schedule}: ${t.invariant.error ?? ''}`)
    assert.deepEqual(t.sessions.map((x) => x.outcome), ['committed', 'committed'])
    assert.match(t.sessions[0].reason ?? '', /did not await/)
    if (schedule === 'lockstep') assert.deepEqual(t.order, ['s1.q1', 's2.q1', 's1.q2', 's2.q2'])
  }
  const file = moduleFile(
    'unawaited.race.mjs',
    `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (k int primary key)'],
  session: async (db) => {
    await db.query('select 1')
    db.query('insert into t values (1)') // no await, no catch: the second one fails 23505
  },
  invariant: 'select count(*) = 1 from t',
  expect: 'held',
}
`,
  )
  const r = await race(['run', file, '--schedule', 'lockstep', '--json'], { url: ctx.server.url })
  assert.doesNotMatch(r.stderr, /internal error/i)
  assert.ok(r.code === 0 || r.code === 1 || r.code === 3, r.stderr)
  const j = JSON.parse(r.stdout)
  assert.equal(j.order, 's1.q1 s2.q1 s1.q2 s2.q2')
})

// ---- 9. a session waiting in JavaScript on another ---------------------------------------------------------------

test('case 9: an in-process mutex: the session waiting in JavaScript on one race holds is named, not a generic timeout', async () => {
  let locked: Promise<void> = Promise.resolve()
  const s = pgRace({
    setup: ['create table t (k int)'],
    session: async (db: any) => {
      const before = locked
      let release!: () => void
      locked = new Promise((r) => (release = r))
      await before
      try {
        await db.query('insert into t values (1)')
        await db.query('insert into t values (2)')
      } finally {
        release()
      }
    },
    invariant: 'select count(*) >= 2 from t',
    expect: 'held',
  })
  for (const schedule of ['lockstep', 'barrier'] as const) {
    locked = Promise.resolve()
    const [t] = (await go(s, 2, schedule, { stepTimeoutMs: 1500 })).trials
    assert.equal(t.sessions[1].outcome, 'timeout', schedule)
    assert.match(t.sessions[1].reason ?? '', new RegExp(String.raw`^s2 waited in JavaScript \(no query pending\) for 1500ms while race held s1 at s1\.q${schedule === 'lockstep' ? 1 : 2}: it waits outside the database on s1`), schedule)
    assert.equal(t.verdict, 'unknown')
    assert.match(t.why, /s2 waited in JavaScript/)
  }
})

// ---- 10. printed order and replay lines replay -------------------------------------------------------------------

test('case 10: a barrier run\'s queries, sent at once, are labelled sent (not a replay line), with every query; a lockstep run\'s order line replays; explore prints --database-url', async () => {
  const file = moduleFile(
    'inserts.race.mjs',
    `export default {
  driver: 'pg',
  sessions: 3,
  setup: ['create table t (k int)'],
  session: async (db, ctx) => {
    await db.query('begin')
    await db.query('insert into t values ($1)', [ctx.index])
    await db.query('commit')
  },
  invariant: 'select count(*) = 3 from t',
  expect: 'held',
}
`,
  )
  // The barrier (the default): the three inserts go at once, on the server together. The line is the order they were
  // sent, every session's first query included; no permutation runs them so, and the report says so.
  const first = await race(['run', file, '--n', '3', '--json'], { url: ctx.server.url })
  assert.ok(first.code === 0 || first.code === 1, first.stderr)
  const sent = JSON.parse(first.stdout) as { order: string; overlap: [string, string] }
  for (const s of ['s1', 's2', 's3']) assert.ok(sent.order.split(' ').includes(`${s}.q1`), sent.order)
  const labels = sent.order.split(' ')
  assert.equal(sent.overlap.length, 2, first.stdout)
  assert.ok(labels.indexOf(sent.overlap[0]) < labels.indexOf(sent.overlap[1]), JSON.stringify(sent))
  assert.notEqual(sent.overlap[0].split('.')[0], sent.overlap[1].split('.')[0])
  const barrier = await race(['run', file, '--n', '3'], { url: ctx.server.url, env: { COLUMNS: '400' } })
  assert.doesNotMatch(barrier.stdout, /^order\s/m)
  assert.equal(/^sent\s+(.*)$/m.exec(barrier.stdout)?.[1]?.trim().split(' ').length, 9, barrier.stdout)
  assert.match(barrier.stdout, /\(the order the queries were sent, not a replay line: s\d\.q\d was sent while s\d\.q\d was on the server, and --schedule runs one step at a time, so this line pasted there runs another interleaving/)
  // One step at a time (lockstep): nothing overlaps, and the order line, pasted back, replays.
  const text = await race(['run', file, '--n', '3', '--schedule', 'lockstep'], { url: ctx.server.url, env: { COLUMNS: '400' } })
  const line = /^order\s+(.*)$/m.exec(text.stdout)?.[1]?.trim() ?? ''
  assert.equal(line.split(' ').length, 9, text.stdout)
  assert.doesNotMatch(text.stdout, /not a replay line/)
  const pasted = await race(['run', file, '--n', '3', '--schedule', line, '--json'], { url: ctx.server.url })
  assert.equal(pasted.code, 0, pasted.stderr)
  assert.equal(JSON.parse(pasted.stdout).order, line)
  assert.equal(JSON.parse(pasted.stdout).overlap, undefined)
  // Explore's replay line names the database it ran on (given by --database-url, not the environment).
  const orders = path.join(EX, 'orders.race.mjs')
  const ex = await race(['explore', orders, '--database-url', ctx.server.url, '--json'], { timeoutMs: 300_000 })
  const j = JSON.parse(ex.stdout)
  // A password is never printed: it is masked, with a note saying to put it back (the test does, as a user would).
  const password = new URL(ctx.server.url).password
  const shown = password ? ctx.server.url.replace(`:${password}@`, ':***@') : ctx.server.url
  assert.ok(j.replay.includes(`--database-url ${shown}`) || j.replay.includes(`--database-url '${shown}'`), j.replay)
  if (password) {
    assert.doesNotMatch(j.replay, new RegExp(password))
    assert.match(j.replayNote, /password in --database-url is printed as \*\*\*: put yours back/)
  } else assert.equal(j.replayNote, undefined)
  const args = j.replay.replace(':***@', `:${password}@`).replace(/^race run /, '').match(/'[^']*'|"[^"]*"|\S+/g).map((a: string) => a.replace(/^['"]|['"]$/g, ''))
  const replayed = await race(['run', ...args, '--json'], { timeoutMs: 120_000 })
  assert.equal(replayed.code, 0, replayed.stderr)
  assert.equal(JSON.parse(replayed.stdout).order, j.shortest.line)
  // From DATABASE_URL: nothing added (the environment the line is pasted into chooses the same server again).
  const env = await race(['explore', orders, '--json'], { url: ctx.server.url, timeoutMs: 300_000 })
  assert.doesNotMatch(JSON.parse(env.stdout).replay, /--database-url/)
})

test('case 10 (MariaDB): the explore replay line names the mysql:// URL and replays there', async (t) => {
  if (!my.lab) return t.skip(my.why)
  const file = path.join(EX, 'orders-mariadb.race.mjs')
  const ex = await race(['explore', file, '--n', '2', '--database-url', MYSQL_URL, '--json'], { timeoutMs: 300_000 })
  const j = JSON.parse(ex.stdout)
  assert.ok(j.replay?.includes(MYSQL_URL), ex.stdout + ex.stderr)
  const args = j.replay.replace(/^race run /, '').match(/'[^']*'|"[^"]*"|\S+/g).map((a: string) => a.replace(/^['"]|['"]$/g, ''))
  const replayed = await race(['run', ...args, '--json'], { timeoutMs: 120_000 })
  assert.equal(replayed.code, 0, replayed.stderr)
  assert.equal(JSON.parse(replayed.stdout).order, j.shortest.line)
})

test('case 10: a replay whose steps cannot be followed (at another level a session fails early) prints its report, names the steps that never came, exit 3', async () => {
  // Read, then write back: a lost update at read committed; at repeatable read s1's update fails with 40001 and its
  // function (no catch) ends there, so s1.q4 (its COMMIT) never comes.
  const file = moduleFile(
    'rmw.race.mjs',
    `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table acct (id int primary key, balance int not null, n int not null)', 'insert into acct values (1, 100, 0)'],
  session: async (db) => {
    await db.query('begin')
    const { rows } = await db.query('select balance from acct where id = 1')
    await db.query('update acct set balance = $1, n = n + 1 where id = 1', [rows[0].balance - 10])
    await db.query('commit')
  },
  invariant: 'select balance = 100 - 10 * n from acct where id = 1',
  expect: 'held',
}
`,
  )
  const line = 's1.q1 s1.q2 s2.q1 s2.q2 s2.q3 s2.q4 s1.q3 s1.q4'
  const rc = await race(['run', file, '--schedule', line, '--json'], { url: ctx.server.url })
  assert.equal(rc.code, 1, rc.stdout + rc.stderr)
  assert.equal(JSON.parse(rc.stdout).order, line)
  const rr = await race(['run', file, '--isolation', 'rr', '--schedule', line], { url: ctx.server.url, env: { COLUMNS: '400' } })
  assert.equal(rr.code, 3, rr.stdout + rr.stderr)
  assert.match(rr.stdout, /^order\s+s1\.q1 s1\.q2 s2\.q1 s2\.q2 s2\.q3 s2\.q4 s1\.q3$/m)
  assert.match(rr.stdout, /--schedule was not followed: s1\.q4 never came \(s1 ended after s1\.q3\): not the interleaving asked for \(the order line is what ran; on it, held: the server raised 40001/)
  const j = JSON.parse((await race(['run', file, '--isolation', 'rr', '--schedule', line, '--json'], { url: ctx.server.url })).stdout)
  assert.equal(j.verdict, 'unknown')
  assert.equal(j.unfollowed, '--schedule was not followed: s1.q4 never came (s1 ended after s1.q3)')
})

// ---- 12. input that would be ignored is refused ------------------------------------------------------------------

test('case 12: an unknown field, stepTimeoutMs -5, a race that sends no query: refused in one line; a permutation step that never comes leaves the trial unknown, naming it', async () => {
  const { createOrder, Conflict } = await load('orders.mjs')
  assert.throws(
    () => appScenario({ driver: 'pg', session: () => {}, invariant: 'select true', expect: 'held', prevension: ['23505'] } as unknown as AppRace, 'typo.race.mjs'),
    (e: unknown) => e instanceof UsageError && e.exitCode === 2 && /"prevension" is not a field of defineAppRace/.test(e.message),
  )
  const s = pgRace({ session: (db, c) => createOrder(db, c.user, 42), rejects: [Conflict], expect: 'violated' })
  await assert.rejects(explore(new RunContext(), s, { stepTimeoutMs: -5 }), (e: unknown) => e instanceof UsageError && e.exitCode === 2 && /^stepTimeoutMs is -5/.test(e.message))
  const [never] = (await go(s, 2, 'permutation', { permutation: 's1.q1 s1.q2 s1.q3 s1.q4 s1.q5' })).trials
  assert.equal(never.verdict, 'unknown')
  assert.match(never.why, /^--schedule was not followed: s1\.q5 never came \(s1 ended after s1\.q4\): not the interleaving asked for/)
  const none = pgRace({ session: async () => {}, expect: 'held' })
  await assert.rejects(go(none, 2, 'lockstep'), (e: unknown) => e instanceof UsageError && /no session's function sent a query/.test((e as Error).message))
  // Through the CLI: one line, exit 2, naming the field as spelled.
  const file = moduleFile('unknown.race.mjs', "export default { driver: 'pg', session: async (db) => { await db.query('select 1') }, invariant: 'select true', expect: 'held', stepTimeoutMs: -5 }\n")
  const r = await race(['run', file], { url: ctx.server.url })
  assert.equal(r.code, 2, r.stderr)
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  assert.match(r.stderr, /"stepTimeoutMs" is not a field of defineAppRace/)
  const empty = moduleFile('empty.race.mjs', "export default { driver: 'pg', session: async () => {}, invariant: 'select true', expect: 'held' }\n")
  const x = await race(['explore', empty], { url: ctx.server.url, timeoutMs: 120_000 })
  assert.equal(x.code, 2, x.stdout + x.stderr)
  assert.doesNotMatch(x.stdout, /--schedule ""/)
})
