// --oracle serial (issue 42, item 1): a race with no invariant, judged against every serial order of its sessions.
// The count-then-insert createOrder and the lost-update withdrawal, their race modules with the invariant taken
// out (examples/app/*-serial.race.mjs spread the invariant versions), are violated in exactly the interleavings
// their invariants find, and their fixes (an advisory lock, SELECT ... FOR UPDATE) hold; race run names what no
// serial order gives; SERIALIZABLE's 40001 is a serial outcome (the session that failed did not run); a spec with
// no invariant line, beside an invariant, the API, and MariaDB. Against a real server (DATABASE_URL, else embedded
// 18; MariaDB at MYSQL_URL, skipped when none answers).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { explore as exploreApi, run as runApi, RaceError } from '../../src/index.js'
import { useExploreServer } from '../support/explore.js'
import { race, ROOT, schemasOf } from '../support/server.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

const t = useExploreServer('app-oracle')

const EX = path.join(ROOT, 'examples', 'app')
const at = (name: string) => path.join(EX, name)
const explore = t.explore
const violatingLines = (j: { every: { line: string; held: boolean | null }[] }) =>
  j.every
    .filter((x) => x.held === false)
    .map((x) => x.line)
    .sort()

/** race run --json: exit code, the document's verdict and what the invariant (and the oracle) observed. */
async function runJson(args: string[]): Promise<{ code: number | null; verdict: string; observed: string; stderr: string }> {
  const r = await race(['run', ...args, '--json'], { url: t.url, timeoutMs: 120_000 })
  assert.deepEqual(await schemasOf(t.admin, r.pid), [], 'every run schema is dropped, the serial runs\' too')
  assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
  const j = JSON.parse(r.stdout) as { verdict: string; invariant: { observed: string } }
  return { code: r.code, verdict: j.verdict, observed: j.invariant.observed, stderr: r.stderr }
}

test('a race module with no invariant is refused without --oracle serial; --oracle takes serial, and at most 5 sessions (exit 2, one line)', async () => {
  for (const args of [
    ['run', at('orders-serial.race.mjs')],
    ['explore', at('orders-serial.race.mjs')],
    ['run', at('orders-serial.race.mjs'), '--oracle', 'linear'],
    ['explore', at('orders-serial.race.mjs'), '--oracle', 'serial', '--n', '6'],
    ['run', at('orders-serial.race.mjs'), '--oracle', 'serial', '--n', '6'],
  ]) {
    const r = await race(args, { url: t.url })
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.doesNotMatch(r.stderr, /\n\s+at /)
  }
  const none = await race(['run', at('orders-serial.race.mjs')], { url: t.url })
  assert.match(none.stderr, /has no invariant: give --oracle serial/)
  const six = await race(['run', at('orders-serial.race.mjs'), '--oracle', 'serial', '--n', '6'], { url: t.url })
  assert.match(six.stderr, /6 sessions are 720 orders; give --n 5 or fewer/)
})

// --exhaustive: the exact counts of every interleaving, as the invariant versions' are known (an application race loaded
// from its file is reduced by default, each session in a worker of its own).
test('count-then-insert with no invariant: --oracle serial violates in the same 60 of 70 interleavings the invariant does; the advisory lock holds in all 36', async () => {
  // Serially the second createOrder counts the first one's order and is rejected (Conflict): one row. An
  // interleaving in which both count before either commits ends with two rows and both committed: no serial order.
  const serial = await explore(['--exhaustive', at('orders-serial.race.mjs'), '--oracle', 'serial'])
  assert.equal(serial.code, 0, serial.stderr)
  assert.equal(serial.j.interleavings, 70)
  assert.equal(serial.j.violating, 60)
  const invariant = await explore(['--exhaustive', at('orders.race.mjs'), '--n', '2'])
  assert.equal(invariant.j.violating, 60, invariant.stderr)
  assert.deepEqual(violatingLines(serial.j), violatingLines(invariant.j), 'the same interleavings violate')
  const fixed = await explore(['--exhaustive', at('orders-locked-serial.race.mjs'), '--oracle', 'serial', '--expect', 'held'])
  assert.equal(fixed.code, 0, fixed.stderr)
  assert.equal(fixed.j.interleavings, 36)
  assert.equal(fixed.j.violating, 0)
})

test('the lost-update withdrawal with no invariant: --oracle serial violates in the same 80 of 92 interleavings; FOR UPDATE holds', async () => {
  const serial = await explore(['--exhaustive', at('withdraw-ledger-serial.race.mjs'), '--oracle', 'serial'])
  assert.equal(serial.code, 0, serial.stderr)
  assert.equal(serial.j.interleavings, 92)
  assert.equal(serial.j.violating, 80)
  const invariant = await explore(['--exhaustive', at('withdraw-ledger.race.mjs'), '--n', '2'])
  assert.equal(invariant.j.violating, 80, invariant.stderr)
  assert.deepEqual(violatingLines(serial.j), violatingLines(invariant.j), 'the same interleavings violate')
  const fixed = await explore(['--exhaustive', at('withdraw-ledger-locked-serial.race.mjs'), '--oracle', 'serial', '--expect', 'held'])
  assert.equal(fixed.code, 0, fixed.stderr)
  assert.equal(fixed.j.violating, 0)
  assert.ok(fixed.j.interleavings > 0)
})

test('race run --oracle serial names what no serial order gives, with the closest order; the fixes hold in lockstep', async () => {
  // Both read 100 and both write 70: the balance no serial order leaves (either order leaves 40).
  const lost = await runJson([at('withdraw-ledger-serial.race.mjs'), '--oracle', 'serial', '--schedule', 's1.q1 s2.q1 s1.q2 s2.q2 s1.q3 s2.q3 s1.q4 s1.q5 s2.q4 s2.q5'])
  assert.equal(lost.code, 0, lost.stderr)
  assert.equal(lost.verdict, 'anomaly')
  assert.match(lost.observed, /^table accounts differs from every serial order \(closest, s1 then s2: accounts has \{"balance":70,"id":1\} where it had \{"balance":40,"id":1\}\)$/)
  const heldAsked = await race(['run', at('withdraw-ledger-serial.race.mjs'), '--oracle', 'serial', '--schedule', 'lockstep', '--expect', 'held'], { url: t.url })
  assert.equal(heldAsked.code, 1, heldAsked.stdout + heldAsked.stderr)
  // Both count 0: two orders, and s2 committed where every serial order rejects it.
  const orders = await runJson([at('orders-serial.race.mjs'), '--oracle', 'serial', '--schedule', 'lockstep'])
  assert.equal(orders.verdict, 'anomaly', orders.stderr)
  assert.match(orders.observed, /table orders differs from every serial order \(closest, s1 then s2: orders has \{"amount":42,"status":"pending","user_id":":user"\} besides its rows; s2 committed where it was rejected\)/)
  for (const file of ['withdraw-ledger-locked-serial.race.mjs', 'orders-locked-serial.race.mjs']) {
    const fixed = await runJson([at(file), '--oracle', 'serial', '--schedule', 'lockstep', '--expect', 'held'])
    assert.equal(fixed.code, 0, `${file}: ${fixed.observed} ${fixed.stderr}`)
    assert.match(fixed.observed, /^as s[12] then s[12], serially$/)
  }
})

test('SERIALIZABLE: the session that failed with 40001 stands for one that did not run, so every interleaving is a serial outcome (held)', async () => {
  const r = await explore([at('withdraw-ledger-serial.race.mjs'), '--oracle', 'serial', '--isolation', 'ser', '--expect', 'held'])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.j.violating, 0)
  assert.ok(r.j.every.some((x) => Object.values(x.outcomes).some((o) => /40001/.test(o))), 'some interleavings end with a 40001')
  const one = await runJson([at('withdraw-ledger-serial.race.mjs'), '--oracle', 'serial', '--isolation', 'ser', '--schedule', 'lockstep', '--expect', 'held'])
  assert.equal(one.code, 0, `${one.observed} ${one.stderr}`)
  assert.match(one.observed, /^as s[12] alone, serially$/)
})

test('a spec with no invariant line is judged by the oracle alone; beside an invariant both are judged', async () => {
  const spec = path.join(t.dir, 'no-invariant.spec')
  const text = fs.readFileSync(path.join(ROOT, 'examples', 'explore-orders.spec'), 'utf8')
  fs.writeFileSync(spec, text.split('\n').filter((l) => !/^(invariant|expect) /.test(l)).join('\n'))
  const both = await runJson([spec, '--oracle', 'serial', '--schedule', 's1.b1 s2.b2 s1.ins1 s2.ins2 s1.c1 s2.c2', '--expect', 'violated'])
  assert.equal(both.code, 0, both.stderr)
  assert.match(both.observed, /^table orders differs from every serial order/)
  const serial = await runJson([spec, '--oracle', 'serial', '--schedule', 's1.b1 s1.ins1 s1.c1 s2.b2 s2.ins2 s2.c2', '--expect', 'held'])
  assert.equal(serial.code, 0, serial.stderr)
  // The spec's own invariant beside the oracle: both say violated, each in its words.
  const beside = await runJson([path.join(ROOT, 'examples', 'explore-orders.spec'), '--oracle', 'serial', '--schedule', 's1.b1 s2.b2 s1.ins1 s2.ins2 s1.c1 s2.c2', '--expect', 'violated'])
  assert.equal(beside.code, 0, beside.stderr)
  assert.match(beside.observed, /^false; serial: table orders differs from every serial order/)
})

test('what a function returns is compared: both read the counter before either increments it, and both return 0', async () => {
  // The counter is incremented atomically (v = v + 1): its row ends at 2 in every order. Only the answers tell: one
  // at a time, the second call returns 1.
  const file = path.join(t.dir, 'ticket.race.mjs')
  fs.writeFileSync(
    file,
    `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table counter (v int not null)', 'insert into counter values (0)'],
  session: async (db) => {
    await db.query('begin')
    const { rows } = await db.query('select v from counter')
    await db.query('update counter set v = v + 1')
    await db.query('commit')
    return { ticket: rows[0].v }
  },
  expect: 'violated',
}
`,
  )
  const both = await runJson([file, '--oracle', 'serial', '--schedule', 'lockstep'])
  assert.equal(both.code, 0, both.stderr)
  assert.equal(both.verdict, 'anomaly')
  assert.match(both.observed, /returned \{"ticket":0\} where it was committed, returned \{"ticket":1\}/)
  const serial = await runJson([file, '--oracle', 'serial', '--schedule', 'serial', '--expect', 'held'])
  assert.equal(serial.code, 0, `${serial.observed} ${serial.stderr}`)
})

test("MariaDB: the run's database's tables are read (auto_increment left out, the user written :user)", async (t) => {
  const { conn, why } = await reachMysql()
  if (!conn) return t.skip(why)
  await conn.end()
  const file = at('orders-mariadb.race.mjs')
  const one = async (schedule: string, expect: string) => {
    const r = await race(['run', file, '--oracle', 'serial', '--n', '2', '--schedule', schedule, '--expect', expect, '--json'], { url: MYSQL_URL, timeoutMs: 120_000 })
    assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
    return { code: r.code, j: JSON.parse(r.stdout) as { verdict: string; invariant: { observed: string } } }
  }
  const both = await one('lockstep', 'violated')
  assert.equal(both.code, 0, both.j.invariant.observed)
  assert.match(both.j.invariant.observed, /^serial: table orders differs from every serial order \(closest, s1 then s2: orders has \{"amount":42,"status":"pending","user_id":":user"\} besides its rows; s2 committed where it was rejected\)$/)
  const serial = await one('serial', 'held')
  assert.equal(serial.code, 0, serial.j.invariant.observed)
  assert.match(serial.j.invariant.observed, /^serial: as s1 then s2, serially$/)
})

test('the API: run() and explore() take oracle: serial, and refuse a race with no invariant without it', async () => {
  const file = at('withdraw-ledger-serial.race.mjs')
  const r = await runApi(file, { databaseUrl: t.url, oracle: 'serial', schedule: 's1.q1 s2.q1 s1.q2 s2.q2 s1.q3 s2.q3 s1.q4 s1.q5 s2.q4 s2.q5' })
  assert.equal(r.verdict, 'anomaly', r.text)
  assert.equal(r.ok, true)
  await assert.rejects(runApi(file, { databaseUrl: t.url }), (e: unknown) => e instanceof RaceError && e.exitCode === 2 && /no invariant/.test(e.message))
  const e = await exploreApi(at('orders-locked-serial.race.mjs'), { databaseUrl: t.url, oracle: 'serial', expect: 'held', exhaustive: true })
  assert.equal(e.exitCode, 0)
  assert.equal(e.violating, 0)
  assert.equal(e.interleavings, 36)
})
