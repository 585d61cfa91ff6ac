// race bench: throughput and latency by isolation level and contention on the user's own server, beside the
// isolation article's published ratios, and (--vs-pgbench) beside pgbench running the same transactions.
import type { RunContext } from '../lifecycle.js'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { checkWritable } from '../report/ci.js'
import type { Command } from 'commander'
import { RunError, UsageError } from '../errors.js'
import { parseDuration, parseWhole } from '../parse.js'
import { advisory, articleRatio, oltp, ARTICLE, type Workload } from '../bench/workloads.js'
import { runCell, type Driver } from '../bench/runner.js'
import { findPgbench, runPgbench, type Pgbench } from '../bench/pgbench.js'
import { groupLabel, html, Progress, shortLevel, text, type BenchReport, type CellResult } from '../bench/report.js'
import type { Lab } from '../db/lab.js'
import type { MysqlLab } from '../db/mysql.js'
import { MYSQL_OLTP, MysqlBenchClient, checkMysqlBench, findSlap, mysqlOltpSetup, runSlap, slapScript } from '../bench/innodb.js'
import { addTargetOptions, type TargetOptions } from './common.js'
import { engineFor, withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'
import { requirePooler } from '../run/pooler.js'
import { addPoolerOptions, parsePool, type PoolerOptions } from './pool-options.js'
import { describePool, startPooler } from '../servers/pooler.js'
import type { CellStats } from '../bench/runner.js'
import type { Pool } from '../scenario.js'
import { levelOf, levelsOn, readUncommittedOnPostgres, type Level } from '../levels.js'

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

export interface BenchOptions {
  workloads: ('oltp' | 'advisory')[]
  levels: string[]
  hot: number[]
  hotRows: number
  rows: number
  users: number
  clients: number
  durationMs: number
  warmupMs: number
  maxTries: number
  lockTimeoutMs: number
  driver: Driver
  vsPgbench: boolean
  html?: string
  json: boolean
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

interface Plan {
  workload: Workload
  hot: number | null
  users: number | null
  level: string
}

function plan(b: BenchOptions): { workload: Workload; cells: Plan[] }[] {
  const out: { workload: Workload; cells: Plan[] }[] = []
  for (const w of b.workloads) {
    if (w === 'oltp') {
      // One accounts table for every hot percentage: the workload object only decides where accesses go.
      const shared = oltp({ hot: b.hot[0], hotRows: b.hotRows, rows: b.rows })
      const cells: Plan[] = []
      for (const hot of b.hot) {
        const wl = oltp({ hot, hotRows: b.hotRows, rows: b.rows })
        for (const level of b.levels) cells.push({ workload: wl, hot, users: null, level })
      }
      out.push({ workload: shared, cells })
    } else {
      const wl = advisory({ users: b.users, lockTimeoutMs: b.lockTimeoutMs })
      out.push({ workload: wl, cells: b.levels.map((level) => ({ workload: wl, hot: null, users: b.users, level })) })
    }
  }
  return out
}

export async function benchCommand(ctx: RunContext, o: BenchCliOptions, cmd: Command): Promise<number> {
  const b = parseBenchOptions(o, cmd)
  const engine = engineFor(o.databaseUrl)
  const pool: Pool | undefined = parsePool(o, cmd, engine)
  requirePooler(pool)
  const bounds = parseBounds(o)
  if (engine === 'mysql') return mysqlBench(ctx, o, b, bounds, cmd)
  if (o.vsSlap) throw new UsageError('--vs-slap drives MySQL/MariaDB; on PostgreSQL use --vs-pgbench')
  const pgbench: Pgbench | null = b.vsPgbench ? findPgbench() : null
  const pgDurationS = Math.max(1, Math.round(b.durationMs / 1000))
  const plans = plan(b)
  const nCells = plans.reduce((a, p) => a + p.cells.length, 0)
  const cellMs = (b.warmupMs + b.durationMs) * (pool ? 3 : 1) + (pgbench ? pgDurationS * 1000 : 0)
  // Unless the user bounded the run, allow every cell plus setup and a margin.
  if (cmd.getOptionValueSource('runTimeout') !== 'cli') bounds.runTimeoutMs = Math.max(bounds.runTimeoutMs, nCells * (cellMs + 15_000) + 60_000)

  return withLab(ctx, o.databaseUrl, bounds, async (driver, target) => {
    const lab = driver as Lab
    const room = await lab.room()
    if (b.clients > room.free) {
      throw new UsageError(`--clients ${b.clients} needs ${b.clients} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --clients ${Math.max(1, room.free)} or fewer`)
    }
    const run = await lab.createSchema('bench', Boolean(o.keep))
    const schema = run.name
    const progress = new Progress(nCells * cellMs)
    const cells: CellResult[] = []
    let poolerText: string | undefined
    let failure: unknown
    try {
      await lab.control.unsafe(`set search_path to "${schema}"`)
      let n = 0
      for (const p of plans) {
        await p.workload.setup(lab.control)
        for (const cell of p.cells) {
          n++
          const label = `cell ${n}/${nCells}: ${groupLabel({ ...cell, workload: cell.workload.id })} ${shortLevel(cell.level)}`
          // One cell's load, the same for every way it runs (direct, unnamed statements, through PgBouncer).
          const load = (extra: Partial<Parameters<typeof runCell>[0]> = {}) =>
            runCell({
              workload: cell.workload,
              level: cell.level,
              clients: b.clients,
              durationMs: b.durationMs,
              warmupMs: b.warmupMs,
              maxTries: b.maxTries,
              target: lab.target,
              schema,
              connectTimeoutMs: bounds.connectTimeoutMs,
              statementTimeoutMs: bounds.stepTimeoutMs,
              driver: b.driver,
              signal: ctx.signal,
              ...extra,
            })
          const runRace = async () => {
            await cell.workload.reset(lab.control)
            progress.phase(`${label} race`, b.warmupMs + b.durationMs)
            return load()
          }
          // The same load through a PgBouncer of race's own (one per cell: its server connections start at
          // this cell's level), beside the direct run: what the pooler costs.
          let pooler: string | undefined
          const runPooled = async (): Promise<CellStats | null> => {
            if (!pool) return null
            await cell.workload.reset(lab.control)
            const size = pool.size || b.clients
            const p = await startPooler({
              target: lab.target,
              config: { mode: pool.mode, size, resetAlways: pool.resetAlways },
              setup: { schema, settings: { default_transaction_isolation: cell.level, statement_timeout: String(bounds.stepTimeoutMs) } },
              connectTimeoutMs: bounds.connectTimeoutMs,
            })
            pooler = describePool(p.version, p.config)
            try {
              progress.phase(`${label} through PgBouncer`, b.warmupMs + b.durationMs)
              return await load({ target: p.target, pooled: true })
            } finally {
              await p.stop()
            }
          }
          // Direct again with the unnamed statements the pooled run must use: the pooler's hop alone.
          const runUnnamed = async (): Promise<CellStats | null> => {
            if (!pool) return null
            await cell.workload.reset(lab.control)
            progress.phase(`${label} direct, unnamed statements`, b.warmupMs + b.durationMs)
            return load({ unnamed: true })
          }
          const runPg = async (): Promise<CellResult['pgbench']> => {
            if (!pgbench) return null
            await cell.workload.reset(lab.control)
            progress.phase(`${label} pgbench`, pgDurationS * 1000)
            const r = await runPgbench({
              pgbench,
              target: lab.target,
              schema,
              level: cell.level,
              clients: b.clients,
              durationS: pgDurationS,
              maxTries: b.maxTries,
              statementTimeoutMs: bounds.stepTimeoutMs,
              scripts: cell.workload.pgbench(),
              context: ctx,
            })
            return { ...r, durationS: pgDurationS }
          }
          // Interleaved, and who goes first alternates from cell to cell, so that a drift of the machine
          // (other load, checkpoints, WAL flushes) does not always favour the same side.
          let race: Awaited<ReturnType<typeof runCell>>
          let pg: CellResult['pgbench']
          let pooled: CellStats | null
          let unnamed: CellStats | null
          if (n % 2 === 1 || (!pgbench && !pool)) {
            race = await runRace()
            unnamed = await runUnnamed()
            pooled = await runPooled()
            pg = await runPg()
          } else {
            pg = await runPg()
            pooled = await runPooled()
            unnamed = await runUnnamed()
            race = await runRace()
          }
          if (pooler) poolerText = pooler
          cells.push({
            workload: cell.workload.id,
            hot: cell.hot,
            users: cell.users,
            isolation: cell.level,
            race,
            pgbench: pg,
            vsRc: null,
            article: articleRatio(cell.workload.id, cell.hot, cell.level),
            racePerPgbench: pg && pg.tps > 0 ? race.tps / pg.tps : null,
            ...(pool
              ? {
                  pooled,
                  unnamed,
                  pooledPerDirect: pooled && unnamed && unnamed.tps > 0 ? pooled.tps / unnamed.tps : null,
                  unnamedPerPrepared: unnamed && race.tps > 0 ? unnamed.tps / race.tps : null,
                }
              : {}),
          })
        }
      }
    } catch (e) {
      failure = e
    } finally {
      progress.end()
      run.release()
    }
    // Cleanup never hides the failure it follows: what it could not drop is added to that failure's line.
    const left = await run.drop()
    if (failure !== undefined) {
      if (left && failure instanceof Error) failure.message = `${failure.message}; ${left.note}`
      throw failure
    }
    if (left) throw new RunError(left.note)
    for (const x of cells) {
      const rc = cells.find((y) => groupLabel(y) === groupLabel(x) && y.isolation === 'read committed')
      x.vsRc = rc && rc.race.tps > 0 ? x.race.tps / rc.race.tps : null
    }
    const report: BenchReport = {
      command: 'bench',
      server: { version: lab.server.version },
      target: target.label,
      config: {
        workloads: b.workloads,
        isolation: b.levels,
        hot: b.hot,
        hotRows: b.hotRows,
        rows: b.rows,
        users: b.users,
        clients: b.clients,
        durationMs: b.durationMs,
        warmupMs: b.warmupMs,
        maxTries: b.maxTries,
        statementTimeoutMs: bounds.stepTimeoutMs,
        driver: b.driver,
        pgbench: pgbench ? { bin: pgbench.bin, version: pgbench.version } : null,
      },
      article: ARTICLE,
      ...(poolerText ? { pooler: poolerText } : {}),
      cells,
      ...(o.keep ? { schema } : {}),
    }
    if (b.html) fs.writeFileSync(b.html, html(report))
    process.stdout.write(
      b.json
        ? JSON.stringify({ ...report, ...(b.html ? { html: b.html } : {}), exitCode: 0 }, null, 2) + '\n'
        : text(report) + '\n' + (b.html ? `wrote ${b.html}\n` : '') + (o.keep ? `kept schema ${schema}\n` : ''),
    )
    return 0
  })
}

export function registerBench(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('bench')
    .description("throughput and latency by isolation level and contention, beside the isolation article's published ratios (and pgbench)")
    .option('--workload <list>', 'oltp (80% point reads, 15% read-modify-write, 5% range sums) and/or advisory (check-then-insert under pg_advisory_xact_lock, advisory-locks article §4)', 'oltp')
    .option('--isolation <levels>', 'one or more of read-committed, repeatable-read, serializable (rc, rr, ser), comma-separated', 'rc,rr,serializable')
    .option('--hot <percents>', 'oltp: percent of accesses that go to the hot rows, one cell each', '1,10,50')
    .option('--hot-rows <n>', 'oltp: size of the hot set', '100')
    .option('--rows <n>', 'oltp: rows in the accounts table', '100000')
    .option('--users <k>', 'advisory: users the requests are spread over (fewer = more contention)', '100')
    .option('--clients <n>', 'concurrent clients, one connection (backend) each', '8')
    .option('--duration <duration>', 'measured time per cell', '10s')
    .option('--warmup <duration>', 'unmeasured time before each cell', '1s')
    .option('--max-tries <n>', 'tries per transaction on 40001/40P01, retried as a whole (pgbench --max-tries)', '10')
    .option('--lock-timeout <duration>', 'advisory: lock_timeout set with set_config(..., true), as in the article', '2s')
    .option('--vs-pgbench', 'also run each cell through pgbench (same script, clients, duration, level) and print race/pgbench')
    .option('--vs-slap', 'MySQL/MariaDB: also run each cell through mariadb-slap (same mix, clients, level) and print race/slap')
    .option('--html [file]', 'also write a self-contained HTML page with the charts (no file: one in the temporary directory; its path is printed)')
    .option('--driver <driver>', "race's load connections: wire (its own minimal protocol client) or postgres.js", 'wire')
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

/**
 * race bench on MySQL/MariaDB: the oltp cells through race's MariaDB-connector clients, in a marked database of
 * its own, each beside the article's 2PL column; --vs-slap runs mariadb-slap on the same mix after each cell.
 */
async function mysqlBench(ctx: RunContext, o: BenchCliOptions, b: BenchOptions, bounds: ReturnType<typeof parseBounds>, cmd: Command): Promise<number> {
  checkMysqlBench({ workloads: b.workloads, vsPgbench: b.vsPgbench, driverGiven: cmd.getOptionValueSource('driver') === 'cli' })
  const slap = o.vsSlap ? findSlap() : null
  const plans = plan(b)
  const nCells = plans.reduce((a, p) => a + p.cells.length, 0)
  const cellMs = b.warmupMs + b.durationMs * (slap ? 2 : 1)
  if (cmd.getOptionValueSource('runTimeout') !== 'cli') bounds.runTimeoutMs = Math.max(bounds.runTimeoutMs, nCells * (cellMs + 30_000) + 60_000)
  if (b.html) throw new UsageError('--html draws the PostgreSQL bench; on MySQL/MariaDB use --json')
  return withLab(ctx, o.databaseUrl, bounds, async (driver, target) => {
    const lab = driver as MysqlLab
    const room = await lab.room()
    if (b.clients > room.free) {
      throw new UsageError(`--clients ${b.clients} needs ${b.clients} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --clients ${Math.max(1, room.free)} or fewer`)
    }
    const space = await lab.createSpace('bench', Boolean(o.keep))
    const progress = new Progress(nCells * cellMs)
    const cells: CellResult[] = []
    let failure: unknown
    try {
      await lab.query(lab.useSql(space.name))
      for (const stmt of mysqlOltpSetup(b.rows)) await lab.query(stmt)
      let n = 0
      for (const p of plans) {
        for (const cell of p.cells) {
          n++
          const wl: Workload = { ...cell.workload, statements: MYSQL_OLTP }
          progress.phase(`cell ${n}/${nCells}: ${groupLabel({ ...cell, workload: wl.id })} ${shortLevel(cell.level)} race`, b.warmupMs + b.durationMs)
          const race = await runCell({
            workload: wl,
            level: cell.level,
            clients: b.clients,
            durationMs: b.durationMs,
            warmupMs: b.warmupMs,
            maxTries: b.maxTries,
            target: lab.target,
            schema: space.name,
            connectTimeoutMs: bounds.connectTimeoutMs,
            statementTimeoutMs: bounds.stepTimeoutMs,
            driver: b.driver,
            signal: ctx.signal,
            open: () => MysqlBenchClient.open(lab, space.name, cell.level, Math.max(1, Math.ceil(bounds.stepTimeoutMs / 1000))),
          })
          let s: CellResult['slap'] = null
          // slap stops at the first error and never retries: at SERIALIZABLE the hot rows deadlock (a shared read lock
          // upgraded to a write), so it has no SERIALIZABLE number to compare with.
          if (slap && cell.level !== 'serializable') {
            // As many transactions per client as race committed per client, so both run for about as long.
            const txns = Math.max(100, Math.round((race.tps * (b.durationMs / 1000)) / b.clients))
            progress.phase(`cell ${n}/${nCells}: slap`, b.durationMs)
            s = await runSlap({ bin: slap.bin, lab, space: space.name, level: cell.level, clients: b.clients, script: slapScript(wl, txns), txns })
          }
          cells.push({
            workload: wl.id,
            hot: cell.hot,
            users: cell.users,
            isolation: cell.level,
            race,
            pgbench: null,
            vsRc: null,
            article: articleRatio(wl.id, cell.hot, cell.level, '2pl'),
            racePerPgbench: null,
            slap: s,
            racePerSlap: s && s.tps > 0 ? race.tps / s.tps : null,
          })
        }
      }
    } catch (e) {
      failure = e
    } finally {
      progress.end()
      space.release()
    }
    const left = await space.drop()
    if (failure !== undefined) {
      if (left && failure instanceof Error) failure.message = `${failure.message}; ${left.note}`
      throw failure
    }
    if (left) throw new RunError(left.note)
    for (const x of cells) {
      const rc = cells.find((y) => groupLabel(y) === groupLabel(x) && y.isolation === 'read committed')
      x.vsRc = rc && rc.race.tps > 0 ? x.race.tps / rc.race.tps : null
    }
    const report: BenchReport = {
      command: 'bench',
      server: { version: lab.server.version, product: lab.server.product },
      engine: 'mysql',
      target: target.label,
      config: {
        workloads: b.workloads,
        isolation: b.levels,
        hot: b.hot,
        hotRows: b.hotRows,
        rows: b.rows,
        users: b.users,
        clients: b.clients,
        durationMs: b.durationMs,
        warmupMs: b.warmupMs,
        maxTries: b.maxTries,
        statementTimeoutMs: bounds.stepTimeoutMs,
        driver: 'mariadb connector',
        pgbench: null,
        slap,
      },
      article: ARTICLE,
      cells,
      ...(o.keep ? { schema: space.name } : {}),
    }
    process.stdout.write(b.json ? JSON.stringify(report, null, 2) + '\n' : text(report) + '\n' + (o.keep ? `kept database ${space.name}\n` : ''))
    return 0
  })
}
