// One session: a dedicated connection (one backend pid) that runs its steps. Every step ends in a recorded
// fact, never in a thrown error: SQL errors, rejections, lost connections and timeouts are outcomes.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Sql } from 'postgres'
import { connect, endQuietly } from '../db/connect.js'
import { conditionName, isConnectionLoss } from '../db/sqlstate.js'
import type { Target } from '../db/target.js'
import { isReject, type Params, type Rows, type SessionSpec, type Step, type StepCtx } from '../scenario.js'
import type { EventKind, Outcome, SessionReport, TimelineEvent } from './types.js'

export interface NamedStep {
  name: string
  step: Step
}

export interface SessionEnv {
  target: Target
  schema: string
  scenarioId: string
  user: string
  params: Params
  stepTimeoutMs: number
  connectTimeoutMs: number
  /** Records an event; the clock is the run's. */
  record(e: Omit<TimelineEvent, 't'>): void
  now(): number
  /** From the control connection: cancel (then, if that is not enough, terminate) this backend's query. */
  cancel(pid: number, terminate: boolean): Promise<void>
  /** Backends this one waits for right now. */
  blockers(pid: number): Promise<number[]>
}

class StepTimeout extends Error {}

/** A session's steps in order; with --window, a pg_sleep step named 'window' right after the race point. */
export function stepsOf(spec: SessionSpec, windowMs: number): NamedStep[] {
  const steps = Object.entries(spec.steps).map(([name, step]) => ({ name, step }))
  if (windowMs > 0 && spec.racePoint) {
    const at = steps.findIndex((s) => s.name === spec.racePoint)
    steps.splice(at + 1, 0, { name: 'window', step: `select pg_sleep(${windowMs / 1000})` })
  }
  return steps
}

export class Session {
  readonly name: string
  pid = 0
  private sql!: Sql
  private closedFlag = false
  /** The session whose connection this one borrows (SessionSpec.shares), if any. */
  lender?: Session
  private opened?: Promise<void>
  readonly steps: NamedStep[]
  private readonly prior: Record<string, Rows> = {}
  private readonly retryLimit: number

  outcome?: Outcome
  reason?: string
  sqlstate?: string
  endStep?: string
  waitedMs = 0
  retries = 0
  readonly errors: string[] = []
  blockedBy?: number[]
  private startedAt = 0
  private endedAt?: number

  /** The step in flight, if any. */
  current?: { name: string; startedAt: number; blocked: boolean; done: Promise<void> }

  constructor(
    readonly index: number,
    name: string,
    spec: SessionSpec,
    private readonly env: SessionEnv,
    windowMs: number,
  ) {
    this.name = name
    this.steps = stepsOf(spec, windowMs)
    this.retryLimit = spec.retries ?? 0
    this.connection = spec.connection ?? {}
    this.shares = spec.shares
  }
  private readonly connection: Record<string, string>
  readonly shares?: string

  private get closedByServer(): boolean {
    return this.lender ? this.lender.closedByServer : this.closedFlag
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
    this.sql = lender.sql
    this.pid = lender.pid
  }

  private async connect(): Promise<void> {
    this.sql = connect(this.env.target, {
      connectTimeoutMs: this.env.connectTimeoutMs,
      applicationName: `race ${this.env.scenarioId} ${this.name}`,
      schema: this.env.schema,
      params: this.connection,
      onclose: () => {
        this.closedFlag = true
      },
    })
    const [row] = await this.sql`select pg_backend_pid() as pid`
    this.pid = Number(row.pid)
  }

  /** Starts the clock for `ms` (the barrier, or the first step of a step-by-step schedule). */
  markStart(t: number): void {
    this.startedAt = t
  }

  /** Runs step i; resolves when it is done (or the session ended). Never rejects. */
  start(i: number): Promise<void> {
    const { name } = this.steps[i]
    const cur = { name, startedAt: this.env.now(), blocked: false, done: Promise.resolve() }
    this.current = cur
    this.record(name, 'run')
    cur.done = this.runStep(i).finally(() => {
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

  private record(step: string, kind: EventKind, detail?: string): void {
    this.env.record({ session: this.name, step, kind, detail })
  }

  private ctx(): StepCtx {
    return {
      session: this.name,
      index: this.index,
      user: this.env.user,
      params: this.env.params,
      prior: this.prior,
      reject: (reason: string) => ({ reject: reason }),
    }
  }

  private async runStep(i: number): Promise<void> {
    const { name, step } = this.steps[i]
    try {
      const res = await this.exec(step)
      this.noteWoke()
      if (isReject(res)) {
        this.record(name, 'reject', res.reject)
        await this.rollback()
        return this.end('rejected', name, { reason: res.reject })
      }
      this.prior[name] = res
      this.record(name, 'ok', summarize(res))
      if (i === this.steps.length - 1) this.end('committed', name)
    } catch (err) {
      this.noteWoke()
      await this.fail(name, i, err)
    }
  }

  private async fail(name: string, i: number, err: unknown): Promise<void> {
    if (err instanceof StepTimeout) {
      this.record(name, 'timeout', err.message)
      return this.end('timeout', name, { reason: err.message })
    }
    const code = (err as { code?: string })?.code
    if (this.closedByServer || isConnectionLoss(err)) {
      this.record(name, 'lost', code)
      return this.end('lost', name, { reason: `connection lost (${code ?? 'closed'})` })
    }
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
      this.errors.push(code)
      this.record(name, 'error', `${code} ${conditionName(code) ?? ''}`.trim())
      await this.rollback()
      if (code === '40001' && this.retries < this.retryLimit) return this.retry(i)
      return this.end('failed', name, { sqlstate: code, reason: (err as Error).message })
    }
    // Not a server error and not a lost connection: report it as the session's failure, honestly.
    this.record(name, 'error', (err as Error)?.message)
    await this.rollback()
    return this.end('failed', name, { reason: (err as Error)?.message ?? String(err) })
  }

  /** §5.1's retry loop: the whole transaction again, after exponential backoff with full jitter. */
  private async retry(from: number): Promise<void> {
    this.retries++
    const backoff = Math.random() * Math.min(1000, 10 * 2 ** this.retries)
    this.record(this.steps[from].name, 'retry', `attempt ${this.retries + 1} after ${Math.round(backoff)}ms`)
    await sleep(backoff)
    // The whole transaction again, each step exactly as the first time (a further 40001 retries again, bounded).
    for (let i = 0; i < this.steps.length && !this.finished; i++) await this.runStep(i)
  }

  private async exec(step: Step): Promise<Rows | { reject: string }> {
    if (this.closedByServer) throw Object.assign(new Error('connection closed by the server'), { code: 'CONNECTION_CLOSED' })
    let r =
      typeof step === 'string' ? this.sql.unsafe(step) : step.run ? step.run(this.sql, this.ctx()) : this.sql.unsafe(step.sql)
    if (isReject(r)) return r
    if (typeof r === 'string') r = this.sql.unsafe(r)
    const query = Promise.resolve(r as PromiseLike<Rows>)
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.env.stepTimeoutMs)))
    try {
      const first = await Promise.race([query, timeout])
      if (first !== 'timeout') return first
    } finally {
      clearTimeout(timer)
    }
    // Give up on this step: note who blocks it, cancel it, and if cancel is not enough, end the backend.
    this.blockedBy = await this.env.blockers(this.pid).catch(() => [])
    await this.env.cancel(this.pid, false).catch(() => {})
    const settled = await Promise.race([query.then(() => true, () => true), sleep(2000).then(() => false)])
    if (!settled) await this.env.cancel(this.pid, true).catch(() => {})
    const by = this.blockedBy.length ? `, waiting for pid ${this.blockedBy.join(', ')}` : ''
    throw new StepTimeout(`no result within ${this.env.stepTimeoutMs}ms${by}`)
  }

  private async rollback(): Promise<void> {
    if (this.closedByServer) return
    try {
      await Promise.race([this.sql.unsafe('rollback'), sleep(2000)])
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
    if (!this.lender) await endQuietly(this.sql, 1)
  }

  /** Closes the socket now; used when the run is aborted. */
  async destroy(): Promise<void> {
    if (!this.lender) await endQuietly(this.sql, 0)
  }

  report(): SessionReport {
    return {
      name: this.name,
      pid: this.pid,
      outcome: this.outcome ?? 'lost',
      reason: this.reason ?? null,
      sqlstate: this.sqlstate ?? null,
      condition: conditionName(this.sqlstate) ?? null,
      step: this.endStep ?? null,
      waitedMs: round(this.waitedMs),
      ms: round((this.endedAt ?? this.env.now()) - this.startedAt),
      retries: this.retries,
      errors: [...this.errors],
      ...(this.outcome === 'timeout' ? { blockedBy: this.blockedBy ?? [] } : {}),
    }
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}

/** A step's result in a few characters: `pending=0`, `0 rows`, `INSERT 1`. */
export function summarize(rows: Rows & { command?: string; count?: number }): string {
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
