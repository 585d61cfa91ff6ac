// The verdict is the whole documented outcome, read from the server: the cases a skeptical user found when
// MATCH meant less than that. Each sets up the server so that something other than the documentation
// happens (a role's lock_timeout, a row that was already there, a role's default isolation) and race must say
// DEVIATION and name what differs. Roles and databases are made here and dropped after (superuser on the
// embedded server and on the machine's PostgreSQL).
import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { test } from 'node:test'
import postgres from 'postgres'
import { findScenario } from '../../src/registry.js'
import { clean, defineScenario, step } from '../../src/scenario.js'
import { advisoryKey } from '../../src/scenario.js'
import { backendsOf, leftBy, outside, session, terminate, useOutside } from '../support/faults.js'
import { spawnRace, until } from '../support/procs.js'
import { openLab, race, runScenario, schemaExists } from '../support/server.js'

const ctx = useOutside()

/** A superuser login role with `settings` (ALTER ROLE ... SET), dropped after `fn`. */
async function withRole(settings: Record<string, string>, fn: (url: string) => Promise<void>, database?: string): Promise<void> {
  const role = `race_t_${randomBytes(4).toString('hex')}`
  const password = `pw-${randomBytes(6).toString('hex')}`
  await ctx.sql.unsafe(`create role ${role} login superuser password '${password}'`)
  for (const [k, v] of Object.entries(settings)) await ctx.sql.unsafe(`alter role ${role} set ${k} = '${v}'`)
  try {
    const u = new URL(ctx.server.url)
    u.username = role
    u.password = password
    if (database) u.pathname = `/${database}`
    await fn(u.toString())
  } finally {
    await ctx.sql`select pg_terminate_backend(pid, 5000) from pg_stat_activity where usename = ${role}`
    await ctx.sql.unsafe(`drop role ${role}`)
  }
}

/** A database of the test's own, dropped after `fn`: no other job's race run ever reaps in it. */
async function withDatabase(fn: (url: string, sql: postgres.Sql) => Promise<void>): Promise<void> {
  const db = `race_t_${randomBytes(4).toString('hex')}`
  await ctx.sql.unsafe(`create database ${db}`)
  const u = new URL(ctx.server.url)
  u.pathname = `/${db}`
  const sql = postgres(u.toString(), { max: 1, onnotice: () => {} })
  try {
    await fn(u.toString(), sql)
  } finally {
    await sql.end({ timeout: 1 })
    await ctx.sql`select pg_terminate_backend(pid, 5000) from pg_stat_activity where datname = ${db}`
    await ctx.sql.unsafe(`drop database ${db}`)
  }
}

test("a role's lock_timeout fails the deadlock scenarios with 55P03: race check names it against the documented 40P01 (exit 1)", async () => {
  // What is certain whatever the machine's load, and only that is asserted. A backend enables lock_timeout and
  // deadlock_timeout together when it starts to wait, so 20ms always runs out no later than any session's
  // deadlock_timeout (50ms and more); and when both have run out, the lock wait loop raises the lock timeout
  // (its interrupt check follows the deadlock check). So no session of these cases ever ends in 40P01, and every
  // case documented with a 40P01 deviates. Whether a wait that would have ended by a COMMIT (the ordered cases)
  // outlasts 20ms depends on how busy the machine is: such a case may match, or deviate by a 55P03, never else.
  await withRole({ lock_timeout: '20ms' }, async (url) => {
    const r = await race(['check', 'deadlock', 'row-deadlock', '--database-url', url])
    assert.equal(r.code, 1, r.stdout + r.stderr)
    assert.match(r.stdout, /deadlock \(default\): documented prevented: s1 committed, s2 40P01/)
    assert.match(r.stdout, /s2: documented 40P01, got (committed|55P03)/)
    assert.match(r.stdout, /row-deadlock \(default\): [\s\S]*?\n {2}t[12]: documented 40P01, got (committed|55P03)/)
    // The count is the cases the report names, at least the three documented with a 40P01.
    const named = r.stdout.match(/^\S+ \([^)]*\): documented /gm) ?? []
    assert.ok(named.length >= 3, r.stdout)
    assert.match(r.stdout, new RegExp(`\\n${named.length} of 6 did not behave as documented`))

    const j = await race(['check', 'deadlock', 'row-deadlock', '--database-url', url, '--json'])
    assert.equal(j.code, 1, j.stdout + j.stderr)
    const doc = JSON.parse(j.stdout) as {
      results: { scenario: string; case: string; matched: boolean; deviations: string[]; documented: { who: Record<string, unknown> }[]; sessions: { name: string; sqlstate: string | null }[] }[]
    }
    assert.equal(doc.results.length, 6)
    for (const c of doc.results) {
      const where = `${c.scenario} (${c.case}): ${c.deviations.join('; ')}`
      assert.ok(c.sessions.every((x) => x.sqlstate !== '40P01'), `${where}: a 40P01 despite lock_timeout 20ms`)
      const deadlocks = c.documented.every((d) => Object.values(d.who).includes('40P01'))
      if (deadlocks) assert.equal(c.matched, false, where)
      if (!c.matched) assert.ok(c.sessions.some((x) => x.sqlstate === '55P03'), `${where}: deviated without a 55P03`)
    }
    assert.deepEqual(
      doc.results.filter((c) => c.documented.every((d) => Object.values(d.who).includes('40P01'))).map((c) => `${c.scenario} (${c.case})`),
      ['deadlock (default)', 'row-deadlock (default)', 'row-deadlock (serializable)'],
    )
  })
})

test('a pending request already there for the user: advisory commits nobody, and that is a deviation (exit 1)', async () => {
  // An event trigger inserts the row when the run's table is created: in a database of its own, so that no
  // other run ever meets it, and only for this role (race.inject names the user).
  const user = randomUUID()
  await withDatabase(async (_url, sql) => {
    await sql.unsafe(`
      create function inject() returns event_trigger language plpgsql as $$
      begin
        if current_setting('race.inject', true) is not null and to_regclass('setup_requests') is not null then
          insert into setup_requests (user_id, status) values (current_setting('race.inject')::uuid, 'pending');
        end if;
      end $$;
      create event trigger inject on ddl_command_end when tag in ('CREATE TABLE') execute function inject();`)
    const [{ db }] = await sql`select current_database() as db`
    await withRole({ 'race.inject': user }, async (url) => {
      const r = await race(['run', 'advisory', '--user', user, '--database-url', url])
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.match(r.stdout, /observed 1 pending {2}HELD/, 'the invariant alone would have passed')
      assert.match(r.stdout, /DEVIATION/)
      assert.match(r.stdout, /committed: documented 1, got 0/)
      assert.match(r.stdout, /rejected: pending limit reached: documented 1, got 2/)
      const five = await race(['run', 'advisory', '--n', '5', '--max-pending', '3', '--user', user, '--database-url', url, '--json'])
      assert.equal(five.code, 1)
      assert.deepEqual(JSON.parse(five.stdout).deviations, ['committed: documented 3, got 2', 'rejected: pending limit reached: documented 2, got 3'])
    }, String(db))
  })
})

test("a role whose default is REPEATABLE READ: each session shows the level it really ran at, and broken deviates", async () => {
  await withRole({ default_transaction_isolation: 'repeatable read' }, async (url) => {
    const r = await race(['run', 'broken', '--schedule', 'lockstep', '--database-url', url, '--json'])
    assert.equal(r.code, 1, r.stdout + r.stderr)
    const doc = JSON.parse(r.stdout)
    assert.deepEqual(doc.sessions.map((s: { isolation: string }) => s.isolation), ['repeatable read', 'repeatable read'])
    assert.deepEqual(doc.isolation, { s1: 'read committed', s2: 'read committed' })
    assert.deepEqual(doc.deviations, ['s1: ran at repeatable read, documented for read committed', 's2: ran at repeatable read, documented for read committed'])
    // Wide enough that the isolation line does not wrap (this checks what it says, not how it fits).
    const text = await race(['run', 'broken', '--schedule', 'lockstep', '--database-url', url], { env: { COLUMNS: '200' } })
    assert.match(text.stdout, /isolation {2}repeatable read \(read from each session\) {2}documented for read committed: the server overrode it/)
  })
})

test('--hold longer than the lock_timeout leaves every outcome as it is without it: MATCH, exit 0', async () => {
  const r = await race(['run', 'advisory', '--hold', '3s'], { url: ctx.server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /lock-timeout=5s \(lock timeouts extended by --hold 3s\)/)
  assert.match(r.stdout, /MATCH/)
  assert.doesNotMatch(r.stdout, /55P03/)
})

test('race show lock-timeout: the interleaving shows the SQL of lock(wait), the SQL it runs', async () => {
  const r = await race(['show', 'lock-timeout'])
  assert.equal(r.code, 0)
  assert.match(r.stdout, /lock\(wait\) select pg_advisory_xact_lock\(:key\)/)
  assert.match(r.stdout, /step lock +\{ select pg_advisory_xact_lock\(:key\) \}/)
  assert.match(r.stdout, /:key +sha256\('setup_request:' \|\| user\), first 8 bytes, signed/)
})

test('the next run drops the schema of a race that was SIGKILLed mid-run, and never one of a live run', async () => {
  await withDatabase(async (url, sql) => {
    const user = randomUUID()
    const holder = outside(url, 'race-test holder')
    try {
      await holder`select pg_advisory_lock(${String(advisoryKey('setup_request', user))}::bigint)`
      const live = spawnRace(['run', 'advisory', '--user', user, '--lock-timeout', '30s', '--step-timeout', '30s'], url)
      const killed = spawnRace(['run', 'advisory', '--user', user, '--lock-timeout', '30s', '--step-timeout', '30s'], url)
      for (const c of [live, killed]) {
        await until('both sessions waiting for the key', async () => {
          const bs = await backendsOf(sql, c)
          return ['s1', 's2'].every((n) => session(bs, n)?.waitEvent === 'advisory')
        })
      }
      const [dead] = await leftBy(sql, killed)
      const [alive] = await leftBy(sql, live)
      assert.ok(dead && alive)
      const sessions = (await backendsOf(sql, killed)).filter((b) => b.name !== 'race control' && b.name !== 'race setup') // race setup: the run role's idle control-side connection
      killed.child.kill('SIGKILL')
      await killed.done
      // Its backends wait on the key and would go on waiting: end them, as an operator would.
      for (const b of sessions) await terminate(sql, b.pid)
      assert.ok(await schemaExists(sql, dead), 'SIGKILL leaves the schema (this is what the reaper is for)')
      const next = await race(['run', 'broken', '--schedule', 'lockstep'], { url })
      assert.equal(next.code, 0, next.stderr)
      assert.equal(await schemaExists(sql, dead), false, "the killed run's schema was dropped by the next run")
      assert.ok(await schemaExists(sql, alive), "the live run's schema was left alone")
      await holder`select pg_advisory_unlock_all()`
      const r = await live.done
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.equal(await schemaExists(sql, alive), false)
    } finally {
      await holder.end({ timeout: 1 })
    }
  })
})

test('a session whose last step answers ROLLBACK has not committed: failed, and the run is undecided', async () => {
  const lab = await openLab(ctx.server.url)
  try {
    const s = defineScenario({
      id: 'rolled-back',
      title: 'test only',
      source: { article: 'advisory-locks', section: '1' },
      story: [],
      params: {},
      sessionCount: { default: 1 },
      isolation: 'read committed',
      setup: ['create table t (x int)'],
      sessions: () => ({ s1: { steps: { begin: 'begin', insert: 'insert into t values (1)', commit: 'rollback' } } }),
      invariant: { description: 'x', sql: 'select true as held' },
      documented: { postgres: { lockstep: clean('x', { committed: 1 }), serial: clean('x', { committed: 1 }) } },
    })
    const [t] = (await runScenario(lab, s)).trials
    assert.deepEqual([t.sessions[0].outcome, t.sessions[0].commitTag], ['failed', 'ROLLBACK'])
    assert.match(t.sessions[0].reason ?? '', /COMMIT answered ROLLBACK/)
    assert.equal(t.verdict, 'unknown')
  } finally {
    await lab.close()
  }
})

test('a read that is missing leaves the invariant undecided (unknown), not held', async () => {
  const lab = await openLab(ctx.server.url)
  try {
    const nrr = await findScenario('non-repeatable-read')
    // The same scenario, but t1 gives up before its second read: the reads it made roll back with it.
    const gaveUp = defineScenario({
      ...nrr,
      id: 'gave-up',
      sessions: (v) => {
        const real = nrr.sessions(v)
        return { ...real, t1: { steps: { ...real.t1.steps, read2: step(String(real.t1.steps.read2), { rejectIf: () => 'gave up' }) } } }
      },
    })
    const [t] = (await runScenario(lab, gaveUp)).trials
    assert.equal(t.invariant.held, null, t.invariant.observed)
    assert.equal(t.verdict, 'unknown')
  } finally {
    await lab.close()
  }
})
