// race explore --isolation all and --inject on application races (issue 31): the user's own function explored once
// per level, the weakest level at which every interleaving held; the server made to fail a chosen query so that a
// retry loop's paths are explored; a retry loop that never ends stopped and reported. Against a real server
// (DATABASE_URL, else embedded PostgreSQL 18).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { race, ROOT, schemasOf } from '../support/server.js'
import { useExploreServer } from '../support/explore.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

const t = useExploreServer('app-levels')

const EX = path.join(ROOT, 'examples', 'app')

interface Levels {
  levels: { isolation: string; interleavings: number; violating: number; unknown: number; prevented: Record<string, number>; complete: boolean; ownLevel: string[]; replay: string | null; shortest: string | null }[]
  weakestSafe: string | null
  fixes: { level: string; fixedAt: string | null; documented: string[] }[]
  exitCode: number
}

async function levels(args: string[]): Promise<{ code: number | null; j: Levels; stderr: string }> {
  const r = await race(['explore', ...args, '--json'], { url: t.url, timeoutMs: 300_000 })
  assert.deepEqual(await schemasOf(t.admin, r.pid), [], 'every run schema is dropped')
  assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
  return { code: r.code, j: JSON.parse(r.stdout) as Levels, stderr: r.stderr }
}

const row = (j: Levels, level: string) => {
  const r = j.levels.find((x) => x.isolation === level)
  assert.ok(r, `a row for ${level}: ${JSON.stringify(j.levels.map((x) => x.isolation))}`)
  return r
}

test('count-then-insert: violated at read committed and repeatable read, held at serializable by 40001; weakest safe serializable', async () => {
  const { code, j, stderr } = await levels([path.join(EX, 'orders.race.mjs'), '--isolation', 'all'])
  assert.equal(code, 0, stderr)
  assert.deepEqual(j.levels.map((x) => x.isolation), ['read committed', 'repeatable read', 'serializable'])
  // A snapshot per statement or per transaction: either way neither count sees the other's uncommitted insert.
  assert.ok(row(j, 'read committed').violating > 0)
  assert.ok(row(j, 'repeatable read').violating > 0)
  const ser = row(j, 'serializable')
  assert.equal(ser.violating, 0)
  assert.equal(ser.unknown, 0)
  assert.ok(ser.complete)
  assert.ok((ser.prevented['40001'] ?? 0) > 0, JSON.stringify(ser.prevented))
  assert.equal(j.weakestSafe, 'serializable')
  // The violated levels name serializable as the level that fixed it, and the documented fixes as text.
  assert.deepEqual(j.fixes.map((f) => [f.level, f.fixedAt]), [['read committed', 'serializable'], ['repeatable read', 'serializable']])
  assert.ok(j.fixes[0].documented.some((x) => /FOR UPDATE/.test(x)) && j.fixes[0].documented.some((x) => /advisory/.test(x)))
})

test('--isolation with several levels says, in one line and in --json, that the race\'s own expect is not applied (exit 0: every level decided)', async () => {
  // orders.race.mjs expects violated; serializable held in every interleaving, and the exit is still 0.
  const file = path.join(EX, 'orders.race.mjs')
  const { code, j, stderr } = await levels([file, '--isolation', 'rc,ser'])
  assert.equal(code, 0, stderr)
  assert.equal(row(j, 'serializable').violating, 0)
  assert.deepEqual((j as unknown as { expectNotApplied: unknown }).expectNotApplied, { 'read committed': 'violated', serializable: 'violated' })
  const text = await race(['explore', file, '--isolation', 'rc,ser'], { url: t.url, timeoutMs: 300_000, env: { COLUMNS: '400' } })
  assert.equal(text.code, 0, text.stderr)
  const lines = text.stdout.split('\n').filter((l) => /not applied/.test(l))
  assert.equal(lines.length, 1, text.stdout)
  assert.match(lines[0], /^expect violated \(the race's own\) is not applied across levels: the exit code says only whether every level was decided; race explore --isolation <level> applies it$/)
})

test('read-modify-write withdrawal: violated at read committed, held at repeatable read by 40001; weakest safe repeatable read; the shortest replays at its level', async () => {
  const file = path.join(EX, 'withdraw.race.mjs')
  const { code, j, stderr } = await levels([file, '--isolation', 'rc,rr'])
  assert.equal(code, 0, stderr)
  const rc = row(j, 'read committed')
  const rr = row(j, 'repeatable read')
  assert.ok(rc.violating > 0)
  assert.equal(rr.violating, 0)
  assert.ok(rr.complete)
  assert.ok((rr.prevented['40001'] ?? 0) > 0, JSON.stringify(rr.prevented))
  assert.equal(j.weakestSafe, 'repeatable read')
  assert.match(rc.replay ?? '', /--isolation 'read committed'/)
  // The line explore printed, run again by race run at that level: the same violation.
  const r = await race(['run', file, '--isolation', 'rc', '--schedule', rc.shortest!, '--json'], { url: t.url, timeoutMs: 120_000 })
  const run = JSON.parse(r.stdout) as { invariant: { held: boolean }; sessions: { isolation: string }[] }
  assert.equal(run.invariant.held, false, r.stderr)
  assert.deepEqual(run.sessions.map((s) => s.isolation), ['read committed', 'read committed'])
})

test('a .spec file whose steps say plain begin: the level is each session connection default; read committed violated, serializable held by 40001', async () => {
  const { code, j, stderr } = await levels([path.join(ROOT, 'examples', 'orders.spec'), '--isolation', 'rc,ser'])
  assert.equal(code, 0, stderr)
  assert.ok(row(j, 'read committed').violating > 0)
  const ser = row(j, 'serializable')
  assert.equal(ser.violating, 0)
  assert.ok((ser.prevented['40001'] ?? 0) > 0, JSON.stringify(ser.prevented))
  assert.deepEqual(ser.ownLevel, [])
  assert.equal(j.weakestSafe, 'serializable')
})

test('a function that sets its own level is reported, not overridden', async () => {
  const file = path.join(t.dir, 'own-level.race.mjs')
  fs.writeFileSync(
    file,
    `export default {
  driver: 'pg',
  setup: ['create table t (id int primary key, v int not null, n int not null)', 'insert into t values (1, 0, 0)'],
  session: async (db) => {
    await db.query('begin isolation level serializable')
    const { rows } = await db.query('select v from t where id = 1')
    await db.query('update t set v = $1, n = n + 1 where id = 1', [rows[0].v + 1])
    await db.query('commit')
  },
  invariant: 'select v = n from t where id = 1',
  expect: 'held',
}
`,
  )
  const { j, stderr } = await levels([file, '--isolation', 'rc,ser'])
  const rc = row(j, 'read committed')
  assert.deepEqual(rc.ownLevel, ['s1 serializable', 's2 serializable'], stderr)
  assert.deepEqual(row(j, 'serializable').ownLevel, [])
  // Run at read committed as asked, the function's own serializable still prevents the lost update.
  assert.equal(rc.violating, 0)
  // race run says so too, under the level each session ran at.
  const r = await race(['run', file, '--isolation', 'rc', '--schedule', 'lockstep'], { url: t.url, timeoutMs: 120_000 })
  assert.match(r.stdout.replace(/\s+/g, ' '), /isolation serializable \(read from each session\) s1, s2: not read committed, as --isolation set on the connection: the code names its own level/)
})

test('--inject 40001@commit: the correct retry loop holds; the loop that keeps its first read violates, and the injected line replays', async () => {
  // A seeded sample keeps this test short (every interleaving with the injections: about a thousand runs).
  const good = await t.explore([path.join(EX, 'withdraw-retry.race.mjs'), '--isolation', 'ser', '--inject', '40001@commit', '--sample', '25', '--seed', '3'])
  assert.equal(good.j.violating, 0, good.stderr)
  assert.equal(good.j.unknown, 0, good.stderr)
  assert.ok(good.j.every.some((x) => /!40001/.test(x.line)), 'some runs had the commit fail')
  // A run in which a session's commit failed and it still committed: its retry ran.
  assert.ok(good.j.every.some((x) => /s1\.q\d+!40001/.test(x.line) && x.outcomes.s1 === 'committed') || good.j.every.some((x) => /s2\.q\d+!40001/.test(x.line) && x.outcomes.s2 === 'committed'))

  const file = path.join(EX, 'withdraw-stale-retry.race.mjs')
  // s1 reads 100, its commit fails; s2 withdraws 60 meanwhile; s1's retry writes 100 - 60 again.
  const line = 's1.q1 s1.q2 s1.q3 s1.q4!40001 s2.q1 s2.q2 s2.q3 s2.q4 s1.q5 s1.q6 s1.q7 s1.q8 s1.q9'
  const r = await race(['run', file, '--isolation', 'ser', '--schedule', line, '--json'], { url: t.url, timeoutMs: 120_000 })
  const run = JSON.parse(r.stdout) as { invariant: { held: boolean; observed: string }; order: string; sessions: { outcome: string; injected?: string[] }[] }
  assert.equal(run.invariant.held, false, r.stderr)
  assert.equal(run.order, line)
  assert.deepEqual(run.sessions.map((s) => s.outcome), ['committed', 'committed'])
  assert.deepEqual(run.sessions[0].injected, ['40001@q4'])
})

test('--inject lost@3: a backend ended by race before its query is decided (held), never a crash; a loop that retries forever is stopped and named', async () => {
  const lost = await t.explore([path.join(EX, 'withdraw-retry.race.mjs'), '--isolation', 'ser', '--inject', 'lost@3', '--sample', '12', '--seed', '5'])
  // Every draw decided and held; a sample asked for no level of evidence (--accept-sample) is not a pass.
  assert.equal(lost.code, 3, lost.stderr)
  assert.match(lost.stderr, /a sample is not a certificate/)
  assert.equal(lost.j.unknown, 0)
  assert.equal(lost.j.violating, 0)
  assert.ok(lost.j.every.some((x) => Object.values(x.outcomes).includes('lost')), JSON.stringify(lost.j.every.map((x) => x.outcomes)))

  const forever = await t.explore([path.join(EX, 'withdraw-retry-forever.race.mjs'), '--isolation', 'ser', '--sample', '4', '--seed', '1'])
  assert.equal(forever.code, 3, forever.stderr)
  assert.ok(forever.j.every.length > 0)
  for (const it of forever.j.every) assert.ok(Object.values(it.outcomes).some((o) => /^retried without end: \d+ transactions begun in 20 queries/.test(o)), JSON.stringify(it.outcomes))
  assert.match(forever.stderr, /retried without end/)
})

test('bad input: one line, exit 2', async () => {
  for (const [args, pattern] of [
    [['explore', 'advisory', '--isolation', 'all'], /advisory sets its sessions' isolation levels itself/],
    [['explore', path.join(EX, 'orders.race.mjs'), '--isolation', 'rc,ru'], /PostgreSQL runs READ UNCOMMITTED as READ COMMITTED/],
    [['explore', path.join(EX, 'orders.race.mjs'), '--isolation', 'rc,,ser'], /empty item/],
    [['explore', path.join(EX, 'orders.race.mjs'), '--isolation', 'all', '--expect', 'held'], /--expect judges one level/],
    [['explore', 'lost-update', '--inject', '40001@commit'], /give an application race module/],
    [['explore', path.join(EX, 'orders.race.mjs'), '--inject', '23505@commit'], /is not CODE@SITE/],
  ] as const) {
    const r = await race([...args], { url: t.url })
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, pattern)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.equal(r.stdout, '')
  }
})

test('MariaDB: the count-then-insert per level, READ UNCOMMITTED included; at SERIALIZABLE every deadlock is the prevention (40001/1213), never a lost session', async (t) => {
  const { conn, why } = await reachMysql()
  if (!conn) return t.skip(why)
  await conn.end()
  const r = await race(['explore', path.join(EX, 'orders-mariadb.race.mjs'), '--isolation', 'ru,ser', '--json', '--database-url', MYSQL_URL], { timeoutMs: 300_000 })
  const j = JSON.parse(r.stdout) as Levels
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(j.levels.map((x) => x.isolation), ['read uncommitted', 'serializable'])
  assert.ok(row(j, 'read uncommitted').violating > 0)
  const ser = row(j, 'serializable')
  // A connection that could not be kept for the next interleaving used to be ended after the next session took it
  // over: its end marked that session lost, and a deadlock victim read as a lost connection (undecided).
  assert.equal(ser.unknown, 0)
  assert.equal(ser.violating, 0)
  assert.ok((ser.prevented['40001/1213'] ?? 0) > 0, JSON.stringify(ser.prevented))
  assert.equal(j.weakestSafe, 'serializable')
})
