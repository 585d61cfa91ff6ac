// One session: a dedicated connection (one backend pid) that runs its steps. Every step ends in a recorded
// fact, never in a thrown error: SQL errors, rejections, lost connections and timeouts are outcomes.
// The SQL a step shows is the SQL it sends: named binds become bind parameters, nothing else changes.
import { setTimeout as sleep } from 'node:timers/promises'
import { parseBinds, type Placeholders } from '../binds.js'
import { statements, triesLock } from '../lex.js'
import { levelSet, pointsOfStep, seenStatements, snapshotAfter, type StepPoints } from './points.js'

const OPENS_TX = /^\s*(begin|start\s+transaction)\b/i
import type { QueryResult, SessionConn, SessionOptions } from '../db/driver.js'
import { conditionName, isConnectionLoss, isServerError, sqlstateOf } from '../db/sqlstate.js'
import type { PlannedSession, PlannedStep } from '../plan.js'
import type { Bind, BindCtx, Params, Row, Rows, Seen, SessionSpec, StepDef } from '../scenario.js'
import type { EventKind, Outcome, SessionReport, StepBackend, TimelineEvent } from './types.js'

export interface SessionEnv {
  /** Opens (or, across trials, hands over the kept) connection of session `index` (the engine's driver). */
  open(o: SessionOptions, index: number): Promise<SessionConn>
  /** How named binds are sent: $1 (PostgreSQL) or ? (MySQL). */
  placeholders: Placeholders
  schema: string
  scenarioId: string
  user: string
  params: Params
  n: number
  /** Binds the scenario declares for every session. */
  binds: Record<string, Bind>
  stepTimeoutMs: number
  connectTimeoutMs: number
  /** Records an event (and returns it); the clock is the run's. */
  record(e: Omit<TimelineEvent, 't'>): TimelineEvent | void
  now(): number
  /** From the control connection: cancel (then, if that is not enough, terminate) this backend's query. */
  cancel(pid: number, terminate: boolean): Promise<void>
  /** Backends this one waits for right now. */
  blockers(pid: number): Promise<number[]>
}

class StepTimeout extends Error {}
/** The server ended the connection and said why (a FATAL with a SQLSTATE that is not a shutdown): the next step fails with it, as libpq reports it. */
class ServerEnded extends Error {
  constructor(readonly code: string, message: string) {
    super(message)
  }
}
/** A step's SQL names a bind that has no value here: the scenario is wrong, not the database. */
class BindError extends Error {}

/**
 * Statements that are never run in a transaction race opens for them (race explore's commit points): they start or
 * end a transaction themselves, act only inside one (outside, PostgreSQL refuses or ignores them: LOCK, DECLARE,
 * SAVEPOINT, SET LOCAL), or change no data (SET, SHOW, RESET). What PostgreSQL refuses inside a transaction block
 * (VACUUM, CREATE INDEX CONCURRENTLY...) is learnt from its SQLSTATE, 25001, and run as it is.
 */
export const NOT_SPLIT = /^\s*(begin|start\s+transaction|commit|end|rollback|abort|savepoint|release|prepare\s+transaction|set|reset|show|lock|declare|discard|listen|unlisten|xa)\b/i
/**
 * The statements of `sql` before its last one, when that one is a lone COMMIT (or END) that ends the transaction the
 * rest leave open: `inTx` (the session is in one before) or their first begins it, and no other one starts, ends or
 * prepares a transaction. Undefined otherwise (the step is one point).
 */
export function commitBody(sql: string, inTx: boolean): string | undefined {
  const parts = statements(sql)
  if (parts.length < 2 || !/^\s*(commit|end)(\s+(work|transaction))?\s*$/i.test(parts[parts.length - 1])) return undefined
  const body = parts.slice(0, -1)
  const control = (x: string) => /^\s*(begin|start\s+transaction|commit|end|rollback|abort|prepare\s+transaction|savepoint|release)\b/i.test(x) && !/^\s*(savepoint|release)\b/i.test(x)
  const opens = /^\s*(begin|start\s+transaction)\b/i.test(body[0])
  if (!inTx && !opens) return undefined
  if (body.slice(opens ? 1 : 0).some(control)) return undefined
  return body.join(';\n')
}

/** SQLSTATE 25001, active_sql_transaction: a statement that cannot run inside a transaction block. */
const IN_BLOCK = '25001'

/** Command tags after which a transaction's isolation level can still change (no snapshot taken yet). */
const NOT_FIXING = new Set(['BEGIN', 'START TRANSACTION', 'SET', 'SHOW', 'RESET', 'SAVEPOINT', 'RELEASE', 'COMMIT', 'ROLLBACK', 'DISCARD'])

export class Session {
  readonly name: string
  private conn!: SessionConn
  /** The session whose connection this one borrows (SessionSpec.shares), if any. */
  lender?: Session
  private opened?: Promise<void>
  readonly steps: PlannedStep[]
  private readonly spec: SessionSpec
  private rows: Record<string, Rows> = {}

  outcome?: Outcome
  reason?: string
  sqlstate?: string
  endStep?: string
  waitedMs = 0
  retries = 0
  readonly errors: string[] = []
  blockedBy?: number[]
  /** The level read with SHOW transaction_isolation before the statement that fixed it. */
  isolation?: string
  private levelFixed = false
  private inTx = false
  /** Its transaction has taken its snapshot (as far as the statements it sent say: points.ts snapshotAfter). */
  private snapTaken = false
  commitTag?: string
  private startedAt = 0
  private endedAt?: number

  /** The step in flight, if any. */
  current?: { name: string; startedAt: number; blocked: boolean; done: Promise<void> }
  /**
   * race explore: the step whose statement would have committed by itself and ran in a transaction race opened for
   * it; its commit is the session's next point (startCommit). Undefined when there is none.
   */
  openCommit?: number
  /**
   * race explore: the step split into points (points.ts) whose later points are still to launch (startPart): one
   * statement each, or a snapshot point. Undefined when there is none.
   */
  private parts?: { step: number; plan: StepPoints; at: number }
  /** Steps run outside a transaction as one point, because PostgreSQL refuses them inside one (25001). */
  readonly indivisible: string[] = []
  /** race explore: steps of several statements run as one point (binds, a retry check, a transaction begun or ended in their middle). */
  readonly whole = new Set<string>()
  /** race explore: steps that lock rows without waiting at SERIALIZABLE (SessionReport.unordered). */
  readonly unordered = new Set<string>()

  /**
   * A pooler's client owns no backend: where each step ran (SessionReport.steps), the backend of the step in
   * flight once known, and that step's events, which carry it (TimelineEvent.backend).
   */
  private readonly stepBackends: StepBackend[] = []
  private stepBackend?: number
  private lastBackend?: number
  private stepEvents: TimelineEvent[] = []

  constructor(
    readonly index: number,
    planned: PlannedSession,
    private readonly env: SessionEnv,
  ) {
    this.name = planned.name
    this.spec = planned.spec
    this.steps = planned.steps
    this.shares = planned.spec.shares
  }
  readonly shares?: string

  /** Its backend: its connection's pid (a pooler's client: the one lent to it right now, 0 when none). */
  get pid(): number {
    return this.lender ? this.lender.pid : (this.conn?.pid ?? 0)
  }

  /** The connection its steps run on (a borrower's is its lender's). */
  get connection(): SessionConn {
    return this.lender ? this.lender.connection : this.conn
  }

  private get closedByServer(): boolean {
    return this.lender ? this.lender.closedByServer : Boolean(this.conn?.closed)
  }

  private get serverFatal(): { code: string; message: string } | undefined {
    return this.lender ? this.lender.serverFatal : this.conn?.fatal
  }

  /** Every row a step of this session returned (undefined if it never ran), for the invariant's `:session.step.column`. */
  rowsOf(step: string): Rows | undefined {
    return this.rows[step]
  }

  /** Between BEGIN and COMMIT/ROLLBACK (as far as the session's own steps said). */
  get inTransaction(): boolean {
    return this.inTx
  }
  /** It has run at least one step. */
  get started(): boolean {
    return Object.keys(this.rows).length > 0 || this.finished || this.busy
  }

  get finished(): boolean {
    return this.outcome !== undefined
  }
  get busy(): boolean {
    return this.current !== undefined
  }

  open(): Promise<void> {
    this.opened ??= this.lender ? this.borrow(this.lender) : this.connect()
    return this.opened
  }

  /** The next borrower of a pooled connection: the lender's backend, with whatever it left behind. */
  private async borrow(lender: Session): Promise<void> {
    await lender.open()
    this.conn = lender.conn
  }

  private async connect(): Promise<void> {
    this.conn = await this.env.open(sessionOptions({ name: this.name, spec: this.spec }, this.env), this.index)
  }

  /** Its own connection (none for a borrower, whose steps run on its lender's); it stays here after the trial. */
  get ownConnection(): SessionConn | undefined {
    return this.lender ? undefined : this.conn
  }

  /** Starts the clock for `ms` (the barrier, or the first step of a step-by-step schedule). */
  markStart(t: number): void {
    this.startedAt = t
  }

  /**
   * Runs step i; resolves when it is done (or the session ended). Never rejects. `split`: a statement that would
   * commit by itself (the session is in no transaction) runs in a transaction race opens for it, and its commit is
   * a point of its own (openCommit, startCommit), as race explore explores it.
   */
  start(i: number, split = false, parts = false, snapshots = true): Promise<void> {
    // Split into points (each statement, a snapshot point): the first launches now, the others at startPart.
    const plan = this.pointsOf(i, split, parts, snapshots)
    this.planned = undefined
    if (plan) {
      this.parts = { step: i, plan, at: 0 }
      return this.launch(`${this.steps[i].name}${plan.points[0].suffix}`, () => this.runPart(true))
    }
    return this.launch(this.steps[i].name, () => this.runStep(i, split))
  }

  /** Step i's points, were it launched now (start with split and parts), or undefined when it runs whole. */
  pointsOf(i: number, split = true, parts = true, snapshots = true): StepPoints | undefined {
    if (this.planned?.step === i) return this.planned.plan
    const def = this.steps[i]?.def
    if (!def || !split || !parts || def.retryIf || def.appWait || /(^|[^:]):[A-Za-z_]/.test(def.sql)) return undefined
    return pointsOfStep(def.sql, this.inTx, this.snapTaken, NOT_SPLIT, snapshots)
  }

  /** Step i's points as planned (planFor) for its launch: start uses them. */
  private planned?: { step: number; plan: StepPoints | undefined }

  /**
   * race explore: step i's points, were it launched next, asking the server where a snapshot point may be needed: at
   * READ COMMITTED (or READ UNCOMMITTED) a statement's snapshot is its own, and no snapshot point is made. The level
   * is the one the step's own BEGIN (or SET TRANSACTION) names, else the transaction's (SHOW, on the session's
   * connection: it takes no snapshot), else the session's default for a transaction still to begin.
   */
  async planFor(i: number): Promise<StepPoints | undefined> {
    this.planned = undefined
    let plan = this.pointsOf(i)
    const def = this.steps[i]?.def
    const at = plan?.points.findIndex((x) => x.snapshot) ?? -1
    // A statement that locks rows without waiting: at SERIALIZABLE its outcome can depend on what happens inside it.
    const tries = def !== undefined && triesLock(def.sql)
    if ((plan && at >= 0) || tries) {
      const sql = plan && at >= 0 ? plan.points[at].sql : def!.sql
      let level = levelSet(sql)
      if (!level && !this.closedByServer) {
        const show = this.inTx && !OPENS_TX.test(sql) ? 'show transaction_isolation' : 'show default_transaction_isolation'
        const rows = await this.connection.step(show, [], false).result.catch(() => undefined)
        const v = rows?.[0] && Object.values(rows[0])[0]
        level = typeof v === 'string' ? v.toLowerCase() : undefined
      }
      if (plan && at >= 0 && (level === 'read committed' || level === 'read uncommitted')) plan = this.pointsOf(i, true, true, false)
      if (tries && level === 'serializable') this.unordered.add(this.steps[i].name)
    }
    if (!plan && def && seenStatements(def.sql) >= 2) this.whole.add(this.steps[i].name)
    this.planned = { step: i, plan }
    return plan
  }

  /** The suffix of the session's next part to launch (startPart): '/2', ':snapshot', ..., or undefined when none is left. */
  get nextPart(): string | undefined {
    const x = this.parts
    return x && x.at < x.plan.points.length ? x.plan.points[x.at].suffix : undefined
  }

  /** The step whose parts are being launched (nextPart), if any. */
  get partStep(): number | undefined {
    return this.nextPart === undefined ? undefined : this.parts!.step
  }

  /** The SQL the next part sends. */
  get nextPartSql(): string {
    const x = this.parts!
    return x.plan.points[x.at].sql
  }

  /** Launches the next point of the step split into points (start with parts). */
  startPart(): Promise<void> {
    const x = this.parts
    if (!x || x.at >= x.plan.points.length) return Promise.resolve()
    return this.launch(`${this.steps[x.step].name}${x.plan.points[x.at].suffix}`, () => this.runPart(false))
  }

  /**
   * Runs the next point of a split step. Its first opens the transaction race opens for a step outside one; a
   * snapshot point whose transaction has taken its snapshot already is passed. The step's later points are not sent
   * once one fails (as the server skips the rest of a simple-query string), and the session ends as the whole step's
   * error would end it. After the last: the step's commit point, or the session's end, as for a whole step.
   */
  private async runPart(first: boolean): Promise<void> {
    const x = this.parts!
    const i = x.step
    const point = x.plan.points[x.at++]
    const { name, def } = this.steps[i]
    const label = `${name}${point.suffix}`
    try {
      if (first) {
        const reject = def.rejectIf?.(this.seen())
        if (reject) {
          this.parts = undefined
          this.record(name, 'reject', String(reject))
          await this.rollback()
          await this.release()
          return this.end('rejected', name, { reason: String(reject) })
        }
        if (x.plan.implicit) {
          await this.exec({ sql: 'begin' }, label)
          this.inTx = true
        }
      }
      if (point.snapshot && this.snapTaken) {
        this.record(label, 'ok', 'snapshot already taken')
        return
      }
      const res = await this.exec({ ...def, sql: point.sql }, label)
      this.noteWoke()
      const tag = res.command ?? ''
      if (!point.snapshot) this.rows[name] = res
      if (tag === 'BEGIN' || tag === 'START TRANSACTION') this.inTx = true
      if (!NOT_FIXING.has(tag)) this.levelFixed = true
      this.record(label, 'ok', point.snapshot ? 'snapshot taken' : summarize(res), !point.snapshot && isSetup(tag, res))
      if (x.at < x.plan.points.length) return
      this.parts = undefined
      // The step's own COMMIT, or the commit of the transaction race opened for it: a point of its own.
      if (x.plan.commit || x.plan.implicit) {
        this.inTx = true
        this.openCommit = i
        return
      }
      if (i === this.steps.length - 1) this.finish(label, tag)
    } catch (err) {
      this.parts = undefined
      this.noteWoke()
      await this.fail(label, err)
    }
  }

  /** Commits the transaction race opened for step openCommit (its commit point): the statement's own commit. */
  startCommit(): Promise<void> {
    const i = this.openCommit
    if (i === undefined) return Promise.resolve()
    this.openCommit = undefined
    const name = `${this.steps[i].name}:commit`
    return this.launch(name, async () => {
      try {
        const res = await this.exec({ sql: 'commit' }, name)
        this.noteWoke()
        const tag = res.command ?? ''
        this.inTx = false
        this.snapTaken = false
        this.commitTag = tag
        this.record(name, 'ok', summarize(res))
        if (i === this.steps.length - 1) this.finish(name, tag)
      } catch (err) {
        this.noteWoke()
        await this.fail(name, err)
      }
    })
  }

  private launch(name: string, body: () => Promise<void>): Promise<void> {
    const cur = { name, startedAt: this.env.now(), blocked: false, done: Promise.resolve() }
    this.current = cur
    this.newStep()
    this.record(name, 'run')
    // A pooler's client that has run all its steps disconnects, as a finished request does.
    cur.done = body().then(() => (this.finished && !this.lender ? this.conn?.done?.() : undefined)).finally(() => {
      this.noteWoke()
      this.current = undefined
    })
    return cur.done
  }

  /** Seen blocked by another session: shown as waiting, and counted in waitedMs when it completes. */
  markBlocked(): void {
    if (this.current && !this.current.blocked) {
      this.current.blocked = true
      this.record(this.current.name, 'wait')
    }
  }

  /** The step in flight came back: if it had been waiting, it woke now (shown before its result). */
  private noteWoke(): void {
    const cur = this.current
    if (cur?.blocked) {
      cur.blocked = false
      this.waitedMs += this.env.now() - cur.startedAt
      this.record(cur.name, 'woke')
    }
  }

  private record(step: string, kind: EventKind, detail?: string, setup?: boolean): void {
    const ev = this.env.record({ session: this.name, step, kind, detail, ...(setup ? { setup } : {}) })
    if (!ev) return
    if (this.stepBackend !== undefined) ev.backend = this.stepBackend
    this.stepEvents.push(ev)
  }

  /** A step begins: its events and its backend are its own. */
  private newStep(): void {
    this.stepEvents = []
    this.stepBackend = undefined
  }

  /**
   * A pooler's client: notes where step `step` ran once its connection knows (after the step), and marks the
   * step's events with it; a step the pooler lent a server connection only while it ran may stay unseen (null).
   */
  private whereRan(step: string, backend: Promise<number | null>): Promise<void> {
    const entry: StepBackend = { step, backend: null }
    this.stepBackends.push(entry)
    const events = this.stepEvents
    return backend.then(
      (b) => {
        if (b === null) return
        entry.backend = b
        this.lastBackend = b
        this.stepBackend = b
        for (const ev of events) ev.backend = b
      },
      () => {},
    )
  }

  private seen(): Seen {
    const prior: Record<string, Row> = {}
    for (const [k, v] of Object.entries(this.rows)) if (v[0]) prior[k] = v[0]
    return { session: this.name, params: this.env.params, n: this.env.n, prior, rows: this.rows }
  }

  private async runStep(i: number, split = false): Promise<void> {
    const { name, def } = this.steps[i]
    try {
      const reject = def.rejectIf?.(this.seen())
      if (reject) {
        this.record(name, 'reject', String(reject))
        await this.rollback()
        await this.release()
        return this.end('rejected', name, { reason: String(reject) })
      }
      if (def.appWait) return await this.appWait(i, def.appWait)
      // Would commit by itself: run in a transaction race opens (at the session's own default level), committed at
      // its own point. Not a step that retries (its retryIf judges a committed result).
      const wrap = split && !this.inTx && !def.retryIf && def.sql.trim() !== '' && !NOT_SPLIT.test(def.sql)
      // Several statements whose last, lone COMMIT ends the transaction the step runs in (`begin; ...; commit` as one
      // step): the statements before it are the step's run, and its COMMIT a point of its own, as for a statement
      // that commits by itself. They must leave that transaction open: it is open before them, or their first begins
      // it, and none of the others starts or ends one.
      const body = split && !wrap && !def.retryIf ? commitBody(def.sql, this.inTx) : undefined
      let res: QueryResult
      let bare = false
      if (body !== undefined) res = await this.exec({ ...def, sql: body }, name)
      else if (wrap) {
        await this.exec({ sql: 'begin' }, name)
        this.inTx = true
        try {
          res = await this.exec(def, name)
        } catch (e) {
          if ((e as { code?: string })?.code !== IN_BLOCK) throw e
          // Refused inside a transaction block: it runs as it is, one point (the report names it).
          await this.rollback()
          this.indivisible.push(name)
          bare = true
          res = await this.exec(def, name)
        }
      } else res = await this.exec(def, name)
      this.noteWoke()
      this.rows[name] = res
      const tag = res.command ?? ''
      if (tag === 'BEGIN' || tag === 'START TRANSACTION') this.inTx = true
      if (tag === 'COMMIT' || tag === 'ROLLBACK') {
        this.inTx = false
        this.commitTag = tag
      }
      if (!NOT_FIXING.has(tag)) this.levelFixed = true
      this.record(name, 'ok', summarize(res), isSetup(tag, res))
      const again = def.retryIf?.({ ...this.seen(), result: res })
      if (again) return this.retry(String(again), name)
      if (body !== undefined) {
        this.inTx = true
        this.openCommit = i
        return
      }
      // Its transaction is still the one race opened: the commit is the session's next point.
      if (wrap && !bare && this.inTx) {
        this.openCommit = i
        return
      }
      if (i === this.steps.length - 1) this.finish(name, tag)
    } catch (err) {
      this.noteWoke()
      await this.fail(name, err)
    }
  }

  /** Application code, not SQL: the client waits the param's milliseconds, holding whatever it holds. */
  private async appWait(i: number, w: NonNullable<StepDef['appWait']>): Promise<void> {
    const { name } = this.steps[i]
    const ms = Number(this.env.params[w.param])
    await sleep(ms)
    this.rows[name] = []
    this.record(name, 'ok', `waited ${ms} ms`)
    if (i === this.steps.length - 1) this.finish(name, '')
  }

  /** The last step ran without an error: committed only if nothing is left open and a COMMIT said COMMIT. */
  private finish(name: string, tag: string): void {
    if (tag === 'ROLLBACK') return this.end('failed', name, { reason: 'COMMIT answered ROLLBACK: the transaction had failed' })
    if (this.inTx) return this.end('failed', name, { reason: 'the session ended with its transaction still open (no commit step)' })
    this.end('committed', name)
  }

  private async fail(name: string, err: unknown): Promise<void> {
    if (err instanceof StepTimeout) {
      this.record(name, 'timeout', err.message)
      return this.end('timeout', name, { reason: err.message })
    }
    if (err instanceof BindError) {
      this.record(name, 'error', err.message)
      await this.rollback()
      return this.end('failed', name, { reason: err.message })
    }
    let code = (err as { code?: string })?.code
    if (!(err instanceof ServerEnded) && (this.closedByServer || isConnectionLoss(err)) && !(isServerError(code) && !isConnectionLoss(err))) {
      // The server said why it ended the connection (its FATAL, read on the socket): that is the step's outcome,
      // whichever came first, the FATAL or the step (exec throws ServerEnded when the FATAL came before the step was
      // sent; sent just before, the step meets a closed connection). A FATAL that is a lost connection (57P01) is lost.
      const fatal = this.serverFatal
      if (!fatal || isConnectionLoss(fatal)) {
        this.record(name, 'lost', code)
        return this.end('lost', name, { reason: `connection lost (${code ?? 'closed'})` })
      }
      err = new ServerEnded(fatal.code, fatal.message)
      code = fatal.code
    }
    if (isServerError(code)) {
      this.errors.push(code)
      this.record(name, 'error', `${code} ${conditionName(code) ?? ''}`.trim())
      await this.rollback()
      const retry = this.spec.retry
      // A retry loop names SQLSTATEs ('40001'); a MySQL error is 'SQLSTATE/errno' ('40001/1213'), retried by its SQLSTATE.
      if ((retry?.on?.includes(code) || retry?.on?.includes(sqlstateOf(code))) && this.retries < retry!.max) return this.again(retry!.backoff ?? false, name)
      await this.release()
      return this.end('failed', name, { sqlstate: code, reason: (err as Error).message })
    }
    // Not a server error and not a lost connection: report it as the session's failure, honestly.
    this.record(name, 'error', (err as Error)?.message)
    await this.rollback()
    return this.end('failed', name, { reason: (err as Error)?.message ?? String(err) })
  }

  /** A step's retryIf said the transaction must run again (or, with no try left, that the application gives up). */
  private async retry(reason: string, name: string): Promise<void> {
    await this.rollback()
    if (this.retries < (this.spec.retry?.max ?? 0)) return this.again(this.spec.retry?.backoff ?? false, name)
    this.record(name, 'reject', reason)
    await this.release()
    return this.end('rejected', name, { reason })
  }

  /** The application's finally (SessionSpec.release), after a rejection or a SQL error; its own failure changes nothing. */
  private async release(): Promise<void> {
    const sql = this.spec.release
    if (!sql || this.closedByServer) return
    this.newStep() // its own events (and, through a pooler, its own backend)
    try {
      const res = await this.exec({ sql }, 'release')
      this.record('release', 'ok', summarize(res))
    } catch (e) {
      this.record('release', 'error', (e as { code?: string })?.code ?? (e as Error)?.message)
    }
  }

  /** The application's retry loop: the whole transaction again, each step exactly as the first time. */
  private async again(backoff: boolean, from: string): Promise<void> {
    this.retries++
    const ms = backoff ? Math.random() * Math.min(1000, 10 * 2 ** this.retries) : 0
    this.record(from, 'retry', `attempt ${this.retries + 1}${backoff ? ` after ${Math.round(ms)}ms` : ''}`)
    if (ms) await sleep(ms)
    this.rows = {}
    for (let i = 0; i < this.steps.length && !this.finished; i++) {
      this.newStep()
      await this.runStep(i)
    }
  }

  /** The value of every named bind of `sql`, in parameter order. */
  private values(names: string[]): unknown[] {
    const ctx: BindCtx = { user: this.env.user, session: this.name, index: this.index, params: this.env.params, n: this.env.n }
    return names.map((name) => {
      const dot = name.indexOf('.')
      if (dot >= 0) {
        const [step, col] = [name.slice(0, dot), name.slice(dot + 1)]
        const row = this.rows[step]?.[0]
        if (!row || !(col in row)) throw new BindError(`bind :${name} has no value (step ${step} returned no such row or column)`)
        return row[col]
      }
      const bind = this.spec.binds?.[name] ?? this.env.binds[name]
      if (bind) return bind.value(ctx)
      switch (name) {
        case 'user':
          return this.env.user
        case 'session':
          return this.name
        case 'index':
          return this.index
        case 'n':
          return this.env.n
        case 'attempt':
          return this.retries + 1
      }
      if (name in this.env.params) return this.env.params[name]
      throw new BindError(`unknown bind :${name}`)
    })
  }

  private async exec(def: StepDef, step: string): Promise<QueryResult> {
    if (this.closedByServer) {
      const fatal = this.serverFatal
      if (fatal && !isConnectionLoss(fatal)) throw new ServerEnded(fatal.code, fatal.message)
      throw Object.assign(new Error('connection closed by the server'), { code: 'CONNECTION_CLOSED' })
    }
    const { text, names } = parseBinds(def.sql, this.env.placeholders)
    const args = this.values(names)
    // Until a statement has fixed the transaction's isolation level, ask the server for it with the step
    // (PostgreSQL: SHOW in the same pipeline, before it; MySQL: from InnoDB's own record of the transaction).
    const conn = this.connection
    const run = conn.step(text, args, !this.levelFixed)
    const show = run.level?.then((level) => {
      if (level !== undefined) this.isolation = level
    })
    // A pooler's client: where the step ran is known once it has ended (waited for, bounded, before its result
    // is recorded, so that its events carry it).
    const placed = run.backend && this.whereRan(step, run.backend)
    const ran = () => (placed ? Promise.race([placed, sleep(2500)]) : undefined)
    const query = run.result
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.env.stepTimeoutMs)))
    try {
      const first = await Promise.race([query, timeout])
      if (first !== 'timeout') {
        await show
        await ran()
        this.snapTaken = snapshotAfter(def.sql, this.snapTaken)
        return first
      }
    } catch (e) {
      await ran()
      throw e
    } finally {
      clearTimeout(timer)
    }
    // Give up on this step: note who blocks it, cancel it, and if cancel is not enough, end the backend. A
    // pooler's client asks the pooler which backend it holds; holding none, it waits in the pooler's queue, and
    // ending the client ends that wait.
    const backend = conn.lent ? await conn.lent().catch(() => undefined) : this.pid
    if (backend === undefined) {
      this.blockedBy = []
      await conn.destroy()
      throw new StepTimeout(`no result within ${this.env.stepTimeoutMs}ms, waiting for a server connection from the pooler`)
    }
    this.blockedBy = await this.env.blockers(backend).catch(() => [])
    await this.env.cancel(backend, false).catch(() => {})
    const settled = await Promise.race([query.then(() => true, () => true), sleep(2000).then(() => false)])
    if (!settled) await this.env.cancel(backend, true).catch(() => {})
    await ran()
    const by = this.blockedBy.length ? `, waiting for pid ${this.blockedBy.join(', ')}` : ''
    throw new StepTimeout(`no result within ${this.env.stepTimeoutMs}ms${conn.lent ? ` on backend ${backend}` : ''}${by}`)
  }

  private async rollback(): Promise<void> {
    if (this.closedByServer) return
    try {
      const r = await this.conn.rollback()
      if (r?.command) this.commitTag = r.command
      if (r?.level && this.isolation === undefined) this.isolation = r.level
      this.inTx = false
      this.snapTaken = false
    } catch {
      /* a lost connection rolls back by itself */
    }
  }

  private end(outcome: Outcome, step: string, o: { reason?: string; sqlstate?: string } = {}): void {
    if (this.outcome) return
    this.outcome = outcome
    this.endStep = step
    this.reason = o.reason
    this.sqlstate = o.sqlstate
    this.endedAt = this.env.now()
  }

  /** Ends a session that never got to run all its steps (the run was aborted). */
  abandon(why: string): void {
    this.end('lost', this.current?.name ?? this.steps[0].name, { reason: why })
  }

  async close(): Promise<void> {
    if (!this.lender) await this.conn?.close()
  }

  /** Closes the socket now; used when the run is aborted. */
  async destroy(): Promise<void> {
    if (this.lender) return
    // Still connecting (the run aborted meanwhile): the connection it gets is ended too, once it comes (bounded by
    // the connect timeout).
    if (!this.conn) await this.opened?.catch(() => {})
    await this.conn?.destroy()
  }

  report(): SessionReport {
    return {
      name: this.name,
      // A pooler's client: the backend of its last step race saw (its steps say where each ran).
      pid: this.lastBackend ?? this.pid,
      outcome: this.outcome ?? 'lost',
      reason: this.reason ?? null,
      sqlstate: this.sqlstate ?? null,
      condition: conditionName(this.sqlstate) ?? null,
      step: this.endStep ?? null,
      isolation: this.isolation ?? null,
      commitTag: this.commitTag ?? null,
      waitedMs: round(this.waitedMs),
      ms: round((this.endedAt ?? this.env.now()) - this.startedAt),
      retries: this.retries,
      errors: [...this.errors],
      ...(this.outcome === 'timeout' ? { blockedBy: this.blockedBy ?? [] } : {}),
      ...(this.connection?.lent ? { steps: this.stepBackends.map((x) => ({ ...x })) } : {}),
      ...(this.indivisible.length ? { indivisible: [...this.indivisible] } : {}),
      ...(this.whole.size ? { whole: [...this.whole] } : {}),
      ...(this.unordered.size ? { unordered: [...this.unordered] } : {}),
    }
  }
}

/** How a session's connection is opened: named after the run's scenario and the session, in the run's namespace. */
export function sessionOptions(
  p: { name: string; spec: SessionSpec },
  env: { scenarioId: string; schema: string; connectTimeoutMs: number; stepTimeoutMs: number },
): SessionOptions {
  return {
    connectTimeoutMs: env.connectTimeoutMs,
    stepTimeoutMs: env.stepTimeoutMs,
    applicationName: `race ${env.scenarioId} ${p.name}`,
    space: env.schema,
    params: p.spec.connection ?? {},
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}

/** Command tags of statements that only set a transaction or session up: they start nothing of the race. */
const SETUP_TAGS = new Set(['BEGIN', 'START TRANSACTION', 'SET', 'SHOW', 'RESET'])

/**
 * A set-up step, known from what the server answered: its command tag, or a SELECT whose one row has only the
 * column set_config (`select set_config('lock_timeout', ...)`). The timeline hides these unless asked.
 */
export function isSetup(tag: string, rows: Rows): boolean {
  if (SETUP_TAGS.has(tag)) return true
  return tag === 'SELECT' && rows.length === 1 && Object.keys(rows[0]).every((k) => k === 'set_config')
}

/** A step's result in a few characters: `pending=0`, `0 rows`, `INSERT 1`. */
export function summarize(rows: QueryResult): string {
  const cmd = rows.command
  if (cmd && cmd !== 'SELECT') return `${cmd} ${rows.count ?? ''}`.trim()
  if (rows.length === 1) {
    const entries = Object.entries(rows[0])
    if (entries.length <= 3 && entries.every(([, v]) => v === null || typeof v !== 'object')) {
      return entries.map(([k, v]) => (v === '' ? 'ok' : `${k}=${v}`)).join(' ')
    }
  }
  return `${rows.length} row${rows.length === 1 ? '' : 's'}`
}
