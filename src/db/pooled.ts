// Sessions through a connection pooler, behind the driver seam: a Driver over PostgreSQL's PostgresLab whose session
// connections are clients of the pooler (race's own PgBouncer, servers/pooler.ts, or one the user runs, --pooled).
// The control connection stays direct. A client owns no backend: the pooler lends it a server connection per
// transaction (or per client, or per statement), so where each step ran is asked from the pooler (its own
// links), never guessed; block detection asks the pooler which server connection a waiting client holds and
// the server whether that backend waits for one of the pool's; between trials the pool's server connections
// are dropped, so nothing a trial left on them (a leaked lock, a SET) reaches the next.
import { setTimeout as sleep } from 'node:timers/promises'
import postgres, { type Sql } from 'postgres'
import { RunError, UsageError } from '../errors.js'
import { connect, endQuietly } from './connect.js'
import type { Driver, Leftover, QueryResult, RunSpace, SessionConn, SessionOptions, StepRun } from './driver.js'
import type { ServerFatal } from './fatal.js'
import type { PostgresLab, RunSchema } from './postgres.js'
import type { Target } from './target.js'

/**
 * The pooler's side of one run: where the clients connect and what the pooler (or, for one the user runs, the
 * server) says about them.
 */
export interface PoolRoute {
  /** Where the sessions connect. */
  target: Target
  /** Added to each session's application_name, so the pooler's and the server's views name this run's clients. */
  tag: string
  /** Startup parameters every session sends (a pooler the user runs must pass search_path on). */
  startup?: Record<string, string>
  /** e.g. "PgBouncer 1.18.0, transaction mode, pool size 2 (race's own, on 127.0.0.1:6432)". */
  describe: string
  /** The backend each of this run's clients (by application_name) is linked to right now. */
  links(): Promise<Map<string, number>>
  /** The server backends this run's clients may be using: the pool's, for block detection and for ending them. */
  backends(): Promise<number[]>
  /** Between trials: drops the pool's server connections (nothing of a trial's session state may outlive it). */
  recycle(): Promise<void>
  close(): Promise<void>
}

/** Opens the route once the run's schema exists (the pool sets its server connections' search_path). */
export interface PoolOpener {
  /** The pool's server connections (null: unknown, a pooler the user runs). */
  size: number | null
  open(schema: string): Promise<PoolRoute>
}

/** How many clients race's own PgBouncer accepts (max_client_conn). */
export const MAX_CLIENTS = 1000

/** How long a question to the pooler may take before race treats the answer as "not seen". */
const ASK_MS = 2000

async function bounded<T>(p: Promise<T>, fallback: T): Promise<T> {
  return Promise.race([p.catch(() => fallback), sleep(ASK_MS).then(() => fallback)])
}

/**
 * A client of the pooler. It connects with its first statement, not before: in session mode a client holds a
 * server connection from its first statement until it disconnects, and a pool smaller than the number of
 * sessions must not fill up before the schedule starts. No search_path startup parameter (PgBouncer 1.18 refuses
 * it; the pool sets every server connection's), no named prepared statements (unnamed only), no query of
 * postgres.js's own after login, and nothing pipelined: two statements of one client may land on two server
 * connections.
 */
export class PooledSession implements SessionConn {
  private closedFlag = false
  private readonly sql: Sql
  fatal?: ServerFatal
  /** Between BEGIN and COMMIT/ROLLBACK, from the command tags the server answered. */
  private inTx = false
  /** The backend of the open transaction (in transaction mode the client keeps it until the transaction ends). */
  private txBackend?: number
  /** The step in flight: its number, and its backend once seen. */
  private flight?: { seq: number; backend?: number }
  private seq = 0

  constructor(
    private readonly route: PoolRoute,
    readonly appName: string,
    o: SessionOptions,
  ) {
    this.sql = connect(route.target, {
      connectTimeoutMs: o.connectTimeoutMs,
      applicationName: appName,
      params: { ...(route.startup ?? {}), ...o.params },
      prepare: false,
      fetchTypes: false,
      onclose: () => {
        this.closedFlag = true
      },
      onFatal: (e) => {
        this.fatal = e
      },
    })
  }

  get pid(): number {
    return this.flight?.backend ?? this.txBackend ?? 0
  }

  get closed(): boolean {
    return this.closedFlag
  }

  /** The step in flight (its number), for the watch: a client counts as blocked only if its step stayed the same. */
  inFlight(): number | undefined {
    return this.flight?.seq
  }

  /** The watch saw the pooler lend step `seq` this backend. */
  saw(seq: number, backend: number): void {
    if (this.flight?.seq === seq && this.flight.backend === undefined) this.flight.backend = backend
  }

  private async linkNow(): Promise<number | undefined> {
    return (await bounded(this.route.links(), new Map<string, number>())).get(this.appName)
  }

  step(text: string, args: unknown[], readLevel: boolean): StepRun {
    const f: { seq: number; backend?: number } = { seq: ++this.seq, backend: this.inTx ? this.txBackend : undefined }
    this.flight = f
    const send = () => (args.length ? this.sql.unsafe(text, args as never[]) : this.sql.unsafe(text)) as unknown as Promise<QueryResult>
    // The level only inside a transaction (on its server connection), and never in the same pipeline: outside
    // one, SHOW would run on whichever server connection the pool lends it, not necessarily the step's.
    let level: Promise<string | undefined> | undefined
    let result: Promise<QueryResult>
    if (readLevel && this.inTx) {
      const show = this.sql.unsafe('show transaction_isolation') as unknown as Promise<QueryResult>
      level = show.then(
        (r) => String(r[0]?.transaction_isolation ?? ''),
        () => undefined,
      )
      result = level.then(send)
    } else result = send()
    result = result.then((r) => {
      const tag = r.command ?? ''
      if (tag === 'BEGIN' || tag === 'START TRANSACTION') this.inTx = true
      if (tag === 'COMMIT' || tag === 'ROLLBACK') this.inTx = false
      return r
    })
    // After the step: if the pooler still lends this client a server connection (an open transaction, or session
    // mode), the step ran on it. In transaction mode an autocommit statement's connection is handed back with its
    // result, so its backend stays unknown unless the watch saw it lent while the step ran.
    const backend = result.then(
      () => this.placed(f),
      () => this.placed(f),
    )
    return { result, level, backend }
  }

  private async placed(f: { seq: number; backend?: number }): Promise<number | null> {
    if (f.backend === undefined || (this.inTx && this.txBackend === undefined)) {
      const b = await this.linkNow()
      if (b !== undefined) {
        f.backend ??= b
        if (this.inTx) this.txBackend = b
      }
    }
    if (!this.inTx) this.txBackend = undefined
    if (this.flight === f) this.flight = undefined
    return f.backend ?? null
  }

  async lent(): Promise<number | undefined> {
    const b = await this.linkNow()
    if (b !== undefined && this.flight && this.flight.backend === undefined) this.flight.backend = b
    return b
  }

  async rollback(): Promise<QueryResult | undefined> {
    const r = (await Promise.race([this.sql.unsafe('rollback'), sleep(2000)])) as QueryResult | undefined
    this.inTx = false
    this.txBackend = undefined
    return r
  }

  private forget(): void {
    this.inTx = false
    this.txBackend = undefined
    this.flight = undefined
  }

  async done(): Promise<void> {
    await this.close()
  }

  async close(): Promise<void> {
    await endQuietly(this.sql, 1)
    this.forget()
  }

  async destroy(): Promise<void> {
    await endQuietly(this.sql, 0)
    this.forget()
  }
}

/** The run's schema and, closed before the schema is dropped, the pooler in front of it. */
class PooledSpace implements RunSpace {
  constructor(
    private readonly schema: RunSchema,
    private readonly route: PoolRoute,
  ) {}
  get name(): string {
    return this.schema.name
  }
  get keep(): boolean {
    return this.schema.keep
  }
  release(): void {
    this.schema.release()
  }
  async drop(): Promise<Leftover | undefined> {
    // The pool first: its server connections may hold what the sessions left (a leaked lock).
    await this.route.close().catch(() => {})
    return this.schema.drop()
  }
}

/**
 * The PostgreSQL driver with every session routed through a pooler: control, the schema, the invariant and
 * cleanup are the PostgresLab's (direct); sessions are the pooler's clients.
 */
export class PooledDriver implements Driver {
  readonly engine = 'postgres' as const
  readonly placeholders = 'dollar' as const
  /** The pooler, described, once the run's space has opened it. */
  describe?: string
  private route?: PoolRoute

  constructor(
    private readonly lab: PostgresLab,
    private readonly opener: PoolOpener,
  ) {
    lab.withoutRole('--pooled: the sessions log in through the pooler as its users, not as a run role')
  }

  get target(): Target {
    return this.lab.target
  }
  get server() {
    return this.lab.server
  }
  get connectTimeoutMs(): number {
    return this.lab.connectTimeoutMs
  }
  get reaped(): string[] {
    return this.lab.reaped
  }
  get reaping(): Promise<void> | undefined {
    return this.lab.reaping
  }
  whenLost(): Promise<never> {
    return this.lab.whenLost()
  }
  checkControl(): void {
    this.lab.checkControl()
  }

  /** The server sees the pool's connections, not one per session: the pool must fit; the sessions are its clients. */
  async room(): Promise<{ free: number; max: number }> {
    const r = await this.lab.room()
    const need = this.opener.size ?? 0
    if (need > r.free) {
      throw new UsageError(
        `the pool needs ${need} connections, but the server has room for ${Math.max(0, r.free)} more (max_connections ${r.max}): use --pool-size ${Math.max(1, r.free)} or fewer`,
      )
    }
    return { free: MAX_CLIENTS, max: MAX_CLIENTS }
  }

  trustSpace(name: string): void {
    this.lab.trustSpace(name)
  }

  async createSpace(label: string, keep: boolean, run?: (text: string) => Promise<unknown>, name?: string): Promise<RunSpace> {
    const schema = await this.lab.createSchema(label, keep, run, name)
    try {
      this.route = await Promise.race([this.opener.open(schema.name), this.lab.context.whenAborted()])
    } catch (e) {
      schema.release()
      const left = await schema.drop()
      if (left && e instanceof Error) e.message = `${e.message}; ${left.note}`
      throw e
    }
    this.describe = this.route.describe
    return new PooledSpace(schema, this.route)
  }

  recreateSql(name: string, keep: boolean): string {
    return this.lab.recreateSql(name, keep)
  }
  useSql(name: string): string {
    return this.lab.useSql(name)
  }
  query(text: string, args?: unknown[]): Promise<QueryResult> {
    return this.lab.query(text, args)
  }
  /** On control (no run role through a pooler), saying so once (PostgresLab.runQuery). */
  runQuery(space: string, text: string, args?: unknown[]): Promise<QueryResult> {
    return this.lab.runQuery(space, text, args)
  }
  cancelControl(done: Promise<void>): Promise<void> {
    return this.lab.cancelControl(done)
  }

  async openSession(o: SessionOptions): Promise<SessionConn> {
    const route = this.requireRoute()
    return new PooledSession(route, `${o.applicationName} ${route.tag}`, o)
  }

  cancel(pid: number, terminate: boolean): Promise<void> {
    return this.lab.cancel(pid, terminate)
  }

  blockers(pid: number): Promise<number[]> {
    return this.lab.blockers(pid)
  }

  /**
   * A client has no backend of its own: the pooler says which server connection its step in flight runs on,
   * before and after asking the server whether that backend waits for one of the pool's (a backend may be
   * blocked by a server connection no session is using: a leaked lock). A client counts as blocked only if its
   * step and its server connection stayed the same meanwhile.
   */
  async blocked<C extends Pick<SessionConn, 'pid'>>(ask: readonly C[], _all: number[]): Promise<Set<C>> {
    const route = this.requireRoute()
    const clients = ask.filter((x): x is C & PooledSession => x instanceof PooledSession && x.inFlight() !== undefined)
    if (!clients.length) return new Set()
    const seq = new Map(clients.map((x) => [x, x.inFlight()!]))
    const before = await route.links()
    const linked = clients.filter((x) => before.has(x.appName))
    for (const x of linked) x.saw(seq.get(x)!, before.get(x.appName)!)
    if (!linked.length) return new Set()
    const waiting = await this.lab.blockedPids(
      linked.map((x) => before.get(x.appName)!),
      await route.backends(),
    )
    const after = await route.links()
    return new Set(linked.filter((x) => x.inFlight() === seq.get(x) && waiting.has(before.get(x.appName)!) && after.get(x.appName) === before.get(x.appName)))
  }

  /** The run's connections are the pool's server connections (the sessions own none). */
  async terminate(pids: number[]): Promise<void> {
    const pool = this.route ? await bounded(this.route.backends(), [] as number[]) : []
    await this.lab.terminate([...new Set([...pids, ...pool])])
  }

  async afterTrial(): Promise<void> {
    await this.route?.recycle()
  }

  close(): Promise<void> {
    return this.lab.close()
  }

  private requireRoute(): PoolRoute {
    if (!this.route) throw new Error('the pooler is opened with the run space (createSpace) before any session')
    return this.route
  }
}

/**
 * --pooled: the server behind a pooler the user runs, for race's control connection (which must be direct: its
 * backend marks the run's schema, and its search_path must stay). The server says where it listens, through
 * the pooler (inet_server_addr, inet_server_port, current_database); the URL's user and password are kept.
 */
export async function discoverDirect(via: Target, connectTimeoutMs: number): Promise<Target> {
  const sql = postgres(via.url ?? '', {
    max: 1,
    prepare: false,
    fetch_types: false,
    onnotice: () => {},
    connect_timeout: Math.max(1, Math.ceil(connectTimeoutMs / 1000)),
    connection: { application_name: 'race pooled discovery' },
  })
  let row: { host: string | null; port: number | null; db: string }
  try {
    ;[row] = (await sql`select host(inet_server_addr()) as host, inet_server_port() as port, current_database() as db`) as unknown as (typeof row)[]
  } catch (e) {
    const code = (e as { code?: string }).code
    throw new RunError(`could not reach the server through the pooler at ${via.label}: ${(e as Error).message}${code ? ` (${code})` : ''}`)
  } finally {
    await endQuietly(sql, 0)
  }
  if (!row.host || !row.port) {
    throw new RunError(`--pooled: the pooler at ${via.label} reaches PostgreSQL over a Unix socket (inet_server_addr() is NULL), so race cannot connect to it directly for its control connection`)
  }
  const u = new URL(via.url!)
  u.hostname = row.host.includes(':') ? `[${row.host}]` : row.host
  u.port = String(row.port)
  u.pathname = `/${encodeURIComponent(row.db)}`
  u.searchParams.delete('host')
  u.searchParams.delete('port')
  const url = u.toString()
  const masked = url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:)[^@/?#]*@/i, '$1***@')
  return { kind: 'url', url, label: masked }
}

/** The session-facing side of a pooler the user runs (--pooled), seen from race's direct control connection. */
export interface ExternalPool {
  target: Target
  tag: string
  /** Backends serving this run's clients right now: application_name carries the tag, and they are not idle. */
  links(control: Sql): Promise<Map<string, number>>
  /** Backends this run's clients used last (their application_name still carries the tag). */
  backends(control: Sql): Promise<number[]>
}

export function externalPool(via: Target, tag: string): ExternalPool {
  const like = `race % ${tag}`
  return {
    target: via,
    tag,
    async links(control) {
      const rows = await control`select application_name as name, pid from pg_stat_activity where application_name like ${like} and state <> 'idle'`
      return new Map(rows.map((r) => [String(r.name), Number(r.pid)]))
    },
    async backends(control) {
      const rows = await control`select pid from pg_stat_activity where application_name like ${like} and backend_type = 'client backend'`
      return rows.map((r) => Number(r.pid))
    },
  }
}
