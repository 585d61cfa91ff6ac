// A step that sends several statements is one point per statement in race explore, and a NOWAIT / SKIP LOCKED that
// takes its transaction's snapshot gets a snapshot point before it (issue 38, H1a). On the old model (a step one
// indivisible point; the snapshot and the lock try one point) explore said HELD for examples/explore-split.spec and
// never showed the 40001 ending of examples/explore-nowait.spec, which free-running sessions give.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { exploreJson, useExploreServer } from '../support/explore.js'
import { race, ROOT } from '../support/server.js'

const t = useExploreServer('explore-split')

const ex = (f: string) => path.join(ROOT, 'examples', f)
const explore = (args: string[]) => exploreJson(t.url, t.admin, args)
const keys = (j: { groups: { key: string }[] }) => j.groups.map((g) => g.key).sort()

async function run(file: string, line: string): Promise<{ code: number | null; held: boolean | null; sessions: { name: string; sqlstate: string | null; step: string | null }[] }> {
  const r = await race(['run', file, '--schedule', line, '--json'], { url: t.url })
  assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
  const j = JSON.parse(r.stdout) as { invariant: { held: boolean | null }; sessions: { name: string; sqlstate: string | null; step: string | null }[] }
  return { code: r.code, held: j.invariant.held, sessions: j.sessions }
}

test('a step of two statements at READ COMMITTED: explore splits it, finds the commit between them, and the replay line violates', async () => {
  const file = ex('explore-split.spec')
  const reduced = await explore([file])
  assert.equal(reduced.code, 1, JSON.stringify(reduced.j.groups))
  assert.equal(reduced.j.complete, true)
  // s1: b1, c1, c1/2, e1; s2: i2 and its commit point: 6!/(4!2!) = 15 orders.
  assert.equal(reduced.j.orders, '15')
  const line = reduced.j.shortest!.line
  assert.match(line, /s1\.c1 s2\.i2 s2\.i2:commit s1\.c1\/2/)
  const exhaustive = await explore([file, '--exhaustive'])
  assert.equal(exhaustive.code, 1)
  assert.equal(exhaustive.j.interleavings, 15)
  assert.equal(exhaustive.j.violating, 3)
  assert.deepEqual(keys(reduced.j), keys(exhaustive.j), 'the reduced search finds the exhaustive groups')
  const again = await run(file, line)
  assert.equal(again.held, false, `the replay of ${line} violates`)
  assert.equal(again.code, 1)
  // A line that names the step whole runs it whole, as before: one snapshot for both counts.
  const whole = await run(file, 's1.b1 s1.c1 s2.i2 s1.e1')
  assert.equal(whole.held, true)
})

test('NOWAIT at REPEATABLE READ: a snapshot point before it, and the 40001 ending (reduced == exhaustive groups); its replay line gives 40001', async () => {
  const file = ex('explore-nowait.spec')
  const reduced = await explore([file])
  const exhaustive = await explore([file, '--exhaustive'])
  for (const x of [reduced, exhaustive]) assert.ok(x.j.groups.some((g) => /s1 40001/.test(g.key)), JSON.stringify(x.j.groups))
  assert.deepEqual(keys(reduced.j), keys(exhaustive.j))
  const g = exhaustive.j.groups.find((x) => /s1 40001/.test(x.key))!
  assert.ok(g.lines.every((l) => /s1\.l1:snapshot .*s2\.u2:commit.* s1\.l1 /.test(l)), g.lines.join('\n'))
  const again = await run(file, g.lines[0])
  assert.equal(again.sessions.find((s) => s.name === 's1')!.sqlstate, '40001')
  // Without the snapshot point (the step named whole), no order gives 40001: the statement's snapshot is after the commit.
  const whole = await run(file, 's1.b1 s2.u2 s2.u2:commit s1.l1 s1.c1')
  assert.equal(whole.sessions.find((s) => s.name === 's1')!.sqlstate, null)
})

test('a part that fails: the step\'s later statements are not sent, the session ends as the whole step would, and bad lines are refused', async () => {
  const dir = await fs.mkdtemp(path.join(ROOT, 'dist', 'split-'))
  const file = path.join(dir, 'fail.spec')
  await fs.writeFile(
    file,
    `setup { create table u (id int primary key); insert into u values (1); create table t (id serial primary key) }
invariant "nothing after the failed statement ran" { select count(*) = 0 from t }
expect held

session s1
step x1 { insert into u values (1); insert into t default values }

session s2
step y2 { insert into u values (2) }
`,
  )
  try {
    const { j } = await explore([file, '--exhaustive'])
    // x1 fails at its first point: x1/2 never runs (3 orders of s1.x1 against s2.y2 and its commit).
    assert.equal(j.interleavings, 3)
    for (const it of j.every) {
      assert.equal(it.held, true, it.line)
      assert.equal(it.outcomes.s1, '23505')
      assert.doesNotMatch(it.line, /x1\/2/)
    }
    const bad = await race(['run', ex('explore-split.spec'), '--schedule', 's1.b1 s1.c1/2 s1.c1 s2.i2 s1.e1'], { url: t.url })
    assert.equal(bad.code, 2)
    assert.match(bad.stderr.trim().split('\n').at(-1)!, /^race: s1\.c1\/2 must come after s1\.c1 /, bad.stderr)
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
})
