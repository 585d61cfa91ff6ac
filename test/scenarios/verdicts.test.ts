// A verdict that never passes by accident (issue 20): "held" when nothing committed because every session failed
// with an integrity error no one declared, a flag (--scan) that was only a label. Each case sets up the server so
// that the accident happens; race must say unknown (exit 3) or DEVIATION (exit 1), never MATCH. Databases and
// roles are made here and dropped after (superuser on the embedded server and on the machine's PostgreSQL).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import postgres from 'postgres'
import { useOutside } from '../support/faults.js'
import { race } from '../support/server.js'

const ctx = useOutside()
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-verdicts-'))
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function file(name: string, text: string): string {
  const f = path.join(dir, name)
  fs.writeFileSync(f, text)
  return f
}

/** A database of the test's own, dropped after `fn`: an event trigger in it meets no other job's run. */
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

test("an event trigger adds a NOT NULL column to race's table: every insert fails 23502, and --expect held is unknown (exit 3), not MATCH", async () => {
  await withDatabase(async (url, sql) => {
    // Only race's own run schemas (race_<label>_<hex>) in this database of the test's own.
    await sql.unsafe(`
      create function add_tenant() returns event_trigger language plpgsql as $$
      declare r record;
      begin
        for r in select * from pg_event_trigger_ddl_commands() where command_tag = 'CREATE TABLE' loop
          if r.schema_name like 'race\\_%' and r.object_identity like '%.setup_requests' then
            execute format('alter table %s add column tenant text not null', r.object_identity);
          end if;
        end loop;
      end $$;
      create event trigger add_tenant on ddl_command_end when tag in ('CREATE TABLE') execute function add_tenant();`)
    const r = await race(['run', 'advisory', '--n', '5', '--expect', 'held', '--database-url', url, '--json'])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    const doc = JSON.parse(r.stdout)
    assert.deepEqual(
      doc.sessions.map((s: { sqlstate: string }) => s.sqlstate),
      ['23502', '23502', '23502', '23502', '23502'],
      'the trigger did what the test needs: every insert failed',
    )
    assert.equal(doc.verdict, 'unknown')
    assert.equal(doc.matched, false)
    const text = await race(['run', 'advisory', '--n', '5', '--expect', 'held', '--database-url', url], { env: { COLUMNS: '200' } })
    assert.equal(text.code, 3, text.stdout + text.stderr)
    assert.match(text.stdout, /verdict +unknown \(s\d failed with 23502 not_null_violation, which its documentation does not name: an integrity error is a prevention only where it is declared/)
    assert.doesNotMatch(text.stdout, /MATCH/)
  })
})

const NOT_NULL = `setup { create table orders (id serial primary key, customer_id int not null, status text not null) }
invariant "at most one open order for customer 1" { select count(*) <= 1 from orders where customer_id = 1 and status = 'open' }
expect held
session s*
step b { begin }
step ins { insert into orders (status) values ('open') }
step c { commit }
`
const CHECK_TYPO = `setup { create table orders (id serial primary key, customer_id int not null, status text not null check (status in ('open', 'closed'))) }
invariant "at most one open order for customer 1" { select count(*) <= 1 from orders where customer_id = 1 and status = 'open' }
expect held
session s*
step b { begin }
step ins { insert into orders (customer_id, status) values (1, 'opne') }
step c { commit }
`
const UNIQUE = (declared: string) => `setup { create table orders (id serial primary key, customer_id int not null, status text not null) }
setup { create unique index one_open on orders (customer_id) where status = 'open' }
invariant "at most one open order for customer 1" { select count(*) <= 1 from orders where customer_id = 1 and status = 'open' }
expect held
${declared}
session s*
step b { begin }
step ins { insert into orders (customer_id, status) values (1, 'open') }
step c { commit }
`

test('a spec whose insert omits a NOT NULL column or breaks a CHECK by a typo: nothing committed, unknown (exit 3) from run and check', async () => {
  for (const [name, text, code] of [
    ['not-null.spec', NOT_NULL, '23502 not_null_violation'],
    ['check-typo.spec', CHECK_TYPO, '23514 check_violation'],
  ] as const) {
    const f = file(name, text)
    const r = await race(['run', f, '--n', '3'], { url: ctx.server.url, env: { COLUMNS: '200' } })
    assert.equal(r.code, 3, `${name}: ${r.stdout}${r.stderr}`)
    assert.match(r.stdout, new RegExp(`verdict +unknown \\(s\\d failed with ${code}`))
    assert.doesNotMatch(r.stdout, /verdict +prevented|MATCH/)
    const c = await race(['check', f], { url: ctx.server.url, env: { COLUMNS: '200' } })
    assert.equal(c.code, 3, `check ${name}: ${c.stdout}${c.stderr}`)
    assert.doesNotMatch(c.stdout, /prevented +MATCH|[^ ] MATCH/)
  }
})

test("a spec's unique index is its prevention only when a `prevented by 23505` line declares it", async () => {
  const declared = file('unique-declared.spec', UNIQUE('prevented by 23505'))
  const r = await race(['run', declared, '--n', '3', '--schedule', 'lockstep'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /verdict +prevented \(held: the server raised 23505 unique_violation\)/)
  assert.match(r.stdout, /expected +held {2}MATCH/)
  const c = await race(['check', declared], { url: ctx.server.url })
  assert.equal(c.code, 0, c.stdout + c.stderr)
  const silent = file('unique-silent.spec', UNIQUE(''))
  const u = await race(['run', silent, '--n', '3', '--schedule', 'lockstep'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  assert.equal(u.code, 3, u.stdout + u.stderr)
  assert.match(u.stdout, /23505 unique_violation, which its documentation does not name: an integrity error is a prevention only where it is declared \(a spec's line: prevented by 23505/)
})

/** A superuser login role with `settings` (ALTER ROLE ... SET), dropped after `fn`. */
async function withRole(settings: Record<string, string>, fn: (url: string) => Promise<void>): Promise<void> {
  const role = `race_t_${randomBytes(4).toString('hex')}`
  const password = `pw-${randomBytes(6).toString('hex')}`
  await ctx.sql.unsafe(`create role ${role} login superuser password '${password}'`)
  for (const [k, v] of Object.entries(settings)) await ctx.sql.unsafe(`alter role ${role} set ${k} = '${v}'`)
  try {
    const u = new URL(ctx.server.url)
    u.username = role
    u.password = password
    await fn(u.toString())
  } finally {
    await ctx.sql`select pg_terminate_backend(pid, 5000) from pg_stat_activity where usename = ${role}`
    await ctx.sql.unsafe(`drop role ${role}`)
  }
}

test("predicate-locks --scan is the plan that ran, whatever the role's planner settings: index gives tuple and index-page SIReadLocks, seq the relation", async () => {
  const observed = async (url: string, scan: string) => {
    const r = await race(['run', 'predicate-locks', '--scan', scan, '--database-url', url, '--json'])
    assert.equal(r.code, 0, r.stdout + r.stderr)
    return String(JSON.parse(r.stdout).invariant.observed)
  }
  await withRole({ enable_indexscan: 'off', enable_bitmapscan: 'off' }, async (url) => {
    const index = await observed(url, 'index')
    assert.match(index, /t1 3 \(tuple doctors 0 1, tuple doctors 0 2, page doctors_on_call 1\)/, 'read through the index although the role turned index scans off')
    assert.doesNotMatch(index, /relation doctors/)
  })
  await withRole({ enable_seqscan: 'off' }, async (url) => {
    const seq = await observed(url, 'seq')
    assert.match(seq, /t1 1 \(relation doctors\), t2 1 \(relation doctors\)/, 'a sequential scan although the role turned it off')
  })
})
