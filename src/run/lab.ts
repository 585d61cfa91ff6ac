// Where a run happens: the target opened (the embedded server started when none is given, a pooler in front when
// asked), bounded by the run's --run-timeout, everything it opens registered with the run's context for cleanup.
// What only some runs use (the embedded server, the MySQL driver, the PgBouncer code) is imported when used.
import fs from 'node:fs'
import os from 'node:os'
import type { Driver } from '../db/driver.js'
import { engineOf, resolveTarget, type Target } from '../db/target.js'
import { BUNDLED } from '../servers/versions.js'
import { RunError, UsageError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import { ownServerRefusal, unavailableOn } from '../plan.js'
import type { Engine, Scenario } from '../scenario.js'
import type { Bounds } from './params.js'

/** The engine the command will talk to, from --database-url / DATABASE_URL (no connection is made). */
export function engineFor(databaseUrl: string | undefined): Engine {
  return engineOf(resolveTarget(databaseUrl))
}

/** Refuses (exit 2) a scenario that cannot exist on the engine, with its one-line reason. */
export function assertRunsOn(s: Scenario, engine: Engine): void {
  const why = unavailableOn(s, engine)
  if (why) throw new UsageError(`${s.id} is not available on ${engine === 'mysql' ? 'MySQL/MariaDB' : 'PostgreSQL'}: ${why}`)
}

/** Opens the target's driver: PostgreSQL (its PostgresLab), or MySQL/MariaDB (loaded only when a mysql:// URL asks for it). */
export async function openDriver(ctx: RunContext, target: Target, connectTimeoutMs: number): Promise<Driver> {
  if (engineOf(target) === 'mysql') {
    const { MysqlLab } = await import('../db/mysql.js')
    return MysqlLab.open(target, connectTimeoutMs, ctx)
  }
  const { PostgresLab } = await import('../db/postgres.js')
  return PostgresLab.open(target, connectTimeoutMs, ctx)
}

/** The prefix of the folders race's own PgBouncers run in (db/pooler.ts POOLER_DIR_PREFIX; a test checks they agree). */
export const POOLER_DIR_PREFIX = 'race-pgb-'

/**
 * Stops and removes the PgBouncers a killed race left behind (db/pooler.ts reapPoolers), loading that code only
 * when the temporary folder holds one of their folders at all.
 */
async function reapLeftPoolers(): Promise<void> {
  let names: string[]
  try {
    names = fs.readdirSync(os.tmpdir())
  } catch {
    return
  }
  if (!names.some((n) => n.startsWith(POOLER_DIR_PREFIX))) return
  const { reapPoolers } = await import('../servers/pooler.js')
  await reapPoolers((line) => process.stderr.isTTY && process.stderr.write(`${line}\n`))
}

/**
 * Opens the target (starting the embedded server when none is configured), runs fn, cleans up via lifecycle.
 * `own`: a scenario with a server of its own (Scenario.ownServer): the embedded server is started with its
 * settings, and a server the user gave is refused (exit 2). `o.sessions`: how many sessions the command opens, for
 * the embedded server's max_connections. `o.pooled` (--pooled): the URL is a pooler the user
 * runs; the driver's control connection goes to the server behind it, and fn gets the pooler's target as `via`.
 */
export async function withLab<T>(
  ctx: RunContext,
  databaseUrl: string | undefined,
  bounds: Bounds,
  fn: (lab: Driver, target: Target, via?: Target) => Promise<T>,
  own?: Scenario,
  o: { pooled?: boolean; sessions?: number; settings?: Record<string, string> } = {},
): Promise<T> {
  let target = resolveTarget(databaseUrl)
  if (own?.ownServer && target.kind !== 'embedded') throw new UsageError(ownServerRefusal(own))
  if (o.pooled && !target.url) throw new UsageError('--pooled says --database-url is a pooler you run: give its URL with --database-url (or DATABASE_URL)')
  const pg = ctx.embedded.pg ?? BUNDLED
  // A first fetch (13-17, once) and a template's first initdb are said on stderr whatever it is (they take seconds);
  // the rest of the start on a terminal only.
  const log = (line: string) => {
    if (line.startsWith('fetch') || line.startsWith('initdb') || process.stderr.isTTY) process.stderr.write(`${process.stderr.isTTY ? '\x1b[2K' : ''}race: ${line}\n`)
  }
  // Fetched before the command's clock starts: --run-timeout bounds the command, the fetch has its own bound.
  if (target.kind === 'embedded' && pg !== BUNDLED) await (await import('../servers/versions.js')).binariesFor(pg, log, ctx)
  // runTimeoutMs 0: no limit for the whole command (race locks --watch, until Ctrl-C).
  const timer = bounds.runTimeoutMs
    ? setTimeout(() => ctx.abort(new RunError(`the command did not finish within --run-timeout ${bounds.runTimeoutMs / 1000}s${stuckNote(ctx)}`)), bounds.runTimeoutMs)
    : undefined
  timer?.unref()
  try {
    // A PgBouncer a killed race left behind (its folder names its owner) goes first, whatever this command does.
    await reapLeftPoolers()
    if (target.kind === 'embedded') {
      if (process.stderr.isTTY) process.stderr.write(`starting the embedded PostgreSQL ${pg}...\r`)
      const { connectionsFor, startEmbedded } = await import('../servers/embedded.js')
      const server = await startEmbedded({ settings: { ...o.settings, ...own?.ownServer?.settings }, cache: ctx.embedded.cache, maxConnections: connectionsFor(o.sessions), tcp: false, pg, log, context: ctx })
      if (process.stderr.isTTY) process.stderr.write('\x1b[2K')
      if (server.cluster.cache === 'unavailable' && process.stderr.isTTY) process.stderr.write(`race: initdb instead of the cached template, which is not usable: ${server.cluster.why}\n`)
      // Through its Unix socket only: no TCP port, no password (nor its hashing on every connection).
      target = { kind: 'embedded', url: server.url, label: 'embedded' }
    }
    // --pooled: the URL is the user's pooler (for the sessions); control goes to the server behind it.
    const via = o.pooled ? target : undefined
    if (via) target = await (await import('../db/pooled.js')).discoverDirect(via, bounds.connectTimeoutMs)
    const lab = await openDriver(ctx, target, bounds.connectTimeoutMs)
    if (via) target = { ...via, label: `${via.label} (a pooler; control direct to ${target.label})` }
    const said = async () => {
      await lab.reaping
      if (lab.reaped.length && process.stderr.isTTY) {
        process.stderr.write(`removed ${lab.reaped.length} ${lab.engine === 'mysql' ? 'database' : 'schema'}(s) left by race runs that were killed: ${lab.reaped.join(', ')}\n`)
      }
    }
    // What a killed run left is reaped beside the run (PostgreSQL) or before it (MySQL): said once it is done.
    const beside = Boolean(lab.reaping)
    if (!beside) await said()
    const result = await fn(lab, target, via)
    if (beside) await said()
    return result
  } finally {
    clearTimeout(timer)
  }
}

function stuckNote(ctx: RunContext): string {
  const s = ctx.describeStuck()
  return s ? `: ${s}` : ''
}
