// One session of an application race: the user's function, running on its own connection, whose every query waits
// at a gate until the schedule releases it. The session records facts as the engine's sessions do (events, an
// outcome, its SQLSTATE), so that the same judge and reports read them.
import { conditionName, isConcurrencyControl, isConnectionLoss, isServerError } from '../db/sqlstate.js'
import { describeThrown } from './describe.js'
import type { EventKind, Outcome, SessionReport, TimelineEvent } from '../engine/types.js'
import type { FaultCode } from './labels.js'
import { NOT_SPLIT } from '../engine/session.js'
import { underTest } from './contain.js'
import { statements, triesLock } from '../lex.js'
import { TAKES_NO_SNAPSHOT } from './parts.js'

/** A part of a string of several statements race runs one by one (app/parts.ts): the first, the last, and whether race opens the string's transaction. */
export interface StringPart {
  first: boolean
  last: boolean
  wrap: boolean
}

/** Where a session stands. app: its function runs JavaScript (between queries); ready: at its gate. */
export type AppState = 'starting' | 'app' | 'ready' | 'running' | 'done'

export interface AppSessionEnv {
  record(e: Omit<TimelineEvent, 't'>): TimelineEvent | void
  /** A wait of a step that has its result already, put where it happened (TrialClock.recordLateWait). */
  recordLateWait?(session: string, step: string): void
  now(): number
  /** Something changed (a session reached its gate, a query ended, a session ended): the scheduler looks again. */
  notify(): void
  /** A query was released: its label goes into the trial's order. */
  released(label: string): void
  /** Starts the step timer of a query now in flight; returns its stop. */
  timeQuery(s: AppSession): () => void
}

/** The error a query of a session that race has given up on (timeout, lost) throws instead of being sent. */
export class SessionEnded extends Error {
  readonly code = 'RACE_SESSION_ENDED'
}

/** A query's result in a few characters, as the engine's summarize: `INSERT 1`, `n=0`, `2 rows`. */
export function summarizeResult(command: string | undefined, count: number | null | undefined, rows: unknown[] | undefined): string {
  if (command && command !== 'SELECT') return `${command} ${count ?? ''}`.trim()
  const r = rows ?? []
  if (r.length === 1 && r[0] && typeof r[0] === 'object' && !Array.isArray(r[0])) {
    const entries = Object.entries(r[0] as Record<string, unknown>)
    if (entries.length <= 3 && entries.every(([, v]) => v === null || typeof v !== 'object')) return entries.map(([k, v]) => `${k}=${v}`).join(' ')
  }
  return `${r.length} row${r.length === 1 ? '' : 's'}`
}

/** Command tags after which the session is inside a transaction / outside one. */
const BEGINS = new Set(['BEGIN', 'START', 'START TRANSACTION'])
const ENDS = new Set(['COMMIT', 'ROLLBACK', 'PREPARE TRANSACTION'])

/** What a function returned, in a few characters, for a reason: ` { status: 409 }`, ` 'conflict'`; nothing when undefined. */
function describeValue(v: unknown): string {
  if (v === undefined || v === null) return ''
  if (v instanceof Error) return `: ${v.message}`
  let text: string
  try {
    text = typeof v === 'string' ? v : JSON.stringify(v)
  } catch {
    text = String(v)
  }
  return `: ${text.length > 80 ? `${text.slice(0, 77)}...` : text}`
}

export class AppSession {
  state: AppState = 'starting'
  /** Since when it has been running JavaScript without reaching a gate (for the step timeout). */
  appSince = 0
  pid = 0
  /** The step at the gate. */
  pending?: { label: string; sql: string; point: boolean; go: () => void }
  /** The query in flight. */
  current?: { label: string; startedAt: number; blocked: boolean; everBlocked: boolean }
  /** Every gate passes at once (barrier after its release, or before it except at `holdAt`). */
  free = false
  /** With `free`: the step (label without the session) at which the session still waits (the barrier). */
  holdAt?: (step: string, point: boolean) => boolean
  /** Not free: which points are steps (a permutation names them, or a barrier stands there); others pass. */
  holdsPoint: (step: string) => boolean = () => false
  private queries = 0
  private readonly points = new Map<string, number>()
  /** Queries wait for the one before them to end (one connection: pipelined queries go one at a time). */
  private chain: Promise<void> = Promise.resolve()

  outcome?: Outcome
  reason?: string
  sqlstate?: string
  endStep?: string
  waitedMs = 0
  readonly errors: string[] = []
  blockedBy?: number[]
  commitTag?: string
  inTx = false
  lostConnection = false
  private startedAt = 0
  private endedAt?: number
  /** Errors the driver raised for this session's queries: a function that throws one failed, any other error is the application's. */
  private readonly driverErrors = new WeakSet<object>()
  private stopTimer?: () => void

  constructor(
    readonly name: string,
    readonly index: number,
    private readonly env: AppSessionEnv,
  ) {}

  markStart(t: number): void {
    this.startedAt = t
  }

  get finished(): boolean {
    return this.state === 'done'
  }

  /** The label of the session's next query. */
  nextQuery(): string {
    return `q${++this.queries}`
  }

  /** The label of a point: its name, then name@2, name@3 when the code passes it again. */
  nextPoint(name: string): string {
    const k = (this.points.get(name) ?? 0) + 1
    this.points.set(name, k)
    return k === 1 ? name : `${name}@${k}`
  }

  /**
   * Called by the driver adapter before it sends a query (or by ctx.point): resolves when the schedule lets it go.
   * Returns the function to call when the query has ended (with its result or error).
   */
  async enter(step: string, sql: string, point = false, splittable = true, part?: StringPart): Promise<void> {
    // Sent after the function returned (from a timer, a promise it left running): no step of any schedule. Not sent.
    if (this.functionEnded) {
      this.lateQuery ??= step
      throw new SessionEnded(`${this.name} sent ${step} after its function returned: race did not send it`)
    }
    if (!point && this.queries > this.maxQueries) return this.park(step)
    // A string of several statements where they are split, sent whole (not split by the adapter): said, never a pass.
    if (!point && !part && this.splitStringAt(step) && statements(sql).length > 1) this.whole.push(step)
    // A part after a string's first holds the connection the first took (the chain) and counts in its step.
    const cont = part !== undefined && !part.first
    if (!cont) this.open++
    // A query that would commit by itself, where the schedule splits it (race explore; a replay that names its commit
    // point): it runs in a transaction race opens, at the connection's own default level, and commits at its own point
    // (commitPoint), before the function gets its result, as an autocommit statement's caller does. A string of
    // several statements run one by one: race opens its implicit transaction before its first part.
    const wrap = !point && !this.inTx && (part ? part.first && part.wrap : splittable && this.splitAt(step) && sql.trim() !== '' && !NOT_SPLIT.test(sql))
    try {
      await this.gate(step, sql, point, cont, wrap)
    } catch (e) {
      this.endParts()
      this.settle()
      throw e
    }
    if (point) this.settle()
    if (part) {
      this.inParts = !part.last
      this.holdChain = !part.last
    }
    const fault = this.faultNow
    this.faultNow = undefined
    if (fault) {
      try {
        await this.inject(fault, step, sql)
      } catch (e) {
        // The transaction race opened at the snapshot point ends with the failure, as the query's own would.
        await this.abortWrapped()
        this.abortParts()
        throw e
      }
    }
    if (wrap && !this.inTx) await this.wrap(step)
  }

  /** Opens the transaction of a query (or string) that would commit by itself: its run and its commit are two points. */
  private async wrap(step: string): Promise<void> {
    try {
      await this.raw!('begin')
    } catch (e) {
      // The connection failed under it: the query meets the same failure when it is sent.
      void e
      return
    }
    this.wrapped = step
    this.inTx = true
    this.snapTaken = false
    this.txLevel = this.defaultKnown ? this.defaultLevel : undefined
  }

  /**
   * Whether the query labelled `step` (q3), a string of several statements, is run statement by statement (q3, q3/2,
   * ...): every such string in race explore, those whose second part a replayed schedule names.
   */
  splitStringAt: (step: string) => boolean = () => false
  /**
   * Whether the query labelled `step` gets a snapshot point before it (`q3:snapshot`) when it locks rows without
   * waiting (NOWAIT, SKIP LOCKED) at REPEATABLE READ or SERIALIZABLE: every such query in race explore, those a
   * replayed schedule names the point of.
   */
  snapshotAt: (step: string) => boolean = () => false
  /** PostgreSQL (node-postgres, postgres.js): a transaction's snapshot is taken by its first statement that needs one. */
  snapshots = false
  /** The transaction has taken its snapshot (a statement that needs one ran in it); false when not known. */
  private snapTaken = false
  /** The isolation level of the transaction in progress; undefined when not known. */
  private txLevel?: string
  /** defaultLevel is still the connection's default (no SET of default_transaction_isolation seen). */
  private defaultKnown = true
  /** Between a string's first part and its last: parts after the first hold the connection, as the whole string would. */
  private inParts = false
  private holdChain = false
  /** Strings of several statements race ran whole where explore runs parts (a driver race cannot rebuild the result of). */
  readonly whole: string[] = []
  /** Queries that lock rows without waiting at SERIALIZABLE, where race explore runs them (SessionReport.unordered). */
  readonly unordered: string[] = []

  /** Whether a snapshot point goes before this query (see snapshotAt): its transaction may take its snapshot in it. */
  private needsSnapshot(step: string, sql: string, wrap: boolean): boolean {
    if (!this.locksWithoutWaitingHere(step, sql)) return false
    const weak = (l: string | undefined) => l === 'read committed' || l === 'read uncommitted'
    if (this.inTx) return !this.snapTaken && !weak(this.txLevel)
    return wrap && !weak(this.levelNow)
  }

  /** race explore (or a replay naming its points): the query labelled `step` locks rows without waiting (NOWAIT, SKIP LOCKED). */
  private locksWithoutWaitingHere(step: string, sql: string): boolean {
    return this.snapshots && this.snapshotAt(step) && triesLock(sql)
  }

  /** The level the next statement runs at: its transaction's, else the connection's default; undefined when not known. */
  private get levelNow(): string | undefined {
    return this.inTx ? this.txLevel : this.defaultKnown ? this.defaultLevel : undefined
  }

  /**
   * The snapshot point before a query that locks rows without waiting: race takes the transaction's snapshot here
   * (`select 1`, after opening race's transaction when the query would commit by itself), so that another session can
   * commit between the snapshot and the row lock, as it can inside the one query in real life (then 40001).
   */
  private async snapshotPoint(step: string, wrap: boolean): Promise<void> {
    const label = `${step}:snapshot`
    await new Promise<void>((go) => {
      this.pending = { label, sql: 'select 1', point: false, go }
      this.state = 'ready'
      this.env.notify()
    })
    this.pending = undefined
    if (this.finished) throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${label} not sent`)
    this.env.released(`${this.name}.${label}`)
    this.record(label, 'run')
    this.current = { label, startedAt: this.env.now(), blocked: false, everBlocked: false }
    this.state = 'running'
    this.stopTimer = this.env.timeQuery(this)
    if (wrap && !this.inTx) await this.wrap(step)
    try {
      await this.raw!('select 1')
    } catch {
      // An aborted transaction (25P02) takes no snapshot; a lost connection fails the query itself.
    }
    this.snapTaken = true
    this.stopTimer?.()
    this.stopTimer = undefined
    this.current = undefined
    this.record(label, 'ok', 'snapshot')
  }

  /** The string's parts end here (a part failed, or race ended the session): the connection is let go. */
  abortParts(): void {
    if (!this.inParts && !this.holdChain) return
    this.endParts()
    if (this.releaseChain) this.endWrapped()
  }
  private endParts(): void {
    this.inParts = false
    this.holdChain = false
  }

  /**
   * Whether the query labelled `step` (q3), when it would commit by itself, is split into its run and its commit
   * point (`q3:commit`): every such query in race explore, those whose commit point a replayed schedule names.
   */
  splitAt: (step: string) => boolean = () => false
  /** The query whose transaction race opened for it (split), until its commit point has run. */
  private wrapped?: string
  /** Queries run outside a transaction as one point, because PostgreSQL refuses them inside one (25001). */
  readonly indivisible: string[] = []

  /**
   * Called by the driver adapter once a query came back with its result, before the function gets it: a split query
   * commits here, at its own point (`q3:commit`), chosen by the schedule as any step. Throws the COMMIT's error (a
   * deferred constraint's, a serialization failure), which is then the query's, as an autocommit statement's is.
   */
  async commitPoint(): Promise<void> {
    const step = this.wrapped
    if (step === undefined) return
    this.wrapped = undefined
    const label = `${step}:commit`
    if (this.finished) {
      this.endWrapped()
      throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${label} not sent`)
    }
    await new Promise<void>((go) => {
      this.pending = { label, sql: 'commit', point: false, go }
      this.state = 'ready'
      this.env.notify()
    })
    this.pending = undefined
    if (this.finished) {
      this.endWrapped()
      throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${label} not sent`)
    }
    this.env.released(`${this.name}.${label}${this.faultNow ? `!${this.faultNow}` : ''}`)
    this.record(label, 'run')
    this.currentSql = 'commit'
    // From here the commit is the step in flight: its end (ok, failed) lets the session's next query go.
    this.current = { label, startedAt: this.env.now(), blocked: false, everBlocked: false }
    this.state = 'running'
    this.stopTimer = this.env.timeQuery(this)
    const fault = this.faultNow
    this.faultNow = undefined
    if (fault) await this.inject(fault, label, 'commit')
    let res: unknown
    try {
      res = await this.raw!('commit')
    } catch (e) {
      this.inTx = false
      this.failed(e)
      throw e
    }
    const tag = String((res as { command?: string })?.command ?? 'COMMIT').toUpperCase()
    if (tag === 'ROLLBACK') this.lastWasRollbackOfCommit = true
    this.ok(tag === 'ROLLBACK' ? 'ROLLBACK' : 'COMMIT', undefined, undefined)
  }

  /**
   * The split query failed with 25001 (active_sql_transaction: PostgreSQL refuses it inside a transaction block,
   * VACUUM or CREATE INDEX CONCURRENTLY): race's transaction is rolled back and the adapter sends the query again as it
   * is, one point (true). Any other error: false.
   */
  async refusedInBlock(err: unknown): Promise<boolean> {
    // A string run part by part: PostgreSQL refuses it in the string's own implicit transaction too.
    if (this.wrapped === undefined || this.codeOf(err) !== '25001' || this.inParts || this.wrapped !== this.current?.label) return false
    const step = this.wrapped
    this.wrapped = undefined
    try {
      await this.raw!('rollback')
    } catch {
      /* the query sent again meets the same failure */
    }
    this.inTx = false
    this.indivisible.push(step)
    return true
  }

  /** The split query failed: its transaction (race's) is rolled back, as an autocommit statement's failure leaves none. */
  async abortWrapped(): Promise<void> {
    if (this.wrapped === undefined) return
    this.wrapped = undefined
    try {
      await this.raw!('rollback')
    } catch {
      /* a lost connection rolls back by itself */
    }
    this.inTx = false
    this.endWrapped()
  }

  /** What endQuery left for the split query's commit: the session's next query may go, and the step is over. */
  private endWrapped(): void {
    this.releaseChain?.()
    this.releaseChain = undefined
    this.settle()
  }

  /** At most this many queries per call of the function (a retry loop that never ends is stopped here). */
  maxQueries = Number.POSITIVE_INFINITY
  /** Stopped at maxQueries: its function is left waiting forever on its next query (never resumed, never spinning). */
  parked = false
  private park(step: string): Promise<never> {
    if (!this.finished) {
      const codes = [...new Set(this.errors.slice(-10))]
      const what = this.begins > 1 ? `retried without end: ${this.begins} transactions begun` : 'sent more than'
      const reason = `${what} ${this.begins > 1 ? 'in' : ''} ${this.maxQueries} queries in one call${codes.length ? `, the last failing with ${codes.join(', ')}` : ''}; race stopped it there (maxQueries)`.replace(/\s+/g, ' ')
      this.record(step, 'error', reason)
      this.crashed = reason
      this.parked = true
      this.end('failed', step, { reason })
    }
    return new Promise<never>(() => {})
  }
  private begins = 0

  /** The fault race injects into the step just released (set by the scheduler), and those it injected. */
  faultNow?: FaultCode
  readonly injected: string[] = []
  /** Sends SQL on the session's connection outside its gate (AppConn.raw), and ends its backend from the control connection. */
  raw?: (sql: string) => Promise<unknown>
  kill?: () => Promise<void>

  /**
   * Makes the server fail the released query instead of running it. 40001 / 40P01: the server raises that SQLSTATE
   * in the session's transaction (a DO block's RAISE, sent in the query's place), which aborts the transaction as a
   * serialization failure or a deadlock does; at a COMMIT the transaction is then rolled back, as a failed COMMIT
   * leaves none open. The driver gets the server's own error. lost: the session's backend is ended from the control
   * connection (pg_terminate_backend) before the query is sent, which then fails as on any lost connection.
   */
  private async inject(fault: FaultCode, step: string, sql: string): Promise<void> {
    this.injected.push(`${fault}@${step}`)
    if (fault === 'lost') {
      this.lostConnection = true
      await this.kill?.()
      return
    }
    const what = fault === '40001' ? 'serialization failure' : 'deadlock'
    const raise = `do $race$ begin raise exception 'race injected a ${what} (--inject ${fault})' using errcode = '${fault}'; end $race$`
    try {
      await this.raw!(raise)
    } catch (e) {
      if (/^\s*(commit|end)\b/i.test(sql)) {
        await this.raw!('rollback').catch(() => {})
        this.inTx = false
      }
      this.failed(e, true)
      throw e
    }
    throw new Error(`race could not inject ${fault}: the server ran its RAISE without an error`)
  }

  /** Steps entered (sent or waiting to be) and not yet ended: a function that returns leaves none behind unseen. */
  private open = 0
  private drainers: (() => void)[] = []
  private settle(): void {
    this.open = Math.max(0, this.open - 1)
    if (this.open === 0) for (const d of this.drainers.splice(0)) d()
  }
  /** Whether a step of the session is still entered and not ended (a query its function did not await). */
  get pendingSteps(): number {
    return this.open
  }
  /**
   * Resolves once every step the session's function entered has ended, its un-awaited queries included (they are
   * released by the schedule as any other). Queries sent in a later tick (postgres.js sends on the next one) count.
   */
  async drained(): Promise<void> {
    for (;;) {
      await new Promise<void>((r) => setImmediate(r))
      if (this.open === 0 || this.finished) return
      this.unawaited = true
      await new Promise<void>((r) => this.drainers.push(r))
    }
  }
  /** Its function ended before every query it sent had ended (it did not await them): race waited for them. */
  unawaited = false
  /** How many queries the function has sent so far (through the connection race gave it). */
  get sent(): number {
    return this.queries
  }

  private async gate(step: string, sql: string, point: boolean, cont = false, wrap = false): Promise<void> {
    if (this.finished) {
      if (cont) this.releaseChain?.()
      throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${step} not sent`)
    }
    let mine!: () => void
    if (cont) mine = () => this.releaseChain?.()
    else {
      const prev = this.chain
      this.chain = new Promise((r) => (mine = r))
      await prev
      this.releaseChain = mine
    }
    if (this.finished) {
      mine()
      throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${step} not sent`)
    }
    if (!point && !this.free && this.locksWithoutWaitingHere(step, sql) && (this.levelNow === 'serializable' || this.levelNow === undefined)) this.unordered.push(step)
    if (!point && !this.free && this.needsSnapshot(step, sql, wrap)) {
      try {
        await this.snapshotPoint(step, wrap)
      } catch (e) {
        mine()
        throw e
      }
    }
    const held = this.free ? Boolean(this.holdAt?.(step, point)) : !point || this.holdsPoint(step)
    if (held) {
      await new Promise<void>((go) => {
        this.pending = { label: step, sql, point, go }
        this.state = 'ready'
        this.env.notify()
      })
      this.pending = undefined
      if (this.finished) {
        mine()
        throw new SessionEnded(`session ${this.name} was ended by race (${this.outcome}): ${step} not sent`)
      }
    }
    // A point that passes by itself is no step of the order (a replay of the order passes it the same way).
    if (!point || held) this.env.released(`${this.name}.${step}${this.faultNow ? `!${this.faultNow}` : ''}`)
    if (!point && /^\s*(begin|start\s+transaction)\b/i.test(sql)) this.begins++
    this.record(step, 'run')
    if (point) {
      this.record(step, 'ok', 'point')
      this.toApp()
      mine()
      return
    }
    this.noteLevel(sql)
    this.currentSql = sql
    this.current = { label: step, startedAt: this.env.now(), blocked: false, everBlocked: false }
    this.state = 'running'
    this.stopTimer = this.env.timeQuery(this)
  }
  private releaseChain?: () => void
  /** The text of the query in flight (what it does to the transaction's level and snapshot is read when it ends). */
  private currentSql = ''

  /** What the statements of a query that ran did to its transaction: its level, whether its snapshot is taken. */
  private noteSnapshot(sql: string): void {
    for (const x of statements(sql)) {
      const lvl = /\bisolation\s+level\s+(read\s+uncommitted|read\s+committed|repeatable\s+read|serializable)\b/i.exec(x)?.[1]?.toLowerCase().replace(/\s+/, ' ')
      if (/^\s*(begin|start\s+transaction)\b/i.test(x)) {
        this.snapTaken = false
        this.txLevel = lvl ?? (this.defaultKnown ? this.defaultLevel : undefined)
      } else if (/^\s*set\s+transaction\b/i.test(x)) this.txLevel = lvl ?? this.txLevel
      else if (/default_transaction_isolation|session\s+characteristics|^\s*reset\s+all\b/i.test(x)) this.defaultKnown = false
      else if (/^\s*(commit|end|rollback|abort|prepare\s+transaction)\b/i.test(x) && !/^\s*rollback\s+((work|transaction)\s+)?to\b/i.test(x)) this.snapTaken = false
      else if (!TAKES_NO_SNAPSHOT.test(x)) this.snapTaken = true
    }
  }

  /** The scheduler lets the step at the gate go. */
  release(): void {
    const p = this.pending
    if (!p) return
    this.state = p.point ? 'app' : 'running'
    p.go()
  }

  private toApp(): void {
    if (this.finished) return
    this.state = 'app'
    this.appSince = this.env.now()
    this.env.notify()
  }

  /** The server's default_transaction_isolation for this connection, read when it connected. */
  defaultLevel?: string
  /** The level the session's transaction runs at: its BEGIN's (or SET TRANSACTION's) own clause, else the default. */
  level?: string
  private noteLevel(sql: string): void {
    const lvl = /\bisolation\s+level\s+(read\s+uncommitted|read\s+committed|repeatable\s+read|serializable)\b/i.exec(sql)?.[1]?.toLowerCase().replace(/\s+/, ' ')
    if (/^\s*(begin|start\s+transaction)\b/i.test(sql)) this.level ??= lvl ?? this.defaultLevel
    else if (lvl && /^\s*set\s+transaction\b/i.test(sql)) this.level = lvl
  }

  /** A notice the server sent on the session's connection (its SQLSTATE): 25P01 while a query runs is a COMMIT or ROLLBACK with no transaction. */
  noticed(code: string | undefined): void {
    if (code === '25P01' && this.current) this.noTxNotice = true
  }
  private noTxNotice = false
  /** Its last COMMIT ran outside any transaction (PostgreSQL's warning 25P01): its label, until a transaction begins or commits. */
  private commitOutside?: string
  /** The last query that failed (its transaction then rolled back), for what a COMMIT outside any transaction says. */
  private lastFailure?: { step: string; code: string; injected: boolean }
  /**
   * A server error the session met that nothing recovered from: its transaction failed, and no transaction began
   * (and no statement outside one succeeded) after it. Said of a session that returned or was rejected: it gave up.
   */
  private unrecovered?: { step: string; code: string; injected: boolean }

  /** The query in flight came back with a result. */
  ok(command: string | undefined, count: number | null | undefined, rows: unknown[] | undefined): void {
    const noTx = this.noTxNotice
    this.noTxNotice = false
    const wasInTx = this.inTx
    const sql = this.currentSql
    const cur = this.endQuery()
    if (!cur) return
    this.noteSnapshot(sql)
    const tag = (command ?? '').toUpperCase()
    // The code started over (a retry), or went on with a statement that committed by itself: it recovered.
    if (BEGINS.has(tag) || (!wasInTx && !ENDS.has(tag))) this.unrecovered = undefined
    if (BEGINS.has(tag)) {
      this.inTx = true
      this.commitOutside = undefined
    }
    // A COMMIT the server answered with 25P01 (no transaction in progress) and the tag COMMIT committed nothing: the
    // transaction it meant to end was already rolled back (a retry loop that sends COMMIT again after a 40001).
    if (tag === 'COMMIT') this.commitOutside = noTx ? cur.label : undefined
    if (ENDS.has(tag)) {
      this.inTx = false
      this.commitTag = tag
      // A split query that ended its transaction itself (several statements, the last a COMMIT): no commit point.
      if (this.wrapped === cur.label) {
        this.wrapped = undefined
        this.endWrapped()
      }
    }
    const setup = BEGINS.has(tag) || tag === 'SET' || tag === 'SHOW'
    this.record(cur.label, 'ok', summarizeResult(command, count, rows), setup)
    this.toApp()
  }

  /**
   * The server's own word on where the connection's transaction stands after a query (node-postgres:
   * getTransactionStatus(), the ReadyForQuery status: I idle, T in a transaction, E in a failed one), which a string of
   * several statements can leave otherwise than its command tags say (`begin; insert ...` that failed). Undefined
   * (a driver that does not say): the tags decide.
   */
  serverTx(status: string | null | undefined): void {
    if (status === 'I') this.inTx = false
    else if (status === 'T' || status === 'E') this.inTx = true
  }

  /** How this driver's errors name their SQLSTATE (default: `code`; the mariadb connector: 'SQLSTATE/errno', as race's MySQL driver says it). */
  codeOf: (err: unknown) => string | undefined = (err) => (err as { code?: string })?.code

  /** The query in flight came back with an error (the driver's: remembered, so that the function's throw of it is a failure). */
  failed(err: unknown, injected = false): void {
    if (err && typeof err === 'object') this.driverErrors.add(err)
    this.noTxNotice = false
    const cur = this.endQuery()
    if (!cur) return
    const code = this.codeOf(err)
    if (isServerError(code)) this.lastFailure = this.unrecovered = { step: cur.label, code, injected }
    if (this.lostConnection || isConnectionLoss(err) || isConnectionLoss({ code })) {
      this.record(cur.label, 'lost', code)
    } else if (isServerError(code)) {
      // An injected error is race's doing, not the server's concurrency control: it is kept apart (injected).
      if (!injected) {
        this.errors.push(code)
        this.caught.push({ step: cur.label, code })
      }
      // A failed statement inside a transaction leaves it aborted: still open until the application rolls back.
      this.record(cur.label, 'error', `${code} ${conditionName(code) ?? ''}${injected ? ' (injected by race)' : ''}`.trim())
    } else this.record(cur.label, 'error', (err as Error)?.message)
    this.toApp()
  }

  private endQuery(): { label: string; startedAt: number; blocked: boolean; everBlocked: boolean } | undefined {
    const cur = this.current
    this.stopTimer?.()
    this.stopTimer = undefined
    this.current = undefined
    // A split query's step goes on to its commit point (commitPoint, or abortWrapped), a string's part to its next
    // part: the connection stays its own.
    const split = this.holdChain || (this.wrapped !== undefined && (cur?.label === this.wrapped || cur?.label.startsWith(`${this.wrapped}/`) === true))
    if (!split) {
      this.releaseChain?.()
      this.releaseChain = undefined
    }
    if (!cur) return undefined
    if (!split) this.settle()
    const ms = this.env.now() - cur.startedAt
    if (cur.everBlocked) {
      this.waitedMs += ms
      this.record(cur.label, 'woke')
    }
    this.lastEnded = { label: cur.label, ms, everBlocked: cur.everBlocked }
    return cur
  }
  /** The last query that ended: how long it ran, and whether it was seen blocked (markBlocked may come after). */
  private lastEnded?: { label: string; ms: number; everBlocked: boolean }

  /**
   * The server has the query labelled `label` (the one in flight, when not said) waiting on a lock, as seen from
   * the control connection. An isolated session's worker (session-host.ts) is told so by the main thread, and the
   * word can come after the query's result: the main thread saw it waiting, let another session commit, and this
   * worker's thread ran only once both had come. The wait is then the ended query's, counted as if seen in time
   * (waitedMs, the timeline): not counting it made a run that waited "clean" (a soundness case under load, 38-0010).
   */
  markBlocked(label?: string): void {
    const cur = this.current
    if (cur && (label === undefined || cur.label === label)) {
      if (cur.blocked) return
      cur.blocked = true
      if (!cur.everBlocked) {
        cur.everBlocked = true
        this.record(cur.label, 'wait')
      }
      return
    }
    const ended = this.lastEnded
    if (label === undefined || ended?.label !== label || ended.everBlocked) return
    ended.everBlocked = true
    this.waitedMs += ended.ms
    this.env.recordLateWait?.(this.name, label)
  }

  /** Seen no longer blocked (it woke, and its query is finishing): the query labelled `label`, when said. */
  unblocked(label?: string): void {
    if (this.current && (label === undefined || this.current.label === label)) this.current.blocked = false
  }

  /** The server errors its queries met (injected ones apart), each with its step: what a function that returns caught. */
  private readonly caught: { step: string; code: string }[] = []
  /**
   * Whether a SQLSTATE is one the race expects a query to meet: the server's concurrency control (40001, 40P01,
   * 55P03), or one the race module declares as its prevention (set by the trial).
   */
  expectedCode: (code: string) => boolean = (code) => isConcurrencyControl(code)

  /** Its function has returned or thrown (and every query it had sent has ended): any query after this is late. */
  functionEnded = false
  /** The first query it sent after its function returned (never sent): the trial cannot be decided. */
  lateQuery?: string
  /** A session of an earlier trial sent a query on this session's connection after its function returned. */
  lateFrom?: string
  /** The timers its code started that have neither fired nor been cleared (app/contain.ts containTimers), and when each is due. */
  readonly timers = new Map<unknown, number>()
  private timerWaiters: (() => void)[] = []
  timerEnded(): void {
    for (const w of this.timerWaiters.splice(0)) w()
  }
  /** Resolves once no timer its code started is due by `deadline` (Date.now() ms): those due later are not waited for. */
  async timersDue(deadline: number): Promise<void> {
    while ([...this.timers.values()].some((due) => due <= deadline)) await new Promise<void>((r) => this.timerWaiters.push(r))
  }

  /** The function returned. */
  returned(value?: unknown): void {
    this.functionEnded = true
    // What it returned, for --oracle serial: the engine writes it down only for an oracle (engine/run.ts).
    this.value = value
    const step = this.lastStep()
    // A query failed with an error nobody expects (a typo'd table, 42P01) and the function caught it and returned:
    // race saw the error, so the code did not do what the race needs, whatever it returned. Not a rejection.
    const swallowed = this.caught.find((c) => !this.expectedCode(c.code))
    if (swallowed) {
      const what = `${swallowed.code}${conditionName(swallowed.code) ? ` ${conditionName(swallowed.code)}` : ''}`
      this.crashed = `caught ${what} (in step ${swallowed.step}) and returned`
      const reason = `its query ${swallowed.step} failed with ${what}, which the function caught and returned: an error neither the server's concurrency control nor the race module's prevention names`
      this.record(step, 'error', reason)
      return this.end('failed', swallowed.step, { sqlstate: swallowed.code, reason })
    }
    if (this.commitOutside && !this.inTx) {
      const f = this.lastFailure
      const after = f ? ` by ${f.code}${conditionName(f.code) ? ` ${conditionName(f.code)}` : ''} in ${f.step}${f.injected ? ' (injected by race)' : ''}` : ''
      this.crashed = `returned after its transaction was rolled back${after}: its COMMIT ${this.commitOutside} ran outside any transaction (25P01 no_active_sql_transaction) and committed nothing`
      this.record(step, 'error', this.crashed)
      return this.end('failed', this.commitOutside, { reason: this.crashed })
    }
    if (this.commitTag === 'ROLLBACK' && !this.inTx && this.lastWasRollbackOfCommit) return this.end('failed', step, { reason: 'COMMIT answered ROLLBACK: the transaction had failed' })
    if (this.inTx) return this.end('failed', step, { reason: 'the function returned with its transaction still open (no COMMIT)' })
    // Its last transaction ended in its own ROLLBACK and it returned: the application said no without throwing
    // (`return { status: 409 }`). Nothing was committed: rejected, with what it returned as the reason.
    if (this.commitTag === 'ROLLBACK') {
      const reason = `rolled back and returned${describeValue(value)}`
      this.record(step, 'reject', reason)
      return this.end('rejected', step, { reason })
    }
    this.end('committed', step)
  }
  /** Set by the adapter when a COMMIT's command tag was ROLLBACK. */
  lastWasRollbackOfCommit = false
  /** What the function returned (undefined: nothing). */
  private value: unknown

  /** The function threw. */
  threw(err: unknown): void {
    this.functionEnded = true
    const step = this.lastStep()
    if (this.finished) return
    // An error the module declares (the application's own 409, maybe carrying the driver's error as its cause) is the
    // application's answer; only an undeclared one is looked into for the driver's error an ORM wrapped.
    const driver = err && typeof err === 'object' && this.driverErrors.has(err) ? err : this.declared(err) ? undefined : this.driverError(err)
    if (err instanceof SessionEnded) return this.end('lost', step, { reason: err.message })
    if (driver) {
      const code = (driver as { copied?: boolean }).copied ? (driver as { code: string }).code : this.codeOf(driver)
      if (this.lostConnection || isConnectionLoss(driver) || isConnectionLoss({ code })) return this.end('lost', step, { reason: `connection lost (${code ?? 'closed'})` })
      if (isServerError(code)) return this.end('failed', step, { sqlstate: code, reason: (driver as Error).message })
      return this.end('failed', step, { reason: (driver as Error).message ?? String(driver) })
    }
    if (!this.declared(err)) {
      // Neither the driver's nor thrown on purpose: a bug in the code under test (a TypeError, an undeclared class).
      const reason = `the function threw ${describeThrown(err)}, which the race module does not declare as a rejection (rejects)`
      this.record(step, 'error', reason)
      this.crashed = describeThrown(err)
      return this.end('failed', step, { reason })
    }
    const reason = (err as Error)?.message ?? String(err)
    this.record(step, 'reject', reason)
    this.end('rejected', step, { reason })
  }
  /**
   * The code under test failed process-wide (it called process.exit, or left an uncaught exception or unhandled
   * rejection) while this session's function ran: a failure of the code, as a throw it does not declare.
   */
  crash(what: string): void {
    if (this.finished) return
    const step = this.lastStep()
    const reason = what.startsWith('called ') ? `the function ${what}` : `the function left an ${what}`
    this.record(step, 'error', reason)
    this.crashed = what
    this.end('failed', step, { reason })
  }
  /** Whether an error the function threw is one its race module declares as a rejection. */
  declared: (err: unknown) => boolean = () => false
  /** The error the function threw that was neither the driver's nor declared ("TypeError: ..."). */
  crashed?: string

  /**
   * The driver's own error, thrown as it is or wrapped by an ORM: found among the thrown error's own fields and causes
   * (Drizzle's and MikroORM's cause, TypeORM's driverError, Sequelize's parent), a few levels deep. An ORM that copies
   * the driver error's fields instead of keeping it (MikroORM's exceptions copy its code; Prisma keeps
   * meta.driverAdapterError.cause.originalCode) is the driver's too when the copied SQLSTATE is one this session's own
   * query failed with: then that SQLSTATE is the code.
   */
  private driverError(err: unknown): object | undefined {
    const seen = new Set<object>()
    let copied: string | undefined
    const walk = (x: unknown, depth: number): object | undefined => {
      if (!x || typeof x !== 'object' || seen.has(x) || depth > 4) return undefined
      seen.add(x)
      if (this.driverErrors.has(x)) return x
      const o = x as Record<string, unknown>
      for (const k of ['code', 'originalCode']) {
        const v = o[k]
        if (typeof v === 'string' && this.errors.includes(v)) copied ??= v
      }
      for (const k of ['cause', 'driverError', 'parent', 'original', 'meta', 'driverAdapterError', 'previous']) {
        const found = walk(o[k], depth + 1)
        if (found) return found
      }
      return undefined
    }
    const found = walk(err, 0)
    if (found) return found
    if (copied) return Object.assign(new Error((err as Error)?.message ?? String(err)), { code: copied, copied: true })
    return undefined
  }

  private lastStep(): string {
    return this.current?.label ?? this.lastLabel ?? 'start'
  }
  lastLabel?: string

  record(step: string, kind: EventKind, detail?: string, setup?: boolean): void {
    this.lastLabel = step
    this.env.record({ session: this.name, step, kind, detail, ...(setup ? { setup } : {}) })
  }

  /** Race gives up on the session (step timeout, lost connection, aborted run): its next query is not sent. */
  end(outcome: Outcome, step: string, o: { reason?: string; sqlstate?: string } = {}): void {
    if (this.outcome) return
    this.outcome = outcome
    this.endStep = step
    const late = 'its function ended before queries it did not await had ended: race let them run and waited for them'
    this.reason = this.unawaited ? (o.reason ? `${o.reason} (${late})` : late) : o.reason
    this.sqlstate = o.sqlstate
    this.endedAt = this.env.now()
    this.stopTimer?.()
    this.state = 'done'
    // A step held at the gate is let go: enter() sees the session ended and throws SessionEnded.
    this.pending?.go()
    for (const d of this.drainers.splice(0)) d()
    this.env.notify()
  }

  report(): SessionReport {
    const round = (ms: number) => Math.round(ms * 10) / 10
    // A query sent after the function returned was never a step: what the trial shows is not what the code does.
    const late = this.lateQuery
      ? `sent a query (${this.lateQuery}) after its function returned`
      : this.lateFrom
        ? `met a query of ${this.lateFrom}, sent after that function returned`
        : undefined
    return {
      name: this.name,
      pid: this.pid,
      outcome: late ? 'failed' : (this.outcome ?? 'lost'),
      reason: late ? `${late}: race did not send it${this.reason ? ` (${this.reason})` : ''}` : (this.reason ?? null),
      sqlstate: this.sqlstate ?? null,
      condition: conditionName(this.sqlstate) ?? null,
      step: this.endStep ?? null,
      isolation: this.level ?? this.defaultLevel ?? null,
      commitTag: this.commitTag ?? null,
      waitedMs: round(this.waitedMs),
      ms: round((this.endedAt ?? this.env.now()) - this.startedAt),
      retries: 0,
      errors: [...this.errors],
      ...(this.outcome === 'timeout' ? { blockedBy: this.blockedBy ?? [] } : {}),
      ...(late || this.crashed ? { thrown: late ?? this.crashed } : {}),
      ...(this.injected.length ? { injected: [...this.injected] } : {}),
      ...(!late && (this.outcome === 'committed' || this.outcome === 'rejected') && this.unrecovered
        ? { unrecovered: `${this.unrecovered.code}${conditionName(this.unrecovered.code) ? ` ${conditionName(this.unrecovered.code)}` : ''} in ${this.unrecovered.step}${this.unrecovered.injected ? ' (injected by race)' : ''}` }
        : {}),
      ...(this.indivisible.length ? { indivisible: [...this.indivisible] } : {}),
      ...(this.whole.length ? { whole: [...this.whole] } : {}),
      ...(this.unordered.length ? { unordered: [...this.unordered] } : {}),
      ...(this.value !== undefined && !late ? { value: this.value } : {}),
    }
  }
}

/**
 * The session a query belongs to: the one whose code sent it (its async context), when that session's function has
 * already returned (a timer it left, run while a later trial holds the connection: the late query is that session's,
 * never a step of the later trial, which is marked as having met it); else the connection's current session.
 */
export function sessionFor(current: AppSession): AppSession {
  const origin = underTest.getStore()
  if (origin instanceof AppSession && origin !== current && origin.functionEnded) {
    current.lateFrom ??= `an earlier trial's ${origin.name}`
    return origin
  }
  return current
}
