// The PostgresLab: one command's control connection to the target, the server's facts, and the schemas race creates
// there. Every schema is marked with its owner (this run's control backend), so that the next run can drop
// what a killed run left, and never a schema whose run is still alive.
import os from 'node:os'
import type { Sql } from 'postgres'
import { RunError } from '../errors.js'
import { RunContext } from '../lifecycle.js'
import { connect, connectError, endQuietly, RUN_SQL_PARAMS } from './connect.js'
import { dropRoleSql, makeRunRole, type RunRole } from './run-role.js'
import { spaceName, type Driver, type QueryResult, type RunSpace, type ServerInfo, type SessionConn, type SessionOptions } from './driver.js'
import { PgSession } from './pg-session.js'
import { conditionName, isConnectionLoss } from './sqlstate.js'
import type { Target } from './target.js'


/** How long the final drop waits for a lock on the run's objects before naming the leftover instead. */
export const DROP_LOCK_TIMEOUT_MS = 5000

/** What race writes on every schema it creates (COMMENT ON SCHEMA), after the 'race:' prefix. */
export interface SchemaMark {
  /** The race process (informational: it may run on another machine). */
  pid: number
  host: string
  /** The control connection's backend and its start: while that backend lives, the run lives. */
  backend: number
  backendStart: string
  /** The backend that runs the run's SQL when it has no run role (PostgresLab.runQuery): the guard accepts it too. */
  runner?: number
  /** --keep: left on purpose; never reaped. */
  keep: boolean
  /** The run role's oid (it owns the schema): dropped with the schema, by this identity, never by its name alone. */
  role?: number
}

/** The PostgreSQL driver: the PostgresLab of one command. */
export class PostgresLab implements Driver {
  readonly engine = 'postgres' as const
  readonly placeholders = 'dollar' as const
  private constructor(
    readonly target: Target,
    readonly control: Sql,
    readonly server: ServerInfo,
    readonly connectTimeoutMs: number,
    /** The control connection's backend, to cancel a statement of ours that an outside lock holds up. */
    readonly controlPid: number,
    private readonly controlStart: string,
    private readonly lost: Promise<never>,
    /** The run this PostgresLab belongs to: its cleanup drops the schema and ends control, its abort ends the waits. */
    readonly context: RunContext,
  ) {}

  /**
   * Set when the control connection closes. postgres.js (max 1) would silently reconnect on the next query,
   * to a backend without the run's search_path: so a closed control ends the run instead (see whenLost).
   */
  controlLost = false

  /** Schemas a killed run left, dropped when this PostgresLab opened. */
  reaped: string[] = []

  /** Rejects (CONNECTION_CLOSED) when the control connection closes; race every wait on control with it. */
  whenLost(): Promise<never> {
    return this.lost
  }

  /** Throws CONNECTION_CLOSED if the control connection has closed (never send on a reconnected one). */
  checkControl(): void {
    if (this.controlLost) throw Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' })
  }

  /** `context`: the run's (a fresh one, whose cleanup is the caller's, when none is given: tests). */
  static async open(target: Target, connectTimeoutMs: number, context: RunContext = new RunContext()): Promise<PostgresLab> {
    let reject: (e: Error) => void = () => {}
    let lab: PostgresLab | undefined
    const lost = new Promise<never>((_, r) => (reject = r))
    lost.catch(() => {}) // observed by whoever races it
    // Control never works in a run's schema: what it sends resolves functions and operators in pg_catalog only
    // (pg_temp last, and never for functions or operators), whatever a run creates in its schema; the run's own SQL
    // runs on a connection of its own (runQuery).
    const control = connect(target, {
      connectTimeoutMs,
      applicationName: 'race control',
      schema: CONTROL_PATH,
      onclose: () => {
        if (lab) lab.controlLost = true
        reject(Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' }))
      },
    })
    // The reaping started below finishes first (each of its drops is bounded by its lock_timeout).
    const release = context.onCleanup('control connection', async () => {
      await lab?.reaping
      if (lab?.preparer) await lab.preparer.then((p) => endQuietly(p.sql, 0), () => {})
      await endQuietly(control, 1)
    })
    // The startup question goes out right after login: the server's facts and the room for sessions, one statement.
    // The schemas a killed run left are asked once it is answered (postgres.js sends what is asked before login one
    // statement at a time, a round trip each; on an open connection they go out with the run's first statement), in
    // a statement of their own (a mark this role may not read fails only the reaping), and reaped beside the run.
    const facts = control.unsafe(`select current_setting('server_version') as version, current_setting('server_version_num')::int as num, pg_backend_pid() as pid,
                       current_user as usr, current_database() as db,
                       (select backend_start::text from pg_stat_activity where pid = pg_backend_pid()) as started,
                       ${ROOM_COLUMNS}`)
    try {
      const [row] = await Promise.race([facts, context.whenAborted()])
      lab = new PostgresLab(target, control, { version: String(row.version).split(' ')[0], versionNum: Number(row.num), product: 'PostgreSQL' }, connectTimeoutMs, Number(row.pid), String(row.started), lost, context)
      lab.userName = String(row.usr)
      lab.database = String(row.db)
      lab.openedRoom = Promise.resolve(roomFrom(row))
    } catch (e) {
      release()
      await endQuietly(control, 0)
      if (context.signal.aborted) throw e
      throw connectError(e, target)
    }
    // Asked now that the connection is open, so that it goes out with the run's first statement.
    lab.reaping = lab.reap(reapable(control))
    return lab
  }

  /** The room read at open, answered by the first room() (the run that follows), which then asks again each time. */
  private openedRoom?: Promise<{ free: number; max: number }>

  /** The reaping of what a killed run left, started at open: it goes on beside the run (never rejects). */
  reaping?: Promise<void>

  /** Connections this role can still open, for refusing an impossible --n before trying. */
  async room(): Promise<{ free: number; max: number }> {
    const first = this.openedRoom
    this.openedRoom = undefined
    return first ?? roomOf(this.control)
  }

  /** The mark of a schema this PostgresLab creates. `runner`: the backend that runs the run's SQL as race's own role. */
  mark(keep: boolean, role?: RunRole, runner?: number): SchemaMark {
    return { pid: process.pid, host: os.hostname(), backend: this.controlPid, backendStart: this.controlStart, ...(runner ? { runner } : {}), keep, ...(role ? { role: role.oid } : {}) }
  }

  /** `create schema` and its mark, as one statement list (one implicit transaction: never one without the other). */
  createSchemaSql(schema: string, keep: boolean): string {
    const role = this.rolesMade.get(schema)
    const kept = role && keep ? `; comment on role "${role.name}" is ${literal('race:' + JSON.stringify(this.roleMark(true)))}` : ''
    return `create schema "${schema}"${role ? ` authorization "${role.name}"` : ''}; comment on schema "${schema}" is ${literal('race:' + JSON.stringify(this.mark(keep, role, this.runnersMade.get(schema)?.pid)))}${kept}`
  }

  /** The mark on a run role (COMMENT ON ROLE): whose run it is, in which database; what reaping reads. */
  roleMark(keep: boolean): SchemaMark & { database: string } {
    return { ...this.mark(keep), database: this.database }
  }

  // ---- the run role: the run's SQL (setup, sessions, invariant) runs as a role race creates for the run ----

  /** Run roles asked for, by the run's schema name. */
  private readonly roles = new Map<string, Promise<RunRole | undefined>>()
  /** Run roles made, by the run's schema name. */
  private readonly rolesMade = new Map<string, RunRole>()
  /** Why runs of this PostgresLab run their SQL as the control role, under the text guard only (said once, on stderr). */
  roleless?: string

  /** No run role for this PostgresLab's runs (said once, in one line: never silently). */
  withoutRole(why: string): void {
    if (this.roleless !== undefined) return
    this.roleless = why
  }

  /**
   * Says, in one line on stderr, that the run's own SQL runs as the control role, once it does (the setup's or the
   * invariant's first statement): a run that ends before running any of it says only why it ended.
   */
  private sayRoleless(): void {
    if (this.roleless === undefined) return
    this.sayOnce(`race: ${this.roleless}: the run's SQL runs as ${this.userName || 'the control role'}, checked by the text guard only\n`)
  }

  /** The run schemas whose SQL is race's own (built-in scenarios): they get no run role. */
  private readonly trusted = new Set<string>()

  trustSpace(name: string): void {
    this.trusted.add(name)
  }

  /** The run role of the run whose schema is `space` (made on first ask), or undefined when runs have none. */
  roleFor(space: string): Promise<RunRole | undefined> {
    if (this.trusted.has(space)) return Promise.resolve(undefined)
    let p = this.roles.get(space)
    if (!p) {
      p = this.roleless !== undefined ? Promise.resolve(undefined) : makeRunRole(this, space).then((r) => {
        if (r && 'why' in r) {
          this.withoutRole(r.why)
          return undefined
        }
        if (r) this.rolesMade.set(space, r)
        return r
      })
      p.catch(() => {})
      this.roles.set(space, p)
    }
    return p
  }

  /** The target a session of the run in `space` connects to: as the run role when there is one. */
  async sessionTarget(space: string): Promise<Target> {
    return (await this.roleFor(space))?.target ?? this.target
  }

  /**
   * Runs the run's own SQL (setup, invariant) as the run role, on its own connection; without one, as the control
   * role on a connection of its own (runnerFor): never on control, whose search_path stays pg_catalog.
   */
  async runQuery(space: string, text: string, args: unknown[] = []): Promise<QueryResult> {
    const role = await this.roleFor(space)
    let sql = role?.sql
    if (!sql) {
      if (!this.trusted.has(space)) this.sayRoleless()
      sql = (await this.runnerFor(space)).sql
    }
    return (args.length ? sql.unsafe(text, args as never[]) : sql.unsafe(text)) as unknown as Promise<QueryResult>
  }

  /** Connections that run a run's SQL as the control role (no run role), by the run's schema name. */
  private readonly runners = new Map<string, Promise<{ sql: Sql; pid: number }>>()
  private readonly runnersMade = new Map<string, { sql: Sql; pid: number }>()

  /** A connection of race's own as the control role, open, with its backend's pid (a failure to open: one line). */
  private async openOwn(applicationName: string, schema: string, params?: Readonly<Record<string, string>>): Promise<{ sql: Sql; pid: number }> {
    const sql = connect(this.target, { connectTimeoutMs: this.connectTimeoutMs, applicationName, schema, ...(params ? { params } : {}), typesFrom: this.control })
    try {
      const [r] = await Promise.race([sql`select pg_catalog.pg_backend_pid() as pid`, this.context.whenAborted()])
      return { sql, pid: Number(r.pid) }
    } catch (e) {
      await endQuietly(sql, 0)
      if (this.context.signal.aborted || isConnectionLoss(e)) throw e
      throw connectError(e, this.target)
    }
  }

  /**
   * The connection on which the run in `space` runs its own SQL when it has no run role: the control role's login,
   * search_path the run's schema (it may not exist yet), application_name 'race setup', opened on first ask.
   */
  private runnerFor(space: string): Promise<{ sql: Sql; pid: number }> {
    let p = this.runners.get(space)
    if (!p) {
      p = this.openOwn('race setup', `"${space}"`, RUN_SQL_PARAMS).then((made) => (this.runnersMade.set(space, made), made))
      p.catch(() => {})
      this.runners.set(space, p)
    }
    return p
  }

  /**
   * A second connection as the control role (application_name 'race prepare', search_path as control's), opened on
   * first ask: where the engine makes a run's next schema again while a trial runs in another (engine/run.ts, lanes),
   * so that control stays free for the trial's questions (blocks, footprints).
   */
  private preparer?: Promise<{ sql: Sql; pid: number }>
  private preparerMade?: { sql: Sql; pid: number }

  /** race's connections besides control: the run roles', the runners' (no run role), the prepare connection. */
  private ownConnections(): { sql: Sql; pid: number }[] {
    return [...this.rolesMade.values(), ...this.runnersMade.values(), ...(this.preparerMade ? [this.preparerMade] : [])]
  }

  prepareQuery(text: string): Promise<unknown> {
    if (!this.preparer) {
      this.preparer = this.openOwn('race prepare', CONTROL_PATH).then((made) => (this.preparerMade = made))
      this.preparer.catch(() => {})
    }
    return this.preparer.then((p) => p.sql.unsafe(text))
  }

  /** The login role of the control connection, and its database. */
  userName = ''
  database = ''

  /**
   * Drops the schemas of this role that a race run marked and whose run is gone (its control backend no longer
   * exists). Never one marked --keep, never one whose control backend still lives, never another role's.
   * `found`: their names, already asked for (PostgresLab.open sends the question with its others).
   */
  async reap(found: Promise<Reapable[]> = reapable(this.control)): Promise<void> {
    let names: Reapable[]
    try {
      names = await found
    } catch {
      return // a mark that is not ours to read, or no rights: leave everything alone
    }
    for (const { nspname, role } of names) {
      try {
        await this.control.unsafe(`set lock_timeout = '${DROP_LOCK_TIMEOUT_MS}ms'; ${role ? dropRoleSql(role) : `drop schema if exists "${nspname}" cascade`}; reset lock_timeout`)
        this.reaped.push(nspname)
      } catch {
        /* another run reaped it first, or it is busy: the next run tries again */
      }
    }
  }

  /**
   * Creates a marked schema `race_<label>_<hex>` and registers its removal with the lifecycle (also on Ctrl-C
   * and errors). `onControl` runs the statement (so a caller can make it cancellable).
   */
  async createSchema(label: string, keep: boolean, run: (text: string) => Promise<unknown> = (t) => this.control.unsafe(t), name = spaceName(label)): Promise<RunSchema> {
    const schema = new RunSchema(this, name, keep)
    try {
      // Without a run role, the connection that will run the run's SQL is marked too (the guard checks it).
      if (!(await this.roleFor(name))) await this.runnerFor(name)
      await run(this.createSchemaSql(name, keep))
    } catch (e) {
      schema.release()
      // Not on an abort or a lost control: the CREATE SCHEMA may still be in flight there (cancelled after this
      // returns); the next run reaps the role by its mark.
      if (!this.context.signal.aborted && !isConnectionLoss(e)) await this.dropUnused(name)
      const code = (e as { code?: string }).code
      if (this.context.signal.aborted || isConnectionLoss(e)) throw e
      if (code === '42501') {
        throw new RunError(`this role may not create a schema in this database (42501 insufficient_privilege): grant it CREATE on the database, or use another role`)
      }
      throw new RunError(`could not create the run's schema ${name}: ${(e as Error).message}`)
    }
    return schema
  }

  /**
   * Runs `fn` on the control connection or, if control is gone (the server ended it, or the socket broke as
   * the statement was sent), on a fresh connection: killing our backends and dropping our schema must not
   * depend on the connection whose loss may be the very fault being cleaned up after.
   */
  async onControlOrFresh<T>(fn: (sql: Sql) => PromiseLike<T>): Promise<T> {
    if (!this.controlLost) {
      try {
        return await fn(this.control)
      } catch (e) {
        if (!isConnectionLoss(e)) throw e
      }
    }
    const fresh = connect(this.target, { connectTimeoutMs: this.connectTimeoutMs, applicationName: 'race cleanup' })
    try {
      return await fn(fresh)
    } finally {
      await endQuietly(fresh, 0)
    }
  }

  /** Cancels the control connection's statement in flight, from a fresh connection; waits (bounded) for it to end. */
  async cancelControl(done: Promise<void>): Promise<void> {
    if (this.controlPid > 0) {
      const fresh = connect(this.target, { connectTimeoutMs: this.connectTimeoutMs, applicationName: 'race cleanup' })
      const pids = [this.controlPid, ...this.ownConnections().map((r) => r.pid)]
      try {
        await fresh`select pg_cancel_backend(pid) from unnest(${pids}::int[]) as pid`
      } catch {
        /* the server may be gone too: cleanup below says what was left */
      } finally {
        await endQuietly(fresh, 0)
      }
    }
    await Promise.race([done, new Promise((r) => setTimeout(r, 2000))])
  }

  /** Ends the run role's connection (before its schema and the role are dropped); the role, if there was one. */
  /** Schemas whose role went with them (RunSchema.drop). */
  private readonly dropped = new Set<string>()

  async endRole(space: string): Promise<RunRole | undefined> {
    this.dropped.add(space)
    const runner = this.runnersMade.get(space)
    if (runner) await endQuietly(runner.sql, 0)
    const role = this.rolesMade.get(space)
    if (role) await endQuietly(role.sql, 0)
    return role
  }

  /** Drops the run role of a schema that was never made (its run ended first): nothing else would. */
  private async dropUnused(space: string): Promise<void> {
    const role = await this.endRole(space)
    this.rolesMade.delete(space)
    if (role) await this.onControlOrFresh((sql) => sql.unsafe(dropRoleSql(role.oid))).catch(() => {})
  }

  /** Ends the control connection, after dropping the run roles whose schema was never made (and the reaping's end). */
  async close(): Promise<void> {
    await this.reaping
    for (const space of [...this.rolesMade.keys()]) {
      if (this.dropped.has(space)) continue
      const [made] = await this.control`select 1 from pg_catalog.pg_namespace where nspname = ${space}`.catch(() => [1]) // unsure: leave it to the reaper
      if (!made) await this.dropUnused(space)
    }
    await Promise.all(this.ownConnections().map((r) => endQuietly(r.sql, 0)))
    await endQuietly(this.control, 1)
  }

  // ---- the Driver seam: what the engine asks of PostgreSQL ----

  createSpace(label: string, keep: boolean, run?: (text: string) => Promise<unknown>, name?: string): Promise<RunSpace> {
    return this.createSchema(label, keep, run, name)
  }

  /** Sessions name the schema in their search_path at connect: they may connect before it exists. */
  readonly earlySessions = true

  /**
   * One statement list, one transaction (the simple query protocol's implicit one): its commit does not wait for
   * the WAL to reach the disk (synchronous_commit off, for this transaction only). Others see it committed as
   * soon as it returns all the same; only a crash of the server could lose it, and a run does not outlive that.
   */
  recreateSql(name: string, keep: boolean): string {
    return `set local synchronous_commit = off; drop schema "${name}" cascade; ${this.createSchemaSql(name, keep)}`
  }

  /** Control stays out of the run's schema (its SQL runs on runQuery's connection): pg_catalog again. */
  useSql(_name: string): string {
    return `set search_path to ${CONTROL_PATH}`
  }

  /** Control plans its prepared statements once (plan_cache_mode, PostgreSQL 12+), said with the first of them. */
  private generic = false

  query(text: string, args: unknown[] = [], prepared = false): Promise<QueryResult> {
    if (prepared) {
      // A generic plan, made once: a custom one is planned again at every call (some 4.6 ms of the server's time for
      // the explorer's catalog read, against ~3.6 ms to run it). Only control's own statements are planned so.
      if (!this.generic && this.server.versionNum >= 120000) {
        this.generic = true
        void this.control.unsafe('set plan_cache_mode = force_generic_plan').catch(() => {})
      }
      return this.control.unsafe(text, args as never[], { prepare: true }) as unknown as Promise<QueryResult>
    }
    return (args.length ? this.control.unsafe(text, args as never[]) : this.control.unsafe(text)) as unknown as Promise<QueryResult>
  }

  async openSession(o: SessionOptions): Promise<SessionConn> {
    const role = await this.roleFor(o.space)
    const names = Object.keys(o.params ?? {})
    if (role && names.length && this.server.versionNum < 150000) {
      // Before PostgreSQL 15 a parameter only a superuser may set (deadlock_timeout, which the deadlock scenarios
      // set per session to choose the victim) cannot be granted: such a session connects as the control role, and
      // says so once (never silently), as a run without a run role does.
      const su = (await this.control`select name from pg_catalog.pg_settings where context = 'superuser' and name = any(${names})`).map((r) => String(r.name))
      if (su.length) {
        this.sayOnce(`race: ${su.join(', ')} may be set only by a superuser before PostgreSQL 15: the sessions that set it run as ${this.userName || 'the control role'}, checked by the text guard only\n`)
        return PgSession.open(this.target, o, this.control)
      }
    }
    if (role) await this.grantParameters(role, names)
    // Session connections take the array types this PostgresLab's control connection fetched at login (see connect.ts).
    return PgSession.open(role?.target ?? this.target, o, this.control)
  }

  /** Lines said once per PostgresLab (sayOnce). */
  private readonly said = new Set<string>()

  /**
   * A line on stderr, once per PostgresLab: on a terminal at once; otherwise once the command has its result (exit 0 or 1):
   * a command that fails says its one line only, as every failure does (stderr to a pipe or file is written
   * synchronously at exit).
   */
  private sayOnce(line: string): void {
    if (this.said.has(line)) return
    this.said.add(line)
    if (process.stderr.isTTY) process.stderr.write(line)
    else process.once('exit', (code) => void (code === 0 || code === 1 ? process.stderr.write(line) : undefined))
  }

  /** Parameters granted to a run role (by role name), each asked for once. */
  private readonly granted = new Map<string, Promise<void>>()

  /**
   * A session's startup parameters that only a superuser may set (deadlock_timeout, which the deadlock scenarios set
   * per session to choose the victim): granted to the run role (GRANT SET ON PARAMETER, PostgreSQL 15+), which is all
   * it may do beyond PUBLIC; DROP OWNED takes the grant back with the role. Before 15 there is nothing to grant:
   * the connection is refused as it is for a role that may not set them.
   */
  private async grantParameters(role: RunRole, names: string[]): Promise<void> {
    if (!names.length || this.server.versionNum < 150000) return
    const todo = names.filter((n) => !this.granted.has(`${role.name}/${n}`))
    if (todo.length) {
      const p = (async () => {
        const rows = await this.control`select name from pg_catalog.pg_settings where context = 'superuser' and name = any(${todo})`
        if (rows.length) await this.control.unsafe(`grant set on parameter ${rows.map((r) => `"${r.name}"`).join(', ')} to "${role.name}"`)
      })()
      p.catch(() => {})
      for (const n of todo) this.granted.set(`${role.name}/${n}`, p)
    }
    await Promise.all(names.map((n) => this.granted.get(`${role.name}/${n}`)))
  }

  async cancel(pid: number, terminate: boolean): Promise<void> {
    await (terminate ? this.control`select pg_terminate_backend(${pid})` : this.control`select pg_cancel_backend(${pid})`)
  }

  async blockers(pid: number): Promise<number[]> {
    const [r] = await this.control`select pg_blocking_pids(${pid}) as b`
    return (r.b as number[]) ?? []
  }

  async blocked<C extends Pick<SessionConn, 'pid'>>(ask: readonly C[], all: number[]): Promise<Set<C>> {
    const got = await this.blockedPids(ask.map((x) => x.pid), all)
    return new Set(ask.filter((x) => got.has(x.pid)))
  }

  /**
   * The backends among `ask` waiting for one of `all` (isolationtester's test, from the control connection), except
   * a wait for a relation's extension lock: two inserts that add the first page of a table at the same moment wait
   * for each other for microseconds inside the server, on a lock no statement of the race takes and none holds across
   * statements. Seen, it turned a clean race into "serialized" (a soundness soak's free-running trial; and a
   * documented "clean" into a DEVIATION); the step ends on its own a moment later.
   */
  async blockedPids(ask: number[], all: number[]): Promise<Set<number>> {
    const rows = await this.control`
        select a.pid from unnest(${ask}::int[]) as a(pid)
        where case when pg_catalog.pg_isolation_test_session_is_blocked(a.pid, ${all}::int[])
          then not exists (select from pg_catalog.pg_locks l where l.pid = a.pid and not l.granted and l.locktype = 'extend')
          else false end`
    return new Set(rows.map((r) => Number(r.pid)))
  }

  /**
   * Terminates the run's backends from control, waiting for them to exit (PostgreSQL 14+): a backend blocked on a
   * lock does not notice its client is gone. Bounded; on a fresh connection if control is gone.
   */
  async terminate(pids: number[]): Promise<void> {
    if (!pids.length) return
    const kill = this.onControlOrFresh((sql) =>
      this.server.versionNum >= 140000
        ? sql`select pg_terminate_backend(pid, 2000) from unnest(${pids}::int[]) as pid`
        : sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid`,
    )
    await Promise.race([kill.then(() => {}, () => {}), new Promise((r) => setTimeout(r, 2500 + this.connectTimeoutMs))])
  }
}

/** A schema this PostgresLab created: dropped at the end (unless kept), also on Ctrl-C and errors. */
export class RunSchema implements RunSpace {
  private readonly unregister: () => void
  constructor(
    private readonly lab: PostgresLab,
    readonly name: string,
    readonly keep: boolean,
  ) {
    this.unregister = lab.context.onCleanup(`schema ${name}`, async () => {
      const left = await this.drop()
      if (left) throw new Error(left.note)
    })
  }

  get quoted(): string {
    return `"${this.name}"`
  }

  /** Stops the lifecycle from dropping it (the caller drops it itself). */
  release(): void {
    this.unregister()
  }

  /** Drops it (bounded) unless kept; returns what was left behind, with the statement to drop it. */
  async drop(): Promise<{ note: string; serverGone: boolean } | undefined> {
    if (this.keep) return undefined
    const role = await this.lab.endRole(this.name)
    // What the note says (by name, for a person); what race runs drops the role by its oid.
    const stmt = `drop schema if exists "${this.name}" cascade${role ? `; drop role if exists "${role.name}"` : ''}`
    const run = `drop schema if exists "${this.name}" cascade${role ? `; ${dropRoleSql(role.oid)}` : ''}`
    try {
      // Bounded: a lock someone else holds on one of our tables must not hold the drop (and race) forever.
      // The run role goes in the same transaction as its schema: never one without the other. Its commit does not wait
      // for the WAL flush: only a crash of the server could lose it, and both would come back marked, for the reaping.
      await this.lab.onControlOrFresh((sql) => sql.unsafe(`set local synchronous_commit = off; set lock_timeout = '${DROP_LOCK_TIMEOUT_MS}ms'; ${run}; reset lock_timeout`))
      return undefined
    } catch (e) {
      const code = (e as { code?: string }).code
      const serverGone = isConnectionLoss(e) || code === 'CONNECT_TIMEOUT'
      return { note: `schema ${this.name} was left behind (${code ?? (e as Error).message}${conditionName(code) ? ' ' + conditionName(code) : ''}): drop it with: ${stmt}`, serverGone }
    }
  }
}

interface Reapable {
  nspname: string
  /** A run role of a dead run (its oid): dropped with everything it owns here, its schema first of all. */
  role?: number
}

/**
 * What a killed race run left (see PostgresLab.reap): schemas of this role marked by a run whose control backend is gone,
 * and run roles whose mark (a comment on the role, which only a role's creator may write: the run role cannot
 * forge or move it) names this database and a dead control backend. By identity: the role's oid.
 */
async function reapable(control: Sql): Promise<Reapable[]> {
  const dead = (d: string) => `not coalesce((substr(${d}.description, 6)::jsonb ->> 'keep')::boolean, false)
           and not exists (select 1 from pg_stat_activity a
                            where a.pid = (substr(${d}.description, 6)::jsonb ->> 'backend')::int
                              and a.backend_start::text = substr(${d}.description, 6)::jsonb ->> 'backendStart')`
  const rows = await control.unsafe(`
        select n.nspname, null::int as role
          from pg_namespace n
          join pg_description d on d.objoid = n.oid and d.classoid = 'pg_namespace'::regclass
         where n.nspname like 'race\\_%'
           and n.nspowner = (select oid from pg_roles where rolname = current_user)
           and d.description ~ '^race:\\{.*\\}$'
           and ${dead('d')}
        union all
        select r.rolname, r.oid::int
          from pg_roles r
          join pg_shdescription d on d.objoid = r.oid and d.classoid = 'pg_authid'::regclass
         where r.rolname like 'race\\_r\\_%'
           and not r.rolsuper
           and d.description ~ '^race:\\{.*\\}$'
           and substr(d.description, 6)::jsonb ->> 'database' = current_database()
           and ${dead('d')}`)
  return rows.map((r) => ({ nspname: String(r.nspname), ...(r.role ? { role: Number(r.role) } : {}) }))
}

/** The columns that tell how many connections this role can still open (see PostgresLab.room), to select beside others. */
const ROOM_COLUMNS = `current_setting('max_connections')::int as max,
             current_setting('superuser_reserved_connections')::int
             + coalesce(nullif(current_setting('reserved_connections', true), ''), '0')::int as reserved,
             (select count(*)::int from pg_stat_activity where backend_type = 'client backend') as used`

function roomFrom(r: Record<string, unknown>): { free: number; max: number } {
  return { free: Number(r.max) - Number(r.reserved) - Number(r.used), max: Number(r.max) }
}

/** Connections this role can still open (see PostgresLab.room). */
async function roomOf(control: Sql): Promise<{ free: number; max: number }> {
  const [r] = await control.unsafe(`select ${ROOM_COLUMNS}`)
  return roomFrom(r)
}

/**
 * The control connection's search_path: pg_catalog, and pg_temp last (else it comes first for tables), so that every
 * function and operator control names is pg_catalog's, never one a run creates in its schema (issue 38).
 */
export const CONTROL_PATH = 'pg_catalog, pg_temp'

/** A SQL string literal. */
export function literal(s: string): string {
  return `'${s.replace(/'/g, "''")}'`
}
