// What the fault tests share: an outside connection to act on the server, the backends of one race child,
// race's leftovers, and the checks every fault must pass (one clean line, no stack trace, nothing left).
import assert from 'node:assert/strict'
import { after, before } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { schemasOf, useServer, type TestServer } from './server.js'
import { clientPorts, type Child } from './procs.js'

export function outside(url: string, name = 'race-test outside'): Sql {
  return postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: name } })
}

export interface Backend {
  pid: number
  name: string
  state: string | null
  waitEvent: string | null
  waitType: string | null
  query: string
  inTx: boolean
}

/** The server backends opened by one race child process (matched by its sockets' ports), by application_name. */
export async function backendsOf(sql: Sql, child: Child): Promise<Backend[]> {
  const ports = [...clientPorts(child.child.pid!)]
  if (!ports.length) return []
  const rows = await sql`
    select pid, application_name as name, state, wait_event as "waitEvent", wait_event_type as "waitType",
           query, xact_start is not null as "inTx"
    from pg_stat_activity where client_port = any(${ports}::int[]) and client_addr is not null`
  return rows.map((r) => ({ ...(r as unknown as Backend), pid: Number(r.pid) }))
}

/** A session backend of the child by session name ('race advisory s1' → 's1'). */
export function session(bs: Backend[], name: string): Backend | undefined {
  return bs.find((b) => b.name.endsWith(` ${name}`) && b.name !== 'race control')
}

export async function terminate(sql: Sql, pid: number): Promise<void> {
  // PostgreSQL 14+: wait (bounded) until the backend has exited, so the next observation is of after the kill.
  const [r] = await sql`select pg_terminate_backend(${pid}, 5000) as ok`
  assert.equal(r.ok, true, `pg_terminate_backend(${pid})`)
}

/** The schemas one race child left behind (found by the owner mark on each; never another run's). */
export async function leftBy(sql: Sql, child: Child | number): Promise<string[]> {
  return schemasOf(sql, typeof child === 'number' ? child : child.child.pid!)
}

/** Exactly one line from race on stderr, naming the problem; never a stack trace or a crash. */
export function oneCleanLine(stderr: string, re?: RegExp): void {
  const lines = stderr.trim().split('\n')
  assert.equal(lines.length, 1, `one line, got: ${stderr}`)
  assert.match(lines[0], /^race: /)
  assert.doesNotMatch(stderr, /\n\s+at |Error:|TypeError|internal error/, 'no stack trace, no crash')
  if (re) assert.match(lines[0], re)
}

export function noCrash(stderr: string): void {
  assert.doesNotMatch(stderr, /\n\s+at |TypeError|internal error|Uncaught/, `no crash: ${stderr}`)
}

/** For a test file: one server, and one outside connection to it (the test's own hands), closed after. */
export function useOutside(): { readonly server: TestServer; readonly sql: Sql } {
  const ctx = {} as { server: TestServer; sql: Sql }
  before(async () => {
    ctx.server = await useServer()
    ctx.sql = outside(ctx.server.url)
  })
  after(async () => {
    await ctx.sql?.end({ timeout: 1 })
    await ctx.server?.stop()
  })
  return ctx
}
