// The MySQL/MariaDB (InnoDB) driver, through the MariaDB Node.js connector (`mariadb`): a control connection, a
// watch connection, and one connection per session, each with its server thread id (CONNECTION_ID()).
//
// What it reads from the server, never from time:
// - who is blocked: a thread waiting in GET_LOCK (or for a metadata lock) says so in PROCESSLIST.STATE, live;
//   a row-lock wait is in information_schema.INNODB_LOCK_WAITS (MariaDB) or performance_schema.data_lock_waits
//   (MySQL 8). InnoDB fills INNODB_TRX / INNODB_LOCK_WAITS from a cache that it refreshes only when nobody has
//   read it for 0.1 s (trx0i_s.cc, CACHE_MIN_IDLE_TIME_NS): a poll every few ms would read the same stale copy
//   forever. So the watch connection reads it at most every WATCH_GAP_MS, inside a transaction of its own, and
//   takes a copy as fresh when its own row shows the very statement that read it (a unique token). The races on
//   one server take turns to read it (a user lock, READ_TURN_LOCK, held until the cache may be refreshed again), so
//   that each read is fresh: with k races at once a read waits for at most k turns of about 0.11 s. Another reader
//   (another race on the same server) makes the copies we read: one counts for a step once it shows a marker whose
//   query id floor is above the step's statement's QUERY_ID (so it was made after that statement began);
// - each session's isolation level: INNODB_TRX.trx_isolation_level of its transaction, from a fresh copy taken
//   after the transaction had started and before its COMMIT (@@tx_isolation is only the session default). Another
//   reader of INNODB_TRX (another race on the same server) makes the copies we read: one is fresh for a level read
//   when it shows a marker, a transaction opened on a connection of its own once that read began;
// - the COMMIT's outcome: the server status flags of every reply (SERVER_STATUS_IN_TRANS);
// - errors: SQLSTATE and error number together, 'SQLSTATE/errno'.
// Cancelling a step is KILL QUERY from control; ending a connection is KILL CONNECTION.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import mariadb, { type Connection, type ConnectionConfig } from 'mariadb'
import { RunError } from '../errors.js'
import { RunContext } from '../lifecycle.js'
import type { Driver, Leftover, QueryResult, RunSpace, ServerInfo, SessionConn, SessionOptions, StepRun } from './driver.js'
import { spaceName } from './driver.js'
import { UNREAD_LEVEL, conditionName } from './sqlstate.js'
import type { Target } from './target.js'

type Conn = Connection

/** SERVER_STATUS_IN_TRANS: a transaction is open on this connection (MySQL protocol status flags). */
const IN_TRANS = 1
/** The InnoDB transaction cache is refreshed only after 0.1 s without a reader; read it no more often than this. */
export const WATCH_GAP_MS = 110
/**
 * The user lock (GET_LOCK) every race process on a server takes around its read of INNODB_TRX and holds until the
 * cache may be refreshed again (WATCH_GAP_MS after the read): with several races on one server, each read then finds
 * the cache idle for 0.1 s and gets a fresh copy of its own, instead of the races keeping the cache stale for each
 * other (a level read before COMMIT then took 0.3-0.9 s inside the application's lock window, and a GET_LOCK of the
 * advisory scenario timed out).
 */
export const READ_TURN_LOCK = 'race: information_schema.innodb_trx reads'
/** How long a read that must be fresh waits for its turn before it reads anyway (and judges the copy by its token). */
const READ_TURN_WAIT_S = 2
/** How long the final drop waits for a metadata lock before naming the leftover instead. */
export const DROP_LOCK_TIMEOUT_S = 5

/** What race writes on every database it creates (the database's COMMENT on MariaDB 10.5+, else a marker table's). */
export interface DatabaseMark {
  pid: number
  host: string
  /** The control connection's thread id: while it lives (in this server boot), the run lives. */
  thread: number
  /** The server's boot time (unix seconds, from Uptime): thread ids start again after a restart. */
  boot: number
  /** The MySQL account that created it: other accounts' databases are never touched. */
  user: string
  keep: boolean
  /**
   * The run user the run's SQL runs as ('name'@'host', see RunUser): dropped with the database by the run after a
   * killed one, only once its grants show it is that database's run user and nothing else (the run user may rewrite
   * this mark: ALTER on its database lets it).
   */
  runUser?: string
  runHost?: string
}

/**
 * The run user: on MariaDB/MySQL a run's own SQL (its setup, its sessions, its invariant) runs as an account race
 * creates for the run (random name and password, at the host the server sees race connect from) and drops after it,
 * granted ALL PRIVILEGES on the run's database and nothing else. What race needs beyond that (PROCESS for the lock
 * waits, KILL, the reaping) stays on race's own control and watch connections. Where it cannot be made (the account
 * may not CREATE USER or grant), the run goes on as race's account and says so in one line.
 */
export interface RunUser {
  name: string
  host: string
  password: string
  /** The target as the run user (its URL carries the user and the password). */
  target: Target
  /** Its connection in the run's database, on which setup and invariant run (made once the user exists). */
  conn?: Conn
}

/** What a run user's name looks like (race_u_ and 12 hex digits): the reaper drops nothing else. */
const RUN_USER_NAME = /^race_u_[0-9a-f]{12}$/

/** A database name as a GRANT names it: `_` and `%` are patterns there, escaped to mean themselves. */
export function grantDatabase(name: string): string {
  return `\`${name.replace(/[\\_%]/g, (c) => '\\' + c).replace(/`/g, '``')}\``
}

/** 'name'@'host', as an account is written in SQL. */
function account(name: string, host: string): string {
  return `${mysqlLiteral(name)}@${mysqlLiteral(host)}`
}

/**
 * Whether the account 'name'@'host' is the run user of database `db` and nothing else: no global privilege but
 * USAGE, every database privilege on exactly `db`, no table, column or routine privilege (read from
 * information_schema, by identity, never by its name alone). What the reaper checks before dropping a user a mark names.
 */
async function isRunUserOf(c: Conn, name: string, host: string, db: string): Promise<boolean> {
  if (!RUN_USER_NAME.test(name)) return false
  const grantee = `'${name}'@'${host}'`
  const [exists, global, schemas, tables] = (await c.query(
    `select count(*) as n from mysql.user where user = ? and host = ?;
     select group_concat(privilege_type) as p from information_schema.user_privileges where grantee = ?;
     select group_concat(distinct table_schema) as s from information_schema.schema_privileges where grantee = ?;
     select (select count(*) from information_schema.table_privileges where grantee = ?) + (select count(*) from information_schema.column_privileges where grantee = ?) as n`,
    [name, host, grantee, grantee, grantee, grantee],
  )) as { n?: number; p?: string | null; s?: string | null }[][]
  return Number(exists[0]?.n) === 1 && String(global[0]?.p ?? '') === 'USAGE' && String(schemas[0]?.s ?? '') === grantDatabase(db).slice(1, -1) && Number(tables[0]?.n) === 0
}

/** The target's URL with another user and password. */
function asUser(target: Target, name: string, password: string): Target | undefined {
  if (!target.url) return undefined
  try {
    const u = new URL(target.url)
    u.username = encodeURIComponent(name)
    u.password = encodeURIComponent(password)
    return { ...target, url: u.toString(), label: `${target.label} (as ${name})` }
  } catch {
    return undefined
  }
}

/** Connection options from a mysql:// or mariadb:// URL. */
export function connectionOptions(target: Target, connectTimeoutMs: number, database?: string): ConnectionConfig {
  const u = new URL(target.url!)
  const db = decodeURIComponent(u.pathname.replace(/^\//, ''))
  return {
    host: decodeURIComponent(u.hostname),
    port: Number(u.port || 3306),
    user: decodeURIComponent(u.username) || 'root',
    password: decodeURIComponent(u.password) || undefined,
    database: database ?? (db || undefined),
    connectTimeout: Math.max(1000, connectTimeoutMs),
    multipleStatements: true,
    bigIntAsNumber: true,
    decimalAsNumber: true,
    insertIdAsNumber: true,
    checkNumberRange: false,
  }
}

/** An error as race reads it: code 'SQLSTATE/errno' for a server error, CONNECTION_CLOSED when the connection is gone. */
export function normalizeError(e: unknown, gone: boolean): Error & { code?: string } {
  const err = e as { errno?: number; sqlState?: string; code?: string; text?: string; message?: string }
  if (err && typeof err.errno === 'number' && typeof err.sqlState === 'string' && err.errno < 45000 && err.errno !== 1927) {
    return Object.assign(new Error(err.text ?? err.message ?? 'server error'), { code: `${err.sqlState}/${err.errno}`, errno: err.errno, sqlState: err.sqlState })
  }
  if (gone || (err && (err.errno === 1927 || err.code === 'ER_SOCKET_UNEXPECTED_CLOSE' || err.code === 'ER_CONNECTION_ALREADY_CLOSED' || err.code === 'ECONNRESET' || err.code === 'EPIPE'))) {
    return Object.assign(new Error(`connection lost: ${err?.text ?? err?.message ?? 'closed'}`), { code: 'CONNECTION_CLOSED' })
  }
  return e instanceof Error ? (e as Error & { code?: string }) : new Error(String(e))
}

/** One line for a failure to connect or log in; the password never appears. */
export function mysqlConnectError(err: unknown, target: Target): RunError {
  const e = err as { errno?: number; sqlState?: string; code?: string; text?: string; message?: string }
  let why = e?.text ?? e?.message ?? String(err)
  if (e?.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(String(e?.message))) why = 'connection refused (is the server running and listening there?)'
  else if (e?.code === 'ER_CONNECTION_TIMEOUT' || e?.code === 'ETIMEDOUT') why = 'no answer within the connect timeout'
  else if (e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN' || /ENOTFOUND|EAI_AGAIN/.test(String(e?.message))) why = 'the host name does not resolve'
  else if (typeof e?.errno === 'number' && e.sqlState && e.errno < 45000) {
    const code = `${e.sqlState}/${e.errno}`
    why = `${e.text ?? why} (${code}${conditionName(code) ? ' ' + conditionName(code) : ''})`
  }
  return new RunError(`could not connect to ${target.label}: ${why}`)
}

/**
 * A session's connection refused: one line, exit 3. The connection limits (the account's MAX_USER_CONNECTIONS, 1226;
 * the server's max_connections, 1040) say how to fix it, as PostgreSQL's 53300 does; any other error is
 * mysqlConnectError's line. Read by error number, never by message text.
 */
export function sessionConnectError(err: unknown, target: Target, aborted = false): Error {
  if (err instanceof RunError || aborted) return err as Error
  const e = err as { errno?: number; sqlState?: string; text?: string; message?: string }
  if (e?.errno === 1226 || e?.errno === 1040) {
    const code = `${e.sqlState ?? 'HY000'}/${e.errno}`
    const limit = e.errno === 1226 ? "the account's MAX_USER_CONNECTIONS" : "the server's max_connections"
    return new RunError(
      `the server refused a session's connection: ${e.text ?? e.message} (${code} ${conditionName(code)}): race needs --n connections besides its control and watch connections: use a smaller --n, or raise ${limit}`,
    )
  }
  return mysqlConnectError(err, target)
}

async function endQuietly(c: Conn | undefined, destroy = false): Promise<void> {
  if (!c) return
  try {
    if (destroy) c.destroy()
    else await Promise.race([c.end(), sleep(1000).then(() => c.destroy())])
  } catch {
    /* already gone */
  }
}

/** The statements of a text (split at `;` outside quotes and comments). */
export function statements(text: string): string[] {
  const out: string[] = []
  let cur = ''
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (ch === "'" || ch === '"' || ch === '`') {
      let k = i + 1
      while (k < text.length && text[k] !== ch) k += text[k] === '\\' && ch !== '`' ? 2 : 1
      cur += text.slice(i, k + 1)
      i = k
    } else if (ch === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i)
      i = end < 0 ? text.length : end
    } else if (ch === ';') {
      if (cur.trim()) out.push(cur.trim())
      cur = ''
    } else cur += ch
  }
  if (cur.trim()) out.push(cur.trim())
  return out
}

/** The command tag race shows for a MySQL statement (MySQL sends none): its first keyword. */
export function commandOf(stmt: string): string {
  const word = (/^\s*(?:\/\*.*?\*\/\s*)*([a-z]+)/is.exec(stmt)?.[1] ?? '').toUpperCase()
  return word === 'START' || word === 'BEGIN' ? 'BEGIN' : word
}

/** A reply as rows with a command tag: a result set's rows, or an OK packet's affected rows as count. */
function toResult(reply: unknown, command: string, multi: boolean): QueryResult {
  const last = multi && Array.isArray(reply) ? reply[reply.length - 1] : reply
  if (Array.isArray(last)) {
    const rows = last.map((r) => ({ ...(r as object) })) as QueryResult
    rows.command = command
    rows.count = rows.length
    return rows
  }
  const ok = last as { affectedRows?: number }
  const rows = [] as unknown as QueryResult
  rows.command = command
  if (typeof ok?.affectedRows === 'number' && command !== 'BEGIN' && command !== 'COMMIT' && command !== 'ROLLBACK' && command !== 'SET') rows.count = ok.affectedRows
  return rows
}

/** A SQL string literal for MySQL (backslash escapes on). */
export function mysqlLiteral(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`
}

interface TrxRow {
  level: string
  state: string
  blockers: number[]
}

interface Snapshot {
  seq: number
  trx: Map<number, TrxRow>
}

/**
 * A copy that is fresh because it shows `thread`'s transaction, opened (on a connection of its own) after a moment.
 * `floor` (MariaDB): the query id of a statement the marker ran just before it opened its transaction; the server
 * numbers statements as they begin, so every statement with a smaller id began before any copy that shows the marker.
 */
interface Marker {
  conn: Conn
  thread: number
  floor: number
}

/** A copy read: made by our own read (`own`), or by another reader's after `marked` opened; 'stale' when neither. */
type Copy = (Snapshot & { own: boolean; marked?: Marker }) | 'stale'

/** The transactions of one copy by thread, with the threads each waits for (`me`, the watch's own read, left out as a blocker). */
function trxOf(rows: { id: number; thread: number; level: string; state: string; blockers: string | null }[], me: unknown): Map<number, TrxRow> {
  const byId = new Map<string, number[]>()
  for (const r of rows) if (r !== me) byId.set(String(r.id), [...(byId.get(String(r.id)) ?? []), Number(r.thread)])
  const trx = new Map<number, TrxRow>()
  for (const r of rows) {
    const ids = r.blockers ? String(r.blockers).split(',') : []
    const threads = ids.flatMap((id) => byId.get(id) ?? []).filter((t) => t !== Number(r.thread))
    trx.set(Number(r.thread), { level: String(r.level ?? '').toLowerCase(), state: String(r.state ?? ''), blockers: [...new Set(threads)] })
  }
  return trx
}

/** The MySQL/MariaDB driver of one command. */
export class MysqlLab implements Driver {
  readonly engine = 'mysql' as const
  readonly placeholders = 'question' as const
  reaped: string[] = []
  controlLost = false
  /** Read numbers of the watch connection: a copy counts for a step only if it was sent after the step ended. */
  private seq = 0
  private lastRead = -Infinity
  /** How long after the last read the next may go: WATCH_GAP_MS, longer (with jitter) after a stale copy. */
  private gapMs = WATCH_GAP_MS
  private latest?: Snapshot
  /** The level each thread's transaction had in the last fresh copy that showed it, and that copy's number. */
  private readonly seen = new Map<number, { seq: number; level: string }>()
  private reading: Promise<unknown> = Promise.resolve()
  /** The marker blocked() counts another reader's copies by (opened once a copy it read was not its own), and its opening. */
  private blockMarker?: Marker
  private blockMarkerOpening?: Promise<void>
  /** The connection that takes READ_TURN_LOCK (opened at the first read; null: none could be had, reads go unpaced). */
  private pacer?: Promise<Conn | null>
  private release: () => void = () => {}

  private constructor(
    readonly target: Target,
    private readonly control: Conn,
    private readonly watch: Conn,
    readonly server: ServerInfo,
    readonly connectTimeoutMs: number,
    private readonly controlId: number,
    private readonly account: string,
    private readonly boot: number,
    private readonly lost: Promise<never>,
    /** The run this driver belongs to: its cleanup drops the database and ends control, its abort ends the waits. */
    readonly context: RunContext,
  ) {}

  get mariadb(): boolean {
    return this.server.product === 'MariaDB'
  }

  /** `context`: the run's (a fresh one, whose cleanup is the caller's, when none is given: tests). */
  static async open(target: Target, connectTimeoutMs: number, context: RunContext = new RunContext()): Promise<MysqlLab> {
    let reject: (e: Error) => void = () => {}
    const lost = new Promise<never>((_, r) => (reject = r))
    lost.catch(() => {})
    let control: Conn | undefined
    let watch: Conn | undefined
    const release = context.onCleanup('control connection', async () => {
      await endQuietly(watch)
      await endQuietly(control)
    })
    try {
      const opts = connectionOptions(target, connectTimeoutMs)
      control = await Promise.race([mariadb.createConnection({ ...opts, connectAttributes: { program_name: 'race control' } }), context.whenAborted()])
      watch = await Promise.race([mariadb.createConnection({ ...opts, connectAttributes: { program_name: 'race watch' } }), context.whenAborted()])
      watch.on('error', () => {})
      const [facts, status] = (await control.query(
        `select version() as v, connection_id() as id, current_user() as u, user() as client, unix_timestamp() as now; show global status like 'Uptime'`,
      )) as [Record<string, unknown>[], Record<string, unknown>[]]
      const version = String(facts[0].v)
      const [maj, min, pat] = version.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0)
      const uptime = Number(status[0]?.Value ?? status[0]?.value ?? 0)
      const lab = new MysqlLab(
        target,
        control,
        watch,
        { version: version.split('-')[0], versionNum: maj * 10000 + min * 100 + pat, product: /mariadb/i.test(version) ? 'MariaDB' : 'MySQL' },
        connectTimeoutMs,
        Number(facts[0].id),
        String(facts[0].u),
        Math.round(Number(facts[0].now) - uptime),
        lost,
        context,
      )
      lab.release = release
      // The host the server sees race connect from: a run user is made there (USER(), not CURRENT_USER(), whose
      // host may be a pattern).
      lab.clientHost = String(facts[0].client).slice(String(facts[0].client).lastIndexOf('@') + 1)
      control.on('error', () => {})
      control.on('end', () => {
        lab.controlLost = true
        reject(Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' }))
      })
      await lab.checkWatch()
      await lab.reap()
      return lab
    } catch (e) {
      release()
      await endQuietly(watch, true)
      await endQuietly(control, true)
      if (context.signal.aborted || e instanceof RunError) throw e
      throw mysqlConnectError(e, target)
    }
  }

  whenLost(): Promise<never> {
    return this.lost
  }

  checkControl(): void {
    if (this.controlLost || !this.control.isValid()) throw Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' })
  }

  /** The watch must see InnoDB's transactions: that needs the PROCESS privilege. */
  private async checkWatch(): Promise<void> {
    try {
      await this.watch.query('select count(*) from information_schema.innodb_trx')
    } catch (e) {
      const err = normalizeError(e, false)
      throw new RunError(
        `this MySQL account cannot read information_schema.INNODB_TRX (${err.code ?? err.message}${conditionName(err.code) ? ' ' + conditionName(err.code) : ''}), which race needs to see lock waits: grant it PROCESS`,
      )
    }
  }

  async room(): Promise<{ free: number; max: number }> {
    const [r] = (await this.control.query(
      `select @@max_connections as max, (select count(*) from information_schema.processlist where command <> 'Daemon') as used`,
    )) as Record<string, number>[]
    return { free: Number(r.max) - Number(r.used), max: Number(r.max) }
  }

  /** The mark of a database this driver creates; `space`: the run's, whose run user it names. */
  mark(keep: boolean, space?: string): DatabaseMark {
    const u = space ? this.users.get(space) : undefined
    return { pid: process.pid, host: os.hostname(), thread: this.controlId, boot: this.boot, user: this.account, keep, ...(u ? { runUser: u.name, runHost: u.host } : {}) }
  }

  // ---- the run user: the run's SQL (setup, sessions, invariant) runs as an account confined to its database ----

  /** The host the server sees race's connections come from (USER()). */
  clientHost = ''
  /** Run users, by the run's database name (named before the database is made, created after). */
  private readonly users = new Map<string, RunUser>()
  /** The run databases whose SQL is race's own (built-in scenarios): they get no run user. */
  private readonly trusted = new Set<string>()
  /** Why runs of this driver run their SQL as race's account (said once, in one line, when it runs). */
  userless?: string

  trustSpace(name: string): void {
    this.trusted.add(name)
  }

  /** The run user of the run in `space`, when it has one. */
  runUser(space: string): RunUser | undefined {
    const u = this.users.get(space)
    return u?.conn ? u : undefined
  }

  /** Names the run user of the run in `space` (made by makeUser once its database exists), or says why there is none. */
  private nameUser(space: string): void {
    if (this.trusted.has(space) || this.userless !== undefined) return
    if (process.env.RACE_RUN_ROLE === '0') {
      this.userless = 'RACE_RUN_ROLE=0'
      return
    }
    const name = `race_u_${randomBytes(6).toString('hex')}`
    const password = randomBytes(24).toString('base64url')
    const target = asUser(this.target, name, password)
    if (!target) {
      this.userless = 'the target names no URL race could log in to as a run user'
      return
    }
    this.users.set(space, { name, host: this.clientHost, password, target })
  }

  /**
   * Creates the run user named for `space` (its database exists, marked with its name), granted only on that
   * database, and logs in as it. Refused (no CREATE USER, no grant option): dropped if half made, and the run goes on
   * as race's account, said once.
   */
  private async makeUser(space: string): Promise<void> {
    const u = this.users.get(space)
    if (!u) return
    const who = account(u.name, u.host)
    let made = false
    try {
      await this.control.query(`create user ${who} identified by ${mysqlLiteral(u.password)}`)
      made = true
      await this.control.query(`grant all privileges on ${grantDatabase(space)}.* to ${who}`)
    } catch (e) {
      const err = normalizeError(e, !this.control.isValid())
      this.users.delete(space)
      // Only the user this driver created (never one that was there: a CREATE USER that failed made nothing).
      if (made) await this.onControlOrFresh((c) => c.query(`drop user if exists ${who}`)).catch(() => {})
      if (err.code === 'CONNECTION_CLOSED') throw err
      const errno = (err as { errno?: number }).errno
      if (errno === 1227 || errno === 1044 || errno === 1045 || errno === 1142 || errno === 1410) {
        this.userless = `this MySQL account may not create the run user race runs the run's SQL as (${err.code}${conditionName(err.code) ? ' ' + conditionName(err.code) : ''}: it needs CREATE USER and GRANT OPTION on race\\_%.*)`
        return
      }
      throw err
    }
    try {
      const conn = await mariadb.createConnection({ ...connectionOptions(u.target, this.connectTimeoutMs, space), connectAttributes: { program_name: 'race setup' } })
      conn.on('error', () => {})
      u.conn = conn
    } catch (e) {
      this.users.delete(space)
      await this.control.query(`drop user if exists ${who}`).catch(() => {})
      const err = normalizeError(e, false)
      this.userless = `the server refused a login as the run user ${u.name}@${u.host} (${err.code ?? err.message})`
    }
  }

  /** Ends the run user's own connection and drops the user (bounded); what could not be dropped, as a statement. */
  async dropUser(space: string): Promise<string | undefined> {
    const u = this.users.get(space)
    if (!u) return undefined
    this.users.delete(space)
    if (u.conn) await endQuietly(u.conn, true)
    const stmt = `drop user if exists ${account(u.name, u.host)}`
    try {
      await this.onControlOrFresh((c) => c.query(stmt))
      return undefined
    } catch {
      return stmt
    }
  }

  /**
   * Says, in one line on stderr, that the run's own SQL runs as race's account, once it does: a run that ends before
   * running any of it says only why it ended.
   */
  private sayUserless(): void {
    if (this.userless === undefined || this.said) return
    this.said = true
    const line = `race: ${this.userless}: the run's SQL runs as ${this.account}, not confined to the run's database\n`
    if (process.stderr.isTTY) process.stderr.write(line)
    else process.once('exit', (code) => void (code === 0 || code === 1 ? process.stderr.write(line) : undefined))
  }

  private said = false

  ownThreads(): number[] {
    return [...this.users.values()].flatMap((u) => (u.conn ? [Number(u.conn.threadId)] : []))
  }

  /** The target a session of the run in `space` connects to: as the run user when there is one. */
  async sessionTarget(space: string): Promise<Target> {
    const u = this.runUser(space)
    if (!u && !this.trusted.has(space)) this.sayUserless()
    return u?.target ?? this.target
  }

  /**
   * Runs the run's own SQL (setup, invariant) as the run user, on its own connection in the run's database; without
   * one, on control (which works in the run's database). A failure names its statement (`statement`).
   */
  async runQuery(space: string, text: string, args: unknown[] = []): Promise<QueryResult> {
    const u = this.runUser(space)
    if (!u) {
      if (!this.trusted.has(space)) this.sayUserless()
      return this.query(text, args).catch((e) => {
        throw Object.assign(e as Error, { statement: text })
      })
    }
    const stmts = statements(text)
    try {
      const reply = args.length ? await u.conn!.execute(text, args) : await u.conn!.query(text)
      return toResult(reply, commandOf(stmts[stmts.length - 1] ?? ''), stmts.length > 1 && !args.length)
    } catch (e) {
      throw Object.assign(normalizeError(e, !u.conn!.isValid()), { statement: text })
    }
  }

  /** The database comment holds the mark on MariaDB 10.5+ (one statement); elsewhere a marker table's comment does. */
  private get schemaComments(): boolean {
    return this.mariadb && this.server.versionNum >= 100500
  }

  createSql(name: string, keep: boolean): string {
    const mark = mysqlLiteral('race:' + JSON.stringify(this.mark(keep, name)))
    return this.schemaComments
      ? `create database \`${name}\` comment ${mark}`
      : `create database \`${name}\`; create table \`${name}\`.race_mark (id int) comment ${mark}`
  }

  recreateSql(name: string, keep: boolean): string {
    return `drop database \`${name}\`; ${this.createSql(name, keep)}`
  }

  useSql(name: string): string {
    return `use \`${name}\``
  }

  /**
   * Drops the databases a race run of this account marked and whose run is gone: its control thread is no
   * longer in PROCESSLIST (or the server has restarted since). Never one kept, never a live run's, never another account's.
   */
  async reap(): Promise<void> {
    let rows: { name: string; mark: string }[]
    let live: Set<number>
    try {
      rows = (await this.control.query(
        this.schemaComments
          ? `select schema_name as name, schema_comment as mark from information_schema.schemata where schema_name like 'race\\_%' and schema_comment like 'race:{%}'`
          : `select table_schema as name, table_comment as mark from information_schema.tables where table_schema like 'race\\_%' and table_name = 'race_mark' and table_comment like 'race:{%}'`,
      )) as { name: string; mark: string }[]
      live = new Set(((await this.control.query(`select id from information_schema.processlist`)) as { id: number }[]).map((r) => Number(r.id)))
    } catch {
      return
    }
    for (const { name, mark } of rows) {
      let m: Partial<DatabaseMark>
      try {
        m = JSON.parse(String(mark).slice(5)) as Partial<DatabaseMark>
      } catch {
        continue
      }
      if (m.keep || m.user !== this.account || typeof m.thread !== 'number' || typeof m.boot !== 'number') continue
      const sameBoot = Math.abs(m.boot - this.boot) <= 2
      if (sameBoot && live.has(m.thread)) continue
      try {
        // The run user the mark names, only if its grants show it is this database's run user and nothing else (the
        // mark is in the run user's reach: it may have rewritten it). Read before the database goes.
        const user = typeof m.runUser === 'string' && typeof m.runHost === 'string' && (await isRunUserOf(this.control, m.runUser, m.runHost, name).catch(() => false)) ? account(m.runUser, m.runHost) : undefined
        await this.control.query(`set session lock_wait_timeout = ${DROP_LOCK_TIMEOUT_S}; drop database if exists \`${name}\`; set session lock_wait_timeout = default`)
        if (user) await this.control.query(`drop user if exists ${user}`)
        this.reaped.push(name)
      } catch {
        /* another run reaped it first, or it is busy: the next run tries again */
      }
    }
  }

  async createSpace(label: string, keep: boolean, run: (text: string) => Promise<unknown> = (t) => this.query(t), name = spaceName(label)): Promise<RunSpace> {
    // The run user is named in the database's mark before it exists (a run killed in between leaves a mark naming a
    // user that is not there, never a user no mark names), and made once the database is.
    this.nameUser(name)
    const space = new MysqlSpace(this, name, keep)
    try {
      await run(this.createSql(name, keep))
    } catch (e) {
      this.users.delete(name)
      space.release()
      const err = normalizeError(e, !this.control.isValid())
      if (this.context.signal.aborted || err.code === 'CONNECTION_CLOSED') throw err
      if (err.code === '42000/1044') {
        throw new RunError(`this MySQL account may not create a database (42000/1044 ER_DBACCESS_DENIED_ERROR): grant it CREATE and DROP on race\\_%.*, or use another account`)
      }
      throw new RunError(`could not create the run's database ${name}: ${err.message}`)
    }
    // Failing (not refused: the connection lost), the run's cleanup drops the database and the user if it was made.
    await this.makeUser(name)
    return space
  }

  async query(text: string, args: unknown[] = []): Promise<QueryResult> {
    const stmts = statements(text)
    try {
      const reply = args.length ? await this.control.execute(text, args) : await this.control.query(text)
      return toResult(reply, commandOf(stmts[stmts.length - 1] ?? ''), stmts.length > 1 && !args.length)
    } catch (e) {
      throw normalizeError(e, this.controlLost || !this.control.isValid())
    }
  }

  /** Runs fn on control or, when control is gone, on a fresh connection (cleanup must not depend on the connection whose loss is the fault). */
  async onControlOrFresh<T>(fn: (c: Conn) => Promise<T>): Promise<T> {
    if (!this.controlLost && this.control.isValid()) {
      try {
        return await fn(this.control)
      } catch (e) {
        if (normalizeError(e, !this.control.isValid()).code !== 'CONNECTION_CLOSED') throw e
      }
    }
    const fresh = await mariadb.createConnection({ ...connectionOptions(this.target, this.connectTimeoutMs), connectAttributes: { program_name: 'race cleanup' } })
    fresh.on('error', () => {})
    try {
      return await fn(fresh)
    } finally {
      await endQuietly(fresh, true)
    }
  }

  async cancelControl(done: Promise<void>): Promise<void> {
    try {
      const fresh = await mariadb.createConnection({ ...connectionOptions(this.target, this.connectTimeoutMs), connectAttributes: { program_name: 'race cleanup' } })
      fresh.on('error', () => {})
      try {
        for (const id of [this.controlId, ...[...this.users.values()].map((u) => (u.conn ? Number(u.conn.threadId) : 0)).filter((t) => t > 0)]) {
          await fresh.query(`kill query ${id}`).catch(() => {})
        }
      } finally {
        await endQuietly(fresh, true)
      }
    } catch {
      /* the server may be gone too: cleanup says what was left */
    }
    await Promise.race([done, sleep(2000)])
  }

  async openSession(o: SessionOptions): Promise<SessionConn> {
    const init = Object.entries(o.params).map(([k, v]) => {
      if (!/^[a-z_][a-z0-9_]*$/i.test(k)) throw new RunError(`session parameter '${k}' is not a MySQL variable name`)
      return `set session ${k} = ${mysqlLiteral(v)}`
    })
    if (!this.runUser(o.space) && !this.trusted.has(o.space)) this.sayUserless()
    let conn: Conn
    try {
      conn = await mariadb.createConnection({
        ...connectionOptions(this.runUser(o.space)?.target ?? this.target, o.connectTimeoutMs, o.space),
        connectAttributes: { program_name: o.applicationName },
        ...(init.length ? { initSql: init } : {}),
      })
    } catch (e) {
      throw sessionConnectError(e, this.target, this.context.signal.aborted)
    }
    return new MysqlSession(this, conn, o.stepTimeoutMs)
  }

  async cancel(pid: number, terminate: boolean): Promise<void> {
    if (!Number.isInteger(pid)) return
    await this.control.query(terminate ? `kill connection ${pid}` : `kill query ${pid}`).catch(() => {})
  }

  /** KILL CONNECTION for each, then waits (bounded) until PROCESSLIST no longer shows them. */
  async terminate(pids: number[]): Promise<void> {
    const ids = pids.filter((p) => Number.isInteger(p) && p > 0)
    if (!ids.length) return
    const work = this.onControlOrFresh(async (c) => {
      for (const id of ids) await c.query(`kill connection ${id}`).catch(() => {})
      for (let i = 0; i < 100; i++) {
        const left = (await c.query(`select id from information_schema.processlist where id in (${ids.join(',')})`)) as unknown[]
        if (!left.length) return
        await sleep(20)
      }
    })
    await Promise.race([work.then(() => {}, () => {}), sleep(2500 + this.connectTimeoutMs)])
  }

  async close(): Promise<void> {
    this.release()
    // The run users' own connections (each user is dropped with its database, by the run's cleanup).
    for (const u of this.users.values()) if (u.conn) await endQuietly(u.conn, true)
    await this.blockMarkerOpening
    this.dropBlockMarker()
    const pacer = await this.pacer?.catch(() => null)
    if (pacer) await endQuietly(pacer, true)
    await endQuietly(this.watch)
    await endQuietly(this.control)
  }

  // ---- watching: who waits, at which level a transaction runs ----

  /** The number of the last copy sent: a copy with a larger number was read after this moment. */
  watchSeq(): number {
    return this.seq
  }

  /**
   * A fresh copy of InnoDB's transactions and lock waits, or undefined when none can be had now: `wait` false
   * returns at once if the cache cannot have been refreshed since the last read (less than WATCH_GAP_MS ago).
   */
  private snapshot(wait: boolean, marker?: Marker): Promise<Copy | undefined> {
    const next = this.reading.then(async (): Promise<{ copy: Copy | undefined; held?: Promise<unknown> }> => {
      const gap = performance.now() - this.lastRead
      if (gap < this.gapMs) {
        if (!wait) return { copy: undefined }
        await sleep(this.gapMs - gap)
      }
      // This process's turn among the races reading INNODB_TRX on this server (READ_TURN_LOCK): a read that may
      // give up (block polling) does not wait for it.
      const turn = await this.readTurn(wait)
      if (turn === undefined) return { copy: undefined }
      const copy = await this.readCopy(marker)
      // Held until the cache may be refreshed again, so that the next reader's copy is fresh too; the copy goes to
      // the caller at once, this process's next read waits for the release.
      const held = turn ? sleep(WATCH_GAP_MS).then(() => turn.query('do release_lock(?)', [READ_TURN_LOCK])).catch(() => {}) : undefined
      return { copy, held }
    })
    this.reading = next.then((r) => r.held).catch(() => {})
    return next.then((r) => r.copy)
  }

  /**
   * Takes READ_TURN_LOCK: the pacer connection holding it, null when reading unpaced (no pacer connection, or the
   * turn did not come within READ_TURN_WAIT_S: someone holds it who is not a race), undefined when `wait` is false
   * and another race is reading now.
   */
  private async readTurn(wait: boolean): Promise<Conn | null | undefined> {
    this.pacer ??= mariadb
      .createConnection({ ...connectionOptions(this.target, this.connectTimeoutMs), connectAttributes: { program_name: 'race watch turn' } })
      .then((c) => (c.on('error', () => {}), c))
      .catch(() => null)
    const pacer = await this.pacer
    if (!pacer || this.context.signal.aborted) return null
    try {
      const [r] = (await pacer.query('select get_lock(?, ?) as got', [READ_TURN_LOCK, wait ? READ_TURN_WAIT_S : 0])) as { got: number | null }[]
      if (Number(r?.got) === 1) return pacer
      return wait ? null : undefined
    } catch {
      return null
    }
  }

  /** One read of INNODB_TRX on the watch connection (see snapshot). */
  private async readCopy(marker?: Marker): Promise<Copy | undefined> {
    {
      const n = ++this.seq
      const token = `race watch ${this.controlId}.${n} `
      // MariaDB shows every read-only transaction with trx_id 0 (in INNODB_TRX and in INNODB_LOCK_WAITS alike): a
      // wait is found by the lock it requests, and its blockers are matched by id in JavaScript, 0 meaning "one of
      // the read-only transactions".
      const blockers = this.mariadb
        ? `(select group_concat(w.blocking_trx_id) from information_schema.innodb_lock_waits w where w.requested_lock_id = t.trx_requested_lock_id)`
        : `null`
      try {
        const reply = (await this.watch.query(
          `start transaction with consistent snapshot; select /* ${token}*/ t.trx_id as id, t.trx_mysql_thread_id as thread, t.trx_isolation_level as level, t.trx_state as state, t.trx_query as q, ${blockers} as blockers from information_schema.innodb_trx t; commit`,
        )) as unknown[]
        this.lastRead = performance.now()
        const rows = reply[1] as { id: number; thread: number; level: string; state: string; q: string | null; blockers: string | null }[]
        const me = rows.find((r) => r.q?.includes(token))
        if (!me) {
          // A copy another reader's query made. Another reader polling at our pace would keep the cache from ever
          // being idle for 0.1 s; waiting a random while longer lets one of us find a quiet moment.
          this.gapMs = WATCH_GAP_MS + Math.random() * 300
          // Made after the marker's transaction began (it shows it): fresh for what the marker was opened for only
          // (its caller judges). Which watch reads it came after is not known, so nothing else counts it.
          if (marker && rows.some((r) => Number(r.thread) === marker.thread)) return { seq: n, trx: trxOf(rows, undefined), own: false, marked: marker }
          return 'stale'
        }
        this.gapMs = WATCH_GAP_MS
        const trx = trxOf(rows, me)
        this.latest = { seq: n, trx }
        for (const [thread, t] of trx) if (t.level) this.seen.set(thread, { seq: n, level: t.level })
        return { ...this.latest, own: true }
      } catch {
        this.lastRead = performance.now()
        return undefined
      }
    }
  }

  /**
   * The level of `pid`'s transaction in the last fresh copy that showed it, if that copy was read after watch read
   * number `after` (so it is the transaction open since then, even if the server has ended it since, e.g. a
   * deadlock victim's).
   */
  levelSeen(pid: number, after: number): string | undefined {
    const s = this.seen.get(pid)
    return s && s.seq > after ? s.level : undefined
  }

  /**
   * The isolation level InnoDB records for `pid`'s transaction, from a fresh copy read after watch read number `after`.
   * undefined: the copy does not show it (a transaction that has read and written no InnoDB row: no level applied to
   * anything). UNREAD_LEVEL: no fresh copy could be had (bounded): the level is unknown, and the judge says so.
   */
  async levelOf(pid: number, after: number, boundMs: number): Promise<string | undefined> {
    const until = performance.now() + boundMs
    let marker: Marker | undefined
    try {
      for (;;) {
        if (this.latest && this.latest.seq > after) return this.latest.trx.get(pid)?.level || undefined
        if (this.context.signal.aborted) return undefined
        if (performance.now() > until) return UNREAD_LEVEL
        const snap = await this.snapshot(true, marker)
        if (snap && snap !== 'stale' && snap.marked) return snap.trx.get(pid)?.level || undefined
        // A stale copy: someone else reads INNODB_TRX too. From now on a copy they make counts, if it shows a
        // transaction begun after this read did (and so after the session's last statement).
        if ((!snap || snap === 'stale') && !marker) marker = await this.openMarker()
      }
    } finally {
      if (marker) await endQuietly(marker.conn, true)
    }
  }

  /** A connection of its own with a transaction open (InnoDB lists it in INNODB_TRX); undefined if none can be had. */
  private async openMarker(): Promise<Marker | undefined> {
    let conn: Conn | undefined
    try {
      conn = await mariadb.createConnection({ ...connectionOptions(this.target, this.connectTimeoutMs), connectAttributes: { program_name: 'race level marker' } })
      conn.on('error', () => {})
      if (!this.mariadb) {
        await conn.query('start transaction with consistent snapshot')
        return { conn, thread: Number(conn.threadId), floor: 0 }
      }
      // The select's own query id, then the transaction: every statement numbered below it began before the marker.
      const reply = (await conn.query(
        'select query_id as q from information_schema.processlist where id = connection_id(); start transaction with consistent snapshot',
      )) as unknown[]
      const floor = Number((reply[0] as { q: number }[])[0]?.q)
      if (!Number.isFinite(floor)) throw new Error('no query id')
      return { conn, thread: Number(conn.threadId), floor }
    } catch {
      if (conn) await endQuietly(conn, true)
      return undefined
    }
  }

  async blocked<C extends Pick<SessionConn, 'pid'>>(ask: readonly C[], all: number[]): Promise<Set<C>> {
    const got = await this.blockedIds(ask.map((x) => x.pid), all)
    return new Set(ask.filter((x) => got.has(x.pid)))
  }

  /** The threads among `ask` waiting for one of `all` (or, in GET_LOCK or for a metadata lock, for anyone). */
  private async blockedIds(ask: number[], all: number[]): Promise<Set<number>> {
    const ids = ask.filter((p) => Number.isInteger(p))
    const out = new Set<number>()
    if (!ids.length) return out
    // MariaDB numbers each statement as it begins (QUERY_ID): a copy of INNODB_TRX judges a statement only if it was
    // made after that statement began (see waitsSince).
    const rows = (await this.watch.query(
      `select id, command, state, ${this.mariadb ? 'query_id' : '0'} as q from information_schema.processlist where id in (${ids.join(',')})`,
    )) as {
      id: number
      command: string
      state: string | null
      q: number
    }[]
    const running: number[] = []
    let since = 0
    for (const r of rows) {
      const state = String(r.state ?? '')
      // GET_LOCK waits ('User lock') and metadata/table lock waits are live in PROCESSLIST.
      if (state === 'User lock' || /^Waiting for .*lock/i.test(state)) out.add(Number(r.id))
      else if (r.command === 'Query' || r.command === 'Execute') {
        running.push(Number(r.id))
        since = Math.max(since, Number(r.q))
      }
    }
    if (!running.length) return out
    if (!this.mariadb) {
      // MySQL 8: performance_schema.data_lock_waits is live.
      const waits = (await this.watch.query(
        `select rt.processlist_id as waiting, bt.processlist_id as blocking from performance_schema.data_lock_waits w
           join performance_schema.threads rt on rt.thread_id = w.requesting_thread_id
           join performance_schema.threads bt on bt.thread_id = w.blocking_thread_id
          where rt.processlist_id in (${running.join(',')})`,
      )) as { waiting: number; blocking: number }[]
      for (const w of waits) if (all.includes(Number(w.blocking))) out.add(Number(w.waiting))
      return out
    }
    const trx = await this.waitsSince(since, false)
    if (trx) for (const id of running) if (trx.get(id)?.blockers.some((b) => all.includes(b))) out.add(id)
    return out
  }

  /**
   * InnoDB's transactions from a copy made after every statement numbered up to `since` (a query id PROCESSLIST
   * showed running) began, or undefined when this read gives none: `wait` false when the cache cannot have been
   * refreshed since the last read. A copy made before such a statement began could show its session still waiting
   * in an earlier statement, or not yet waiting: neither counts. Our own read (sent after PROCESSLIST showed the
   * statement) qualifies; so does another reader's copy that shows blockMarker, once its floor is above `since`.
   * After a copy that does not, a new marker is opened for the next read (without waiting for it): only while
   * someone else reads INNODB_TRX.
   */
  private async waitsSince(since: number, wait: boolean): Promise<Map<number, TrxRow> | undefined> {
    const marker = this.blockMarker
    const snap = await this.snapshot(wait, marker && marker.floor > since ? marker : undefined)
    if (!snap) return undefined
    if (snap !== 'stale') {
      if (snap.own) this.dropBlockMarker()
      return snap.trx
    }
    // Opened meanwhile (the next read is WATCH_GAP_MS away anyway): the poll that found the copy stale does not wait.
    void this.openBlockMarker(since).catch(() => {})
    return undefined
  }

  /** A marker whose floor is above `since` (opened now, after PROCESSLIST showed that statement), replacing the last. */
  private async openBlockMarker(since: number): Promise<void> {
    while (!(this.blockMarker && this.blockMarker.floor > since)) {
      if (this.context.signal.aborted) return
      if (!this.blockMarkerOpening) {
        this.blockMarkerOpening = (async () => {
          const m = await this.openMarker()
          if (!m) return
          const old = this.blockMarker
          this.blockMarker = m
          if (old) await endQuietly(old.conn, true)
        })().finally(() => (this.blockMarkerOpening = undefined))
        await this.blockMarkerOpening
        if (!(this.blockMarker && this.blockMarker.floor > since)) return // none could be had (or a slower one): the next read tries again
      } else await this.blockMarkerOpening
    }
  }

  private dropBlockMarker(): void {
    const m = this.blockMarker
    this.blockMarker = undefined
    if (m) void endQuietly(m.conn, true)
  }

  async blockers(pid: number): Promise<number[]> {
    if (!this.mariadb) {
      const waits = (await this.watch.query(
        `select bt.processlist_id as blocking from performance_schema.data_lock_waits w
           join performance_schema.threads rt on rt.thread_id = w.requesting_thread_id
           join performance_schema.threads bt on bt.thread_id = w.blocking_thread_id
          where rt.processlist_id = ${Number(pid)}`,
      )) as { blocking: number }[]
      return waits.map((w) => Number(w.blocking))
    }
    const [row] = (await this.watch.query(`select query_id as q from information_schema.processlist where id = ${Number(pid)}`)) as { q: number }[]
    if (!row) return []
    for (let i = 0; i < 5; i++) {
      const trx = await this.waitsSince(Number(row.q), true)
      if (trx) return trx.get(pid)?.blockers ?? []
    }
    return []
  }
}

/** A database this driver created: dropped at the end (unless kept), also on Ctrl-C and errors. */
class MysqlSpace implements RunSpace {
  private readonly unregister: () => void
  constructor(
    private readonly lab: MysqlLab,
    readonly name: string,
    readonly keep: boolean,
  ) {
    this.unregister = lab.context.onCleanup(`database ${name}`, async () => {
      const left = await this.drop()
      if (left) throw new Error(left.note)
    })
  }

  release(): void {
    this.unregister()
  }

  async drop(): Promise<Leftover | undefined> {
    // The run user goes first, also when the database is kept (nobody knows its password: it could only be in the way).
    const user = await this.lab.dropUser(this.name)
    if (this.keep) return user ? { note: `the run user of ${this.name} was left behind: drop it with: ${user}`, serverGone: false } : undefined
    const stmt = `drop database if exists \`${this.name}\``
    try {
      // Bounded: a metadata lock someone else holds on one of our tables must not hold the drop (and race) forever.
      await this.lab.onControlOrFresh((c) => c.query(`set session lock_wait_timeout = ${DROP_LOCK_TIMEOUT_S}; ${stmt}; set session lock_wait_timeout = default`))
      if (user) return { note: `the run user of ${this.name} was left behind: drop it with: ${user}`, serverGone: false }
      return undefined
    } catch (e) {
      const err = normalizeError(e, false)
      const code = err.code ?? (e as { code?: string }).code
      const serverGone = code === 'CONNECTION_CLOSED' || /ECONNREFUSED|ER_CONNECTION_TIMEOUT|ETIMEDOUT/.test(String(code ?? err.message))
      return { note: `database ${this.name} was left behind (${code ?? err.message}${conditionName(code) ? ' ' + conditionName(code) : ''}): drop it with: ${stmt}${user ? `; ${user}` : ''}`, serverGone }
    }
  }
}

/** A session's connection (one MySQL thread). */
/** MySQL's error number for a deadlock: InnoDB rolled the victim's whole transaction back. */
const ER_LOCK_DEADLOCK = 1213

class MysqlSession implements SessionConn {
  readonly pid: number
  private lost = false
  /** A BEGIN/START TRANSACTION of this session opened the transaction now open. */
  private begun = false
  /** The watch read number when the transaction was last seen open after a statement. */
  private seenOpen = 0

  constructor(
    private readonly lab: MysqlLab,
    private readonly conn: Conn,
    /** --step-timeout: what a level read may take too (at COMMIT it is part of the step). */
    private readonly stepTimeoutMs: number,
  ) {
    this.pid = Number(conn.threadId)
    conn.on('error', () => void (this.lost = true))
    conn.on('end', () => void (this.lost = true))
  }

  get closed(): boolean {
    return this.lost || !this.conn.isValid()
  }

  /**
   * The server rolled the whole transaction back with an error (1213, a deadlock victim). An error packet carries no
   * status flags, so the connector still shows the transaction open until the next statement answers.
   */
  private endedByServer = false

  private get open(): boolean {
    return !this.endedByServer && ((this.conn.info?.status ?? 0) & IN_TRANS) !== 0
  }

  step(text: string, args: unknown[]): StepRun {
    const stmts = statements(text)
    const command = commandOf(stmts[stmts.length - 1] ?? '')
    const ending = command === 'COMMIT' || command === 'ROLLBACK'
    const wasOpen = this.open
    // Before a transaction ends, its isolation level as InnoDB records it (a copy read after it was last seen open).
    const level = ending && wasOpen ? this.lab.levelOf(this.pid, this.seenOpen, this.stepTimeoutMs) : undefined
    const result = (async () => {
      if (level) await level
      if (command === 'COMMIT' && this.begun && !wasOpen) {
        throw Object.assign(new Error('COMMIT found no open transaction: the server had already ended it'), { code: 'TRANSACTION_ENDED' })
      }
      let reply: unknown
      try {
        reply = args.length ? await this.conn.execute(text, args) : await this.conn.query(text)
      } catch (e) {
        if ((e as { errno?: number }).errno === ER_LOCK_DEADLOCK) this.endedByServer = true
        throw e
      }
      this.endedByServer = false
      const res = toResult(reply, command, stmts.length > 1 && !args.length)
      if (command === 'BEGIN' && this.open) this.begun = true
      if (!this.open) this.begun = false
      else this.seenOpen = this.lab.watchSeq()
      return res
    })().catch((e) => {
      throw normalizeError(e, this.closed)
    })
    return { result, level }
  }

  async rollback(): Promise<(QueryResult & { level?: string }) | undefined> {
    try {
      // Before it ends, the level of the transaction as InnoDB records it (read before COMMIT otherwise): a rejected
      // or failed session's level is then known too. Ended by the server already (a deadlock victim): the level a
      // copy showed while it was open. When no copy showed it, unknown (UNREAD_LEVEL), not absent: a transaction
      // the server ended had a level (a deadlock victim locked rows), and an absent level is compared as a match.
      const level = this.open
        ? await this.lab.levelOf(this.pid, this.seenOpen, this.stepTimeoutMs)
        : (this.lab.levelSeen(this.pid, this.seenOpen) ?? (this.begun ? UNREAD_LEVEL : undefined))
      const r = await Promise.race([this.conn.query('rollback'), sleep(2000).then(() => undefined)])
      if (r === undefined) return undefined
      this.begun = false
      return Object.assign(toResult(r, 'ROLLBACK', false), level ? { level } : {})
    } catch {
      return undefined
    }
  }

  close(): Promise<void> {
    return endQuietly(this.conn)
  }

  /**
   * Ends the thread now. Not with the connector's destroy() while a statement is in flight: that KILLs the thread
   * from a connection of its own and leaves the KILL's failure (1094 Unknown thread id, when the thread had
   * already ended, e.g. killed by race's cleanup a moment before) as an unhandled rejection. So race ends the
   * thread itself, where 1094 only means it is gone, and waits (bounded) until the connector has seen its socket
   * close: destroy() then has nothing left to kill.
   */
  async destroy(): Promise<void> {
    if (!this.closed) {
      await this.lab.terminate([this.pid])
      for (let i = 0; i < 100 && !this.closed; i++) await sleep(10)
    }
    return endQuietly(this.conn, true)
  }
}
