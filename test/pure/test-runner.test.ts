// npm test's runner (scripts/test.ts): every test file exactly once, the slowest named ones first, each of those a
// file that exists (a renamed file would otherwise drop back to its place by name, unnoticed).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { cpuOf } from '../../scripts/test-cpu.js'
import { BESIDE, cpuTimes, FIRST, jobOf, LANES, nextJob, OPENS, runnerArgs, SERIAL, serialServer, testFiles, timeSummary, type Job } from '../../scripts/test.js'

test('npm test runs every test file once, the slowest first', () => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
  const files = testFiles(root)
  const onDisk = fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => fs.readdirSync(path.join(root, d.name)).filter((f) => f.endsWith('.test.js')).map((f) => path.join(root, d.name, f)))
  assert.deepEqual([...files].sort(), onDisk.sort())
  assert.equal(new Set(files).size, files.length)
  for (const f of FIRST) assert.ok(fs.existsSync(path.join(root, `${f}.test.js`)), `${f} is a test file`)
  assert.deepEqual(
    files.slice(0, FIRST.length).map((f) => path.relative(root, f)),
    FIRST.map((f) => `${f}.test.js`),
  )
})

test("npm test's tail: two lanes, one a server, and no file of one lane opens the other lane's server", () => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
  const name = (f: string) => path.relative(root, f).slice(0, -'.test.js'.length)
  const files = testFiles(root)
  const lanes = { MariaDB: files.filter((f) => serialServer(name(f)) === 'MariaDB'), 'PostgreSQL 15': files.filter((f) => serialServer(name(f)) === 'PostgreSQL 15') }
  assert.ok(lanes.MariaDB.some((f) => name(f) === 'innodb/innodb'))
  assert.ok(lanes['PostgreSQL 15'].some((f) => name(f) === 'cli/explore-jobs'))
  for (const f of files) assert.equal(SERIAL(name(f)), serialServer(name(f)) !== null, name(f))
  // What opens PostgreSQL in a test file (its own server, the machine's PostgreSQL 15), and what opens MariaDB
  const opens = {
    PostgreSQL: /\buseServer\(|\bserverUrls\(|\bPG15\b|:5432\b|\bopenLab\(|from 'postgres'/,
    MariaDB: /\bMYSQL_URL\b|mysql:\/\/|:3306\b|from 'mariadb'/,
  }
  for (const f of lanes.MariaDB) assert.doesNotMatch(fs.readFileSync(f, 'utf8'), opens.PostgreSQL, `${name(f)} (MariaDB lane) opens PostgreSQL`)
  for (const f of lanes['PostgreSQL 15']) assert.doesNotMatch(fs.readFileSync(f, 'utf8'), opens.MariaDB, `${name(f)} (PostgreSQL 15 lane) opens MariaDB`)
})

test("npm test's time summary: the slowest files first with their CPU time, all of them added up, the tail's share of the wall time", () => {
  const times = Array.from({ length: 20 }, (_, i) => ({ file: `a/f${i}`, ms: (i + 1) * 1000, serial: i === 3 || i === 19, cpu: i === 5 ? undefined : { self: (i + 1) * 100, children: (i + 1) * 400 } }))
  const lines = timeSummary(times, { parallel: 150_000, serial: 50_000 }, 15, 3)
  assert.equal(lines.length, 15 + 3)
  assert.match(lines[0], /the 15 slowest of 20 test files: wall time of each file's process, then its CPU time/)
  assert.match(lines[1], /^# {3}a\/f19 +20\.0 s +10\.0 s +\(50%\) {2}\(serial\)$/)
  assert.match(lines[15], /^# {3}a\/f5 +6\.0 s +\?$/, 'a file whose CPU was not measured')
  assert.ok(!lines.some((l) => /a\/f4 /.test(l)), 'the 16th slowest is not listed')
  // 210 s of wall time, of which the 19 measured files' 204 s used 102 s of CPU
  assert.match(lines[16], /all files added up: 210\.0 s wall, 102\.0 s CPU \(19 of 20 files measured, 50% of their wall time\)/)
  assert.match(lines[17], /3 at a time: 150\.0 s of wall time; the serial tail \(2 files, 24\.0 s\): 50\.0 s, 25% of the 200\.0 s in all/)
})

test("npm test's arguments: --lanes N, then the files' name prefixes; a bad --lanes refused", () => {
  assert.deepEqual(runnerArgs([]), { lanes: LANES, only: [], tailAfter: false })
  assert.deepEqual(runnerArgs(['innodb/', '--lanes', '3', 'cli/explore-jobs']), { lanes: 3, only: ['innodb/', 'cli/explore-jobs'], tailAfter: false })
  assert.deepEqual(runnerArgs(['--lanes=1', '--tail-after']), { lanes: 1, only: [], tailAfter: true })
  for (const bad of [['--lanes'], ['--lanes', '0'], ['--lanes=two'], ['--lanes', '1.5']]) assert.throws(() => runnerArgs(bad), /--lanes takes a whole number/, bad.join(' '))
})

test("a test file's CPU time: /proc/self/stat's user, system and waited-for children's times, a name with spaces and parentheses read past", () => {
  // pid (name) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
  const stat = '4242 (node (a) b) S 1 2 3 4 5 6 7 8 9 10 150 25 300 12 20 0 1 0'
  assert.deepEqual(cpuOf(stat), { self: 1750, children: 3120 })
  assert.equal(cpuOf('4242 (x) S 1 2'), null)
})

test("a test file's process under the preload writes its CPU time as it exits, and its own children see the runner's NODE_OPTIONS, not the preload", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-test-cpu-check-'))
  try {
    const file = path.join(dir, 'burn.test.js')
    // some CPU of its own, a child that burns some too and prints what it was given
    fs.writeFileSync(
      file,
      `const { execFileSync } = require('node:child_process')
let x = 0; const t = Date.now(); while (Date.now() - t < 150) x++
const seen = execFileSync(process.execPath, ['-e', 'let y = 0; const t = Date.now(); while (Date.now() - t < 150) y++; console.log(JSON.stringify([process.env.NODE_OPTIONS ?? null, process.env.RACE_TEST_CPU_DIR ?? null]))'], { encoding: 'utf8' })
process.stdout.write(seen)`,
    )
    const out = path.join(dir, 'cpu')
    fs.mkdirSync(out)
    const preload = pathToFileURL(path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'scripts', 'test-cpu.js')).href
    const env = { ...process.env, RACE_TEST_CPU_DIR: out, RACE_TEST_CPU_NODE_OPTIONS: '--max-old-space-size=300', NODE_OPTIONS: `--max-old-space-size=300 --import="${preload}"` }
    const seen = JSON.parse(execFileSync(process.execPath, [file], { env, encoding: 'utf8' }))
    assert.deepEqual(seen, ['--max-old-space-size=300', null])
    const cpu = cpuTimes(out).get(file)
    assert.ok(cpu, `a CPU time for ${file}: ${fs.readdirSync(out).join(', ')}`)
    // each burned 150 ms of wall time on a core (less when the machine is busy); /proc counts in 10 ms steps
    assert.ok(cpu.self >= 10, `its own: ${cpu.self} ms`)
    assert.ok(cpu.children >= 10, `its child's: ${cpu.children} ms`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

/** Runs the scheduler to the end, files taking turns to end in the order they started: the sets that ran together. */
function simulate(jobs: Job[], o: { lanes: number; beside: readonly ('MariaDB' | 'PostgreSQL 15')[] }): string[][] {
  const pending = [...jobs]
  const running: Job[] = []
  const together: string[][] = []
  for (let guard = 0; pending.length || running.length; guard++) {
    assert.ok(guard < 1000, 'the scheduler ends')
    for (let j = nextJob(pending, running, o); j; j = nextJob(pending, running, o)) {
      pending.splice(pending.indexOf(j), 1)
      running.push(j)
    }
    assert.ok(running.length > 0, `something runs while ${pending.map((p) => p.name).join(', ')} wait`)
    together.push(running.map((r) => r.name))
    running.shift()
  }
  return together
}

test("npm test's scheduler: the serial files in a lane of their own beside the others, never beside a file that opens their server", () => {
  const job = (name: string, ...opens: ('MariaDB' | 'PostgreSQL 15')[]): Job => ({ name, serial: serialServer(name), opens })
  const jobs = [job('soundness/soundness'), job('soundness/kept'), job('cli/readme', 'MariaDB'), job('app/app-levels', 'MariaDB'), job('cli/a'), job('cli/b'), job('cli/c', 'PostgreSQL 15'), job('innodb/innodb', 'MariaDB'), job('app/app-mariadb', 'MariaDB'), job('cli/explore-jobs', 'PostgreSQL 15')]
  for (const o of [
    { lanes: 2, beside: BESIDE },
    { lanes: 3, beside: BESIDE },
    { lanes: 2, beside: ['MariaDB', 'PostgreSQL 15'] as const },
    { lanes: 2, beside: [] },
  ]) {
    const sets = simulate(jobs, o)
    assert.deepEqual(new Set(sets.flat()), new Set(jobs.map((j) => j.name)), 'every file runs')
    for (const set of sets) {
      const js = set.map((n) => jobs.find((j) => j.name === n)!)
      assert.ok(js.filter((j) => !j.serial).length <= o.lanes, `${set}: at most ${o.lanes} others`)
      assert.ok(js.length <= o.lanes + 1, `${set}: one lane more for the serial files`)
      for (const s of js.filter((j) => j.serial)) {
        const beside = js.filter((j) => j !== s && (j.serial === s.serial || j.opens.includes(s.serial!)))
        assert.deepEqual(beside.map((j) => j.name), [], `${s.name} shares ${s.serial} with nothing (${JSON.stringify(o)})`)
      }
    }
    const first = sets[0]
    assert.deepEqual(first.slice(0, 2), ['soundness/soundness', 'soundness/kept'], 'the slowest start first')
    if (o.beside.length) assert.ok(first.some((n) => serialServer(n)), `a serial file starts beside them: ${first}`)
    for (const server of ['MariaDB', 'PostgreSQL 15'] as const) {
      const at = sets.findIndex((set) => set.some((n) => serialServer(n) === server))
      if ((o.beside as readonly string[]).includes(server)) assert.ok(sets.some((set) => set.some((n) => serialServer(n) === server) && set.some((n) => !serialServer(n))), `${server}'s serial files run beside the others (${JSON.stringify(o)})`)
      else assert.ok(sets.slice(at).every((set) => set.every((n) => serialServer(n))), `${server}'s serial files are a tail (${JSON.stringify(o)})`)
    }
  }
})

test("npm test's scheduler reads the servers a file opens from its text; the serial lanes' files open only their own", () => {
  assert.deepEqual(jobOf('cli/x', "import mariadb from 'mariadb'\nconst u = PG15").opens, ['PostgreSQL 15', 'MariaDB'])
  assert.deepEqual(jobOf('cli/x', 'useServer()').opens, [])
  assert.equal(jobOf('innodb/innodb', '').serial, 'MariaDB')
  // the documents' samples cli/readme runs again name both machine servers: it never runs beside a serial file
  const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..')
  const docs = ['README.md', 'CONTRIBUTING.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)].map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8')).join('\n')
  for (const [server, re] of Object.entries({ MariaDB: /<!-- sample: [^\n]*(mysql|mariadb):\/\/[^\n]*:3306/, 'PostgreSQL 15': /<!-- sample: [^\n]*127\.0\.0\.1:5432/ }))
    if (re.test(docs)) assert.ok(jobOf('cli/readme', '').opens.includes(server as 'MariaDB'), `a sample names ${server}: cli/readme opens it`)
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
  for (const f of testFiles(root)) {
    const j = jobOf(path.relative(root, f).slice(0, -'.test.js'.length), fs.readFileSync(f, 'utf8'))
    if (j.serial) assert.deepEqual(j.opens.filter((s) => s !== j.serial), [], `${j.name} opens only ${j.serial} of the machine's servers`)
  }
  assert.ok(OPENS.MariaDB.test('mysql://root@127.0.0.1:3306/test'))
})
