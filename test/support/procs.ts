// Watching processes instead of sleeping: race's embedded servers (by their marked folders), a postmaster's
// busy backends (by process title), and which server backends belong to one race child (by its sockets).
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import { ownPorts } from '../../src/app/foreign.js'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { DIR_PREFIX, runRoots } from '../../src/servers/embedded.js'
import { BIN } from './server.js'

/** The full paths of race's run folders (embedded servers), in every folder race makes them in. */
function runDirs(): string[] {
  return runRoots().flatMap((root) => {
    try {
      return fs.readdirSync(root).filter((d) => d.startsWith(DIR_PREFIX)).map((d) => path.join(root, d))
    } catch {
      return []
    }
  })
}

/** The names of race's run folders (/dev/shm and the temporary folder); other jobs' are among them. */
export function ourDirs(): string[] {
  return runDirs().map((d) => path.basename(d))
}

/** The run folders (full paths) marked as made by race process `pid`: after it exits, there must be none. */
export function runDirsOf(pid: number): string[] {
  return runDirs().filter((d) => ownedBy(d, pid))
}

export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false
  } catch {
    return false
  }
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Backends of a postmaster that are running a statement: their process title ends with the command tag. */
export function busyBackends(postmaster: number): number {
  let n = 0
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid !== postmaster) continue
      const title = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim()
      // Any role: the run's sessions log in as its run role (db/run-role.ts).
      if (/^postgres: \S+ postgres .* SELECT$/.test(title)) n++
    } catch {
      /* the process went away while we looked */
    }
  }
  return n
}

/** The local TCP ports of a process's sockets: pg_stat_activity.client_port tells which backends are its own. */
export function clientPorts(pid: number): Set<number> {
  return ownPorts(pid)
}

/** The folder was made by this race process (embedded.ts marks each folder with its owner's pid). */
function ownedBy(dir: string, pid: number): boolean {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, 'race-owner.json'), 'utf8')).pid === pid
  } catch {
    return false
  }
}

export interface Racing {
  child: ChildProcess
  dir: string
  postmaster: number
  exited: Promise<number | null>
  stderr: () => string
}

/**
 * Starts race on the embedded default (args default: broken with a 20s window), and waits (by looking at the
 * server's backends, not by sleeping a guessed time) until `busy` backends run a statement: the race is under way.
 */
export async function startRacing(args = ['run', 'broken', '--window', '20s', '--step-timeout', '30s'], busy = 2, extraEnv: NodeJS.ProcessEnv = {}): Promise<Racing> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extraEnv }
  delete env.DATABASE_URL
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  child.stderr!.on('data', (d) => (err += d))
  const exited = new Promise<number | null>((r) => child.on('close', (code, sig) => r(code ?? (sig ? -1 : null))))
  for (let i = 0; i < 600; i++) {
    const dir = runDirsOf(child.pid!)[0]
    const pidFile = dir && path.join(dir, 'data', 'postmaster.pid')
    if (pidFile && fs.existsSync(pidFile)) {
      const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0])
      if (postmaster && busyBackends(postmaster) >= busy) {
        return { child, dir, postmaster, exited, stderr: () => err }
      }
    }
    await sleep(25)
  }
  child.kill('SIGKILL')
  throw new Error('race never got to the race')
}

/** Polls `probe` (a database or /proc observation, never a guessed delay) until it returns a value; bounded. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const t0 = Date.now()
  for (;;) {
    const v = await probe()
    if (v !== undefined && v !== false) return v as T
    if (Date.now() - t0 > timeoutMs) throw new Error(`gave up waiting for ${what} after ${timeoutMs}ms`)
    await sleep(10)
  }
}

export interface Child {
  child: ChildProcess
  /** Resolves when race exits: its code (or -1 for a signal), stdout and stderr. */
  done: Promise<{ code: number | null; stdout: string; stderr: string }>
  stderr(): string
}

/** Starts bin/race against `url` without waiting for it (the test acts on the server meanwhile). */
export function spawnRace(args: string[], url?: string, timeoutMs = 60_000): Child {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  for (const k of ['DATABASE_URL', 'PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD', 'COLUMNS', 'GITHUB_ACTIONS']) delete env[k]
  if (url) env.DATABASE_URL = url
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, sig) => {
      clearTimeout(timer)
      resolve({ code: code ?? (sig ? -1 : null), stdout, stderr })
    }),
  )
  return { child, done, stderr: () => stderr }
}
