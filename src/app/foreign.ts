// Queries on connections race did not hand out. A session that opens its own connection (a `new pg.Client`, a
// module-level Pool) and queries through it is not gated, so no schedule reaches it: a race that violates held in
// every interleaving. race cannot see those queries in the process, but the server can. A connection is taken for
// one when it is not one of race's (its sessions, its control connection, another race's "race ..." connections)
// and the server shows it
// - (PostgreSQL) holding a lock on a relation of THIS run's schema; or with a query (running, or its last) that
//   names the run's schema, whose name is this run's alone (race_<label>_<hex>), from any process and over any
//   socket (TCP or Unix); or opened from race's own process over TCP with a query that names one of the schema's
//   tables;
// - (MySQL/MariaDB, where the run's namespace is a database of its own) in the run's database (PROCESSLIST.DB: it
//   connected to it or USEd it), or running a statement that names it.
// Other jobs racing on the same database touch other schemas and live in other processes. And, in race's own
// process, every connection a session's code starts to the run's server (its port, or its Unix socket) is seen as it
// starts (noteSessionSockets), however short it lives: between two looks at the server (every FOREIGN_MS while the
// functions run, and once at the end) it may come and go unseen there. Not seen: a connection another process opens
// for the code (a worker, a child process) that is gone by the next look.
import fs from 'node:fs'
import net from 'node:net'
import type { Driver } from '../db/driver.js'
import { unixSocket } from '../db/connect.js'
import type { Target } from '../db/target.js'
import { underTest } from './contain.js'

/** Sockets a session's code connected (its own client or pool), by session name, while they are open. */
const opened = new Set<{ socket: net.Socket; session: string }>()
let watching = false

/**
 * From now on, a TCP connection started in a session's async context is remembered with the session's name, so that
 * a backend it reaches can be named by its client port. race's own connections are opened outside that context.
 */
export function noteSessionSockets(): void {
  if (watching) return
  watching = true
  const connect = net.Socket.prototype.connect
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    const s = underTest.getStore()
    if (s) {
      const entry = { socket: this, session: s.name }
      opened.add(entry)
      this.once('close', () => opened.delete(entry))
      const tell = elsewhereReporter
      if (tell) {
        // In a session's worker (session-host.ts): the main thread, which asks the server, names the backend by this port.
        this.once('connect', () => {
          const port = this.localPort
          if (port === undefined) return
          tell(port, s.name, true)
          this.once('close', () => tell(port, s.name, false))
        })
      }
      started.push({ session: s.name, ...destination(args), seq: ++seq })
      if (started.length > STARTED_KEPT) started.splice(0, started.length - STARTED_KEPT)
    }
    return (connect as (...a: unknown[]) => net.Socket).apply(this, args)
  } as typeof connect
}

/** Where a socket connects: a TCP port or a Unix socket's path, from Socket#connect's arguments. */
interface Destination {
  port?: number
  path?: string
}

/**
 * Every connection a session's code started (race opens its own outside that context), with where it went, in
 * order: seen as it starts, however short it lives. A trial reads those after its mark (startedMark).
 */
const started: (Destination & { session: string; seq: number })[] = []
const STARTED_KEPT = 10_000
let seq = 0

/** The mark a trial reads the connections its sessions start after (connectionsToServer). */
export function startedMark(): number {
  return seq
}

function destination(args: unknown[]): Destination {
  // net.connect hands Socket#connect its normalised arguments as one array.
  const a = Array.isArray(args[0]) ? args[0][0] : args[0]
  if (typeof a === 'number' || (typeof a === 'string' && /^\d+$/.test(a))) return { port: Number(a) }
  if (typeof a === 'string') return { path: a }
  if (a && typeof a === 'object') {
    const o = a as { port?: unknown; path?: unknown }
    if (o.path) return { path: String(o.path) }
    if (o.port !== undefined) return { port: Number(o.port) }
  }
  return {}
}

/** Where the target's server listens, as a client of it connects: its Unix socket's path, or its TCP port. */
export function serverDestination(target: Target): Destination {
  const mysql = target.engine === 'mysql'
  if (!target.url) {
    const host = process.env.PGHOST ?? ''
    const port = Number(process.env.PGPORT || 5432)
    return host.startsWith('/') ? { path: `${host}/.s.PGSQL.${port}` } : { port }
  }
  if (!mysql) {
    const { socket } = unixSocket(target.url)
    if (socket) return { path: socket }
  }
  // race connects to MySQL/MariaDB over TCP only (db/mysql.ts connectionOptions): its port.
  return { port: Number(new URL(target.url).port || (mysql ? 3306 : 5432)) }
}

/**
 * The connections to the run's server (`target`) that a session's code started after `mark`, on its own: whatever
 * they sent, race scheduled none of it. Each named by the session and where it went.
 */
export function connectionsToServer(target: Target, mark: number): { session: string; to: string }[] {
  const server = serverDestination(target)
  return started
    .filter((c) => c.seq > mark && (server.path ? c.path === server.path : c.port === server.port && !c.path))
    .map((c) => ({ session: c.session, to: c.path ? `socket ${c.path}` : `port ${c.port}` }))
}

function sessionOfPort(port: number): string | undefined {
  for (const e of opened) if (e.socket.localPort === port) return e.session
  return elsewhere.get(port)
}

/** Sockets the code of an isolated session opened in its worker (app/isolated.ts), by local port: the session's name. */
const elsewhere = new Map<number, string>()
/** The main thread: a session's worker said its code opened (or closed) a socket on this local port. */
export function noteElsewhere(port: number, session: string, open: boolean): void {
  if (open) elsewhere.set(port, session)
  else if (elsewhere.get(port) === session) elsewhere.delete(port)
}
let elsewhereReporter: ((port: number, session: string, open: boolean) => void) | undefined
/** In a session's worker: every socket its code opens is told to the main thread through `tell`. */
export function reportSessionSockets(tell: (port: number, session: string, open: boolean) => void): void {
  elsewhereReporter = tell
}

/** The local TCP ports of a process's sockets (this one's by default; Linux /proc); empty where that cannot be read. */
export function ownPorts(pid: number | 'self' = 'self'): Set<number> {
  const inodes = new Set<string>()
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))
        if (m) inodes.add(m[1])
      } catch {
        /* closed meanwhile */
      }
    }
  } catch {
    return new Set()
  }
  const ports = new Set<number>()
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string
    try {
      text = fs.readFileSync(f, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length > 9 && inodes.has(cols[9])) ports.add(parseInt(cols[1].split(':')[1], 16))
    }
  }
  return ports
}

/** A backend that queried the run's tables on a connection race did not hand out. */
export interface Foreign {
  pid: number
  how: string
  /** The session whose code opened the connection, when race saw it do so. */
  session?: string
}

/** Whether a query's text names `name` as an identifier (bare or double-quoted, or back-quoted on MySQL). */
function namesIdent(q: string, name: string): boolean {
  const n = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`(^|[^\\w$])["\`]?${n}["\`]?($|[^\\w$])`, 'i').test(q)
}

/**
 * The session threads race handed out on each server, over the run (MySQL/MariaDB opens them per trial): one a
 * previous trial closed can still be listed in its database for a moment. Thread ids are never reused while the
 * server runs.
 */
const handedOut = new WeakMap<Driver, Set<number>>()

/** The connections (not race's) that touch the run's database now (MySQL/MariaDB): see the module comment. */
async function foreignThreads(lab: Driver, database: string, ours: readonly number[]): Promise<Foreign[]> {
  let seen = handedOut.get(lab)
  if (!seen) handedOut.set(lab, (seen = new Set()))
  for (const p of ours) if (Number.isInteger(p)) seen.add(p)
  const own = [...seen, ...(lab.ownThreads?.() ?? [])]
  const r = (await lab.query(
    `select id, host, db, info from information_schema.processlist
      where id <> connection_id() and command <> 'Daemon'${own.length ? ` and id not in (${own.join(',')})` : ''}
        and (db = ? or info like ?)`,
    [database, `%${database.replace(/[\\%_]/g, '\\$&')}%`],
  )) as unknown as { id: number; host: string | null; db: string | null; info: string | null }[]
  const out: Foreign[] = []
  for (const row of r) {
    const inDb = row.db === database
    if (!inDb && !namesIdent(row.info ?? '', database)) continue
    const port = /:(\d+)$/.exec(row.host ?? '')?.[1]
    out.push({ pid: Number(row.id), how: inDb ? `used database ${database}` : `queried database ${database}`, session: port ? sessionOfPort(Number(port)) : undefined })
  }
  return out
}

/** The backends (not race's) that touch the run's schema now: see the module comment. */
export async function foreignBackends(lab: Driver, schema: string, ours: readonly number[]): Promise<Foreign[]> {
  if (lab.engine === 'mysql') return foreignThreads(lab, schema, ours)
  if (lab.engine !== 'postgres') return []
  const r = await lab.query(
    `select a.pid, a.client_port, a.query,
            exists (select 1 from pg_locks l join pg_class c on c.oid = l.relation join pg_namespace n on n.oid = c.relnamespace
                     where l.pid = a.pid and n.nspname = $1) as locks,
            array(select c.relname::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
                   where n.nspname = $1 and c.relkind in ('r', 'p', 'v', 'm')) as tables
       from pg_stat_activity a
      where a.datname = current_database() and a.pid <> pg_backend_pid() and not (a.pid = any($2::int[]))
        and a.backend_type = 'client backend' and a.application_name not like 'race %'`,
    [schema, [...ours]],
  )
  const rows = r as unknown as { pid: number; client_port: number | null; query: string | null; locks: boolean; tables: string[] | null }[]
  if (!rows.length) return []
  const mine = ownPorts()
  const out: Foreign[] = []
  for (const row of rows) {
    const session = row.client_port == null ? undefined : sessionOfPort(Number(row.client_port))
    if (row.locks) {
      out.push({ pid: Number(row.pid), how: 'holds a lock on a table of the run', session })
      continue
    }
    const q = row.query ?? ''
    // The run's schema by name: that name is this run's alone, so any process, over any socket.
    if (namesIdent(q, schema)) {
      out.push({ pid: Number(row.pid), how: `queried schema ${schema}`, session })
      continue
    }
    if (row.client_port == null || !mine.has(Number(row.client_port))) continue
    const named = (row.tables ?? []).find((t) => namesIdent(q, t))
    if (named) out.push({ pid: Number(row.pid), how: `queried ${named}`, session })
  }
  return out
}
