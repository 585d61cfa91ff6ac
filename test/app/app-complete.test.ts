// Issue 39, "Every verdict earned", items 4 and 7. An injection that never happened is said, never a silent pass, and
// --json says what was injected where. A race that says every session must complete (a race module's mustComplete,
// a spec's `every session completes` line) fails when a session ends with an error, the server's prevention
// included: in race run, race explore and race explore --isolation. Against a real server (DATABASE_URL, else
// embedded PostgreSQL).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { race, useLab } from '../support/server.js'

const ctx = useLab()

let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-complete-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function moduleFile(name: string, body: string): string {
  const file = path.join(dir, name)
  fs.writeFileSync(file, body)
  return file
}

// Wide lines: a report's sentence is matched whole.
const cli = (args: string[]) => race(args, { url: ctx.server.url, timeoutMs: 300_000, env: { COLUMNS: '400' } })

// ---- item 4: an injection that never happened ----------------------------------------------------------------------

/** Each session books a seat in a transaction of three queries: begin, insert, commit (or, never committing, rollback). */
const BOOK = (commit: boolean) => `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table seats (id serial primary key, who text not null)'],
  session: async (db, ctx) => {
    await db.query('begin')
    await db.query('insert into seats (who) values ($1)', [ctx.session])
    await db.query('${commit ? 'commit' : 'rollback'}')
  },
  invariant: 'select count(*) <= 2 from seats',
  expect: 'held',
}
`

test('item 4: --inject at a query no session reaches is no pass: exit 3, one line naming it; --json counts each fault', async () => {
  const file = moduleFile('book.race.mjs', BOOK(true))
  const r = await cli(['explore', file, '--inject', '40001@9', '--json'])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stderr, /^race: --inject 40001@9 never fired: no session sent a 9th query \(q9\) in any of the \d+ runs/m)
  assert.doesNotMatch(r.stderr, /could not decide/)
  const j = JSON.parse(r.stdout)
  assert.equal(j.violating, 0)
  assert.equal(j.unknown, 0)
  assert.deepEqual(j.injections, [{ fault: '40001@9', runs: 0, offered: 0 }])
  assert.equal(j.notFired.length, 1)
  assert.equal(j.matched, false)
  // The report says it too, in its own words.
  const text = await cli(['explore', file, '--inject', '40001@9'])
  assert.equal(text.code, 3)
  assert.match(text.stdout, /--inject 40001@9 never fired/)
  assert.doesNotMatch(text.stdout, /\bMATCH\b/)
})

test('item 4: --inject 40001@commit on code that never commits is no pass; one that fires is counted and placed', async () => {
  const never = moduleFile('autocommit.race.mjs', BOOK(false))
  const r = await cli(['explore', never, '--inject', '40001@commit', '--json'])
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stderr, /--inject 40001@commit never fired: no session sent a COMMIT in any of the \d+ runs/)
  // Given twice, one fires and the other is unknown: each fault as given, in order.
  const file = moduleFile('book2.race.mjs', BOOK(true))
  const both = await cli(['explore', file, '--inject', '40P01@2,40001@7', '--json'])
  assert.equal(both.code, 3, both.stdout + both.stderr)
  const j = JSON.parse(both.stdout)
  assert.equal(j.injections.length, 2)
  assert.equal(j.injections[0].fault, '40P01@2')
  assert.ok(j.injections[0].runs > 0 && j.injections[0].offered >= j.injections[0].runs, JSON.stringify(j.injections))
  assert.deepEqual(j.injections[1], { fault: '40001@7', runs: 0, offered: 0 })
  // Where it was injected, per interleaving: the query its line marks.
  const hit = j.every.find((x: { line: string }) => x.line.includes('!40P01'))
  const at = hit.line.split(' ').find((t: string) => t.endsWith('!40P01')).replace(/!40P01$/, '')
  assert.deepEqual(hit.injected, [{ fault: '40P01@2', at }])
  assert.equal(j.every.filter((x: { injected?: unknown }) => x.injected).length, j.injections[0].runs)
})

test('item 4: a query past maxQueries is refused before anything runs (exit 2); --isolation: a level whose fault never fired is not safe', async () => {
  const file = moduleFile('book3.race.mjs', BOOK(true))
  const r = await cli(['explore', file, '--inject', '40001@101'])
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  assert.match(r.stderr, /--inject 40001@101: a session's function sends at most 100 queries/)
  const lv = await cli(['explore', file, '--isolation', 'rc,ser', '--inject', '40001@9', '--json'])
  assert.equal(lv.code, 3, lv.stdout + lv.stderr)
  const j = JSON.parse(lv.stdout)
  assert.equal(j.weakestSafe, null)
  for (const row of j.levels) {
    assert.equal(row.violating, 0)
    assert.equal(row.complete, false)
    assert.match(row.notFired[0], /^--inject 40001@9 never fired/)
  }
  assert.match(lv.stderr, /at read committed: --inject 40001@9 never fired/)
})

// ---- item 7: every session must complete ----------------------------------------------------------------------------

/**
 * A withdrawal whose retry loop looks for the wrong code (an ORM's own, as a Prisma loop looks for P2034 while the
 * adapter throws the driver's 40001): a serialization failure is never retried, and the caller gets the error.
 * `shape` says what the code does with it: throw it, answer 503 after rolling back, or (the right loop) retry. `lock`:
 * the read locks the row (FOR UPDATE), so at read committed nothing is lost.
 */
const WITHDRAW = (o: { must?: boolean; shape: 'throw' | 'answer' | 'retry'; lock?: boolean }) => `class Declined extends Error {}
async function withdraw(db, amount) {
  for (let tries = 1; ; tries++) {
    await db.query('begin')
    try {
      const { rows } = await db.query('select balance from accounts where id = 1${o.lock ? ' for update' : ''}')
      if (rows[0].balance < amount) { await db.query('rollback'); throw new Declined('insufficient funds') }
      await db.query('update accounts set balance = $1, withdrawn = withdrawn + $2 where id = 1', [rows[0].balance - amount, amount])
      await db.query('commit')
      return 'ok'
    } catch (e) {
      if (e instanceof Declined) throw e
      await db.query('rollback')
      ${o.shape === 'retry' ? "if (e.code === '40001' && tries < 5) continue" : "if (e.code === 'RETRY_ME' && tries < 5) continue"}
      ${o.shape === 'answer' ? "return { status: 503 }" : 'throw e'}
    }
  }
}
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table accounts (id int primary key, balance int not null, withdrawn int not null)', 'insert into accounts values (1, 100, 0)'],
  session: (db) => withdraw(db, 30),
  rejects: [Declined],
  invariant: 'select balance = 100 - withdrawn and balance >= 0 from accounts where id = 1',
  expect: 'held',${o.must ? '\n  mustComplete: true,' : ''}
}
`

/** s1 runs alone (begin, select, update, commit), its COMMIT (q4) failed by race with 40001, its rollback; then s2. */
const S1_FAILS = 's1.q1 s1.q2 s1.q3 s1.q4!40001 s1.q5 s2.q1 s2.q2 s2.q3 s2.q4'

test('item 7: race run: a 40001 the loop did not retry is a failure where every session must complete (exit 1, naming it); a pass without the field', async () => {
  const loose = moduleFile('w-loose.race.mjs', WITHDRAW({ shape: 'throw' }))
  const plain = await cli(['run', loose, '--schedule', S1_FAILS, '--json'])
  assert.equal(plain.code, 0, plain.stdout + plain.stderr)
  const must = moduleFile('w-must.race.mjs', WITHDRAW({ must: true, shape: 'throw' }))
  const r = await cli(['run', must, '--schedule', S1_FAILS, '--json'])
  assert.equal(r.code, 1, r.stdout + r.stderr)
  const j = JSON.parse(r.stdout)
  assert.equal(j.matched, false)
  assert.equal(j.invariant.held, true)
  assert.match(j.deviations[0], /^every session must complete, but s1 failed with 40001 serialization_failure in step q\d/)
  const text = await cli(['run', must, '--schedule', S1_FAILS])
  assert.equal(text.code, 1)
  assert.match(text.stdout, /DEVIATION/)
  assert.match(text.stdout, /every session must complete, but s1 failed with 40001/)
})

test('item 7: race run: returning an answer after a 40001 it did not retry is no completion; a loop that retries completes', async () => {
  const answer = moduleFile('w-answer.race.mjs', WITHDRAW({ must: true, shape: 'answer' }))
  const r = await cli(['run', answer, '--schedule', S1_FAILS, '--json'])
  assert.equal(r.code, 1, r.stdout + r.stderr)
  const j = JSON.parse(r.stdout)
  assert.equal(j.sessions[0].unrecovered, '40001 serialization_failure in q4 (injected by race)')
  assert.match(j.deviations[0], /^every session must complete, but s1 was rejected \(rolled back and returned.*503.*\) after 40001 serialization_failure in q4 \(injected by race\), which it did not retry/)
  // The loop that retries on 40001 begins again: both withdrawals commit, and the race passes.
  const retry = moduleFile('w-retry.race.mjs', WITHDRAW({ must: true, shape: 'retry' }))
  const ok = await cli(['run', retry, '--schedule', 's1.q1 s1.q2 s1.q3 s1.q4!40001 s1.q5 s1.q6 s1.q7 s1.q8 s1.q9', '--json'])
  assert.equal(ok.code, 0, ok.stdout + ok.stderr)
  assert.deepEqual(JSON.parse(ok.stdout).sessions.map((x: { outcome: string }) => x.outcome), ['committed', 'committed'])
})

test('item 7: race explore --inject: the interleavings where a session did not complete are FAILED, exit 1 under expect held', async () => {
  const loose = moduleFile('we-loose.race.mjs', WITHDRAW({ shape: 'throw', lock: true }))
  const plain = await cli(['explore', loose, '--inject', '40001@commit', '--json'])
  assert.equal(plain.code, 0, plain.stdout.slice(0, 2000) + plain.stderr)
  const must = moduleFile('we-must.race.mjs', WITHDRAW({ must: true, shape: 'throw', lock: true }))
  const r = await cli(['explore', must, '--inject', '40001@commit', '--json'])
  assert.equal(r.code, 1, r.stdout.slice(0, 2000) + r.stderr)
  const j = JSON.parse(r.stdout)
  assert.equal(j.violating, 0)
  assert.ok(j.incomplete > 0, String(j.incomplete))
  assert.equal(j.incomplete, j.every.filter((x: { line: string }) => x.line.includes('!40001')).length)
  const failed = j.groups.filter((g: { key: string }) => g.key.startsWith('FAILED'))
  assert.ok(failed.length > 0, JSON.stringify(j.groups.map((g: { key: string }) => g.key)))
  const text = await cli(['explore', must, '--inject', '40001@commit'])
  assert.equal(text.code, 1)
  assert.match(text.stdout, /FAILED in \d+ of \d+ interleavings: a session did not complete, and every session must \(s\d failed with 40001 serialization_failure in step q\d\)/)
  assert.doesNotMatch(text.stdout, /\bMATCH\b/)
})

test('item 7: --isolation: a level where a session fails with 40001 is not safe when every session must complete', async () => {
  // A read, then a write of what it read: lost at read committed, 40001 at repeatable read and serializable.
  const loose = moduleFile('wl-loose.race.mjs', WITHDRAW({ shape: 'throw' }))
  const plain = await cli(['explore', loose, '--isolation', 'rc,rr', '--json'])
  assert.equal(plain.code, 0, plain.stdout.slice(0, 2000) + plain.stderr)
  assert.equal(JSON.parse(plain.stdout).weakestSafe, 'repeatable read')
  const must = moduleFile('wl-must.race.mjs', WITHDRAW({ must: true, shape: 'throw' }))
  const r = await cli(['explore', must, '--isolation', 'rc,rr', '--json'])
  const j = JSON.parse(r.stdout)
  assert.equal(j.weakestSafe, null, r.stdout.slice(0, 2000))
  const rr = j.levels.find((x: { isolation: string }) => x.isolation === 'repeatable read')
  assert.equal(rr.violating, 0)
  assert.ok(rr.incomplete > 0)
  assert.match(rr.failure, /failed with 40001 serialization_failure/)
  const text = await cli(['explore', must, '--isolation', 'rc,rr'])
  assert.match(text.stdout, /not safe at repeatable read: every session must complete/)
  assert.match(text.stdout, /weakest level at which every interleaving held: none/)
})

test('item 7: a spec\'s `every session completes` line: a session failing with 40001 fails the run (exit 1); without it, prevented', async () => {
  const body = (line: string) => `setup { create table acct (id int primary key, balance int not null) }
setup { insert into acct values (1, 100) }
invariant "never negative" { select balance >= 0 from acct where id = 1 }
expect held
${line}
session s1
step b1 { begin isolation level serializable }
step r1 { select balance from acct where id = 1 }
step w1 { update acct set balance = balance - 60 where id = 1 }
step c1 { commit }
session s2
step b2 { begin isolation level serializable }
step r2 { select balance from acct where id = 1 }
step w2 { update acct set balance = balance - 30 where id = 1 }
step c2 { commit }
permutation b1 r1 b2 r2 w1 c1 w2 c2
`
  const loose = moduleFile('skew.spec', body(''))
  const plain = await cli(['run', loose, '--json'])
  assert.equal(plain.code, 0, plain.stdout + plain.stderr)
  assert.equal(JSON.parse(plain.stdout).verdict, 'prevented')
  const must = moduleFile('skew-must.spec', body('every session completes'))
  const r = await cli(['run', must, '--json'])
  assert.equal(r.code, 1, r.stdout + r.stderr)
  assert.match(JSON.parse(r.stdout).deviations[0], /^every session must complete, but s2 failed with 40001 serialization_failure in step w2/)
  const ex = await cli(['explore', must, '--json'])
  assert.equal(ex.code, 1, ex.stdout.slice(0, 2000) + ex.stderr)
  assert.ok(JSON.parse(ex.stdout).incomplete > 0)
})
