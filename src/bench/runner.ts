// One cell of race's own load: C clients, each its own connection and backend, running the workload's
// transactions back to back for a duration after a warmup. 40001/40P01 are retried as a whole (same random
// inputs) up to max-tries and counted as pgbench counts them; any other error is a failure, counted by SQLSTATE.
import { performance } from 'node:perf_hooks'
import type { Sql } from 'postgres'
import { connect, connectError, endQuietly } from '../db/connect.js'
import { RunError } from '../errors.js'
import { conditionName, isConnectionLoss, sqlstateOf } from '../db/sqlstate.js'
import type { Target } from '../db/target.js'
import { ROLLBACK, type BenchClient, type Txn, type Workload } from './workloads.js'
import { WireClient, type BatchResult, type Bound } from './wire.js'

export type Driver = 'wire' | 'postgres.js'

export interface CellConfig {
  workload: Workload
  level: string
  clients: number
  durationMs: number
  warmupMs: number
  maxTries: number
  target: Target
  schema: string
  connectTimeoutMs: number
  statementTimeoutMs: number
  driver: Driver
  /**
   * Through a transaction pooler: the pool sets each server connection's schema, level and statement_timeout
   * (PgBouncer 1.18 refuses them as startup parameters), and statements are unnamed.
   */
  pooled?: boolean
  /** Unnamed statements (implied by pooled): to compare direct and pooled with the same statements. */
  unnamed?: boolean
  /** Opens a load client for another engine (MySQL); default: PostgreSQL's wire or postgres.js client. */
  open?: () => Promise<BenchClient>
  /** The run's abort (Ctrl-C, --run-timeout): the cell stops and its clients are destroyed. Default: never. */
  signal?: AbortSignal
}

export interface Failure {
  count: number
  condition?: string
  message: string
}

export interface CellStats {
  txns: number
  elapsedMs: number
  tps: number
  latencyMs: { avg: number; p50: number; p95: number; p99: number; max: number }
  /** Total number of retries (pgbench's "total number of retries"). */
  retries: number
  /** Transactions retried at least once (pgbench's "number of transactions retried"). */
  retried: number
  /** Transactions that did not commit: 40001/40P01 after max-tries, or any other error. */
  failures: number
  failuresByCode: Record<string, Failure>
  /** Measured transactions by kind (what the generator chose), failures included. */
  mix: Record<string, number>
  /** advisory: checks that saw more than one pending request for the user. */
  anomalies: number
}

const RETRIABLE = new Set(['40001', '40P01'])

/** Latencies in a typed array that doubles when full: no per-transaction allocation. */
export class Latencies {
  private a = new Float64Array(1 << 16)
  n = 0
  add(ms: number): void {
    if (this.n === this.a.length) {
      const b = new Float64Array(this.a.length * 2)
      b.set(this.a)
      this.a = b
    }
    this.a[this.n++] = ms
  }
  summary(): CellStats['latencyMs'] {
    if (this.n === 0) return { avg: 0, p50: 0, p95: 0, p99: 0, max: 0 }
    const s = this.a.slice(0, this.n).sort()
    let sum = 0
    for (let i = 0; i < s.length; i++) sum += s[i]
    const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
    return { avg: sum / s.length, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: s[s.length - 1] }
  }
}

/** Opens one load connection: the bench schema, the level as the session default, every statement bounded. */
export async function openClient(cfg: Pick<CellConfig, 'target' | 'schema' | 'level' | 'connectTimeoutMs' | 'statementTimeoutMs' | 'driver' | 'pooled' | 'unnamed'>): Promise<BenchClient> {
  const unnamed = Boolean(cfg.pooled || cfg.unnamed)
  const params: Record<string, string> = cfg.pooled
    ? { application_name: 'race bench' }
    : {
        search_path: `"${cfg.schema}"`,
        default_transaction_isolation: cfg.level,
        statement_timeout: String(cfg.statementTimeoutMs),
        application_name: 'race bench',
      }
  if (cfg.driver === 'wire') return WireClient.connect(cfg.target, { connectTimeoutMs: cfg.connectTimeoutMs, params, unnamed })
  return PgjsClient.open(cfg.target, cfg.connectTimeoutMs, params, !unnamed)
}

/** The same interface over postgres.js (one max:1 instance per client), to compare drivers. */
class PgjsClient implements BenchClient {
  pid = 0
  private text: Record<string, string> = {}
  private constructor(
    private readonly sql: Sql,
    private readonly prepared: boolean,
  ) {}
  static async open(target: Target, connectTimeoutMs: number, params: Record<string, string>, prepared = true): Promise<PgjsClient> {
    const { application_name, ...rest } = params
    const sql = connect(target, { connectTimeoutMs, applicationName: application_name, params: rest, ...(prepared ? {} : { prepare: false }) })
    const c = new PgjsClient(sql, prepared)
    const [r] = await sql`select pg_backend_pid() as pid`
    c.pid = Number(r.pid)
    return c
  }
  async prepare(statements: Record<string, string>): Promise<void> {
    this.text = statements
  }
  async run(batch: readonly Bound[]): Promise<BatchResult> {
    const result: BatchResult = { code: null, message: null, values: new Array(batch.length).fill(null) }
    const qs = batch.map((b) => this.sql.unsafe(this.text[b.stmt], b.params as (string | number)[], { prepare: this.prepared }).values())
    qs.forEach((q) => q.execute()) // pipelined: every statement is sent before the first answer
    const settled = await Promise.allSettled(qs)
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        const v = s.value[0]?.[0]
        result.values[i] = v === null || v === undefined ? null : String(v)
        return
      }
      if (isConnectionLoss(s.reason)) throw s.reason
      const err = s.reason as { code?: string; message?: string }
      if (!result.code) {
        result.code = err.code ?? 'ERROR'
        result.message = err.message ?? String(s.reason)
      }
    })
    return result
  }
  close(): Promise<void> {
    return endQuietly(this.sql, 1)
  }
  destroy(): void {
    void endQuietly(this.sql, 0)
  }
}

/** Runs one cell; onTick reports the fraction done. Connections are opened before and closed after the clock. */
export async function runCell(cfg: CellConfig): Promise<CellStats> {
  const abortSignal = cfg.signal ?? new AbortController().signal
  const clients: BenchClient[] = []
  const destroyAll = () => clients.forEach((c) => c.destroy())
  abortSignal.addEventListener('abort', destroyAll, { once: true })
  try {
    const opened = await Promise.allSettled(Array.from({ length: cfg.clients }, () => (cfg.open ? cfg.open() : openClient(cfg))))
    for (const o of opened) if (o.status === 'fulfilled') clients.push(o.value)
    const bad = opened.find((o) => o.status === 'rejected') as PromiseRejectedResult | undefined
    if (bad) throw bad.reason
    await Promise.all(clients.map((c) => c.prepare(cfg.workload.statements)))

    const lat = new Latencies()
    const kinds = cfg.workload.kinds
    const st = {
      txns: 0,
      retries: 0,
      retried: 0,
      failures: 0,
      anomalies: 0,
      mix: new Array<number>(kinds.length).fill(0),
      byCode: new Map<string, Failure>(),
      last: 0,
    }
    const t0 = performance.now()
    const from = t0 + cfg.warmupMs
    const until = from + cfg.durationMs
    const loop = async (c: BenchClient) => {
      const t: Txn = { kind: 0, id: 0, delta: 0, anomaly: false }
      for (;;) {
        const start = performance.now()
        if (start >= until || abortSignal.aborted) return
        cfg.workload.next(t)
        let tries = 0
        let r: BatchResult
        for (;;) {
          tries++
          r = await cfg.workload.attempt(c, t)
          if (!r.code) break
          await c.run(ROLLBACK)
          // MySQL's codes are 'SQLSTATE/errno': a deadlock (40001/1213) is retried like PostgreSQL's 40001.
          if (!RETRIABLE.has(sqlstateOf(r.code)) || tries >= cfg.maxTries || abortSignal.aborted) break
        }
        const end = performance.now()
        if (start < from) continue
        st.txns++
        st.mix[t.kind]++
        if (t.anomaly) st.anomalies++
        if (tries > 1) {
          st.retried++
          st.retries += tries - 1
        }
        if (r.code) {
          st.failures++
          const f = st.byCode.get(r.code)
          if (f) f.count++
          else st.byCode.set(r.code, { count: 1, condition: conditionName(r.code), message: r.message ?? '' })
        } else {
          lat.add(end - start)
        }
        if (end > st.last) st.last = end
      }
    }
    await Promise.all(clients.map(loop))
    if (abortSignal.aborted) throw abortSignal.reason
    const elapsedMs = Math.max(cfg.durationMs, st.last - from)
    const committed = st.txns - st.failures
    return {
      txns: st.txns,
      elapsedMs,
      // Like pgbench's tps: transactions that finished (not the failed ones) per second.
      tps: committed / (elapsedMs / 1000),
      latencyMs: lat.summary(),
      retries: st.retries,
      retried: st.retried,
      failures: st.failures,
      failuresByCode: Object.fromEntries(st.byCode),
      mix: Object.fromEntries(kinds.map((k, i) => [k, st.mix[i]])),
      anomalies: st.anomalies,
    }
  } catch (e) {
    if (abortSignal.aborted) throw abortSignal.reason
    if (e instanceof RunError) throw e
    const err = e as { code?: string; message?: string }
    if (err.code === '53300') throw new RunError(`the server refused a bench connection: too many connections (53300): use fewer --clients`)
    if (clients.length < cfg.clients) throw connectError(e, cfg.target)
    throw new RunError(`a bench client failed (${err.code ?? 'no code'}${conditionName(err.code) ? ' ' + conditionName(err.code) : ''}): ${err.message ?? e}`)
  } finally {
    abortSignal.removeEventListener('abort', destroyAll)
    await Promise.all(clients.map((c) => c.close()))
  }
}
