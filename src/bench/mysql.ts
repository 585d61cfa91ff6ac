// race bench's cells on MySQL/MariaDB: the oltp cells through race's MariaDB-connector clients (innodb.ts), in a
// marked database of the bench's own, each beside the article's 2PL column; --vs-slap runs mariadb-slap on the same
// mix after each cell.
import type { MysqlLab } from '../db/mysql.js'
import type { RunContext } from '../lifecycle.js'
import type { BenchOptions, Cell, CellAt, CellRunner } from './cells.js'
import { MYSQL_OLTP, MysqlBenchClient, mysqlOltpSetup, runSlap, slapScript } from './innodb.js'
import type { CellResult } from './report.js'
import { runCell } from './runner.js'
import { articleRatio, type Workload } from './workloads.js'

/** How long one MySQL cell takes: its run, and slap's. */
export function mysqlCellMs(b: BenchOptions, slap: { bin: string } | null): number {
  return b.warmupMs + b.durationMs * (slap ? 2 : 1)
}

export class MysqlCells implements CellRunner {
  private space = ''

  constructor(
    private readonly ctx: RunContext,
    private readonly lab: MysqlLab,
    private readonly b: BenchOptions,
    private readonly o: { slap: { bin: string; version: string } | null; connectTimeoutMs: number; stepTimeoutMs: number },
  ) {}

  async prepare(space: string): Promise<void> {
    this.space = space
    await this.lab.query(this.lab.useSql(space))
    for (const stmt of mysqlOltpSetup(this.b.rows)) await this.lab.query(stmt)
  }

  async beforeGroup(): Promise<void> {}

  async run(cell: Cell, at: CellAt): Promise<CellResult> {
    const { b, lab, space } = this
    const { slap } = this.o
    const wl: Workload = { ...cell.workload, statements: MYSQL_OLTP }
    at.progress.phase(`${at.label} race`, b.warmupMs + b.durationMs)
    const race = await runCell({
      workload: wl,
      level: cell.level,
      clients: b.clients,
      durationMs: b.durationMs,
      warmupMs: b.warmupMs,
      maxTries: b.maxTries,
      target: lab.target,
      schema: space,
      connectTimeoutMs: this.o.connectTimeoutMs,
      statementTimeoutMs: this.o.stepTimeoutMs,
      driver: b.driver,
      signal: this.ctx.signal,
      open: () => MysqlBenchClient.open(lab, space, cell.level, Math.max(1, Math.ceil(this.o.stepTimeoutMs / 1000))),
    })
    let s: CellResult['slap'] = null
    // slap stops at the first error and never retries: at SERIALIZABLE the hot rows deadlock (a shared read lock
    // upgraded to a write), so it has no SERIALIZABLE number to compare with.
    if (slap && cell.level !== 'serializable') {
      // As many transactions per client as race committed per client, so both run for about as long.
      const txns = Math.max(100, Math.round((race.tps * (b.durationMs / 1000)) / b.clients))
      at.progress.phase(`${at.at}: slap`, b.durationMs)
      s = await runSlap({ bin: slap.bin, lab, space, level: cell.level, clients: b.clients, script: slapScript(wl, txns), txns })
    }
    return {
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
    }
  }

  report() {
    return {
      server: { version: this.lab.server.version, product: this.lab.server.product },
      engine: 'mysql' as const,
      config: { driver: 'mariadb connector', pgbench: null, slap: this.o.slap },
    }
  }
}
