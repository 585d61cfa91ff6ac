// Faults, part 4: two runs at once on one database, the server's own connection limit (53300) reached
// anyway, and a role that may not create a schema. Roles are made here and dropped after (superuser on the
// embedded server and on the machine's PostgreSQL 15).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { race } from '../support/server.js'
import { leftBy, oneCleanLine, useOutside } from '../support/faults.js'
import { spawnRace } from '../support/procs.js'

const ctx = useOutside()

interface Doc {
  sessions: { outcome: string; pid: number }[]
  invariant: { observed: string }
  verdict: string
  matched: boolean
  schema?: string
}

test('two race runs at once on one database and scenario: independent, correct results in their own schemas', async () => {
  for (const [args, committed, observed, verdict] of [
    [['run', 'advisory', '--n', '5', '--max-pending', '3', '--schedule', 'lockstep'], 3, '3 pending', 'serialized'],
    [['run', 'broken', '--schedule', 'lockstep'], 2, '2 pending', 'anomaly'],
  ] as const) {
    const a = spawnRace([...args, '--json', '--keep'], ctx.server.url)
    const b = spawnRace([...args, '--json', '--keep'], ctx.server.url)
    const [ra, rb] = await Promise.all([a.done, b.done])
    const docs = [ra, rb].map((r) => {
      assert.equal(r.code, 0, r.stdout + r.stderr)
      return JSON.parse(r.stdout) as Doc
    })
    for (const d of docs) {
      // Had the runs shared a table or an advisory key, one would count the other's rows or wait for it.
      assert.equal(d.sessions.filter((s) => s.outcome === 'committed').length, committed)
      assert.equal(d.invariant.observed, observed)
      assert.equal(d.verdict, verdict)
      assert.equal(d.matched, true, 'the whole documented outcome')
    }
    assert.notEqual(docs[0].schema, docs[1].schema, 'each run has its own schema')
    const pids = docs.flatMap((d) => d.sessions.map((s) => s.pid))
    assert.equal(new Set(pids).size, pids.length, 'no backend shared between the runs')
    for (const d of docs) await ctx.sql.unsafe(`drop schema "${d.schema}" cascade`)
    assert.deepEqual([...(await leftBy(ctx.sql, a)), ...(await leftBy(ctx.sql, b))], [])
  }
})

/** A login role with a password (the embedded server wants scram), dropped after `fn` whatever happens. */
async function withRole(opts: string, grantCreate: boolean, fn: (url: string, role: string) => Promise<void>): Promise<void> {
  const role = `race_fault_${randomBytes(4).toString('hex')}`
  const password = `pw-${randomBytes(6).toString('hex')}`
  const [{ db }] = await ctx.sql`select current_database() as db`
  await ctx.sql.unsafe(`create role ${role} login password '${password}' ${opts}`)
  if (grantCreate) await ctx.sql.unsafe(`grant create on database "${db}" to ${role}`)
  try {
    const u = new URL(ctx.server.url)
    u.username = role
    u.password = password
    await fn(u.toString(), role)
  } finally {
    await ctx.sql`select pg_terminate_backend(pid, 5000) from pg_stat_activity where usename = ${role}`
    if (grantCreate) await ctx.sql.unsafe(`revoke create on database "${db}" from ${role}`)
    await ctx.sql.unsafe(`drop role ${role}`)
  }
}

test("the server's too_many_connections (53300) reached anyway: one line, exit 3, no hang, nothing left", async () => {
  // --n 3 fits max_connections, but the role may open only 2 connections: control and one more; the next (a
  // session, or the connection the run's setup runs on) is refused.
  await withRole('connection limit 2', true, async (url, role) => {
    const t0 = Date.now()
    const r = await race(['run', 'advisory', '--n', '3', '--database-url', url])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    oneCleanLine(r.stderr, /too many connections for role "race_fault_[0-9a-f]+" \(53300 too_many_connections\)/)
    assert.ok(Date.now() - t0 < 10_000, 'no hang')
    assert.doesNotMatch(r.stderr, /pw-/, 'password masked')
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
    const left = await ctx.sql`select pid from pg_stat_activity where usename = ${role}`
    assert.equal(left.length, 0, 'no backend left')
  })
})

test('a role without CREATE on the database: one line naming the missing privilege, exit 3', async () => {
  await withRole('', false, async (url) => {
    const r = await race(['run', 'broken', '--database-url', url])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    oneCleanLine(r.stderr, /may not create a schema in this database \(42501 insufficient_privilege\): grant it CREATE on the database/)
    assert.doesNotMatch(r.stderr, /pw-/)
  })
})
