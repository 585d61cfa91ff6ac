// race bench's loop, once for every engine: the cells planned from the request (a workload, a contention, a level
// each), the server's room checked, a schema (or database) of the bench's own made, every cell run in turn by the
// engine's cell runner (postgres.ts, mysql.ts) under one progress bar, the space dropped (what could not be
// dropped is said with the failure it follows), each cell beside READ COMMITTED, and the report. Nothing is printed
// here but the progress bar.
import type { Driver, RunSpace } from '../db/driver.js'
import { RunError, UsageError } from '../errors.js'
import { groupLabel, Progress, shortLevel, type BenchReport, type CellResult } from './report.js'
import type { Driver as LoadDriver } from './runner.js'
import { advisory, ARTICLE, oltp, type Workload } from './workloads.js'

/** race bench as asked for, every option checked (commands/bench.ts parseBenchOptions). */
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
  driver: LoadDriver
  vsPgbench: boolean
  html?: string
  json: boolean
}

/** One cell: a workload at one contention (oltp: hot percent; advisory: users) and one level. */
export interface Cell {
  workload: Workload
  hot: number | null
  users: number | null
  level: string
}

/** The cells of one workload, and the workload whose setup makes their tables. */
export interface CellGroup {
  workload: Workload
  cells: Cell[]
}

/** Where a cell stands in the run, for its progress phases. */
export interface CellAt {
  /** 1-based. */
  n: number
  /** "cell n/N". */
  at: string
  /** "cell n/N: oltp hot 1% RC". */
  label: string
  progress: Progress
}

/** What an engine brings to the loop: its setup, one cell run (every way it runs), and its part of the report. */
export interface CellRunner {
  /** The space made: the tables every cell shares. */
  prepare(space: string): Promise<void>
  /** Before a group's cells: its workload's tables. */
  beforeGroup(g: CellGroup): Promise<void>
  run(cell: Cell, at: CellAt): Promise<CellResult>
  /** The report's server, engine and the config's driver and yardsticks, once every cell ran. */
  report(): Pick<BenchReport, 'server' | 'engine' | 'pooler'> & { config: Pick<BenchReport['config'], 'driver' | 'pgbench' | 'slap'> }
}

export function plan(b: BenchOptions): CellGroup[] {
  const out: CellGroup[] = []
  for (const w of b.workloads) {
    if (w === 'oltp') {
      // One accounts table for every hot percentage: the workload object only decides where accesses go.
      const shared = oltp({ hot: b.hot[0], hotRows: b.hotRows, rows: b.rows })
      const cells: Cell[] = []
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

export function cellCount(groups: readonly CellGroup[]): number {
  return groups.reduce((a, p) => a + p.cells.length, 0)
}

/**
 * Every cell of the plan on the open target, each by `runner`, in a space of the bench's own (kept with `keep`):
 * the report, its schema named when kept. `cellMs`: how long a cell's runs take, for the progress bar.
 */
export async function runBench(lab: Driver, target: { label: string }, b: BenchOptions, runner: CellRunner, o: { cellMs: number; keep: boolean; statementTimeoutMs: number }): Promise<BenchReport> {
  const groups = plan(b)
  const nCells = cellCount(groups)
  const room = await lab.room()
  if (b.clients > room.free) {
    throw new UsageError(`--clients ${b.clients} needs ${b.clients} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --clients ${Math.max(1, room.free)} or fewer`)
  }
  const space = await lab.createSpace('bench', o.keep)
  const progress = new Progress(nCells * o.cellMs)
  const cells: CellResult[] = []
  let failure: unknown
  try {
    await runner.prepare(space.name)
    let n = 0
    for (const g of groups) {
      await runner.beforeGroup(g)
      for (const cell of g.cells) {
        n++
        const at = `cell ${n}/${nCells}`
        cells.push(await runner.run(cell, { n, at, label: `${at}: ${groupLabel({ ...cell, workload: cell.workload.id })} ${shortLevel(cell.level)}`, progress }))
      }
    }
  } catch (e) {
    failure = e
  } finally {
    progress.end()
    space.release()
  }
  await dropSpace(space, failure)
  for (const x of cells) {
    const rc = cells.find((y) => groupLabel(y) === groupLabel(x) && y.isolation === 'read committed')
    x.vsRc = rc && rc.race.tps > 0 ? x.race.tps / rc.race.tps : null
  }
  const own = runner.report()
  return {
    command: 'bench',
    server: own.server,
    ...(own.engine ? { engine: own.engine } : {}),
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
      statementTimeoutMs: o.statementTimeoutMs,
      ...own.config,
    },
    article: ARTICLE,
    ...(own.pooler ? { pooler: own.pooler } : {}),
    cells,
    ...(o.keep ? { schema: space.name } : {}),
  }
}

/** Cleanup never hides the failure it follows: what it could not drop is added to that failure's line. */
async function dropSpace(space: RunSpace, failure: unknown): Promise<void> {
  const left = await space.drop()
  if (failure !== undefined) {
    if (left && failure instanceof Error) failure.message = `${failure.message}; ${left.note}`
    throw failure
  }
  if (left) throw new RunError(left.note)
}
