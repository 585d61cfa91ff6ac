// --pooler pgbouncer / --pooled: the driver whose sessions go through the pooler (race's own PgBouncer, started
// once the run's schema exists, or one the user runs).
import { connect, endQuietly } from '../db/connect.js'
import type { Driver } from '../db/driver.js'
import { PostgresLab } from '../db/postgres.js'
import { externalPool, PooledDriver, type PoolOpener, type PoolRoute } from '../db/pooled.js'
import { describePool, findPgbouncer, startPooler } from '../servers/pooler.js'
import type { Target } from '../db/target.js'
import { RunError, UsageError } from '../errors.js'
import type { Pool } from '../scenario.js'


/** --pooler pgbouncer without PgBouncer installed: one line saying how to install it, exit 3, before any connection. */
export function requirePooler(pool: Pool | undefined): void {
  if (pool?.kind === 'pgbouncer') findPgbouncer()
}

/**
 * The driver for one run through this pool: PostgreSQL's (the PostgresLab's control connection, direct), with every
 * session a client of the pooler. One per run: race's own PgBouncer starts when the run's schema exists.
 */
export function pooledDriver(pool: Pool, lab: Driver, connectTimeoutMs: number, via?: Target): PooledDriver {
  if (!(lab instanceof PostgresLab)) throw new UsageError('--pooler and --pooled are for PostgreSQL: leave them out on MySQL/MariaDB')
  if (pool.kind === 'pgbouncer') return new PooledDriver(lab, ownPooler(pool, lab, connectTimeoutMs))
  if (!via) throw new UsageError('--pooled needs --database-url (or DATABASE_URL) naming the pooler you run')
  return new PooledDriver(lab, externalPooler(via, lab, connectTimeoutMs))
}

/**
 * --pooled: sessions through the pooler at --database-url, the control connection direct to the server behind
 * it. race cannot configure that pooler: its sessions send search_path as a startup parameter, which the pooler
 * must pass on (PgBouncer 1.18 refuses it; race says so in one line and stops). Which
 * backend serves a client is read from the server (application_name carries the run's tag; not idle). At the
 * end of each trial the backends this run's clients used are ended: the session state they may carry (a leaked
 * lock, a SET) must not reach the pooler's other clients.
 */
export function externalPooler(via: Target, lab: PostgresLab, connectTimeoutMs: number): PoolOpener {
  return {
    size: null,
    async open(schema: string): Promise<PoolRoute> {
      const tag = schema.slice(-8)
      const ext = externalPool(via, tag)
      const startup = { search_path: `"${schema}"` }
      const probe = connect(via, { connectTimeoutMs, applicationName: `race probe ${tag}`, params: startup, prepare: false, fetchTypes: false })
      try {
        const [r] = await probe`select current_setting('search_path') as sp`
        if (!String(r.sp).includes(schema)) throw new RunError(`the pooler at ${via.label} did not pass race's search_path to the server (it ignored the startup parameter): race's sessions need a pooler that passes search_path on; or let race start its own: --pooler pgbouncer`)
      } catch (e) {
        if (e instanceof RunError) throw e
        const code = (e as { code?: string }).code
        throw new RunError(`the pooler at ${via.label} refused race's session (${code ? `${code}: ` : ''}${(e as Error).message}): race's sessions need a pooler that passes search_path on as a startup parameter (PgBouncer 1.18 refuses it); or let race start its own: --pooler pgbouncer`)
      } finally {
        await endQuietly(probe, 0)
      }
      const end = async () => {
        const pids = await ext.backends(lab.control)
        if (pids.length) await lab.control`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid`
      }
      return {
        target: via,
        tag,
        startup,
        describe: `the pooler at ${via.label} (--pooled: its mode and size are its own)`,
        links: () => ext.links(lab.control),
        backends: () => ext.backends(lab.control),
        recycle: end,
        close: () => end().catch(() => {}),
      }
    },
  }
}

/** The engine's pooler: race's own PgBouncer, started once the run's schema exists, stopped at the end. */
export function ownPooler(pool: Pool, lab: PostgresLab, connectTimeoutMs: number): PoolOpener {
  return {
    size: pool.size,
    async open(schema: string): Promise<PoolRoute> {
      const p = await startPooler({
        target: lab.target,
        config: { mode: pool.mode, size: pool.size ?? 1, resetAlways: pool.resetAlways },
        setup: { schema },
        context: lab.context,
        connectTimeoutMs,
      })
      return {
        target: p.target,
        tag: schema.slice(-8),
        describe: `${describePool(p.version, p.config)} (race's own, on 127.0.0.1:${p.port})`,
        links: () => p.links(),
        backends: () => p.backends(),
        recycle: () => p.recycle(),
        close: () => p.stop(),
      }
    },
  }
}
