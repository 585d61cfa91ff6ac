// What race's own servers (the embedded PostgreSQL, a PgBouncer) need from the local machine: a free loopback
// port, whether a process still runs, the OS user to run them as when race runs as root.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import { RunError } from '../errors.js'

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })
}

export function alive(pid: number): boolean {
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
 * PostgreSQL and PgBouncer refuse to run as root: then they run as the postgres OS user (undefined: race is not
 * root, they run as race). `refusal`: the one line when there is no such user.
 */
export function postgresUser(refusal: string): { uid: number; gid: number } | undefined {
  if (os.userInfo().uid !== 0) return undefined
  // /etc/passwd first: two `id` processes cost more than the rest of the start.
  try {
    const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))
    const [, , uid, gid] = line?.split(':') ?? []
    if (line && /^\d+$/.test(uid) && /^\d+$/.test(gid)) return { uid: Number(uid), gid: Number(gid) }
  } catch {
    /* no /etc/passwd: ask id (NSS) */
  }
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
    return { uid, gid }
  } catch {
    throw new RunError(refusal)
  }
}

/** The last two lines of a server's log that match `worth` (else its last line), for a one-line error. */
export function logTail(log: string, worth: RegExp): string {
  const lines = log.trim().split('\n').filter((l) => worth.test(l))
  return (lines.slice(-2).join(' | ') || log.trim().split('\n').slice(-1)[0] || 'no output').slice(0, 400)
}
