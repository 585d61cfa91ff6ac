// race locks: the advisory locks held or awaited in this database right now (§11), waiting rows first.
import type { Command } from 'commander'
import type { Sql } from 'postgres'
import { setTimeout as sleep } from 'node:timers/promises'
import { RunError, UsageError } from '../errors.js'
import type { PostgresLab } from '../db/postgres.js'
import { engineOf, resolveTarget } from '../db/target.js'
import type { RunContext } from '../lifecycle.js'
import { formatDuration, parseDuration } from '../parse.js'
import { plain, type Style } from '../report/color.js'
import { fitTable, fmtMs } from '../report/table.js'
import { columns, joinFit, width } from '../report/width.js'
import { addTargetOptions, type TargetOptions } from './common.js'
import { withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'

export interface LocksOptions extends TargetOptions {
  watch?: boolean
  interval?: string
}

export function registerLocks(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('locks')
    .description('advisory locks held or awaited in a database right now (pg_locks joined with pg_stat_activity), waiting first')
    .option('--watch', 'redraw every --interval until Ctrl-C (or --run-timeout, when given)')
    .option('--interval <duration>', 'with --watch: how often to redraw (default 1s)')
  addTargetOptions(cmd, ctx, { keep: false, stepTimeout: false, embedded: false })
  cmd.action(async (o: LocksOptions, self: Command) => exit(await locksCommand(ctx, o, self)))
  cmd.addHelpText(
    'after',
    '\nExamples:\n  $ race locks --database-url postgres://app@db:5432/app\n  $ race locks --watch --interval 500ms\n  $ race run deadlock --hold 20s    (it prints how to point race locks at it)',
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

export function locksTable(c: Style, rows: readonly LockRow[], w = columns()): string {
  if (!rows.length) return c.dim('no advisory locks held or awaited in this database')
  const granted = (r: LockRow) => (r.granted ? c.green('yes') : c.yellow(`waiting${r.waitingFor.length ? ` for ${r.waitingFor.join(', ')}` : ''}`))
  const key = (r: LockRow) => r.key ?? `(${r.pair![0]}, ${r.pair![1]})`
  const mode = (r: LockRow) => r.mode.replace(/Lock$/, '')
  const age = (r: LockRow) => (r.xactAgeMs === null ? '' : fmtMs(r.xactAgeMs))
  const query = (r: LockRow) => r.query.replace(/\s+/g, ' ')
  const wide = rows.map((r) => [r.pid, key(r), mode(r), granted(r), r.state ?? '', age(r), query(r)])
  const head = ['pid', 'key', 'mode', 'granted', 'state', 'xact age', 'query']
  const natural = head.map((h, i) => Math.max(width(h), ...wide.map((r) => width(String(r[i])))))
  let table: string
  if (natural.reduce((a, x) => a + x, 0) + 3 * head.length + 1 <= w) table = fitTable(c, head, wide, [], w)
  else {
    // Narrow: who holds or waits for what on one row, the query under it across the whole table (cut at its edge).
    const body = rows.flatMap((r) => [
      [r.pid, key(r), `${mode(r)} ${r.granted ? c.green('held') : granted(r)}`, [r.state ?? '', age(r)].filter(Boolean).join(', ')],
      [{ content: c.dim(query(r)), colSpan: 4, overflow: 'cut' as const }],
    ])
    table = fitTable(c, ['pid', 'key', 'lock', 'state, xact age'], body, [{ shrink: 0 }, { shrink: 0 }, { min: 14 }, { min: 10 }], w)
  }
  const waiting = rows.filter((r) => !r.granted).length
  return `${table}\n${rows.length - waiting} held, ${waiting} waiting`
}

export async function locksCommand(ctx: RunContext, o: LocksOptions, cmd?: Command): Promise<number> {
  const c = ctx.style ?? plain
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
  // --watch runs until Ctrl-C; --run-timeout, when given, still ends it (every refresh is bounded on its own).
  const limited = !o.watch || cmd?.getOptionValueSource('runTimeout') === 'cli'
  if (!limited) bounds.runTimeoutMs = 0
  const read = (sql: Sql) => {
    const ms = bounds.connectTimeoutMs + 10_000
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new RunError(`the server did not answer the pg_locks query within ${ms / 1000}s`)), ms)))
    return Promise.race([advisoryLocks(sql), late, ctx.whenAborted()]).finally(() => clearTimeout(timer))
  }
  return withLab(ctx, o.databaseUrl, bounds, async (driver) => {
    const lab = driver as PostgresLab
    if (!o.watch) {
      const rows = await read(lab.control)
      if (o.json) process.stdout.write(JSON.stringify({ server: { version: lab.server.version }, target: target.label, locks: rows }, null, 2) + '\n')
      else process.stdout.write(locksTable(c, rows) + '\n')
      return 0
    }
    // Watch until Ctrl-C (or, when given, until just before --run-timeout).
    const until = limited ? Date.now() + bounds.runTimeoutMs - Math.min(2000, bounds.runTimeoutMs / 2) : Infinity
    const tty = process.stdout.isTTY
    while (Date.now() + intervalMs < until) {
      const rows = await read(lab.control)
      const w = columns()
      const head = joinFit([c.bold('race locks'), c.dim(target.label), c.dim(`every ${formatDuration(intervalMs)}`), c.dim(new Date().toISOString().slice(11, 19)), c.dim('Ctrl-C stops')], c.dim('  ·  '), w, 2)
      process.stdout.write((tty ? '\x1b[2J\x1b[H' : '') + `${head.join('\n')}\n${locksTable(c, rows, w)}\n${tty ? '' : '\n'}`)
      await Promise.race([sleep(intervalMs), ctx.whenAborted()])
    }
    process.stdout.write(c.dim(`stopped watching at --run-timeout ${formatDuration(bounds.runTimeoutMs)}\n`))
    return 0
  })
}
