// A spec (and a .mjs module) as a race scenario, through the real CLI: templates with --n, invariants, expect
// lines, the nothing-outside-the-schema rule, bad spec files, and a user's module importing 'racelab'.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, ROOT, schemasOf, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let admin: Sql
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-spec-'))
const tag = randomBytes(4).toString('hex')
/** A schema of this test's own, outside any race run: what a spec must not touch. */
const outside = `race_test_outside_${tag}`

before(async () => {
  server = await useServer()
  admin = postgres(server.url, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create schema ${outside}; create table ${outside}.accounts (id int); insert into ${outside}.accounts values (1)`)
})
after(async () => {
  await admin.unsafe(`drop schema if exists ${outside} cascade`)
  await admin.end()
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

function file(name: string, text: string): string {
  const f = path.join(dir, name)
  fs.writeFileSync(f, text)
  return f
}

const ORDERS = path.join(ROOT, 'examples', 'orders.spec')
const FIXED = path.join(ROOT, 'examples', 'orders-fixed.spec')

test('a template session replicated by --n, the invariant violated as the expect line says: MATCH, exit 0', async () => {
  // Lockstep, so the race is certain: in a barrier run one session's insert and commit may come before another's
  // insert starts (seen with both cores busy), and then the invariant holds.
  const r = await race(['run', ORDERS, '--n', '4', '--schedule', 'lockstep', '--json'], { url: server.url })
  assert.equal(r.code, 0, r.stderr)
  const j = JSON.parse(r.stdout)
  const trial = j.trials?.[0] ?? j.representative ?? j
  const sessions = (trial.sessions ?? j.sessions) as { name: string; outcome: string }[]
  assert.deepEqual(
    sessions.map((s) => s.name),
    ['s1', 's2', 's3', 's4'],
  )
  assert.ok(sessions.every((s) => s.outcome === 'committed'))
  assert.match(r.stdout, /"held": false/)
  assert.deepEqual(await schemasOf(admin, r.pid), [], 'the run schema is dropped')
})

test('expect held on the fixed spec: MATCH; --expect held on the broken one: DEVIATION, exit 1', async () => {
  const fixed = await race(['run', FIXED, '--n', '5'], { url: server.url })
  assert.equal(fixed.code, 0, fixed.stdout + fixed.stderr)
  assert.match(fixed.stdout, /invariant {2}at most one open order for customer 1: observed true {2}HELD/)
  assert.match(fixed.stdout, /expected {3}held {2}MATCH/)
  // Lockstep, so the race is certain: a barrier run may not overlap, and then the broken spec holds.
  const broken = await race(['run', ORDERS, '--n', '3', '--schedule', 'lockstep', '--expect', 'held'], { url: server.url })
  assert.equal(broken.code, 1, broken.stdout + broken.stderr)
  assert.match(broken.stdout, /expected {3}held {2}DEVIATION/)
})

test('race check runs spec files in lockstep and exits 0 when each matches its expect line', async () => {
  // race check's table (case, outcomes / invariant, verdict): how the sessions ended, then the invariant under it.
  const r = await race(['check', ORDERS, FIXED], { url: server.url, env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /│ orders +│ 2 committed +│ anomaly MATCH +│\n│ +│ VIOLATED false +│ +│/)
  assert.match(r.stdout, /│ orders-fixed +│ 2 committed +│ serialized MATCH +│\n│ +│ HELD true +│ +│/)
})

test('several invariants must all hold; an undecidable one (NULL) exits 3; no expect line reports what happened', async () => {
  const two = file(
    'two.spec',
    `setup { create table t (id int) }
invariant "no rows" { select count(*) = 0 from t }
invariant "always" { select true }
session s1
step ins { insert into t values (1) }
`,
  )
  const r = await race(['run', two], { url: server.url })
  assert.equal(r.code, 0, 'without an expect line race reports what happened: ' + r.stderr)
  assert.match(r.stdout, /invariant {2}no rows; always: observed no rows false {2}VIOLATED/)
  const held = await race(['run', two, '--expect', 'violated'], { url: server.url })
  assert.equal(held.code, 0)
  const nul = file('null.spec', `setup { create table t (id int) }\ninvariant "undecided" { select null::bool }\nexpect held\nsession s1\nstep a { select 1 }\n`)
  const u = await race(['run', nul], { url: server.url })
  assert.equal(u.code, 3, u.stdout + u.stderr)
  assert.match(u.stderr, /could not decide/)
})

test('a permutation line is the default schedule, and a --schedule may name steps as the spec does', async () => {
  const perm = file(
    'perm.spec',
    `setup { create table acc (id int primary key, v int); insert into acc values (1, 0) }
invariant "both increments counted" { select v = 2 from acc }
expect held
session a
setup { begin isolation level repeatable read }
step a_inc { update acc set v = v + 1 }
step a_c { commit }
session b
setup { begin isolation level repeatable read }
step b_read { select v from acc }
step b_inc { update acc set v = v + 1 }
step b_c { commit }
permutation b_read a_inc a_c b_inc b_c
`,
  )
  const r = await race(['run', perm, '--json'], { url: server.url })
  assert.equal(r.code, 1, 'b fails with 40001 at REPEATABLE READ, so only one increment counts: ' + r.stderr)
  assert.match(r.stdout, /"schedule": "lockstep"/)
  assert.match(r.stdout, /"sqlstate": "40001"/)
  const serial = await race(['run', perm, '--schedule', 'a_inc a_c b_read b_inc b_c'], { url: server.url })
  assert.equal(serial.code, 0, serial.stdout + serial.stderr)
})

test('a setup that creates or writes anything outside race schema fails with one line and leaves no trace', async () => {
  const leak = `race_leak_${tag}`
  const creates = file('creates.spec', `setup { create table orders (id int); create table public.${leak} (id int) }\nsession s1\nstep a { select 1 }\n`)
  const writes = file('writes.spec', `setup { create table mine (id int); insert into ${outside}.accounts values (2) }\nsession s1\nstep a { select 1 }\n`)
  const alters = file('alters.spec', `setup { alter table ${outside}.accounts add column note text }\nsession s1\nstep a { select 1 }\n`)
  for (const [f, what] of [
    [creates, new RegExp(`setup block 1 creates table public\\.${leak}`)],
    [writes, new RegExp(`writes to ${outside}\\.accounts`)],
    [alters, new RegExp(`(locks or alters|changes table) ${outside}\\.accounts`)],
  ] as const) {
    for (const cmd of ['run', 'spec']) {
      // race spec guards its blocks in a schema of its own (--schema, or a role that may not create databases).
      const r = await race(cmd === 'spec' ? [cmd, f, '--schema'] : [cmd, f], { url: server.url })
      assert.equal(r.code, 2, `${cmd} ${f}: ${r.stdout}${r.stderr}`)
      const lines = r.stderr.trim().split('\n')
      assert.equal(lines.length, 1, r.stderr)
      // race run's setup runs as the run role (db/run-role.ts): the server refuses what the guard would have named.
      if (cmd === 'run' && /refused by the server/.test(lines[0])) {
        assert.match(lines[0], /setup block was refused by the server: .*\(42501 insufficient_privilege\): .*nothing outside it was changed$/)
      } else {
        assert.match(lines[0], what)
        assert.match(lines[0], /outside race's schema race_\w+: .*nothing was changed$/)
      }
      assert.deepEqual(await schemasOf(admin, r.pid), [], 'the run schema is gone too')
    }
  }
  assert.equal((await admin`select 1 from pg_class where relname = ${leak}`).length, 0, 'no table was created in public')
  assert.deepEqual([...(await admin.unsafe(`select id from ${outside}.accounts order by id`))].map((x) => x.id), [1], 'no row was written')
  const cols = await admin`select attname from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace where n.nspname = ${outside} and c.relname = 'accounts' and a.attnum > 0`
  assert.deepEqual(cols.map((x) => x.attname), ['id'], 'no column was added')
})

test('a setup that stays in race schema, reading outside it, runs', async () => {
  const reads = file('reads.spec', `setup { create table copy as select * from ${outside}.accounts }\ninvariant "copied" { select count(*) = 1 from copy }\nexpect held\nsession s1\nstep a { select 1 }\n`)
  const r = await race(['run', reads], { url: server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
})

test('bad spec files: one line with file:line:column and what was expected, exit 2, nothing run', async () => {
  const cases: [string, string, RegExp][] = [
    ['unterminated.spec', 'setup { create table t (id int);\nsession s1\n', /unterminated\.spec:1:7: unterminated sql block/],
    ['unknown.spec', 'session s1\nstep a { select 1 }\npermutation a b\n', /unknown\.spec:3:15: undefined step b in permutation/],
    ['duplicate.spec', 'session s1\nstep a { select 1 }\nsession s2\nstep a { select 2 }\n', /duplicate\.spec:4:6: duplicate step name a/],
    ['template.spec', 'session s*\nstep b { begin }\nsession x\nstep y { select 1 }\npermutation b y\n', /template\.spec:5:13: step b belongs to template session s\*/],
    ['noinv.spec', 'expect held\nsession s1\nstep a { select 1 }\n', /noinv\.spec:1:1: expect held needs an invariant line/],
  ]
  for (const [name, text, msg] of cases) {
    const f = file(name, text)
    for (const cmd of name === 'noinv.spec' ? ['run', 'show', 'check'] : ['run', 'show', 'check', 'spec']) {
      const r = await race([cmd, f], { url: server.url })
      assert.equal(r.code, 2, `${cmd} ${name}: ${r.stderr}`)
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
      assert.match(r.stderr, msg)
      assert.doesNotMatch(r.stderr, /\bat .*\.js:\d+/, 'no stack trace')
    }
  }
  const missing = await race(['run', path.join(dir, 'nope.spec')], { url: server.url })
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /nope\.spec: no such file/)
})

test("a .mjs module importing defineScenario from 'racelab' runs through the same contract, and is checked first", async () => {
  const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'race-mjs-'))
  try {
    fs.mkdirSync(path.join(proj, 'node_modules'))
    fs.symlinkSync(ROOT, path.join(proj, 'node_modules', 'racelab'))
    const body = (documented: string) => `import { defineScenario, step, replicate, anomaly, clean } from 'racelab'
export default defineScenario({
  id: 'coupon',
  title: 'a coupon redeemed twice',
  story: ['Each session reads the coupon and redeems it when it is unused.'],
  params: {},
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: 'read committed',
  setup: ['create table coupons (code text primary key, uses int)', "insert into coupons values ('X', 0)"],
  sessions: () => replicate(2, { steps: {
    begin: 'begin',
    read: "select uses from coupons where code = 'X'",
    redeem: step("update coupons set uses = uses + 1 where code = 'X'", { rejectIf: ({ prior }) => prior.read.uses > 0 && 'already used' }),
    commit: 'commit',
  } }),
  permutation: 's1.begin s2.begin s1.read s2.read s1.redeem s2.redeem s1.commit s2.commit',
  defaultSchedule: 'lockstep',
  invariant: { description: 'used at most once', sql: "select uses <= 1 as held, uses from coupons where code = 'X'" },
  documented: { postgres: {
    lockstep: anomaly('both read 0 before either writes', ${documented}),
    serial: clean('the second sees 1', { s1: 'committed', s2: 'rejected: already used' }),
  } },
})
`
    fs.writeFileSync(path.join(proj, 'coupon.mjs'), body(`{ s1: 'committed', s2: 'committed' }`))
    // Wide: the first line names the server by its URL, which wraps at 80 columns.
    const r = await race(['run', './coupon.mjs'], { url: server.url, cwd: proj, env: { COLUMNS: '200' } })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /race run coupon .* lockstep/)
    assert.match(r.stdout, /used at most once: observed uses=2 {2}VIOLATED/)
    assert.match(r.stdout, /expected {3}anomaly: s1 committed, s2 committed {2}MATCH/)
    const show = await race(['show', './coupon.mjs'], { cwd: proj })
    assert.equal(show.code, 0, show.stderr)
    assert.match(show.stdout, /^coupon: a coupon redeemed twice\nfrom the file \.\/coupon\.mjs/)
    fs.writeFileSync(path.join(proj, 'unsound.mjs'), body(`{ s1: 'committed', s9: 'committed' }`).replace("id: 'coupon'", "id: 'unsound'"))
    // Where racelab is not installed next to the module, its import resolves to the race running it.
    const bare = fs.mkdtempSync(path.join(os.tmpdir(), 'race-mjs-bare-'))
    try {
      fs.writeFileSync(path.join(bare, 'coupon.mjs'), body(`{ s1: 'committed', s2: 'committed' }`))
      const b = await race(['run', './coupon.mjs'], { url: server.url, cwd: bare, env: { COLUMNS: '200' } })
      assert.equal(b.code, 0, b.stdout + b.stderr)
      assert.match(b.stdout, /expected {3}anomaly: s1 committed, s2 committed {2}MATCH/)
    } finally {
      fs.rmSync(bare, { recursive: true, force: true })
    }
    const u = await race(['run', './unsound.mjs'], { url: server.url, cwd: proj })
    assert.equal(u.code, 2, u.stdout + u.stderr)
    assert.match(u.stderr, /unsound\.mjs: scenario unsound is not sound: lockstep: documents session 's9', which this variant does not have/)
  } finally {
    fs.rmSync(proj, { recursive: true, force: true })
  }
})
