// npm test: every test file (dist/test/<area>/<file>.test.js), two at a time, the longest first, then the few that
// must not share their server with another file (SERIAL), one at a time per server (two lanes, side by side).
// `node --test` sorts the files it is given by name, so the longest (the soundness harness) started last and ran
// alone at the end; run() of node:test keeps the order it is given. Each file still runs in a process of its own,
// with the spec reporter; the exit code is 1 when a test failed. At the end it prints each file's wall time (the
// slowest 15), their sum and the tail's share. One file: node --test --test-concurrency=1 --test-reporter=spec <file>.
import fs from 'node:fs'
import path from 'node:path'
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'

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

/** One file's wall time: its process, start to exit, as node:test's run() reports it (a top-level test:complete). */
export interface FileTime {
  file: string
  ms: number
  serial: boolean
}

/**
 * The lines printed after the spec output: the slowest `top` files with their seconds, then the sum of all files'
 * times, each phase's wall time and the SERIAL tail's share of the whole wall time, so a CI log says where time goes.
 */
export function timeSummary(times: FileTime[], wall: { parallel: number; serial: number }, top = 15): string[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`
  const sorted = [...times].sort((a, b) => b.ms - a.ms)
  const width = Math.max(0, ...sorted.slice(0, top).map((t) => t.file.length))
  const sum = times.reduce((n, t) => n + t.ms, 0)
  const serialSum = times.filter((t) => t.serial).reduce((n, t) => n + t.ms, 0)
  const whole = wall.parallel + wall.serial
  const share = whole > 0 ? Math.round((100 * wall.serial) / whole) : 0
  return [
    `# the ${Math.min(top, sorted.length)} slowest of ${times.length} test files (wall time of each file's process):`,
    ...sorted.slice(0, top).map((t) => `#   ${t.file.padEnd(width)}  ${s(t.ms).padStart(8)}${t.serial ? '  (serial)' : ''}`),
    `# all files added up: ${s(sum)}; two at a time: ${s(wall.parallel)} of wall time; ` +
      `the serial tail (${times.filter((t) => t.serial).length} files, ${s(serialSum)}): ${s(wall.serial)}, ${share}% of the ${s(whole)} in all`,
  ]
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
  const only = process.argv.slice(2)
  const name = (f: string) => path.relative(TESTS, f).slice(0, -'.test.js'.length)
  const files = testFiles().filter((f) => !only.length || only.some((o) => name(f).startsWith(o)))
  const t0 = performance.now()
  const parallel = await runFiles(files.filter((f) => !SERIAL(name(f))), 2)
  const t1 = performance.now()
  // The tail: the MariaDB lane printed as it runs, the PostgreSQL 15 lane held and printed after it
  const held = new Held()
  const [maria, pg15] = await Promise.all([
    runFiles(files.filter((f) => serialServer(name(f)) === 'MariaDB'), 1),
    runFiles(files.filter((f) => serialServer(name(f)) === 'PostgreSQL 15'), 1, held),
  ])
  process.stdout.write(Buffer.concat(held.chunks))
  const t2 = performance.now()
  const times = [...parallel.map((t) => ({ ...t, serial: false })), ...[...maria, ...pg15].map((t) => ({ ...t, serial: true }))]
  process.stdout.write(timeSummary(times.map((t) => ({ ...t, file: name(t.file) })), { parallel: t1 - t0, serial: t2 - t1 }).join('\n') + '\n')
}
