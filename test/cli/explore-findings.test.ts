// Issue 39, items 8 and 9, through the real CLI on a real server. The code under test failing in some interleavings
// is a finding: its own group naming the error, the shortest failing schedule as a line race run replays to the same
// error, exit 1 under expect held (not "could not decide", exit 3). And a search that is stopped (--run-timeout,
// SIGTERM, Ctrl-C) keeps what it found: the groups so far, the shortest violation's replay line, complete: false; a
// violation found under expect held is exit 1 for a timeout, and a signal's own exit code (143, 130) for a signal.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { type Explored, useExploreServer } from '../support/explore.js'
import { oneCleanLine } from '../support/faults.js'
import { spawnRace, until } from '../support/procs.js'
import { race, schemasOf } from '../support/server.js'

const t = useExploreServer('explore-findings')

const explore = t.explore

type Found = Explored & { failed: number; shortestFailure: { line: string; failure: string } | null; failureReplay: string | null; stopped?: string; every: (Explored['every'][number] & { failure?: string })[] }

function file(name: string, body: string): string {
  const f = path.join(t.dir, name)
  fs.writeFileSync(f, body)
  return f
}

/** A printed replay line (race run FILE ... --schedule "..."), run as printed with --json: its exit code and report. */
async function replayed(line: string): Promise<{ code: number | null; verdict: string; why: string }> {
  const m = /^race run (\S+) (.*)--schedule "([^"]+)"$/.exec(line)
  assert.ok(m, line)
  const r = await race(['run', m[1], ...m[2].split(' ').filter(Boolean), '--schedule', m[3], '--json'], { url: t.url, timeoutMs: 120_000 })
  assert.deepEqual(await schemasOf(t.admin, r.pid), [])
  const j = JSON.parse(r.stdout) as { verdict: string; why: string }
  return { code: r.code, verdict: j.verdict, why: j.why }
}

const TABLE = 'create table orders (id bigserial primary key, user_id text not null, status text not null)'

/** The review's f1: a typo'd table (ordrs) whose 42P01 every session catches, rolls back and returns from. */
const SWALLOW = `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['${TABLE}'],
  session: async (db, ctx) => {
    try {
      await db.query('begin')
      const { rows } = await db.query('select count(*)::int as n from ordrs where user_id = $1', [ctx.user])
      if (rows[0].n === 0) await db.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user])
      await db.query('commit')
    } catch (e) {
      await db.query('rollback')
    }
  },
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
`

test('item 8: an application race whose code swallows a 42P01 is a failure group naming it, with a replay line; exit 1 under expect held', async () => {
  const f = file('swallow.race.mjs', SWALLOW)
  const { code, j: raw, stderr } = await explore([f])
  const j = raw as Found
  assert.equal(code, 1, stderr)
  assert.equal(j.exitCode, 1)
  assert.equal(j.failed, j.interleavings)
  assert.ok(j.interleavings > 1)
  assert.deepEqual(
    j.groups.map((g) => [g.key, g.count]),
    [['FAILED failed: s1 42P01 undefined_table, s2 42P01 undefined_table', j.interleavings]],
  )
  assert.doesNotMatch(stderr, /could not decide/)
  // The shortest failing schedule, as a line race run replays to the same error (there: unknown, naming it).
  assert.equal(j.shortestFailure?.failure, 's1 42P01 undefined_table, s2 42P01 undefined_table')
  assert.match(j.failureReplay!, /^race run \S+swallow\.race\.mjs --schedule "s\d\.q1 /)
  const again = await replayed(j.failureReplay!)
  assert.equal(again.code, 3)
  assert.equal(again.verdict, 'unknown')
  assert.match(again.why, /caught 42P01 undefined_table/)
  // The text report says the same: the group, and the replay line under "shortest in which the code failed".
  const text = await race(['explore', f], { url: t.url, timeoutMs: 120_000 })
  assert.equal(text.code, 1, text.stderr)
  assert.match(text.stdout, /FAILED failed: s1 42P01 undefined_table, s2 42P01 undefined_table/)
  assert.match(text.stdout, /\nshortest in which the code failed \(/)
  assert.match(text.stdout, /\n  race run \S+swallow\.race\.mjs (\\\n\s+)?--schedule "s\d\.q1 /)
})

test('item 8: a spec whose step fails with an undocumented SQLSTATE in some interleavings: FAILED there, HELD elsewhere, the replay fails the same way', async () => {
  // s2 divides by the number of flags: 22012 division_by_zero exactly when s1's insert has not committed before it.
  const spec = file(
    'divide.spec',
    `setup { create table flag (id int) }
invariant "at most one flag" { select count(*) <= 1 from flag }
expect held

session s1
step ins { insert into flag values (1) }

session s2
step chk { select 1 / (select count(*)::int from flag) }
`,
  )
  const { code, j: raw, stderr } = await explore([spec, '--exhaustive'])
  const j = raw as Found
  assert.equal(code, 1, stderr)
  assert.doesNotMatch(stderr, /could not decide/)
  assert.ok(j.failed > 0 && j.failed < j.interleavings, `${j.failed} of ${j.interleavings}`)
  // Failed exactly when s2's check runs before s1's insert commits (worked out by hand).
  for (const it of j.every) {
    const at = (x: string) => it.line.split(' ').indexOf(x)
    const early = at('s2.chk') < at('s1.ins:commit')
    assert.equal(it.failure, early ? 's2 22012' : undefined, it.line)
    assert.equal(it.held, true)
  }
  assert.equal(j.groups[0].key, 'FAILED failed: s2 22012')
  assert.equal(j.groups[0].count, j.failed)
  const again = await replayed(j.failureReplay!)
  assert.equal(again.code, 3)
  assert.match(again.why, /s2 failed with 22012/)
})

/**
 * A check-then-insert that violates in some interleavings; from its 7th call on (the 4th trial) its function never
 * returns, so the search cannot end by itself; it writes `mark` when it stops there. Its sessions share the count (sharedState).
 */
function hanging(name: string): { file: string; mark: string } {
  const mark = path.join(t.dir, `${name}.hung`)
  return {
    mark,
    file: file(
      `${name}.race.mjs`,
      `import fs from 'node:fs'
let calls = 0
export default {
  driver: 'pg',
  sessions: 2,
  // The count of calls is the process's, across sessions: they share it (each in a worker of its own, each would count its own).
  sharedState: true,
  setup: ['${TABLE}'],
  session: async (db) => {
    if (++calls > 6) {
      fs.writeFileSync(${JSON.stringify(mark)}, String(calls))
      await new Promise(() => {})
    }
    await db.query('begin')
    const { rows } = await db.query("select count(*)::int as n from orders where user_id = 'u1'")
    if (rows[0].n === 0) await db.query("insert into orders (user_id, status) values ('u1', 'pending')")
    await db.query('commit')
  },
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
`,
    ),
  }
}

/** What every stopped search's --json says: not complete, the three runs made, a violation among them and its replay. */
async function keptWhatItFound(j: Found, stopped: string): Promise<void> {
  assert.equal(j.stopped, stopped)
  assert.equal(j.complete, false)
  assert.equal(j.runs, 3)
  assert.ok(j.violating >= 1, JSON.stringify(j.groups))
  assert.ok(j.groups.some((g) => g.key.startsWith('VIOLATED')))
  assert.equal(j.exitCode, 1)
  assert.match(j.replay!, /--schedule "s1\.q1 /)
  const again = await replayed(j.replay!)
  assert.equal(again.verdict, 'anomaly')
}

test('item 9: --run-timeout stops a search that found a violation: the report keeps it, complete false, exit 1 (not 3)', async () => {
  const h = hanging('timeout')
  const { code, j, stderr } = await explore([h.file, '--run-timeout', '20s', '--step-timeout', '600s'])
  assert.equal(code, 1, stderr)
  await keptWhatItFound(j as Found, 'run-timeout')
  oneCleanLine(stderr, /did not finish within --run-timeout 20s[^\n]*: stopped after 3 runs; what it found \(\d+ violating interleavings\) is in the report/)
})

for (const [sig, exit, json] of [
  ['SIGTERM', 143, true],
  ['SIGINT', 130, false],
] as const) {
  test(`item 9: ${sig} stops a search that found a violation: the report (${json ? '--json' : 'text'}) keeps it; exit ${exit}, one line`, async () => {
    const h = hanging(sig)
    const child = spawnRace(['explore', h.file, '--step-timeout', '600s', ...(json ? ['--json'] : [])], t.url, 120_000)
    // The search is in its fourth trial, whose functions never return: three runs are in.
    await until('the fourth trial', () => fs.existsSync(h.mark), 60_000)
    child.child.kill(sig)
    const r = await child.done
    assert.equal(r.code, exit, r.stdout + r.stderr)
    oneCleanLine(r.stderr, new RegExp(`interrupted by ${sig}: stopped, cleaned up`))
    assert.deepEqual(await schemasOf(t.admin, child.child.pid!), [])
    if (json) await keptWhatItFound(JSON.parse(r.stdout) as Found, sig)
    else {
      assert.match(r.stdout, new RegExp(`stopped \\(${sig}\\) after 3 runs`))
      assert.match(r.stdout, /VIOLATED in \d+ of the 3 interleavings run/)
      assert.match(r.stdout, /\nshortest violating \(/)
      assert.match(r.stdout, /\n  race run \S+SIGINT\.race\.mjs (\\\n\s+)?--schedule "s1\.q1 /)
    }
  })
}
