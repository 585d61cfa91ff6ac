// race bench on MySQL/MariaDB (InnoDB): the oltp workload (the isolation article's 80/15/5 mix) at READ COMMITTED,
// REPEATABLE READ and SERIALIZABLE, each cell beside the article's 2PL column (InnoDB's SERIALIZABLE is two-phase
// locking), and with --vs-slap a yardstick for race's load generator: mariadb-slap (it ships with the MariaDB
// client) runs the same mix, the same number of clients at the same level, and race/slap is printed per cell.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import mariadb, { type Connection } from 'mariadb'
import { connectionOptions, normalizeError, type MysqlLab } from '../db/mysql.js'
import { RunError, UsageError } from '../errors.js'
import type { BatchResult, Bound } from './wire.js'
import { RANGE, type BenchClient, type Txn, type Workload } from './workloads.js'

/** The oltp statements in MySQL's words ($n as in the PostgreSQL workload; the client turns them into ? in order). */
export const MYSQL_OLTP: Record<string, string> = {
  begin: 'start transaction',
  commit: 'commit',
  rollback: 'rollback',
  read: 'select balance from accounts where id = $1',
  update: 'update accounts set balance = $2 + $3 where id = $1',
  range: `select sum(balance) from accounts where id between $1 and $1 + ${RANGE - 1}`,
}

/** The oltp table on InnoDB, `rows` rows, built without a sequence (both MySQL 8 and MariaDB). */
export function mysqlOltpSetup(rows: number): string[] {
  const digits = '(select 0 d union all select 1 union all select 2 union all select 3 union all select 4 union all select 5 union all select 6 union all select 7 union all select 8 union all select 9)'
  const places = Math.max(1, Math.ceil(Math.log10(rows + 1)))
  const from = Array.from({ length: places }, (_, i) => `${digits} p${i}`).join(', ')
  const n = Array.from({ length: places }, (_, i) => `p${i}.d * ${10 ** i}`).join(' + ')
  return [
    `create table accounts (id int primary key, balance bigint not null, filler varchar(84) not null)`,
    `insert into accounts select ${n} + 1, 0, repeat('x', 84) from ${from} where ${n} < ${rows}`,
    `analyze table accounts`,
  ]
}

/** A load client over the MariaDB connector: prepared statements, a transaction's statements pipelined. */
export class MysqlBenchClient implements BenchClient {
  pid = 0
  private text: Record<string, { sql: string; order: number[] }> = {}
  private constructor(private readonly conn: Connection) {
    this.pid = Number(conn.threadId)
  }

  static async open(lab: MysqlLab, space: string, level: string, lockWaitS: number): Promise<MysqlBenchClient> {
    const conn = await mariadb.createConnection({
      ...connectionOptions(lab.target, lab.connectTimeoutMs, space),
      connectAttributes: { program_name: 'race bench' },
      initSql: [`set session transaction isolation level ${level}`, `set session innodb_lock_wait_timeout = ${lockWaitS}`],
    })
    conn.on('error', () => {})
    return new MysqlBenchClient(conn)
  }

  async prepare(statements: Record<string, string>): Promise<void> {
    for (const [name, sql] of Object.entries(statements)) {
      const order: number[] = []
      this.text[name] = { sql: sql.replace(/\$(\d+)/g, (_, d: string) => (order.push(Number(d) - 1), '?')), order }
    }
  }

  async run(batch: readonly Bound[]): Promise<BatchResult> {
    const result: BatchResult = { code: null, message: null, values: new Array(batch.length).fill(null) }
    const qs = batch.map((b) => {
      const { sql, order } = this.text[b.stmt]
      return order.length ? this.conn.execute(sql, order.map((i) => b.params[i])) : this.conn.query(sql)
    })
    const settled = await Promise.allSettled(qs)
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        const row = Array.isArray(s.value) ? (s.value[0] as Record<string, unknown> | undefined) : undefined
        const v = row ? Object.values(row)[0] : null
        result.values[i] = v === null || v === undefined ? null : String(v)
        return
      }
      const err = normalizeError(s.reason, !this.conn.isValid())
      if (err.code === 'CONNECTION_CLOSED') throw err
      if (!result.code) {
        result.code = err.code ?? 'ERROR'
        result.message = err.message
      }
    })
    return result
  }

  async close(): Promise<void> {
    try {
      await this.conn.end()
    } catch {
      this.conn.destroy()
    }
  }

  destroy(): void {
    this.conn.destroy()
  }
}

/** mariadb-slap (or mysqlslap) on PATH. */
export function findSlap(): { bin: string; version: string } {
  for (const bin of ['mariadb-slap', 'mysqlslap']) {
    const out = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 })
    if (out.status === 0) return { bin, version: out.stdout.trim() }
  }
  throw new RunError('--vs-slap: neither mariadb-slap nor mysqlslap is on PATH (install the MariaDB or MySQL client, or leave out --vs-slap)')
}

/**
 * The same mix as SQL text for slap: `txns` transactions of the workload's random choices, one statement a line.
 * The read-modify-write becomes `balance = balance + d` (slap cannot carry a value from one statement to the next).
 */
export function slapScript(w: Workload, txns: number): string {
  const t: Txn = { kind: 0, id: 0, delta: 0, anomaly: false }
  const out: string[] = []
  for (let i = 0; i < txns; i++) {
    w.next(t)
    if (t.kind === 0) out.push(`select balance from accounts where id = ${t.id};`)
    else if (t.kind === 2) out.push(`select sum(balance) from accounts where id between ${t.id} and ${t.id + RANGE - 1};`)
    else out.push('start transaction;', `select balance from accounts where id = ${t.id};`, `update accounts set balance = balance + ${t.delta} where id = ${t.id};`, 'commit;')
  }
  return out.join('\n') + '\n'
}

export interface SlapResult {
  tps: number
  txns: number
  seconds: number
  error?: string
}

/** Runs slap: every client runs the whole script once, at `level`, in the bench database; TPS = clients x txns / seconds. */
export async function runSlap(o: { bin: string; lab: MysqlLab; space: string; level: string; clients: number; script: string; txns: number }): Promise<SlapResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-slap-'))
  const file = path.join(dir, 'mix.sql')
  const abortSignal = o.lab.context.signal
  const unregister = o.lab.context.onCleanup('slap script', async () => fs.rmSync(dir, { recursive: true, force: true }))
  try {
    fs.writeFileSync(file, o.script)
    const u = new URL(o.lab.target.url!)
    const args = [
      `--host=${decodeURIComponent(u.hostname)}`,
      `--port=${u.port || 3306}`,
      `--user=${decodeURIComponent(u.username) || 'root'}`,
      `--create-schema=${o.space}`,
      '--no-drop',
      `--query=${file}`,
      '--delimiter=;',
      `--concurrency=${o.clients}`,
      '--iterations=1',
      `--init-command=set session transaction isolation level ${o.level}`,
      '--csv',
    ]
    // The password goes through the environment, never the command line (ps would show it).
    const env = { ...process.env, MYSQL_PWD: decodeURIComponent(u.password) }
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(o.bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d) => (stdout += d))
      child.stderr.on('data', (d) => (stderr += d))
      const stop = () => child.kill('SIGTERM')
      abortSignal.addEventListener('abort', stop, { once: true })
      child.on('close', (code) => {
        abortSignal.removeEventListener('abort', stop)
        resolve({ code, stdout, stderr })
      })
    })
    if (abortSignal.aborted) throw abortSignal.reason
    // CSV: ,mixed,<avg seconds>,<min>,<max>,<clients>,<queries per client>
    const line = out.stdout.trim().split('\n').find((l) => l.includes(',mixed,'))
    const seconds = line ? Number(line.split(',')[2]) : NaN
    if (out.code !== 0 || !(seconds > 0)) return { tps: 0, txns: 0, seconds: 0, error: (out.stderr.trim().split('\n')[0] || `exit ${out.code}`).replace(/password[^ ]*/gi, 'password ***') }
    const txns = o.txns * o.clients
    return { tps: txns / seconds, txns, seconds }
  } finally {
    unregister()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** Refuses what the InnoDB bench does not do, before any connection. */
export function checkMysqlBench(o: { workloads: string[]; vsPgbench: boolean; driverGiven: boolean }): void {
  if (o.workloads.includes('advisory')) throw new UsageError("--workload advisory is PostgreSQL's (pg_advisory_xact_lock); on MySQL/MariaDB use --workload oltp")
  if (o.vsPgbench) throw new UsageError('--vs-pgbench drives PostgreSQL; on MySQL/MariaDB use --vs-slap (mariadb-slap runs the same mix)')
  if (o.driverGiven) throw new UsageError("--driver chooses race's PostgreSQL load client; on MySQL/MariaDB race uses the MariaDB connector")
}
