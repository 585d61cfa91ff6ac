// npm test: every test file (dist/test/<area>/<file>.test.js), two at a time, the longest first, then the few that
// must run alone (SERIAL), one at a time. `node --test` sorts
// the files it is given by name, so the longest (the soundness harness) started last and ran alone at the end; run()
// of node:test keeps the order it is given. Each file still runs in a process of its own, with the spec reporter;
// the exit code is 1 when a test failed. One file: node --test --test-concurrency=1 --test-reporter=spec <file>.
import fs from 'node:fs'
import path from 'node:path'
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
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
 * Files that run after the others, one at a time: each drives a shared server's timing (InnoDB's INNODB_TRX copies
 * and lock waits on the machine's MariaDB; which session PostgreSQL's deadlock detector cancels, on the machine's
 * PostgreSQL 15, compared between searches), and in a fresh clone's npm test, two at a time, they failed beside
 * another file that used the same server (an isolation level not read in time, a deadlock's other victim).
 */
export const SERIAL = (name: string): boolean => name.startsWith('innodb/') || name === 'app/app-mariadb' || name.startsWith('cli/explore-jobs')

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

/** Runs `files` `concurrency` at a time with the spec reporter; resolves when they are done. */
function runFiles(files: string[], concurrency: number): Promise<void> {
  return new Promise((resolve) => {
    const stream = run({ files, concurrency })
    stream.on('test:fail', () => {
      process.exitCode = 1
    })
    // node:test/reporters' spec is a Transform class on Node 20
    const out = stream.compose(new (spec as unknown as new () => NodeJS.ReadWriteStream)())
    out.on('end', () => resolve())
    out.pipe(process.stdout, { end: false })
  })
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const files = testFiles()
  const name = (f: string) => path.relative(TESTS, f).slice(0, -'.test.js'.length)
  await runFiles(files.filter((f) => !SERIAL(name(f))), 2)
  await runFiles(files.filter((f) => SERIAL(name(f))), 1)
}
