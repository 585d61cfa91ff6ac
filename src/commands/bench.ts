// race bench: throughput and latency by isolation level and contention on the user's own server, beside the
// isolation article's published ratios, and (--vs-pgbench) beside pgbench running the same transactions.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Command } from 'commander'
import { cellCount, plan, runBench, type BenchOptions, type CellRunner } from '../bench/cells.js'
import { findPgbench, type Pgbench } from '../bench/pgbench.js'
import { PgCells, pgCellMs } from '../bench/postgres.js'
import { html, text, type BenchReport } from '../bench/report.js'
import type { Driver } from '../db/driver.js'
import type { PostgresLab } from '../db/postgres.js'
import type { MysqlLab } from '../db/mysql.js'
import { UsageError } from '../errors.js'
import { levelOf, levelsOn, readUncommittedOnPostgres, type Level } from '../levels.js'
import type { RunContext } from '../lifecycle.js'
import { plain } from '../report/color.js'
import { parseDuration, parseWhole } from '../parse.js'
import { checkWritable } from '../report/ci.js'
import { engineFor, withLab } from '../run/lab.js'
import { parseBounds, type Bounds } from '../run/params.js'
import { requirePooler } from '../run/pooler.js'
import type { Pool } from '../scenario.js'
import { addTargetOptions, type TargetOptions } from './common.js'
import { addOptions, type Options } from '../run/options.js'
import { addPoolerOptions, parsePool, type PoolerOptions } from './pool-options.js'

export const WORKLOADS = ['oltp', 'advisory'] as const

function list(raw: string): string[] {
  return String(raw)
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
}

export function parseLevels(raw: string): string[] {
  const out: Level[] = []
  for (const item of list(raw)) {
    const level = levelOf(item)
    if (level === 'read uncommitted') throw readUncommittedOnPostgres('--isolation', item)
    if (!level) throw new UsageError(`--isolation '${item}' is not an isolation level: use read-committed, repeatable-read, serializable (or rc, rr, ser), comma-separated`)
    if (!out.includes(level)) out.push(level)
  }
  if (!out.length) throw new UsageError('--isolation is empty: give one or more of read-committed, repeatable-read, serializable')
  // Always in the order RC, RR, SERIALIZABLE so the ratios read the same way.
  return levelsOn('postgres').filter((l) => out.includes(l))
}

export function parseHot(raw: string): number[] {
  const out: number[] = []
  for (const item of list(raw)) {
    if (!/^\d+(\.\d{1,2})?$/.test(item)) throw new UsageError(`--hot takes percentages from 0 to 100, comma-separated (e.g. --hot 1,10,50), got '${item}'`)
    const v = Number(item)
    if (v > 100) throw new UsageError(`--hot ${item}: a percentage of accesses is at most 100 (e.g. --hot 1,10,50)`)
    if (!out.includes(v)) out.push(v)
  }
  if (!out.length) throw new UsageError('--hot is empty: give percentages like --hot 1,10,50')
  return out
}

export function parseWorkloads(raw: string): ('oltp' | 'advisory')[] {
  const out: ('oltp' | 'advisory')[] = []
  for (const item of list(raw)) {
    const w = item.toLowerCase()
    if (!(WORKLOADS as readonly string[]).includes(w)) throw new UsageError(`--workload '${item}' does not exist: use oltp, advisory, or oltp,advisory`)
    if (!out.includes(w as 'oltp')) out.push(w as 'oltp' | 'advisory')
  }
  if (!out.length) throw new UsageError('--workload is empty: use oltp, advisory, or oltp,advisory')
  return out
}

/** --html with no file: a page in the temporary directory (never an untracked file in the working directory). */
export function defaultHtmlPath(now = new Date()): string {
  return path.join(os.tmpdir(), `race-bench-${now.toISOString().replace(/[:.]/g, '-').slice(0, 19)}.html`)
}

export interface BenchCliOptions extends TargetOptions, PoolerOptions {
  workload: string
  isolation: string
  hot: string
  hotRows: string
  rows: string
  users: string
  clients: string
  duration: string
  warmup: string
  maxTries: string
  lockTimeout: string
  vsPgbench?: boolean
  vsSlap?: boolean
  html?: string | boolean
  driver: string
  keep?: boolean
}

export function parseBenchOptions(o: BenchCliOptions, cmd: Command): BenchOptions {
  const given = (k: string) => cmd.getOptionValueSource(k) === 'cli'
  const workloads = parseWorkloads(o.workload)
  if (!workloads.includes('oltp')) {
    for (const [k, f] of [['hot', '--hot'], ['hotRows', '--hot-rows'], ['rows', '--rows']] as const) {
      if (given(k)) throw new UsageError(`${f} applies to the oltp workload only: add --workload oltp,advisory or leave ${f} out`)
    }
  }
  if (!workloads.includes('advisory') && given('users')) throw new UsageError('--users applies to the advisory workload only: add --workload advisory')
  const hotRows = parseWhole('--hot-rows', o.hotRows, 1, 10_000_000)
  const rows = parseWhole('--rows', o.rows, 1, 100_000_000)
  if (rows < hotRows + 100) throw new UsageError(`--rows ${rows} must be at least --hot-rows + 100 (${hotRows + 100}): the cold rows and a range sum need room`)
  const driver = String(o.driver)
  if (driver !== 'wire' && driver !== 'postgres.js') throw new UsageError(`--driver takes wire or postgres.js, got '${o.driver}'`)
  const html = o.html === undefined ? undefined : o.html === true ? defaultHtmlPath() : checkWritable('--html', String(o.html))
  return {
    workloads,
    levels: parseLevels(o.isolation),
    hot: parseHot(o.hot),
    hotRows,
    rows,
    users: parseWhole('--users', o.users, 1, 10_000_000),
    clients: parseWhole('--clients', o.clients, 1, 1000),
    durationMs: parseDuration('--duration', o.duration),
    warmupMs: parseDuration('--warmup', o.warmup, { allowZero: true }),
    maxTries: parseWhole('--max-tries', o.maxTries, 1, 1000),
    lockTimeoutMs: parseDuration('--lock-timeout', o.lockTimeout),
    driver,
    vsPgbench: Boolean(o.vsPgbench),
    html,
    json: Boolean(o.json),
  }
}

export async function benchCommand(ctx: RunContext, o: BenchCliOptions, cmd: Command): Promise<number> {
  const b = parseBenchOptions(o, cmd)
  const engine = engineFor(o.databaseUrl)
  const pool: Pool | undefined = parsePool(o, cmd, engine)
  requirePooler(pool)
  const bounds = parseBounds(o)
  const bench = engine === 'mysql' ? await mysqlBench(ctx, o, b, bounds, cmd) : pgBench(ctx, o, b, bounds, pool)
  // Unless the user bounded the run, allow every cell plus setup and a margin.
  if (cmd.getOptionValueSource('runTimeout') !== 'cli') bounds.runTimeoutMs = Math.max(bounds.runTimeoutMs, cellCount(plan(b)) * (bench.cellMs + bench.marginMs) + 60_000)
  return withLab(ctx, o.databaseUrl, bounds, async (driver, target) => {
    const report = await runBench(driver, target, b, bench.runner(driver), { cellMs: bench.cellMs, keep: Boolean(o.keep), statementTimeoutMs: bounds.stepTimeoutMs })
    bench.print(report)
    return 0
  })
}

/** One engine's bench, its options checked: its cells' runner, how long a cell takes, and how its report is printed. */
interface EngineBench {
  cellMs: number
  /** Allowed per cell beyond cellMs (setup, pooler or yardstick start) when --run-timeout is not given. */
  marginMs: number
  runner(lab: Driver): CellRunner
  print(report: BenchReport): void
}

function pgBench(ctx: RunContext, o: BenchCliOptions, b: BenchOptions, bounds: Bounds, pool: Pool | undefined): EngineBench {
  if (o.vsSlap) throw new UsageError('--vs-slap drives MySQL/MariaDB; on PostgreSQL use --vs-pgbench')
  const pgbench: Pgbench | null = b.vsPgbench ? findPgbench() : null
  return {
    cellMs: pgCellMs(b, pool, pgbench),
    marginMs: 15_000,
    runner: (lab) => new PgCells(ctx, lab as PostgresLab, b, { pool, pgbench, connectTimeoutMs: bounds.connectTimeoutMs, stepTimeoutMs: bounds.stepTimeoutMs }),
    print: (report) => {
      if (b.html) fs.writeFileSync(b.html, html(report))
      process.stdout.write(
        b.json
          ? JSON.stringify({ ...report, ...(b.html ? { html: b.html } : {}), exitCode: 0 }, null, 2) + '\n'
          : text(ctx.style ?? plain, report) + '\n' + (b.html ? `wrote ${b.html}\n` : '') + (o.keep ? `kept schema ${report.schema}\n` : ''),
      )
    },
  }
}

/**
 * race bench on MySQL/MariaDB: the oltp cells through race's MariaDB-connector clients, in a marked database of
 * its own, each beside the article's 2PL column; --vs-slap runs mariadb-slap on the same mix after each cell.
 */
async function mysqlBench(ctx: RunContext, o: BenchCliOptions, b: BenchOptions, bounds: Bounds, cmd: Command): Promise<EngineBench> {
  // Loaded here, for a mysql:// URL only: the MariaDB connector (its dist/promise.cjs) costs some 25 ms of every
  // start-up that registers this command (race --help, race bench on PostgreSQL) if imported with it.
  const [{ checkMysqlBench, findSlap }, { MysqlCells, mysqlCellMs }] = await Promise.all([import('../bench/innodb.js'), import('../bench/mysql.js')])
  checkMysqlBench({ workloads: b.workloads, vsPgbench: b.vsPgbench, driverGiven: cmd.getOptionValueSource('driver') === 'cli' })
  const slap = o.vsSlap ? findSlap() : null
  if (b.html) throw new UsageError('--html draws the PostgreSQL bench; on MySQL/MariaDB use --json')
  return {
    cellMs: mysqlCellMs(b, slap),
    marginMs: 30_000,
    runner: (lab) => new MysqlCells(ctx, lab as MysqlLab, b, { slap, connectTimeoutMs: bounds.connectTimeoutMs, stepTimeoutMs: bounds.stepTimeoutMs }),
    print: (report) => {
      process.stdout.write(b.json ? JSON.stringify(report, null, 2) + '\n' : text(ctx.style ?? plain, report) + '\n' + (o.keep ? `kept database ${report.schema}\n` : ''))
    },
  }
}

/** race bench's own options, declared once (the form is run/options.ts's): commander's, and docs/options.md's table. */
export const BENCH_OWN = [
  { flag: '--workload <list>', name: 'workload', kind: 'text', help: 'oltp (80% point reads, 15% read-modify-write, 5% range sums) and/or advisory (check-then-insert under pg_advisory_xact_lock, advisory-locks article §4)', default: 'oltp' },
  { flag: '--isolation <levels>', name: 'isolation', kind: 'text', help: 'one or more of read-committed, repeatable-read, serializable (rc, rr, ser), comma-separated', default: 'rc,rr,serializable' },
  { flag: '--hot <percents>', name: 'hot', kind: 'text', help: 'oltp: percent of accesses that go to the hot rows, one cell each', default: '1,10,50' },
  { flag: '--hot-rows <n>', name: 'hotRows', kind: 'whole', help: 'oltp: size of the hot set', default: '100' },
  { flag: '--rows <n>', name: 'rows', kind: 'whole', help: 'oltp: rows in the accounts table', default: '100000' },
  { flag: '--users <k>', name: 'users', kind: 'whole', help: 'advisory: users the requests are spread over (fewer = more contention)', default: '100' },
  { flag: '--clients <n>', name: 'clients', kind: 'whole', help: 'concurrent clients, one connection (backend) each', default: '8' },
  { flag: '--duration <duration>', name: 'duration', kind: 'duration', help: 'measured time per cell', default: '10s' },
  { flag: '--warmup <duration>', name: 'warmup', kind: 'duration', help: 'unmeasured time before each cell', default: '1s' },
  { flag: '--max-tries <n>', name: 'maxTries', kind: 'whole', help: 'tries per transaction on 40001/40P01, retried as a whole (pgbench --max-tries)', default: '10' },
  { flag: '--lock-timeout <duration>', name: 'lockTimeout', kind: 'duration', help: 'advisory: lock_timeout set with set_config(..., true), as in the article', default: '2s' },
  { flag: '--vs-pgbench', name: 'vsPgbench', kind: 'switch', help: 'also run each cell through pgbench (same script, clients, duration, level) and print race/pgbench' },
  { flag: '--vs-slap', name: 'vsSlap', kind: 'switch', help: 'MySQL/MariaDB: also run each cell through mariadb-slap (same mix, clients, level) and print race/slap' },
  { flag: '--html [file]', name: 'html', kind: 'text', help: 'also write a self-contained HTML page with the charts (no file: one in the temporary directory; its path is printed)' },
  { flag: '--driver <driver>', name: 'driver', kind: 'choice', choices: ['wire', 'postgres.js'], help: "race's load connections: wire (its own minimal protocol client) or postgres.js", default: 'wire' },
] as const satisfies Options

export function registerBench(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('bench')
    .description("throughput and latency by isolation level and contention, beside the isolation article's published ratios (and pgbench)")
  addOptions(cmd, BENCH_OWN)
  addTargetOptions(cmd, ctx)
  addPoolerOptions(cmd, { pooled: false })
  cmd.action(async (o: BenchCliOptions, self: Command) => exit(await benchCommand(ctx, o, self)))
  cmd.addHelpText(
    'after',
    `
Each cell runs --clients connections for --duration after --warmup;
40001/40P01 are retried as a whole up to --max-tries and counted (like
pgbench); other errors are failures, counted by SQLSTATE. --step-timeout is
each statement's statement_timeout. Everything happens in a schema
race_bench_<hex>, dropped at the end.

Examples:
  $ race bench
  $ race bench --workload oltp --hot 1,10,50 --duration 5s --vs-pgbench
  $ race bench --workload advisory --users 20 --isolation rc,serializable
  $ race bench --isolation rc,rr --clients 16 --html
  $ race bench --workload advisory --html ~/bench/advisory.html
  $ race bench --database-url postgres://app@db:5432/app --json
  $ race bench --pooler pgbouncer --workload oltp --hot 1 --isolation rc
      (TPS through a PgBouncer of race's own and direct, side by side)`,
  )
  return cmd
}
