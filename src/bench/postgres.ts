// race bench's cells on PostgreSQL: each cell's load by race's own clients, and beside it, when asked, the same load
// with unnamed statements and through a PgBouncer of race's own (--pooler: what the pooler costs) and pgbench
// running the same transactions (--vs-pgbench), interleaved so that a drift of the machine favours no side.
import type { PostgresLab } from '../db/postgres.js'
import type { RunContext } from '../lifecycle.js'
import type { Pool } from '../scenario.js'
import { describePool, startPooler } from '../servers/pooler.js'
import type { BenchOptions, Cell, CellAt, CellRunner, CellGroup } from './cells.js'
import { runPgbench, type Pgbench } from './pgbench.js'
import type { CellResult } from './report.js'
import { runCell, type CellStats } from './runner.js'
import { articleRatio } from './workloads.js'

/** How long one PostgreSQL cell takes: its runs (three with a pooler) and pgbench's. */
export function pgCellMs(b: BenchOptions, pool: Pool | undefined, pgbench: Pgbench | null): number {
  return (b.warmupMs + b.durationMs) * (pool ? 3 : 1) + (pgbench ? pgDuration(b) * 1000 : 0)
}

/** pgbench's --time: whole seconds, at least one. */
function pgDuration(b: BenchOptions): number {
  return Math.max(1, Math.round(b.durationMs / 1000))
}

export class PgCells implements CellRunner {
  private schema = ''
  private poolerText: string | undefined

  constructor(
    private readonly ctx: RunContext,
    private readonly lab: PostgresLab,
    private readonly b: BenchOptions,
    private readonly o: { pool?: Pool; pgbench: Pgbench | null; connectTimeoutMs: number; stepTimeoutMs: number },
  ) {}

  async prepare(space: string): Promise<void> {
    this.schema = space
    await this.lab.control.unsafe(`set search_path to "${space}"`)
  }

  async beforeGroup(g: CellGroup): Promise<void> {
    await g.workload.setup(this.lab.control)
  }

  async run(cell: Cell, at: CellAt): Promise<CellResult> {
    const { pool, pgbench } = this.o
    // Interleaved, and who goes first alternates from cell to cell, so that a drift of the machine
    // (other load, checkpoints, WAL flushes) does not always favour the same side.
    let race: CellStats
    let pg: CellResult['pgbench']
    let pooled: CellStats | null
    let unnamed: CellStats | null
    if (at.n % 2 === 1 || (!pgbench && !pool)) {
      race = await this.race(cell, at)
      unnamed = await this.unnamed(cell, at)
      pooled = await this.pooled(cell, at)
      pg = await this.pgbench(cell, at)
    } else {
      pg = await this.pgbench(cell, at)
      pooled = await this.pooled(cell, at)
      unnamed = await this.unnamed(cell, at)
      race = await this.race(cell, at)
    }
    return {
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
    }
  }

  report() {
    const { pgbench } = this.o
    return {
      server: { version: this.lab.server.version },
      config: { driver: this.b.driver, pgbench: pgbench ? { bin: pgbench.bin, version: pgbench.version } : null },
      ...(this.poolerText ? { pooler: this.poolerText } : {}),
    }
  }

  /** One cell's load, the same for every way it runs (direct, unnamed statements, through PgBouncer). */
  private load(cell: Cell, extra: Partial<Parameters<typeof runCell>[0]> = {}): Promise<CellStats> {
    const { b } = this
    return runCell({
      workload: cell.workload,
      level: cell.level,
      clients: b.clients,
      durationMs: b.durationMs,
      warmupMs: b.warmupMs,
      maxTries: b.maxTries,
      target: this.lab.target,
      schema: this.schema,
      connectTimeoutMs: this.o.connectTimeoutMs,
      statementTimeoutMs: this.o.stepTimeoutMs,
      driver: b.driver,
      signal: this.ctx.signal,
      ...extra,
    })
  }

  private async race(cell: Cell, at: CellAt): Promise<CellStats> {
    await cell.workload.reset(this.lab.control)
    at.progress.phase(`${at.label} race`, this.b.warmupMs + this.b.durationMs)
    return this.load(cell)
  }

  /**
   * The same load through a PgBouncer of race's own (one per cell: its server connections start at this cell's
   * level), beside the direct run: what the pooler costs.
   */
  private async pooled(cell: Cell, at: CellAt): Promise<CellStats | null> {
    const { pool } = this.o
    if (!pool) return null
    await cell.workload.reset(this.lab.control)
    const size = pool.size || this.b.clients
    const p = await startPooler({
      target: this.lab.target,
      config: { mode: pool.mode, size, resetAlways: pool.resetAlways },
      setup: { schema: this.schema, settings: { default_transaction_isolation: cell.level, statement_timeout: String(this.o.stepTimeoutMs) } },
      connectTimeoutMs: this.o.connectTimeoutMs,
    })
    this.poolerText = describePool(p.version, p.config)
    try {
      at.progress.phase(`${at.label} through PgBouncer`, this.b.warmupMs + this.b.durationMs)
      return await this.load(cell, { target: p.target, pooled: true })
    } finally {
      await p.stop()
    }
  }

  /** Direct again with the unnamed statements the pooled run must use: the pooler's hop alone. */
  private async unnamed(cell: Cell, at: CellAt): Promise<CellStats | null> {
    if (!this.o.pool) return null
    await cell.workload.reset(this.lab.control)
    at.progress.phase(`${at.label} direct, unnamed statements`, this.b.warmupMs + this.b.durationMs)
    return this.load(cell, { unnamed: true })
  }

  private async pgbench(cell: Cell, at: CellAt): Promise<CellResult['pgbench']> {
    const { pgbench } = this.o
    if (!pgbench) return null
    const durationS = pgDuration(this.b)
    await cell.workload.reset(this.lab.control)
    at.progress.phase(`${at.label} pgbench`, durationS * 1000)
    const r = await runPgbench({
      pgbench,
      target: this.lab.target,
      schema: this.schema,
      level: cell.level,
      clients: this.b.clients,
      durationS,
      maxTries: this.b.maxTries,
      statementTimeoutMs: this.o.stepTimeoutMs,
      scripts: cell.workload.pgbench(),
      context: this.ctx,
    })
    return { ...r, durationS }
  }
}
