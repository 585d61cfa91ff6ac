// race locks: the advisory locks held or awaited in this database right now (§11), waiting rows first.
import type { Command } from 'commander'
import type { Sql } from 'postgres'
import { setTimeout as sleep } from 'node:timers/promises'
import { UsageError } from '../errors.js'
import type { Lab } from '../db/lab.js'
import { engineOf, resolveTarget } from '../db/target.js'
import { whenAborted } from '../lifecycle.js'
import { parseDuration } from '../parse.js'
import { c } from '../report/color.js'
import { fmtMs, plainTable } from '../report/table.js'
import { addTargetOptions, parseBounds, withLab, type TargetOptions } from './common.js'

export interface LocksOptions extends TargetOptions {
  watch?: boolean
  interval?: string
}

export function registerLocks(program: Command, exit: (code: number) => void): Command {
  const cmd = program
    .command('locks')
    .description('advisory locks held or awaited in a database right now (pg_locks joined with pg_stat_activity), waiting first')
    .option('--watch', 'redraw every --interval until Ctrl-C (or --run-timeout)')
    .option('--interval <duration>', 'with --watch: how often to redraw (default 1s)')
  addTargetOptions(cmd, { keep: false, stepTimeout: false })
  cmd.action(async (o: LocksOptions) => exit(await locksCommand(o)))
  cmd.addHelpText(
    'after',
    '\nExamples:\n  $ race locks --database-url postgres://app@db:5432/app\n  $ race locks --watch --interval 500ms\n  $ race run deadlock --hold 20s      (its output says how to point race locks at it)',
  )
  return cmd
}

export interface LockRow {
  pid: number
  /** A single bigint key (objsubid 1), in decimal; null for a two-int key. */
  key: string | null
  /** A two-int key (objsubid 2): [key1, key2]; null for a bigint key. */
  pair: [number, number] | null
  mode: string
  granted: boolean
  /** For a waiting row: the backends it waits for. */
  waitingFor: number[]
  state: string | null
  xactAgeMs: number | null
  query: string
}

/**
 * §11's query, extended: bigint keys rebuilt as (classid::bigint << 32) | objid::bigint (objsubid 1),
 * two-int keys shown as a pair (objsubid 2; oids back to signed int4); this database only.
 */
export async function advisoryLocks(sql: Sql): Promise<LockRow[]> {
  const rows = await sql`
    select l.pid,
           case when l.objsubid = 1 then ((l.classid::bigint << 32) | l.objid::bigint)::text end as key,
           case when l.objsubid = 2 then l.classid::bigint - case when l.classid::bigint >= 2147483648 then 4294967296 else 0 end end::int as k1,
           case when l.objsubid = 2 then l.objid::bigint - case when l.objid::bigint >= 2147483648 then 4294967296 else 0 end end::int as k2,
           l.mode, l.granted,
           case when l.granted then '{}'::int[] else pg_blocking_pids(l.pid) end as waiting_for,
           a.state,
           (extract(epoch from now() - a.xact_start) * 1000)::float8 as xact_age_ms,
           left(a.query, 80) as query
      from pg_locks as l
      join pg_stat_activity as a using (pid)
     where l.locktype = 'advisory'
       and l.database = (select oid from pg_database where datname = current_database())
     order by l.granted, now() - a.xact_start desc nulls last, l.pid`
  return rows.map((r) => ({
    pid: Number(r.pid),
    key: r.key === null ? null : String(r.key),
    pair: r.k1 === null ? null : [Number(r.k1), Number(r.k2)],
    mode: String(r.mode),
    granted: Boolean(r.granted),
    waitingFor: ((r.waiting_for as number[]) ?? []).map(Number),
    state: r.state === null ? null : String(r.state),
    xactAgeMs: r.xact_age_ms === null ? null : Math.round(Number(r.xact_age_ms)),
    query: String(r.query ?? ''),
  }))
}

export function locksTable(rows: readonly LockRow[]): string {
  if (!rows.length) return c.dim('no advisory locks held or awaited in this database')
  const t = plainTable(['pid', 'key', 'mode', 'granted', 'state', 'xact age', 'query'])
  for (const r of rows) {
    t.push([
      r.pid,
      r.key ?? `(${r.pair![0]}, ${r.pair![1]})`,
      r.mode.replace(/Lock$/, ''),
      r.granted ? c.green('yes') : c.yellow(`waiting${r.waitingFor.length ? ` for ${r.waitingFor.join(', ')}` : ''}`),
      r.state ?? '',
      r.xactAgeMs === null ? '' : fmtMs(r.xactAgeMs),
      r.query.replace(/\s+/g, ' '),
    ])
  }
  const waiting = rows.filter((r) => !r.granted).length
  return `${t.toString()}\n${rows.length - waiting} held, ${waiting} waiting`
}

export async function locksCommand(o: LocksOptions): Promise<number> {
  const target = resolveTarget(o.databaseUrl)
  if (target.kind === 'embedded') {
    throw new UsageError(
      `race locks looks at a server you name: give --database-url (or DATABASE_URL / PG*); race run --hold prints the URL of its embedded server`,
    )
  }
  if (engineOf(target) !== 'postgres') {
    throw new UsageError(`race locks reads PostgreSQL's pg_locks; ${target.label} is MySQL/MariaDB, whose user locks (GET_LOCK) have no such view here: give a postgres:// URL`)
  }
  const intervalMs = parseDuration('--interval', o.interval ?? '1s')
  if (o.interval !== undefined && !o.watch) throw new UsageError(`--interval only applies with --watch: race locks --watch --interval ${o.interval}`)
  if (o.watch && o.json) throw new UsageError(`--watch redraws a table; for JSON run race locks --json once (or in a loop)`)
  const bounds = parseBounds(o)
  return withLab(o.databaseUrl, bounds, async (driver) => {
    const lab = driver as Lab
    if (!o.watch) {
      const rows = await advisoryLocks(lab.control)
      if (o.json) process.stdout.write(JSON.stringify({ server: { version: lab.server.version }, target: target.label, locks: rows }, null, 2) + '\n')
      else process.stdout.write(locksTable(rows) + '\n')
      return 0
    }
    // Watch until Ctrl-C, or until just before --run-timeout (every wait bounded).
    const until = Date.now() + bounds.runTimeoutMs - Math.min(2000, bounds.runTimeoutMs / 2)
    const tty = process.stdout.isTTY
    while (Date.now() + intervalMs < until) {
      const rows = await advisoryLocks(lab.control)
      const head = c.bold(`race locks`) + c.dim(`  ·  ${target.label}  ·  every ${intervalMs} ms  ·  ${new Date().toISOString().slice(11, 19)}  ·  Ctrl-C stops`)
      process.stdout.write((tty ? '\x1b[2J\x1b[H' : '') + `${head}\n${locksTable(rows)}\n${tty ? '' : '\n'}`)
      await Promise.race([sleep(intervalMs), whenAborted()])
    }
    process.stdout.write(c.dim(`stopped watching at --run-timeout ${bounds.runTimeoutMs / 1000}s\n`))
    return 0
  })
}
