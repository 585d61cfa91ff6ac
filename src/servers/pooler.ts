// The pooler of the advisory-lock article (§6), for real: a PgBouncer of race's own between the sessions and
// the server. It listens on a free loopback port, with its own config in a fresh `race-pgb-*` folder marked
// with its owner (like the embedded server), runs as the postgres OS user when race runs as root (PgBouncer
// refuses root), and is stopped at the end, on errors and on Ctrl-C; after a SIGKILL of race the next race
// command reaps it. Its admin console says which server connection (backend pid) each client is linked to:
// the facts race shows per step and uses to detect a blocked step, never a guess from time.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import postgres, { type Sql } from 'postgres'
import { RunError, UsageError } from '../errors.js'
import { onCleanup, type RunContext } from '../lifecycle.js'
import type { PoolMode } from '../scenario.js'
import { endQuietly } from '../db/connect.js'
import { connInfo } from '../db/pgwire.js'
import type { Target } from '../db/target.js'
import { alive, freePort, logTail, postgresUser } from './local.js'

export const POOLER_DIR_PREFIX = 'race-pgb-'
const OWNER_FILE = 'race-owner.json'
/** The database name clients use (an alias: the server's own database is in the [databases] line). */
export const POOL_DB = 'race'

export interface PoolerConfig {
  mode: PoolMode
  size: number
  /** server_reset_query_always: reset after every transaction, in every mode. */
  resetAlways: boolean
}

/** How every server connection of the pool is set up when it opens, and again after each reset. */
export interface ServerSetup {
  /** The schema race works in (search_path); PgBouncer 1.18 refuses it as a client's startup parameter. */
  schema: string
  /** Further settings, e.g. default_transaction_isolation for race bench. */
  settings?: Record<string, string>
}

export interface StartOptions {
  target: Target
  config: PoolerConfig
  setup: ServerSetup
  connectTimeoutMs: number
  startTimeoutMs?: number
  /** The run the pooler belongs to: stopped and removed by its cleanup. Without: by the caller. */
  context?: RunContext
}

export interface Pooler {
  /** e.g. '1.18.0' */
  version: string
  port: number
  dir: string
  config: PoolerConfig
  /** Where clients connect: the pool's own database alias, user and password. */
  target: Target
  /** The reset query the pool runs (session mode, or after every transaction with resetAlways). */
  resetQuery: string
  /** The query each server connection runs when it opens. */
  connectQuery: string
  /** The backend each client (by application_name) is linked to right now, as the pooler reports it. */
  links(): Promise<Map<string, number>>
  /** The backend pid of every server connection of the pool. */
  backends(): Promise<number[]>
  /** Drops every connection of the pool (KILL, then RESUME): nothing of one trial's session state reaches the next. */
  recycle(): Promise<void>
  stop(): Promise<void>
}

const INSTALL = 'install it (Debian, Ubuntu: apt-get install -y pgbouncer; macOS: brew install pgbouncer), or run without --pooler'

/** Where pgbouncer usually is when it is not on PATH (Debian puts it in /usr/sbin). */
export const PGBOUNCER_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin', '/opt/homebrew/bin']

/** The pgbouncer binary: RACE_PGBOUNCER, else PATH, else the usual sbin folders. Missing: one line, exit 3. */
export function findPgbouncer(env: NodeJS.ProcessEnv = process.env, usual: readonly string[] = PGBOUNCER_DIRS): string {
  const explicit = env.RACE_PGBOUNCER
  const dirs = [...(env.PATH ?? '').split(path.delimiter).filter(Boolean), ...usual]
  const candidates = explicit ? [explicit] : dirs.map((d) => path.join(d, 'pgbouncer'))
  for (const c of candidates) {
    try {
      fs.accessSync(c, fs.constants.X_OK)
      if (fs.statSync(c).isFile()) return c
    } catch {
      /* not there: try the next */
    }
  }
  if (explicit) throw new RunError(`RACE_PGBOUNCER=${explicit} is not an executable file: point it at pgbouncer, or unset it and ${INSTALL}`)
  throw new RunError(`PgBouncer is not installed (no pgbouncer on PATH or in /usr/sbin): ${INSTALL}`)
}

export function pgbouncerVersion(bin: string): string {
  try {
    const out = execFileSync(bin, ['--version'], { timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] }).toString()
    return /PgBouncer\s+(\S+)/.exec(out)?.[1] ?? out.split('\n')[0].trim()
  } catch (e) {
    throw new RunError(`${bin} --version failed (${(e as Error).message.split('\n')[0]}): is it PgBouncer? ${INSTALL}`)
  }
}




/** The pgbouncer pid of a race folder, only if that process's command line names the folder's config. */
function pgbouncerPid(dir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(path.join(dir, 'pgbouncer.pid'), 'utf8').trim())
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    return pid > 0 && cmd.includes(path.join(dir, 'pgbouncer.ini')) ? pid : undefined
  } catch {
    return undefined
  }
}

/**
 * Stops the PgBouncers a race process that no longer exists (SIGKILL) left behind, and removes their folders.
 * Only folders race marked as its own, and only a process whose command line names that folder's config.
 */
export async function reapPoolers(log: (line: string) => void = () => {}): Promise<number> {
  const tmp = os.tmpdir()
  let reaped = 0
  let names: string[]
  try {
    names = fs.readdirSync(tmp)
  } catch {
    return 0
  }
  for (const name of names) {
    if (!name.startsWith(POOLER_DIR_PREFIX)) continue
    const dir = path.join(tmp, name)
    let owner: { pid: number }
    try {
      owner = JSON.parse(fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8'))
    } catch {
      continue // not marked by race (or still being created): leave it alone
    }
    if (alive(owner.pid)) continue
    const pid = pgbouncerPid(dir)
    if (pid && alive(pid)) {
      try {
        process.kill(pid, 'SIGTERM')
      } catch {
        /* already gone */
      }
      for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20))
      if (alive(pid)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          /* gone */
        }
      }
    }
    fs.rmSync(dir, { recursive: true, force: true })
    reaped++
    log(`removed a PgBouncer left behind by race process ${owner.pid} (${dir})`)
  }
  return reaped
}

/** A value of PgBouncer's [databases] line: plain when it can be, else quoted with '' for a quote. */
function connValue(v: string): string {
  return /^[A-Za-z0-9_.\-/:]+$/.test(v) ? v : `'${v.replace(/'/g, "''")}'`
}

/** A line of the auth file: "user" "password", with "" for a double quote. */
function authLine(user: string, password: string): string {
  const q = (s: string) => `"${s.replace(/"/g, '""')}"`
  return `${q(user)} ${q(password)}\n`
}

/** SET statements for the server connections: the run's schema, then any further settings. */
export function setupSql(setup: ServerSetup): string {
  const lit = (s: string) => `'${s.replace(/'/g, "''")}'`
  const sets = [`set search_path to "${setup.schema.replace(/"/g, '""')}"`]
  for (const [k, v] of Object.entries(setup.settings ?? {})) {
    if (!/^[a-z_]+$/.test(k)) throw new UsageError(`not a setting name: ${k}`)
    sets.push(`set ${k} to ${lit(v)}`)
  }
  return sets.join('; ')
}

/**
 * DISCARD ALL spelled out as the PostgreSQL manual lists it (DISCARD ALL itself cannot run in the statement
 * list a reset query is), then the run's search_path again: the reset wipes every session state a client left,
 * and the next client still finds the run's tables.
 */
export function resetSql(setup: ServerSetup): string {
  return `close all; set session authorization default; reset all; deallocate all; unlisten *; select pg_advisory_unlock_all(); discard plans; discard temp; discard sequences; ${setupSql(setup)}`
}

export function describePool(version: string, c: PoolerConfig): string {
  return `PgBouncer ${version}, ${c.mode} mode, pool size ${c.size}${c.resetAlways ? ', server_reset_query_always' : ''}`
}

export async function startPooler(o: StartOptions): Promise<Pooler> {
  const bin = findPgbouncer()
  const version = pgbouncerVersion(bin)
  await reapPoolers()
  const ids = postgresUser('PgBouncer refuses to run as root and there is no postgres user to run it as: create one (useradd postgres), or run race as another user')
  const info = connInfo(o.target)
  const startTimeoutMs = o.startTimeoutMs ?? 10_000
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), POOLER_DIR_PREFIX))
  let child: ChildProcess | undefined
  let admin: Sql | undefined
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true })
  const killChild = () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  // Registered before anything can fail, so that neither the process nor the folder outlives race.
  const unregister = onCleanup(o.context, 'PgBouncer', () => stop(), () => {
    killChild()
    removeDir()
  })
  fs.writeFileSync(path.join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, started: new Date().toISOString() }))
  if (ids) fs.chownSync(dir, ids.uid, ids.gid)

  // Clients log in with the server's user name and, when the target has none, a password of the pool's own.
  const password = info.password || randomBytes(18).toString('base64url')
  const users = path.join(dir, 'users.txt')
  fs.writeFileSync(users, authLine(info.user, password), { mode: 0o600 })
  const connectQuery = setupSql(o.setup)
  const resetQuery = resetSql(o.setup)
  const host = info.host.replace(/^\[(.*)\]$/, '$1')
  const c = o.config

  async function stop(): Promise<void> {
    unregister()
    await endQuietly(admin, 0)
    const ch = child
    if (ch && ch.exitCode === null && ch.signalCode === null) {
      const exited = new Promise<void>((r) => ch.once('exit', () => r()))
      ch.kill('SIGTERM') // immediate shutdown: server connections closed, their backends end
      const t = setTimeout(() => ch.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(t)
    }
    removeDir()
  }

  const ini = (port: number) =>
    [
      '; written by race for one run; removed when the run ends',
      '[databases]',
      `${POOL_DB} = host=${connValue(host)} port=${info.port} dbname=${connValue(info.database)} user=${connValue(info.user)} connect_query=${connValue(connectQuery)}`,
      '',
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
      'logfile =',
      'auth_type = scram-sha-256',
      `auth_file = ${users}`,
      `admin_users = ${info.user}`,
      `pool_mode = ${c.mode}`,
      `default_pool_size = ${c.size}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      `max_db_connections = ${c.size}`,
      'max_client_conn = 1000',
      `server_reset_query = ${resetQuery}`,
      `server_reset_query_always = ${c.resetAlways ? 1 : 0}`,
      // No hidden statements on the run's backends: no sanity check before reuse.
      'server_check_query =',
      'server_idle_timeout = 0',
      'server_lifetime = 86400',
      `server_connect_timeout = ${Math.max(1, Math.ceil(o.connectTimeoutMs / 1000))}`,
      'server_login_retry = 1',
      `server_tls_sslmode = ${info.sslmode || 'disable'}`,
      'log_connections = 0',
      'log_disconnections = 0',
      'application_name_add_host = 0',
      '',
    ].join('\n')

  try {
    let port = 0
    let lastLog = ''
    for (let attempt = 0; attempt < 3 && !port; attempt++) {
      const p = await freePort()
      const file = path.join(dir, 'pgbouncer.ini')
      fs.writeFileSync(file, ini(p), { mode: 0o600 })
      if (ids) {
        fs.chownSync(file, ids.uid, ids.gid)
        fs.chownSync(users, ids.uid, ids.gid)
      }
      // Own process group: a terminal's Ctrl-C reaches race, which stops PgBouncer in order.
      child = spawn(bin, [file], { ...(ids ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } })
      const up = await new Promise<boolean>((resolve, reject) => {
        let log = ''
        const timer = setTimeout(() => reject(new RunError(`PgBouncer did not start within ${startTimeoutMs / 1000}s: ${logTail(log, /FATAL|ERROR|WARNING|could not|bind/i)}`)), startTimeoutMs)
        child!.stderr!.on('data', (d: Buffer) => {
          log = (log + d.toString()).slice(-4000)
          lastLog = log
          if (/process up/.test(log)) {
            clearTimeout(timer)
            resolve(true)
          }
        })
        child!.once('exit', () => {
          clearTimeout(timer)
          resolve(false) // e.g. the port was taken meanwhile: try another
        })
        child!.once('error', (e) => {
          clearTimeout(timer)
          reject(new RunError(`PgBouncer could not be started: ${e.message}`))
        })
      })
      if (up) port = p
      else if (!/bind|address already in use/i.test(lastLog)) throw new RunError(`PgBouncer exited while starting: ${logTail(lastLog, /FATAL|ERROR|WARNING|could not|bind/i)}`)
    }
    if (!port) throw new RunError(`PgBouncer could not listen on a free port: ${logTail(lastLog, /FATAL|ERROR|WARNING|could not|bind/i)}`)
    child!.stderr!.removeAllListeners('data')
    child!.stderr!.resume() // keep draining its log
    const auth = `${encodeURIComponent(info.user)}:${encodeURIComponent(password)}`
    const url = `postgres://${auth}@127.0.0.1:${port}/${POOL_DB}`
    admin = postgres(`postgres://${auth}@127.0.0.1:${port}/pgbouncer`, {
      max: 1,
      fetch_types: false,
      prepare: false,
      onnotice: () => {},
      connect_timeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
      idle_timeout: 0,
      max_lifetime: null,
      connection: { application_name: 'race pooler admin' },
    })
    await admin.unsafe('show version')
    const show = async (what: 'clients' | 'servers') => (await admin!.unsafe(`show ${what}`)) as unknown as Record<string, string>[]
    return {
      version,
      port,
      dir,
      config: c,
      target: { kind: 'url', url, label: `PgBouncer on 127.0.0.1:${port}` },
      resetQuery,
      connectQuery,
      async links() {
        // Two views, cross-checked: the client points at the server and the server at the client.
        const clients = await show('clients')
        const servers = new Map((await show('servers')).map((s) => [s.ptr, s]))
        const out = new Map<string, number>()
        for (const cl of clients) {
          if (cl.database !== POOL_DB || !cl.link) continue
          const sv = servers.get(cl.link)
          if (sv && sv.link === cl.ptr && Number(sv.remote_pid) > 0) out.set(cl.application_name, Number(sv.remote_pid))
        }
        return out
      },
      async backends() {
        return (await show('servers')).filter((s) => s.database === POOL_DB && Number(s.remote_pid) > 0).map((s) => Number(s.remote_pid))
      },
      async recycle() {
        await admin!.unsafe(`kill ${POOL_DB}`)
        await admin!.unsafe(`resume ${POOL_DB}`)
      },
      stop,
    }
  } catch (e) {
    await stop()
    if (e instanceof RunError) throw e
    throw new RunError(`PgBouncer could not be started: ${(e as Error).message}`)
  }
}
