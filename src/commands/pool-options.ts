// --pooler pgbouncer / --pooled: the options run, check, show and bench share, and how they are read. Light on
// purpose (no driver, no PgBouncer code): run/pooler.ts has the driver, loaded only when a pooler is asked for.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { parseWhole } from '../parse.js'
import { addOptions, POOL_MODE, POOL_SIZE, POOLED, POOLER, RESET_QUERY_ALWAYS } from '../run/options.js'
import { POOL_MODES, type Engine, type Pool, type PoolMode } from '../scenario.js'

export interface PoolerOptions {
  pooler?: string
  poolSize?: string
  poolMode?: string
  resetQueryAlways?: boolean
  pooled?: boolean
}

export function addPoolerOptions(cmd: Command, o: { config?: boolean; pooled?: boolean } = {}): Command {
  addOptions(cmd, [POOLER, ...(o.config !== false ? [POOL_SIZE, POOL_MODE, RESET_QUERY_ALWAYS] : []), ...(o.pooled !== false ? [POOLED] : [])])
  return cmd
}

/** The pool the options ask for (size filled in later when not given), or undefined: direct. */
export function parsePool(o: PoolerOptions, cmd: Command, engine: Engine = 'postgres'): Pool | undefined {
  const given = (k: string) => cmd.getOptionValueSource(k) === 'cli'
  if (engine === 'mysql' && (o.pooler !== undefined || o.pooled)) {
    throw new UsageError(`${o.pooled ? '--pooled' : '--pooler'} is for PostgreSQL poolers such as PgBouncer, and --database-url is MySQL/MariaDB: leave it out, or give a postgres:// URL`)
  }
  if (o.pooler !== undefined && o.pooled) throw new UsageError('--pooler and --pooled exclude each other: --pooler starts a PgBouncer of race\'s own, --pooled says --database-url already is one')
  if (o.pooler === undefined) {
    for (const [k, f] of [['poolSize', '--pool-size'], ['poolMode', '--pool-mode'], ['resetQueryAlways', '--reset-query-always']] as const) {
      if (given(k)) throw new UsageError(`${f} configures the pooler race starts: add --pooler pgbouncer${o.pooled ? ' (a pooler you run keeps its own configuration)' : ''}`)
    }
    return o.pooled ? { kind: 'external', mode: 'transaction', size: null, resetAlways: false } : undefined
  }
  const name = String(o.pooler).trim().toLowerCase()
  if (name !== 'pgbouncer') throw new UsageError(`--pooler takes pgbouncer (the pooler race can start), got '${o.pooler}'`)
  let mode: PoolMode = 'transaction'
  if (o.poolMode !== undefined) {
    const m = String(o.poolMode).trim().toLowerCase()
    if (!(POOL_MODES as readonly string[]).includes(m)) throw new UsageError(`--pool-mode takes transaction, session or statement, got '${o.poolMode}'`)
    mode = m as PoolMode
  }
  const size = o.poolSize === undefined ? 0 : parseWhole('--pool-size', String(o.poolSize), 1, 1000)
  return { kind: 'pgbouncer', mode, size, resetAlways: Boolean(o.resetQueryAlways) }
}

// The run service's (it sizes the pool of a run), named here with the options.