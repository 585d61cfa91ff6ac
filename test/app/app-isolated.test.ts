// race explore runs an application race's sessions isolated by default (issue 41, item 2): each session's function in
// a worker thread of its own, with its own copy of the race module and everything it imports, so the sessions share
// nothing but the database, and the reduced search (which sees only what the server saw) is sound for them. A race
// module whose sessions share process state says sharedState: true: one process, every interleaving. Against a real
// server (DATABASE_URL, else embedded PostgreSQL 18).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { useExploreServer } from '../support/explore.js'
import { race, ROOT } from '../support/server.js'

const t = useExploreServer('app-isolated')

const explore = t.explore
const WITHDRAW = path.join(ROOT, 'examples', 'app', 'withdraw-ledger.race.mjs')

/**
 * A module-level map, per trial (ctx.user): the sessions whose function started in this copy of the module. Each
 * session writes how many others it saw there. In one process the second to start sees the first; isolated, none.
 */
const seenModule = (shared: boolean) => `const seen = new Map()
export default {
  driver: 'pg',
  setup: ['create table log (session text primary key, others int not null)'],
  session: async (db, ctx) => {
    const here = seen.get(ctx.user) ?? []
    seen.set(ctx.user, here)
    here.push(ctx.session)
    await db.query('begin')
    await db.query('select 1')
    await db.query('insert into log values ($1, $2)', [ctx.session, here.length - 1])
    await db.query('commit')
  },
  invariant: 'select count(*) = 2 and bool_and(others = 0) as held from log',
  expect: 'held',${shared ? '\n  sharedState: true,' : ''}
}
`

test('isolated (the default): each session has its own copy of the module, in every interleaving; in one process (sharedState) they share it', async () => {
  const isolated = path.join(t.dir, 'seen-isolated.race.mjs')
  fs.writeFileSync(isolated, seenModule(false))
  const a = await explore([isolated, '--exhaustive'])
  assert.equal(a.j.sessionsRan?.mode, 'isolated')
  assert.equal(a.j.complete, true)
  assert.ok(a.j.interleavings > 1)
  assert.equal(a.j.violating, 0, 'no session saw another in its copy of the module')
  assert.ok(a.j.every.every((x) => x.held === true && Object.values(x.outcomes).every((o) => o === 'committed')), JSON.stringify(a.j.groups))
  assert.equal(a.code, 0)
  // The reduced search (the default) says the same.
  const d = await explore([isolated])
  assert.equal(d.j.search, 'reduced')
  assert.equal(d.j.violating, 0)
  assert.equal(d.code, 0)
  // The same code in one process: the second session to start saw the first, in every interleaving.
  const shared = path.join(t.dir, 'seen-shared.race.mjs')
  fs.writeFileSync(shared, seenModule(true))
  const b = await explore([shared, '--exhaustive'])
  assert.equal(b.j.sessionsRan?.mode, 'shared')
  assert.equal(b.j.interleavings, a.j.interleavings)
  assert.equal(b.j.violating, b.j.interleavings)
  assert.equal(b.code, 1)
})

/**
 * Sessions that touch nothing in common on the server (each inserts into its own table), but hand a value to each
 * other in a module-level map: s1 records what the session that got its `select 1` back before it left there. Only
 * the order of their JavaScript decides whether s1 sees s2's name, which no lock on the server shows.
 */
const lastModule = `const last = new Map()
export default {
  driver: 'pg',
  setup: ['create table log1 (prev text)', 'create table log2 (prev text)'],
  session: async (db, ctx) => {
    await db.query('begin')
    await db.query('select 1')
    const prev = last.get(ctx.user) ?? null
    last.set(ctx.user, ctx.session)
    await db.query('insert into log' + (ctx.index + 1) + ' values ($1)', [prev])
    await db.query('commit')
  },
  invariant: "select not exists (select 1 from log1 where prev = 's2') as held",
  expect: 'held',
  sharedState: true,
}
`

test('shared state (sharedState: true): every interleaving runs by default and finds the violation only the JavaScript state shows', async () => {
  const file = path.join(t.dir, 'last-shared.race.mjs')
  fs.writeFileSync(file, lastModule)
  const { code, j } = await explore([file])
  assert.equal(j.sessionsRan?.mode, 'shared')
  assert.equal(j.search, 'exhaustive')
  assert.equal(j.complete, true)
  assert.ok(j.violating > 0, 'an order where s2 got its select back before s1 violates')
  assert.ok(j.every.filter((x) => x.held === false).every((x) => x.line.indexOf('s2.q2') < x.line.indexOf('s1.q2')), 'violated exactly where s2 went first')
  assert.equal(code, 1)
  // What --reduce assumes, shown: the server saw two sessions that touch nothing in common, so one order of them is
  // run, and the violation, which lives only in the shared JavaScript state, is not reached.
  const r = await explore([file, '--reduce'])
  assert.equal(r.j.search, 'reduced')
  assert.ok(r.j.runs < j.runs)
  const text = await race(['explore', file, '--reduce'], { url: t.url, timeoutMs: 120_000 })
  assert.match(text.stdout.replace(/\s+/g, ' '), /sessions shared: the sessions ran in one process/)
  assert.match(text.stdout.replace(/\s+/g, ' '), /--reduce assumes the sessions share no state outside the database/)
  // Isolated (the same code without sharedState), each session's map is its own: never a name, in any order.
  const iso = path.join(t.dir, 'last-isolated.race.mjs')
  fs.writeFileSync(iso, lastModule.replace('  sharedState: true,\n', ''))
  const x = await explore([iso, '--exhaustive'])
  assert.equal(x.j.sessionsRan?.mode, 'isolated')
  assert.equal(x.j.interleavings, j.interleavings)
  assert.equal(x.j.violating, 0)
})

test("the withdrawal's lost update over node-postgres, default flags: the reduced search, isolated, finds the groups --exhaustive finds", async () => {
  const d = await explore([WITHDRAW, '--n', '2'])
  const x = await explore([WITHDRAW, '--n', '2', '--exhaustive'])
  assert.equal(d.j.search, 'reduced')
  assert.equal(d.j.sessionsRan?.mode, 'isolated')
  assert.equal(d.j.complete, true)
  assert.ok(d.j.violating > 0)
  assert.equal(d.code, 0, 'the module expects violated')
  assert.ok(d.j.runs < x.j.runs, `${d.j.runs} reduced runs, ${x.j.runs} exhaustive`)
  assert.deepEqual(d.j.groups.map((g) => g.key).sort(), x.j.groups.map((g) => g.key).sort())
  assert.equal(d.j.shortest!.switches, x.j.shortest!.switches)
  // The text says how the sessions ran and what that assumes.
  const text = await race(['explore', WITHDRAW, '--n', '2'], { url: t.url, timeoutMs: 300_000 })
  assert.match(text.stdout.replace(/\s+/g, ' '), /sessions isolated: each session ran in a worker thread of its own/)
  assert.doesNotMatch(text.stdout.replace(/\s+/g, ' '), /--reduce assumes/)
})

/**
 * A retry loop that keeps its first attempt's count: its retry writes what that attempt read. At READ COMMITTED the
 * other session's update waits on the first's; an injected 40001 at the first's COMMIT lets the other commit, and the
 * retry then writes a count that misses it. Whether that happens depends on the order and on where the fault went.
 */
const bumpModule = `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table c (id int primary key, n int not null)', 'insert into c values (1, 0)'],
  session: async (db) => {
    let v
    for (let tries = 1; ; tries++) {
      try {
        await db.query('begin')
        if (v === undefined) v = (await db.query('update c set n = n + 1 where id = 1 returning n')).rows[0].n
        else await db.query('update c set n = $1 where id = 1', [v])
        await db.query('commit')
        return
      } catch (e) {
        await db.query('rollback')
        if (e?.code !== '40001' || tries >= 3) throw e
      }
    }
  },
  expect: 'held',
  invariant: { sql: 'select n = 2 as held, n from c where id = 1', description: 'both increments counted' },
}
`

test('--inject in isolated sessions (issue 41 item 4): the reduced search by default, the same groups and shortest as --exhaustive, for 40001 and a lost connection', async () => {
  const file = path.join(t.dir, 'bump-retry.race.mjs')
  fs.writeFileSync(file, bumpModule)
  for (const fault of ['40001@commit', 'lost@2']) {
    const d = await explore([file, '--inject', fault])
    const x = await explore([file, '--inject', fault, '--exhaustive'])
    assert.equal(d.j.search, 'reduced', fault)
    assert.equal(d.j.sessionsRan?.mode, 'isolated', fault)
    assert.equal(x.j.sessionsRan?.mode, 'isolated', fault)
    assert.equal(d.j.complete, true, fault)
    assert.equal(x.j.complete, true, fault)
    assert.ok(d.j.violating > 0, `${fault}: the stale retry is found`)
    assert.equal(d.code, 1, fault)
    assert.ok(d.j.runs < x.j.runs, `${fault}: ${d.j.runs} reduced runs, ${x.j.runs} exhaustive`)
    assert.deepEqual(d.j.groups.map((g) => g.key).sort(), x.j.groups.map((g) => g.key).sort(), fault)
    assert.equal(d.j.shortest!.switches, x.j.shortest!.switches, fault)
    // The fault was placed in the runs (the shortest violation carries it), in both searches.
    const mark = fault === 'lost@2' ? '!lost' : '!40001'
    assert.ok(d.j.shortest!.line.includes(mark) && x.j.shortest!.line.includes(mark), `${d.j.shortest!.line} / ${x.j.shortest!.line}`)
  }
})

test('a correct SERIALIZABLE retry loop under --inject 40001@commit, default flags: isolated, reduced, complete, held, exit 0 (it ran every one of 980 interleavings in one process)', async () => {
  const r = await explore([path.join(ROOT, 'examples', 'app', 'withdraw-retry.race.mjs'), '--isolation', 'serializable', '--inject', '40001@commit'])
  assert.equal(r.j.sessionsRan?.mode, 'isolated')
  assert.equal(r.j.search, 'reduced')
  assert.equal(r.j.complete, true)
  assert.equal(r.j.violating, 0)
  assert.equal(r.j.unknown, 0)
  assert.equal(r.code, 0)
  // 360 runs on PostgreSQL 15 and 18 when measured; every interleaving is 980.
  assert.ok(r.j.runs <= 450, `${r.j.runs} runs`)
  assert.ok((r.j as { injections?: { runs: number }[] }).injections?.[0]?.runs, 'the fault was injected')
})
