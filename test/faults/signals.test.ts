// Faults, part 3: Ctrl-C (SIGINT) and SIGTERM while race sets up and while it tears down, against a
// --database-url server (the race itself and the embedded default are in embedded.test.ts). Each phase is
// held by an outside lock and observed in pg_locks, never guessed from time; then the signal is sent and
// the lock released. What must hold: exit 130 / 143, one line, the run's schema dropped, no backend left.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { backendsOf, leftBy, oneCleanLine, outside, useOutside } from '../support/faults.js'
import { spawnRace, until, type Child } from '../support/procs.js'

const ctx = useOutside()

/** The child's control backend, once it waits for a lock on `relation` (a table name or regclass text). */
async function controlWaitingOn(child: Child, relation: string): Promise<number> {
  return until(`race control waiting for a lock on ${relation}`, async () => {
    const control = (await backendsOf(ctx.sql, child)).find((b) => b.name === 'race control')
    if (!control) return undefined
    const rows = await ctx.sql`select 1 from pg_locks where pid = ${control.pid} and not granted and relation = ${relation}::regclass`
    return rows.length ? control.pid : undefined
  })
}

async function finishes(child: Child, code: number, pids: number[]) {
  const r = await child.done
  assert.equal(r.code, code, r.stdout + r.stderr)
  // --hold's notice (three lines, before the signal) is not an error line.
  oneCleanLine(r.stderr.replace(/^holding for [^\n]*\n  race locks\n/, ''), /interrupted by SIG(INT|TERM): stopped, cleaned up/)
  assert.deepEqual(await leftBy(ctx.sql, child), [], 'schema dropped')
  const left = await ctx.sql`select pid from pg_stat_activity where pid = any(${pids}::int[])`
  assert.deepEqual(left.map((x) => x.pid), [], 'no backend left')
}

for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  test(`${sig} during setup (creating the run's schema, held up by a lock on pg_namespace): exit ${code}, nothing left`, async () => {
    // The lock lasts from here to the signal: it only holds up schema creation in this database, briefly.
    const blocker = outside(ctx.server.url, 'race-test pg_namespace')
    try {
      await blocker.unsafe('begin')
      await blocker.unsafe('lock table pg_catalog.pg_namespace in share row exclusive mode')
      const child = spawnRace(['run', 'broken'], ctx.server.url)
      const control = await controlWaitingOn(child, 'pg_catalog.pg_namespace')
      child.child.kill(sig)
      // race cancels its own CREATE SCHEMA (from a fresh connection) without waiting for the lock.
      await until('the CREATE SCHEMA cancelled', async () => {
        const rows = await ctx.sql`select 1 from pg_locks where pid = ${control} and not granted`
        return rows.length === 0
      })
      await blocker.unsafe('rollback')
      await finishes(child, code, [control])
    } finally {
      await blocker.end({ timeout: 1 })
    }
  })

  test(`${sig} during teardown (dropping the schema, held up by a lock on its table): exit ${code}, schema dropped`, async () => {
    const reader = outside(ctx.server.url, 'race-test reader')
    try {
      // --hold keeps the race's locks held before the first commit, and says which backends hold them: the
      // first session has inserted, so its lock on setup_requests names the run's schema.
      const child = spawnRace(['run', 'advisory', '--hold', '2s', '--lock-timeout', '30s'], ctx.server.url)
      const pids = await until('the hold', () => {
        const m = /backends ([\d, ]+)\)/.exec(child.stderr())
        return m ? m[1].split(', ').map(Number) : undefined
      })
      const [{ nspname }] = await ctx.sql`
        select n.nspname from pg_locks l join pg_class c on c.oid = l.relation join pg_namespace n on n.oid = c.relnamespace
        where l.pid = any(${pids}::int[]) and c.relname = 'setup_requests' limit 1`
      await reader.unsafe('begin')
      await reader.unsafe(`lock table "${nspname}".setup_requests in access share mode`)
      const control = await controlWaitingOn(child, `"${nspname}".setup_requests`)
      child.child.kill(sig)
      await reader.unsafe('rollback')
      await finishes(child, code, [...pids, control])
    } finally {
      await reader.end({ timeout: 1 })
    }
  })
}
