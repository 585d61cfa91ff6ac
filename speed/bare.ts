// The yardstick for speed/speed.ts (row 5): the same statements as `race run advisory --n 5 --max-pending 3`, written
// by hand with postgres.js and nothing else (no engine, no block detection, no report). Usage: node bare.js URL
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import postgres from 'postgres'

const url = process.argv[2]
const n = 5
const maxPending = 3
const schema = `race_bare_${randomBytes(4).toString('hex')}`
const user = randomUUID()
const key = createHash('sha256').update(`setup_request:${user}`).digest().readBigInt64BE(0).toString()
const control = postgres(url, { max: 1, onnotice: () => {} })
await control.unsafe(`create schema ${schema}; set search_path to ${schema}; create table setup_requests (
  id uuid primary key default gen_random_uuid(), user_id uuid not null,
  status text not null check (status in ('pending', 'completed', 'cancelled')), created_at timestamptz not null default now())`)
const conns = Array.from({ length: n }, () => postgres(url, { max: 1, onnotice: () => {}, connection: { search_path: schema } }))
await Promise.all(conns.map((c) => c`select pg_backend_pid()`))
const results = await Promise.all(
  conns.map(async (sql) => {
    await sql`begin`
    await sql`set transaction isolation level read committed`
    await sql`select set_config('lock_timeout', '2000ms', true)`
    await sql`select pg_advisory_xact_lock(${key}::bigint)`
    const [{ pending }] = await sql`select count(*)::int as pending from setup_requests where user_id = ${user} and status = 'pending'`
    if (pending >= maxPending) {
      await sql`rollback`
      return 'rejected'
    }
    await sql`insert into setup_requests (user_id, status) values (${user}, 'pending')`
    await sql`commit`
    return 'committed'
  }),
)
const [{ pending }] = await control`select count(*)::int as pending from setup_requests where user_id = ${user}`
await Promise.all(conns.map((c) => c.end({ timeout: 1 })))
await control.unsafe(`drop schema ${schema} cascade`)
await control.end({ timeout: 1 })
if (pending !== maxPending || results.filter((r) => r === 'committed').length !== maxPending) {
  console.error(`bare: unexpected result ${results.join(',')} pending=${pending}`)
  process.exit(1)
}
