// The machine's CPU time around a measured run, for the bench's floors (issue 41): a run that keeps the server and
// race busy for C CPU-seconds cannot end sooner than C / cores on this machine, however its work is spread. Read
// from /proc/stat (Linux): every process's time, the server's backends included, so another job on the machine
// adds to it (the figure is printed as measured, with that said). Undefined where /proc/stat cannot be read.
import fs from 'node:fs'
import os from 'node:os'

/** Milliseconds of busy CPU time on the whole machine since boot (user, nice, system, irq, softirq, steal). */
export function busyMs(): number | undefined {
  try {
    const line = fs.readFileSync('/proc/stat', 'latin1').split('\n', 1)[0]
    const f = line.trim().split(/\s+/)
    if (f[0] !== 'cpu') return undefined
    const [user, nice, system, , , irq, softirq, steal] = f.slice(1).map(Number)
    const ticks = user + nice + system + irq + softirq + (steal || 0)
    // USER_HZ is 100 on every Linux this runs on (sysconf(_SC_CLK_TCK)); Node has no call for it.
    return Number.isFinite(ticks) ? ticks * 10 : undefined
  } catch {
    return undefined
  }
}

/** The cores this process may use (Node 20 has availableParallelism: package.json engines). */
export function cores(): number {
  return os.availableParallelism()
}

/** Runs `fn`, returning its result with the machine's busy CPU milliseconds meanwhile (undefined: not readable). */
export async function withCpu<T>(fn: () => Promise<T>): Promise<{ value: T; cpuMs?: number }> {
  const a = busyMs()
  const value = await fn()
  const b = busyMs()
  return { value, cpuMs: a !== undefined && b !== undefined ? b - a : undefined }
}
