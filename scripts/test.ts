// npm test: every test file (dist/test/<area>/<file>.test.js), two at a time, the longest first, then the few that
// must not share their server with another file (SERIAL), one at a time per server (two lanes, side by side).
// `node --test` sorts the files it is given by name, so the longest (the soundness harness) started last and ran
// alone at the end; run() of node:test keeps the order it is given. Each file still runs in a process of its own,
// with the spec reporter; the exit code is 1 when a test failed. At the end it prints each file's wall time (the
// slowest 15) and its CPU time (scripts/test-cpu.ts), their sums and the tail's share. `--lanes N` runs N files at a time
// in the parallel part. One file: node --test --test-concurrency=1 --test-reporter=spec <file>.
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
export const LANES = 2

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
export function runnerArgs(argv: string[]): { lanes: number; only: string[] } {
  const only: string[] = []
  let lanes = LANES
  for (let i = 0; i < argv.length; i++) {
    const m = /^--lanes(?:=(.*))?$/.exec(argv[i])
    if (!m) {
      only.push(argv[i])
      continue
    }
    const v = m[1] ?? argv[++i]
    if (!/^[1-9]\d*$/.test(v ?? '')) throw new Error(`--lanes takes a whole number of files at a time, 1 or more (got ${v ?? 'nothing'})`)
    lanes = Number(v)
  }
  return { lanes, only }
}

/**
 * Runs `files` `concurrency` at a time with the spec reporter, its output written to `out`; resolves when they are
 * done, with each file's time.
 */
function runFiles(files: string[], concurrency: number, sink: NodeJS.WritableStream = process.stdout): Promise<{ file: string; ms: number }[]> {
  return new Promise((resolve) => {
    const times: { file: string; ms: number }[] = []
    if (!files.length) return resolve(times)
    const stream = run({ files, concurrency })
    stream.on('test:fail', () => {
      process.exitCode = 1
    })
    // A file's own process is reported as a test named by its path, at nesting 0, when it ends (test:complete)
    stream.on('test:complete', (data: { name: string; file?: string; nesting: number; details: { duration_ms: number } }) => {
      if (data.nesting === 0 && data.file !== undefined && data.name === data.file) times.push({ file: data.file, ms: data.details.duration_ms })
    })
    // node:test/reporters' spec is a Transform class on Node 20
    const out = stream.compose(new (spec as unknown as new () => NodeJS.ReadWriteStream)())
    out.on('end', () => resolve(times))
    out.pipe(sink, { end: false })
  })
}

/** A sink that keeps what is written, to be printed once the lane written beside it is done (no mixed lines). */
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
  const { lanes, only } = args
  const name = (f: string) => path.relative(TESTS, f).slice(0, -'.test.js'.length)
  const files = testFiles().filter((f) => !only.length || only.some((o) => name(f).startsWith(o)))
  // Each file's process loads scripts/test-cpu.ts, which writes its CPU time here as it exits.
  const cpuDir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-test-cpu-'))
  process.env.RACE_TEST_CPU_DIR = cpuDir
  process.env.RACE_TEST_CPU_NODE_OPTIONS = process.env.NODE_OPTIONS ?? ''
  const preload = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'test-cpu.js')).href
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import="${preload}"`.trim()
  const t0 = performance.now()
  const parallel = await runFiles(files.filter((f) => !SERIAL(name(f))), lanes)
  const t1 = performance.now()
  // The tail: the MariaDB lane printed as it runs, the PostgreSQL 15 lane held and printed after it
  const held = new Held()
  const [maria, pg15] = await Promise.all([
    runFiles(files.filter((f) => serialServer(name(f)) === 'MariaDB'), 1),
    runFiles(files.filter((f) => serialServer(name(f)) === 'PostgreSQL 15'), 1, held),
  ])
  process.stdout.write(Buffer.concat(held.chunks))
  const t2 = performance.now()
  const cpu = cpuTimes(cpuDir)
  fs.rmSync(cpuDir, { recursive: true, force: true })
  const times = [...parallel.map((t) => ({ ...t, serial: false })), ...[...maria, ...pg15].map((t) => ({ ...t, serial: true }))]
  const rows = times.map((t) => ({ ...t, file: name(t.file), cpu: cpu.get(path.resolve(t.file)) }))
  process.stdout.write(timeSummary(rows, { parallel: t1 - t0, serial: t2 - t1 }, 15, lanes).join('\n') + '\n')
}
