// npm test: every test file (dist/test/<area>/<file>.test.js), three at a time (LANES), the longest first; the few that must not
// share their server with another file (SERIAL: one at a time per server) run in a lane of their own, MariaDB's beside
// the others, each while no other file opens its server (nextJob, BESIDE), PostgreSQL 15's after the others (all of
// them after the others when DATABASE_URL is set, or with --tail-after). `node --test` sorts the files it is given by name, so the longest (the soundness harness) started last and
// ran alone at the end; here each file is its own run() of node:test, started in the order given. Each file runs in a
// process of its own, with the spec reporter, its output printed whole when it ends; the exit code is 1 when a test
// failed. At the end it prints each file's wall time (the slowest 15) and its CPU time (scripts/test-cpu.ts), their
// sums, the tail's share and the tests counted. `--lanes N` runs N files at a time (besides the serial lane).
// One file: node --test --test-concurrency=1 --test-reporter=spec <file>.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
import { Writable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'

const TESTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'test')

/**
 * The slowest files, longest first (CONTRIBUTING.md, "What CI runs"): started first, so none runs alone at the end.
 * Not package/installed: it races the checkout's Prisma example, whose client app/app-layers generates (it makes it
 * itself when it is missing, but two files writing one generated folder at once are better avoided).
 */
export const FIRST = [
  'soundness/soundness',
  'soundness/kept',
  'soundness/rows',
  'cli/workflow',
  'cli/readme',
  'cli/cache',
  'cli/explore',
  'app/app-levels',
  'scenarios/trials',
  'isolation/transcript',
]

/**
 * Files that run after the others, one at a time per server: each drives a shared server's timing (InnoDB's
 * INNODB_TRX copies and lock waits on the machine's MariaDB; which session PostgreSQL's deadlock detector cancels, on
 * the machine's PostgreSQL 15, compared between searches), and in a fresh clone's npm test, two at a time, they
 * failed beside another file that used the same server (an isolation level not read in time, a deadlock's other
 * victim). The MariaDB files and the PostgreSQL 15 files share no server (none of the first opens PostgreSQL, none of
 * the second MariaDB), so the two lanes run side by side: two files at a time, never two on one server.
 */
export function serialServer(name: string): 'MariaDB' | 'PostgreSQL 15' | null {
  if (name.startsWith('innodb/') || name === 'app/app-mariadb') return 'MariaDB'
  if (name.startsWith('cli/explore-jobs')) return 'PostgreSQL 15'
  return null
}
export const SERIAL = (name: string): boolean => serialServer(name) !== null

/** Files at a time in the parallel part (CONTRIBUTING.md, "Two files at a time": 3 measured against 2). */
export const LANES = 3

/** Every test file under dist/test, the FIRST ones first (those that exist), then the others by name. */
export function testFiles(root = TESTS): string[] {
  const all = fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => fs.readdirSync(path.join(root, d.name)).filter((f) => f.endsWith('.test.js')).map((f) => `${d.name}/${f.slice(0, -'.test.js'.length)}`))
    .sort()
  const first = FIRST.filter((f) => all.includes(f))
  return [...first, ...all.filter((f) => !first.includes(f))].map((f) => path.join(root, `${f}.test.js`))
}

/**
 * One file's wall time: its process, start to exit, as node:test's run() reports it (a top-level test:complete); and
 * the CPU time (user + system, milliseconds) its process used, with the children it waited for (scripts/test-cpu.ts),
 * when it was measured.
 */
export interface FileTime {
  file: string
  ms: number
  serial: boolean
  cpu?: { self: number; children: number }
}

/**
 * The lines printed after the spec output: the slowest `top` files with their seconds, then the sum of all files'
 * times, each phase's wall time and the SERIAL tail's share of the whole wall time, so a CI log says where time goes.
 */
export function timeSummary(times: FileTime[], wall: { parallel: number; serial: number }, top = 15, lanes = 2): string[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  const cpuOf = (t: FileTime) => (t.cpu ? t.cpu.self + t.cpu.children : null)
  const sorted = [...times].sort((a, b) => b.ms - a.ms)
  const width = Math.max(0, ...sorted.slice(0, top).map((t) => t.file.length))
  const sum = times.reduce((n, t) => n + t.ms, 0)
  const serialSum = times.filter((t) => t.serial).reduce((n, t) => n + t.ms, 0)
  const measured = times.filter((t) => t.cpu)
  const cpuSum = measured.reduce((n, t) => n + cpuOf(t)!, 0)
  const cpuWall = measured.reduce((n, t) => n + t.ms, 0)
  const whole = wall.parallel + wall.serial
  const share = whole > 0 ? Math.round((100 * wall.serial) / whole) : 0
  const row = (t: FileTime) => {
    const cpu = cpuOf(t)
    const cpuText = cpu === null ? '       ?' : `${s(cpu).padStart(8)} ${`(${Math.round((100 * cpu) / Math.max(1, t.ms))}%)`.padStart(6)}`
    return `#   ${t.file.padEnd(width)}  ${s(t.ms).padStart(8)}  ${cpuText}${t.serial ? '  (serial)' : ''}`
  }
  return [
    `# the ${Math.min(top, sorted.length)} slowest of ${times.length} test files: wall time of each file's process, then its CPU time ` +
      `(user + system, with the children it waited for: race, npm, its embedded servers) and that as a share of its wall time:`,
    ...sorted.slice(0, top).map(row),
    `# all files added up: ${s(sum)} wall, ${s(cpuSum)} CPU (${measured.length} of ${times.length} files measured, ` +
      `${cpuWall > 0 ? Math.round((100 * cpuSum) / cpuWall) : 0}% of their wall time)`,
    `# ${lanes} at a time: ${s(wall.parallel)} of wall time; ` +
      `the serial tail (${times.filter((t) => t.serial).length} files, ${s(serialSum)}): ${s(wall.serial)}, ${share}% of the ${s(whole)} in all`,
  ]
}

/**
 * Each file's CPU time, by the files scripts/test-cpu.ts wrote into `dir` as its processes exited (one a process;
 * a file run more than once, none here, keeps its last).
 */
export function cpuTimes(dir: string): Map<string, { self: number; children: number }> {
  const out = new Map<string, { self: number; children: number }>()
  for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    try {
      const r = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { file: string; self: number; children: number }
      out.set(path.resolve(r.file), { self: r.self, children: r.children })
    } catch {
      // a file half written (its process killed as it exited): that file's CPU is unknown
    }
  }
  return out
}

/** The runner's arguments: `--lanes N` (files at a time in the parallel part, 2 by default), then name prefixes. */
export function runnerArgs(argv: string[]): { lanes: number; only: string[]; tailAfter: boolean } {
  const only: string[] = []
  let lanes = LANES
  let tailAfter = false
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--tail-after') {
      tailAfter = true
      continue
    }
    const m = /^--lanes(?:=(.*))?$/.exec(argv[i])
    if (!m) {
      only.push(argv[i])
      continue
    }
    const v = m[1] ?? argv[++i]
    if (!/^[1-9]\d*$/.test(v ?? '')) throw new Error(`--lanes takes a whole number of files at a time, 1 or more (got ${v ?? 'nothing'})`)
    lanes = Number(v)
  }
  return { lanes, only, tailAfter }
}

/** The machine's servers a serial file drives (serialServer): a file that opens one must not run beside it. */
export type Server = 'MariaDB' | 'PostgreSQL 15'

/**
 * What in a test file's text opens the machine's PostgreSQL 15 or MariaDB (a file that names neither opens its own
 * embedded server, or none). Read from the compiled file, which keeps the source's strings.
 */
export const OPENS: Record<Server, RegExp> = {
  'PostgreSQL 15': /\bserverUrls\(|\bPG15\b|:5432\b/,
  MariaDB: /\bMYSQL_URL\b|mysql:\/\/|:3306\b|from 'mariadb'/,
}

/** A test file as the scheduler sees it: its name, the server it drives alone (if serial), the servers it opens. */
export interface Job {
  name: string
  serial: Server | null
  opens: Server[]
}

/**
 * Files that open the machine's servers through what they run rather than by their own text: cli/readme runs every
 * document's samples again, and some name MariaDB at 127.0.0.1:3306 and PostgreSQL 15 at 127.0.0.1:5432.
 */
export const OPENS_THROUGH: Record<string, Server[]> = { 'cli/readme': ['PostgreSQL 15', 'MariaDB'] }

export function jobOf(name: string, text: string): Job {
  const through = OPENS_THROUGH[name] ?? []
  return { name, serial: serialServer(name), opens: (Object.keys(OPENS) as Server[]).filter((s) => OPENS[s].test(text) || through.includes(s)) }
}

/**
 * The servers whose serial files run beside the others (nextJob). MariaDB's files wait more than they compute
 * (innodb/innodb: 69 s of wall time for 6 s of CPU) and passed beside them in every run measured. PostgreSQL 15's
 * (cli/explore-jobs*) stay a tail: which session its deadlock detector cancels depends on when each session's
 * deadlock_timeout fires, and beside two busy files cli/explore-jobs once saw --jobs 1 and --jobs 2 cancel different
 * sessions of one order (CONTRIBUTING.md, "The slowest first").
 */
export const BESIDE: readonly Server[] = ['MariaDB']

/**
 * The next file to start, or undefined: the first pending one, in order, that fits. `lanes` files that are not serial
 * at a time. The serial files (one at a time per server, serialServer) take one lane more: those of a server in
 * `beside`, beside the others from the start, while no other file opens their server, and a file that opens the
 * server a serial file is waiting for or drives waits for it (that server then has one user, as in a tail of its
 * own); the others only once every other file is done, as a tail (all of them when DATABASE_URL is set: every file
 * may open that server).
 */
export function nextJob(pending: readonly Job[], running: readonly Job[], o: { lanes: number; beside: readonly Server[] }): Job | undefined {
  if (running.length >= o.lanes + 1) return undefined
  const held = (s: Server) => running.some((r) => r.serial === s)
  const used = (s: Server) => running.some((r) => r.serial === s || r.opens.includes(s))
  const waitedFor = (s: Server) => o.beside.includes(s) && pending.some((p) => p.serial === s)
  if (running.filter((r) => !r.serial).length < o.lanes) {
    const j = pending.find((x) => !x.serial && x.opens.every((s) => !held(s) && !waitedFor(s)))
    if (j) return j
  }
  const othersLeft = pending.some((p) => !p.serial) || running.some((r) => !r.serial)
  return pending.find((x) => x.serial && (o.beside.includes(x.serial) || !othersLeft) && !used(x.serial) && x.opens.every((s) => !held(s)))
}

/** One file run with the spec reporter, its output kept until it ends (files that run side by side never mix lines). */
function runFile(file: string, counts: Map<string, number>): Promise<{ file: string; ms: number; out: Buffer }> {
  return new Promise((resolve) => {
    let ms = 0
    const stream = run({ files: [file], concurrency: 1 })
    stream.on('test:fail', () => {
      process.exitCode = 1
    })
    // The run's own counts (tests, pass, fail, ...), added up over the files for the last line
    stream.on('test:diagnostic', (data: { message: string; nesting: number }) => {
      const m = /^(tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(data.message)
      if (m && data.nesting === 0) counts.set(m[1], (counts.get(m[1]) ?? 0) + Number(m[2]))
    })
    // A file's own process is reported as a test named by its path, at nesting 0, when it ends (test:complete)
    stream.on('test:complete', (data: { name: string; file?: string; nesting: number; details: { duration_ms: number } }) => {
      if (data.nesting === 0 && data.file !== undefined && data.name === data.file) ms = data.details.duration_ms
    })
    const held = new Held()
    // node:test/reporters' spec is a Transform class on Node 20
    const out = stream.compose(new (spec as unknown as new () => NodeJS.ReadWriteStream)())
    out.on('end', () => resolve({ file, ms, out: Buffer.concat(held.chunks) }))
    out.pipe(held)
  })
}

/**
 * Runs the jobs as nextJob says, each file's output printed as it ends; resolves with each file's time, and when the
 * last file that is not serial ended (what comes after is the serial tail).
 */
function runJobs(jobs: { job: Job; file: string }[], o: { lanes: number; beside: readonly Server[] }, counts: Map<string, number>): Promise<{ times: FileTime[]; othersDone: number }> {
  return new Promise((resolve) => {
    const pending = [...jobs]
    const running: typeof jobs = []
    const times: FileTime[] = []
    let othersDone = performance.now()
    const fill = () => {
      for (;;) {
        const j = nextJob(
          pending.map((p) => p.job),
          running.map((r) => r.job),
          o,
        )
        if (!j) break
        const item = pending.splice(pending.findIndex((p) => p.job === j), 1)[0]
        running.push(item)
        void runFile(item.file, counts).then((r) => {
          running.splice(running.indexOf(item), 1)
          process.stdout.write(`# ${path.relative(TESTS, r.file)}${item.job.serial ? ` (serial: ${item.job.serial})` : ''}, ${(r.ms / 1000).toFixed(1)} s\n`)
          process.stdout.write(r.out)
          times.push({ file: r.file, ms: r.ms, serial: item.job.serial !== null })
          if (!item.job.serial) othersDone = performance.now()
          fill()
        })
      }
      if (!pending.length && !running.length) resolve({ times, othersDone })
    }
    fill()
  })
}

/** A sink that keeps what is written, to be printed once its file is done (no mixed lines). */
class Held extends Writable {
  chunks: Buffer[] = []
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.chunks.push(Buffer.from(chunk))
    done()
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  // Arguments, when given, keep only the files whose names start with one of them (node dist/scripts/test.js innodb/
  // cli/explore-jobs: the tail alone), in the same order and lanes.
  let args: ReturnType<typeof runnerArgs>
  try {
    args = runnerArgs(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`)
    process.exit(2)
  }
  const { lanes, only, tailAfter } = args
  const name = (f: string) => path.relative(TESTS, f).slice(0, -'.test.js'.length)
  const files = testFiles().filter((f) => !only.length || only.some((o) => name(f).startsWith(o)))
  // Each file's process loads scripts/test-cpu.ts, which writes its CPU time here as it exits.
  const cpuDir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-test-cpu-'))
  process.env.RACE_TEST_CPU_DIR = cpuDir
  process.env.RACE_TEST_CPU_NODE_OPTIONS = process.env.NODE_OPTIONS ?? ''
  const preload = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'test-cpu.js')).href
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import="${preload}"`.trim()
  // With DATABASE_URL set, every file may open the server it names: the serial files then run after the others.
  const beside = tailAfter || process.env.DATABASE_URL ? [] : BESIDE
  const t0 = performance.now()
  const counts = new Map<string, number>()
  const { times, othersDone } = await runJobs(
    files.map((f) => ({ file: f, job: jobOf(name(f), fs.readFileSync(f, 'utf8')) })),
    { lanes, beside },
    counts,
  )
  const t2 = performance.now()
  const cpu = cpuTimes(cpuDir)
  fs.rmSync(cpuDir, { recursive: true, force: true })
  const rows = times.map((t) => ({ ...t, file: name(t.file), cpu: cpu.get(path.resolve(t.file)) }))
  process.stdout.write(timeSummary(rows, { parallel: othersDone - t0, serial: Math.max(0, t2 - othersDone) }, 15, lanes).join('\n') + '\n')
  if (beside.length) process.stdout.write(`# the serial files of ${beside.join(' and ')} ran in a lane of their own beside the others, each while no other file opened its server; the rest were the tail\n`)
  process.stdout.write(`# in all ${files.length} files: ${[...counts].map(([k, v]) => `${k} ${v}`).join(', ')}\n`)
}
