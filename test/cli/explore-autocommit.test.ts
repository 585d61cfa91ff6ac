// Statements that commit by themselves overlap in real life: race explore runs each one, then its commit, as two
// points (issue 38). On the old model (a statement and its commit one indivisible step) every race here was
// "HELD in all", exit 0, while free-running trials of the same file violated. Each violation found is replayed with
// `race run --schedule` and violates again; each fix holds in every interleaving.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { exploreJson, useExploreServer } from '../support/explore.js'
import { race, ROOT } from '../support/server.js'

const t = useExploreServer('explore-autocommit')

const ex = (f: string) => path.join(ROOT, 'examples', f)
const explore = (args: string[]) => exploreJson(t.url, t.admin, args)

/** The replay command explore printed, run: its --schedule line, and the verdict of the trial it runs. */
async function replays(line: string, file: string): Promise<{ code: number | null; violated: boolean }> {
  const r = await race(['run', file, '--schedule', line, '--json'], { url: t.url })
  assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
  const j = JSON.parse(r.stdout) as { invariant: { held: boolean | null }; order?: string[] }
  return { code: r.code, violated: j.invariant.held === false }
}

for (const [file, search] of [
  ['autocommit.spec', []],
  ['autocommit.spec', ['--exhaustive']],
  ['app/insert-if-absent.race.mjs', []],
  ['app/insert-if-absent-fn.race.mjs', []],
] as const) {
  test(`two autocommit statements overlap: ${file} ${search.join(' ') || '(default search)'} is VIOLATED, and its replay line violates`, async () => {
    const { code, j } = await explore([ex(file), ...search])
    assert.equal(code, 1, JSON.stringify(j.groups))
    assert.equal(j.complete, true)
    // Of the 6 orders of two statements and their commits, 4 put both statements before either commit.
    assert.equal(j.interleavings, 6)
    assert.equal(j.violating, 4)
    assert.ok(j.shortest, 'a shortest violation')
    assert.match(j.shortest!.line, /^s\d\.\w+ s\d\.\w+ s\d\.\w+:commit s\d\.\w+:commit$/)
    assert.deepEqual((j as unknown as { autocommit: { split: string[] } }).autocommit.split.length, 2)
    const again = await replays(j.shortest!.line, ex(file))
    assert.equal(again.violated, true, `the replay of ${j.shortest!.line} violates`)
    assert.equal(again.code, 1)
  })
}

for (const file of ['autocommit-fixed.spec', 'app/insert-if-absent-unique.race.mjs', 'app/insert-if-absent-locked.race.mjs']) {
  test(`the fix holds in every interleaving, commit points included: ${file}`, async () => {
    const { code, j } = await explore([ex(file)])
    assert.equal(code, 0, JSON.stringify(j.groups))
    assert.equal(j.violating, 0)
    assert.equal(j.unknown, 0)
    assert.equal(j.complete, true)
  })
}

test('postgres.js: a tagged-template statement outside a transaction is split too (race\'s BEGIN and COMMIT are not gated as its queries)', async () => {
  const auto = await import('node:fs/promises').then((fs) => fs.mkdtemp(path.join(ROOT, 'dist', 'ac-')))
  const file = path.join(auto, 'pj.race.mjs')
  await import('node:fs/promises').then((fs) =>
    fs.writeFile(
      file,
      `export default { driver: 'postgres', sessions: 2, expect: 'held',
  setup: ['create table t (id serial primary key, k int not null)'],
  invariant: 'select count(*) <= 1 from t where k = 1',
  session: async (sql) => { await sql\`insert into t (k) select 1 where not exists (select 1 from t where k = 1)\` } }
`,
    ),
  )
  try {
    const r = await explore([file])
    assert.equal(r.code, 1, JSON.stringify(r.j.groups))
    assert.equal(r.j.interleavings, 6)
    assert.equal(r.j.violating, 4)
    assert.equal(r.j.unknown, 0)
  } finally {
    await import('node:fs/promises').then((fs) => fs.rm(auto, { recursive: true, force: true }))
  }
})

test('a statement PostgreSQL refuses inside a transaction block (VACUUM, 25001) stays one point, and the report says so', async () => {
  const fs = await import('node:fs/promises')
  const dir = await fs.mkdtemp(path.join(ROOT, 'dist', 'ac-'))
  const file = path.join(dir, 'vacuum.spec')
  await fs.writeFile(
    file,
    `setup { create table t (k int) }
invariant "at most one row" { select count(*) <= 1 from t }
session s1
step v1 { vacuum t }
step i1 { insert into t select 1 where not exists (select 1 from t) }
session s2
step i2 { insert into t select 1 where not exists (select 1 from t) }
`,
  )
  try {
    const { j } = await explore([file, '--exhaustive', '--expect', 'violated'])
    const ac = (j as unknown as { autocommit: { split: string[]; indivisible: string[] } }).autocommit
    assert.deepEqual(ac.indivisible, ['s1.v1'])
    assert.deepEqual(ac.split, ['s1.i1', 's2.i2'])
    assert.equal(j.unknown, 0, JSON.stringify(j.groups))
    assert.ok(j.violating > 0)
    // Counted as it runs: VACUUM one point, each insert two.
    assert.equal(j.orders, '10')
    const text = await race(['explore', file, '--exhaustive'], { url: t.url })
    assert.match(text.stdout, /s1\.v1 ran as one point:\s+PostgreSQL\s+refuses\s+it\s+inside\s+a\s+transaction\s+block\s+\(25001\)/)
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
})

test('a spec step that is a whole transaction (begin; ...; commit) runs, then commits, as two points: the check-then-insert overlaps', async () => {
  const fs = await import('node:fs/promises')
  const dir = await fs.mkdtemp(path.join(ROOT, 'dist', 'ac-'))
  const file = path.join(dir, 'whole.spec')
  await fs.writeFile(
    file,
    `setup { create table t (k int) }
invariant "at most one row" { select count(*) <= 1 from t }
expect held
session s1
step w1 { begin; insert into t select 1 where not exists (select 1 from t); commit }
session s2
step w2 { begin; insert into t select 1 where not exists (select 1 from t); commit }
`,
  )
  try {
    // On the old model each step was one point: HELD in both orders.
    const { code, j } = await explore([file, '--exhaustive'])
    assert.equal(code, 1, JSON.stringify(j.groups))
    assert.equal(j.interleavings, 6)
    assert.equal(j.violating, 4)
    assert.match(j.shortest!.line, /^s\d\.w\d s\d\.w\d s\d\.w\d:commit s\d\.w\d:commit$/)
    const again = await replays(j.shortest!.line, file)
    assert.equal(again.violated, true)
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
})
