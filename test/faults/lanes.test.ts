// Two lanes (engine/run.ts): a run of many trials on PostgreSQL takes two schemas in turn, each with its own run role
// and connections, the next made ready beside the trial in the other. What must hold: both exist while the run goes,
// each owned by a role of its own; neither schema nor role is left after the run ends, after Ctrl-C, or (once the
// next run has reaped) after a SIGKILL; the reduced search finds what it finds on one lane, with the steps' footprints
// named alike in both (else a step seen in one lane would look independent of itself in the other). On the test
// server (embedded PostgreSQL 18, or DATABASE_URL). Every wait is on the server's own facts, bounded.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { backendsOf, leftBy, useOutside } from '../support/faults.js'
import { spawnRace, until, type Child } from '../support/procs.js'
import { race, ROOT } from '../support/server.js'

const ctx = useOutside()

const SPEC = `setup { create table counter (id int primary key, v int not null); insert into counter values (1, 0) }

invariant "both increments counted" { select v = 2 from counter where id = 1 }
expect held

session s1
step b1 { begin }
step r1 { select v from counter where id = 1 }
step w1 { update counter set v = v + 1 where id = 1 }
step c1 { commit }

session s2
step b2 { begin }
step r2 { select v from counter where id = 1 }
step w2 { update counter set v = v + 1 where id = 1 }
step c2 { commit }
`

function specFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-lanes-'))
  const file = path.join(dir, 'lanes.spec')
  fs.writeFileSync(file, SPEC)
  return file
}

/** The child's schemas (by the mark's pid) with their owners, once there are two. */
async function twoLanes(child: Child): Promise<{ schema: string; owner: string }[]> {
  return until('two schemas of the run', async () => {
    const names = await leftBy(ctx.sql, child)
    if (names.length < 2) return undefined
    const rows = await ctx.sql`select n.nspname as schema, r.rolname as owner from pg_namespace n join pg_roles r on r.oid = n.nspowner where n.nspname = any(${names}::text[])`
    return rows.length === 2 ? rows.map((r) => ({ schema: String(r.schema), owner: String(r.owner) })) : undefined
  })
}

async function gone(lanes: { schema: string; owner: string }[]): Promise<void> {
  const schemas = await ctx.sql`select nspname from pg_namespace where nspname = any(${lanes.map((l) => l.schema)}::text[])`
  const roles = await ctx.sql`select rolname from pg_roles where rolname = any(${lanes.map((l) => l.owner)}::text[])`
  assert.deepEqual([...schemas.map((r) => r.nspname), ...roles.map((r) => r.rolname)], [], 'no schema or role of either lane left')
}

test('a run of many trials: two schemas, each owned by its own run role; Ctrl-C leaves neither', async () => {
  const child = spawnRace(['run', specFile(), '--schedule', 'lockstep', '--trials', '100000'], ctx.server.url)
  try {
    const lanes = await twoLanes(child)
    assert.notEqual(lanes[0].owner, lanes[1].owner, 'a run role per lane')
    assert.ok(lanes.every((l) => /^race_r_/.test(l.owner)), JSON.stringify(lanes))
    child.child.kill('SIGINT')
    const r = await child.done
    assert.equal(r.code, 130, r.stderr)
    await gone(lanes)
  } finally {
    child.child.kill('SIGKILL')
  }
})

test('SIGKILL mid-run: the next run reaps both lanes, schemas and roles', async () => {
  const child = spawnRace(['run', specFile(), '--schedule', 'lockstep', '--trials', '100000'], ctx.server.url)
  let lanes: { schema: string; owner: string }[] = []
  try {
    lanes = await twoLanes(child)
    const pids = (await backendsOf(ctx.sql, child)).map((b) => b.pid)
    child.child.kill('SIGKILL')
    await child.done
    // The killed run's backends end as the server reads the closed sockets: only then is its mark a dead run's.
    await until('the killed run\'s backends gone', async () => (await ctx.sql`select 1 from pg_stat_activity where pid = any(${pids}::int[])`).length === 0)
  } finally {
    child.child.kill('SIGKILL')
  }
  const next = await race(['run', 'lost-update'], { url: ctx.server.url })
  assert.ok(next.code === 0 || next.code === 1, next.stderr)
  await gone(lanes)
})

test('the reduced search on two lanes: the runs, groups and shortest of one lane, footprints named alike in both', async () => {
  const spec = path.join(ROOT, 'examples', 'explore-orders-3.spec')
  const two = await race(['explore', spec, '--json'], { url: ctx.server.url, env: { RACE_DEBUG_FPS: '1' }, timeoutMs: 240_000 })
  const one = await race(['explore', spec, '--json'], { url: ctx.server.url, env: { RACE_LANES: '1' }, timeoutMs: 240_000 })
  const view = (stdout: string) => {
    const j = JSON.parse(stdout)
    return { runs: j.runs, complete: j.complete, groups: j.groups.map((g: { count?: number; runs?: number; line?: string; label?: string }) => [g.count ?? g.runs]), shortest: j.shortest?.line }
  }
  assert.deepEqual(view(two.stdout), view(one.stdout))
  // What the search was told of each step (RACE_DEBUG_FPS): the run's schema named as in every other run, never by
  // the 8 hex digits that tell one lane's schema from the other's.
  const told = two.stderr.split('\n').filter((l) => l.startsWith('['))
  assert.ok(told.length >= view(two.stdout).runs, `${told.length} runs told`)
  assert.ok(told.some((l) => l.includes('race_explore_orders_3_job.orders')), told[0])
  assert.ok(!told.some((l) => /race_explore_orders_3_[0-9a-f]{8}\b/.test(l)), told.find((l) => /_[0-9a-f]{8}\b/.test(l)))
})
