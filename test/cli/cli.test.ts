// The real CLI as a user runs it: bad input, unreachable servers, --json, --keep, timeouts and cleanup.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { advisoryKey } from '../../src/scenario.js'
import { checkCases } from '../../src/run/check.js'
import { race } from '../support/server.js'
import { leftBy, oneCleanLine, outside, useOutside } from '../support/faults.js'
import { spawnRace, until } from '../support/procs.js'

const ctx = useOutside()

const BAD: [string[], RegExp][] = [
  [['run', 'advisroy'], /unknown scenario 'advisroy': did you mean 'advisory'/],
  [['run', 'nope'], /unknown scenario 'nope'/],
  [['run', 'advisory', '--n', 'abc'], /--n must be a whole number/],
  [['run', 'advisory', '--n', '0'], /--n must be at least 1/],
  [['run', 'advisory', '--n', '-3'], /--n/],
  [['run', 'advisory', '--n', '2.5'], /--n must be a whole number/],
  [['run', 'advisory', '--n', ''], /--n must be a whole number/],
  [['run', 'advisory', '--max-pending', '0'], /--max-pending must be at least 1/],
  [['run', 'advisory', '--max-pending', 'many'], /--max-pending must be a whole number/],
  [['run', 'advisory', '--window', '3x'], /--window takes a duration/],
  [['run', 'advisory', '--window', '1y'], /--window takes a duration/],
  [['run', 'advisory', '--window', '-5s'], /--window/],
  [['run', 'advisory', '--window', '9999999999ms'], /--window must be at most 60m/],
  [['run', 'advisory', '--lock-timeout', 'forever'], /--lock-timeout takes a duration/],
  [['run', 'advisory', '--step-timeout', '0s'], /--step-timeout must be longer than 0/],
  [['run', 'advisory', '--trials', '0'], /--trials must be at least 1/],
  [['run', 'advisory', '--schedule', 'foo'], /unknown schedule 'foo'/],
  [['run', 'broken', '--schedule', 's1.begin s3.check'], /names session 's3'/],
  [['run', 'broken', '--schedule', 's1.begin s1.nope'], /has no step 'nope'/],
  [['run', 'broken', '--schedule', 's1.begin s1.begin'], /appears twice/],
  [['run', 'broken', '--schedule', 's1.begin s2.begin s1.check'], /leaves out/],
  [['run', 'broken', '--max-pending', '3'], /--max-pending does not apply to broken/],
  [['run', 'advisory', '--expect', 'maybe'], /--expect takes held or violated/],
  [['run', 'advisory', '--user', "x'; drop table users; --"], /--user takes a uuid/],
  [['run', 'limit-lock', '--database-url', 'mysql://u:secret@h/db'], /limit-lock is not available on MySQL\/MariaDB/],
  [['run', 'advisory', '--database-url', 'postgres://u:secret@h:99999/db'], /not a valid URL/],
  [['run', 'advisory', '--database-url', 'postgres://u:secret@h:abc/db'], /not a valid URL/],
  [['run', 'advisory', '--database-url', ''], /is empty/],
  [['run', 'advisory', '--database-url', 'http://u:secret@h/db'], /scheme 'http'/],
  [['run', 'advisory', '--bogus'], /unknown option '--bogus'/],
  [['frobnicate'], /unknown command 'frobnicate'/],
  [['run'], /missing required argument 'scenario'/],
  [['show', 'ünïcödé"; select 1'], /unknown scenario/],
  [['check', 'broken', 'nope'], /unknown scenario 'nope'/],
  [['run', 'advisory', '--isolation', 'chaos'], /--isolation|unknown option/],
]

test('bad input: one line naming the problem, exit 2, no stack trace, no password', async () => {
  for (const [args, msg] of BAD) {
    const r = await race(args, { url: ctx.server.url })
    assert.equal(r.code, 2, `${args.join(' ')} → ${r.code}: ${r.stderr}`)
    assert.match(r.stderr, msg, args.join(' '))
    oneCleanLine(r.stderr)
    assert.doesNotMatch(r.stderr, /secret/, 'password masked')
    assert.equal(r.stdout, '')
  }
})

test('DATABASE_URL that is not a URL is bad input too', async () => {
  const r = await race(['run', 'advisory'], { env: { DATABASE_URL: 'postgres://u:secret@h:0x/db' } })
  assert.equal(r.code, 2)
  assert.match(r.stderr, /DATABASE_URL/)
  assert.doesNotMatch(r.stderr, /secret/)
})

test('an unreachable server or a failed login: one line, password masked, exit 3, within the connect timeout', async () => {
  const t0 = Date.now()
  const r = await race(['run', 'advisory', '--database-url', 'postgres://u:secret@127.0.0.1:1/db', '--connect-timeout', '2s'])
  assert.equal(r.code, 3)
  assert.match(r.stderr, /could not connect to postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/db: connection refused/)
  oneCleanLine(r.stderr)
  assert.ok(Date.now() - t0 < 5000)
  const bad = new URL(ctx.server.url)
  bad.username = 'no_such_role_race'
  bad.password = 'secret'
  const login = await race(['run', 'advisory', '--database-url', bad.toString()])
  assert.equal(login.code, 3)
  assert.match(login.stderr, /could not connect/)
  assert.doesNotMatch(login.stderr, /secret/)
  oneCleanLine(login.stderr)
})

test('--n above what the server allows is refused up front with the number that fits', async () => {
  const r = await race(['run', 'advisory', '--n', '10000'], { url: ctx.server.url })
  assert.equal(r.code, 2)
  assert.match(r.stderr, /has room for \d+ more .* use --n \d+ or fewer/)
})

test('--json: the documented document', async () => {
  const r = await race(['run', 'advisory', '--n', '5', '--max-pending', '3', '--json'], { url: ctx.server.url })
  assert.equal(r.code, 0, r.stderr)
  const doc = JSON.parse(r.stdout)
  for (const k of ['scenario', 'server', 'target', 'params', 'schedule', 'isolation', 'sessions', 'invariant', 'verdict', 'expected', 'matched', 'trials', 'violations']) {
    assert.ok(k in doc, k)
  }
  assert.equal(doc.scenario, 'advisory')
  assert.match(doc.server.version, /^\d+/)
  assert.equal(doc.sessions.length, 5)
  for (const s of doc.sessions) for (const k of ['name', 'pid', 'outcome', 'sqlstate', 'condition', 'isolation', 'commitTag', 'waitedMs', 'ms']) assert.ok(k in s, k)
  // Read from the server, not taken from the scenario: each session's level, and how its COMMIT was answered.
  assert.ok(doc.sessions.every((s: { isolation: string }) => s.isolation === 'read committed'))
  assert.deepEqual(doc.sessions.map((s: { commitTag: string }) => s.commitTag).sort(), ['COMMIT', 'COMMIT', 'COMMIT', 'ROLLBACK', 'ROLLBACK'])
  assert.equal(new Set(doc.sessions.map((s: { pid: number }) => s.pid)).size, 5)
  assert.equal(doc.sessions.filter((s: { outcome: string }) => s.outcome === 'committed').length, 3)
  assert.equal(doc.sessions.filter((s: { outcome: string }) => s.outcome === 'rejected').length, 2)
  assert.deepEqual(doc.invariant, { description: 'at most 3 pending requests for the user', observed: '3 pending', held: true })
  assert.equal(doc.matched, true)
  assert.equal(doc.trials, 1)
  assert.equal(doc.violations, 0)
  assert.doesNotMatch(r.stdout, /\u001b\[/, 'no colour codes in JSON')
})

test('--json with trials and a failing session: sqlstate and condition, rate of violations', async () => {
  const u = await race(['run', 'unique-index', '--schedule', 'lockstep', '--json'], { url: ctx.server.url })
  const doc = JSON.parse(u.stdout)
  const loser = doc.sessions.find((s: { outcome: string }) => s.outcome === 'failed')
  assert.equal(loser.sqlstate, '23505')
  assert.equal(loser.condition, 'unique_violation')
  assert.equal(doc.verdict, 'prevented')
  const b = await race(['run', 'broken', '--schedule', 'lockstep', '--trials', '5', '--json'], { url: ctx.server.url })
  const bd = JSON.parse(b.stdout)
  assert.equal(bd.trials, 5)
  assert.equal(bd.violations, 5)
  assert.equal(bd.verdict, 'anomaly')
})

test('race check --json: every case of every scenario as documented, each with its duration', async () => {
  const r = await race(['check', '--json'], { url: ctx.server.url, timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stdout)
  const doc = JSON.parse(r.stdout)
  const cases = await checkCases([])
  // On a server given by URL, a scenario with a server of its own (lock-limit) is left out, and said so.
  const name = (k: (typeof cases)[number]) => `${k.scenario.id} ${k.label}`
  assert.deepEqual(
    doc.results.map((x: { scenario: string; case: string }) => `${x.scenario} ${x.case}`),
    cases.filter((k) => !k.scenario.ownServer).map(name),
  )
  assert.deepEqual(
    doc.skipped.map((x: { scenario: string; case: string }) => `${x.scenario} ${x.case}`),
    cases.filter((k) => k.scenario.ownServer).map(name),
  )
  for (const x of doc.results) {
    assert.equal(x.matched, true, `${x.scenario} ${x.case}: ${x.deviations.join('; ')}`)
    assert.deepEqual(x.deviations, [])
    assert.ok(x.documented.length >= 1 && typeof x.ms === 'number')
  }
})

test('--expect turns the question around: advisory asked to violate is a deviation (exit 1)', async () => {
  const r = await race(['run', 'advisory', '--schedule', 'lockstep', '--expect', 'violated'], { url: ctx.server.url })
  assert.equal(r.code, 1)
  assert.match(r.stdout, /DEVIATION/)
})

test('--keep leaves the schema and names it; without it nothing is left', async () => {
  const r = await race(['run', 'broken', '--keep'], { url: ctx.server.url })
  assert.equal(r.code, 0)
  const name = /schema (race_broken_[0-9a-f]+) kept/.exec(r.stdout)?.[1]
  assert.ok(name, r.stdout)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [name])
  // A kept schema is marked so: the next run does not reap it.
  const next = await race(['run', 'broken', '--schedule', 'lockstep'], { url: ctx.server.url })
  assert.equal(next.code, 0, next.stderr)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [name], 'the next run left the kept schema alone')
  assert.deepEqual(await leftBy(ctx.sql, next.pid), [], 'and dropped its own')
  await ctx.sql.unsafe(`drop schema "${name}" cascade`)
})

test("a killed run's schema is reaped by the next run (beside its race, before it exits); a live run's never", async () => {
  const [{ t0 }] = await ctx.sql`select clock_timestamp() as t0`
  // A short window: a session backend sleeping in it notices its client is gone only when the sleep ends, and holds
  // its locks in the schema until then (the reaper's DROP does not wait for them).
  const killed = spawnRace(['run', 'broken', '--window', '4s', '--step-timeout', '30s'], ctx.server.url)
  const [dead] = await until("the killed run's schema", async () => ((await leftBy(ctx.sql, killed.child.pid!)).length ? leftBy(ctx.sql, killed.child.pid!) : undefined))
  // Its backends (control, setup, both sessions in their window, holding locks in its schema): race's, started since.
  const mine = (await ctx.sql`select pid from pg_stat_activity where backend_start >= ${t0} and application_name in ('race control', 'race setup', 'race broken s1', 'race broken s2')`).map((x) => Number(x.pid))
  killed.child.kill('SIGKILL')
  await killed.done
  // Dead by the reaper's rule: the control backend its mark names has exited (the server notices the closed socket).
  // The connection its setup SQL ran on (`runner`) too.
  const backendsOf = async (schema: string) =>
    (await ctx.sql`select substr(d.description, 6)::jsonb ->> 'backend' as b, substr(d.description, 6)::jsonb ->> 'runner' as r from pg_namespace n join pg_description d on d.objoid = n.oid and d.classoid = 'pg_namespace'::regclass where n.nspname = ${schema}`)
      .flatMap((x) => [x.b, x.r])
      .filter((x) => x !== null && x !== undefined)
      .map(Number)
  const pids = [...(await backendsOf(dead)), ...mine]
  // Until the server has seen each of them close, a session's locks would hold up the reaper's DROP (which then leaves
  // the schema to the next run, as a busy one).
  await until('its backends to exit', async () => (await ctx.sql`select 1 from pg_stat_activity where pid = any(${pids}::int[])`).length === 0)
  const live = spawnRace(['run', 'broken', '--window', '20s', '--step-timeout', '30s'], ctx.server.url)
  try {
    const [alive] = await until("the live run's schema", async () => ((await leftBy(ctx.sql, live.child.pid!)).length ? leftBy(ctx.sql, live.child.pid!) : undefined))
    const next = await race(['run', 'broken', '--schedule', 'lockstep'], { url: ctx.server.url })
    assert.equal(next.code, 0, next.stderr)
    assert.deepEqual(await leftBy(ctx.sql, killed.child.pid!), [], `the next run reaped ${dead} before it exited`)
    assert.deepEqual(await leftBy(ctx.sql, live.child.pid!), [alive], "a live run's schema is never reaped")
  } finally {
    live.child.kill('SIGINT')
    await live.done
  }
  assert.deepEqual(await leftBy(ctx.sql, live.child.pid!), [], 'the live run dropped its own on Ctrl-C')
})

test('a step that never returns: cancelled at --step-timeout, exit 3 naming session, step and blocking pid; schema dropped', async () => {
  const user = '5f0c6d7e-2a1b-4c3d-8e9f-0a1b2c3d4e5f'
  const holder = outside(ctx.server.url, 'race-test holder')
  try {
    const [{ pid }] = await holder`select pg_backend_pid() as pid, pg_advisory_lock(${String(advisoryKey('setup_request', user))}::bigint)`
    const r = await race(['run', 'advisory', '--user', user, '--step-timeout', '1s', '--lock-timeout', '30s'], { url: ctx.server.url })
    assert.equal(r.code, 3, r.stdout + r.stderr)
    assert.match(r.stdout, /timeout in lock/)
    assert.match(r.stderr, new RegExp(`s\\d timed out in step lock .*waiting for pid ${pid}`))
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
  } finally {
    await holder.end({ timeout: 1 })
  }
})

test('a whole-run timeout mid-run: exit 3 naming what was stuck; schema dropped', async () => {
  const user = '6f0c6d7e-2a1b-4c3d-8e9f-0a1b2c3d4e5f'
  const holder = outside(ctx.server.url, 'race-test holder')
  try {
    await holder`select pg_advisory_lock(${String(advisoryKey('setup_request', user))}::bigint)`
    // 5 s: on two busy cores a run can take more than 1.5 s to reach its sessions' lock step (then the timeout names
    // nothing stuck, which is what this checks it does).
    const r = await race(['run', 'advisory', '--user', user, '--run-timeout', '5s', '--lock-timeout', '30s'], { url: ctx.server.url })
    assert.equal(r.code, 3, r.stdout + r.stderr)
    assert.match(r.stderr, /did not finish within --run-timeout 5s: s\d \(pid \d+\) in step lock/)
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
  } finally {
    await holder.end({ timeout: 1 })
  }
})

test('list and show: every scenario with its story; help has examples', async () => {
  const l = await race(['list'])
  assert.equal(l.code, 0)
  for (const id of ['broken', 'for-update', 'advisory', 'unique-index', 'serializable', 'repeatable-read']) assert.match(l.stdout, new RegExp(id))
  const s = await race(['show', 'advisory'])
  assert.equal(s.code, 0)
  assert.match(s.stdout, /pg_advisory_xact_lock/)
  assert.match(s.stdout, /race point/)
  const h = await race(['run', '--help'])
  assert.equal(h.code, 0)
  assert.match(h.stdout, /Examples:/)
})
