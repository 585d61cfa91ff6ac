// Loaded by npm test's runner (scripts/test.ts) into each test file's process, through NODE_OPTIONS: when the process
// exits it writes the CPU time (user + system) it used, and the children it waited for used (race child processes,
// npm, the embedded servers it started and stopped), to a file of the runner's folder, so that the runner's summary
// can print it beside the file's wall time. A file whose time is mostly waiting (on a server, a child, a lock held on
// purpose) shows little CPU; CPU time does not grow with the load other jobs put on the machine, wall time does.
// Not counted: servers the file did not start (the machine's PostgreSQL 15, MariaDB), children it left running.
import fs from 'node:fs'
import path from 'node:path'

const dir = process.env.RACE_TEST_CPU_DIR
if (dir) {
  // What the test file starts sees the environment the runner was given: no preload, no folder.
  const before = process.env.RACE_TEST_CPU_NODE_OPTIONS
  if (before) process.env.NODE_OPTIONS = before
  else delete process.env.NODE_OPTIONS
  delete process.env.RACE_TEST_CPU_DIR
  delete process.env.RACE_TEST_CPU_NODE_OPTIONS
}

/** Milliseconds of CPU: this process's own and its waited-for children's (Linux /proc/self/stat, in 1/100 s). */
export function cpuOf(stat: string): { self: number; children: number } | null {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  // after the name: state (3), ..., utime (14), stime (15), cutime (16), cstime (17)
  const [utime, stime, cutime, cstime] = f.slice(11, 15)
  if (![utime, stime, cutime, cstime].every(Number.isFinite)) return null
  return { self: (utime + stime) * 10, children: (cutime + cstime) * 10 }
}

const file = process.argv[1]
if (dir && file?.endsWith('.test.js')) {
  process.on('exit', () => {
    let cpu: { self: number; children: number } | null = null
    try {
      cpu = cpuOf(fs.readFileSync('/proc/self/stat', 'utf8'))
    } catch {
      // no /proc: this process's own time alone
    }
    if (!cpu) {
      const u = process.cpuUsage()
      cpu = { self: (u.user + u.system) / 1000, children: 0 }
    }
    try {
      fs.writeFileSync(path.join(dir, `${process.pid}.json`), JSON.stringify({ file, ...cpu }))
    } catch {
      // the runner's folder is gone: the summary says the file's CPU is unknown
    }
  })
}
