// npm run bench:explore's done-when section (speed/done-when.ts) on a real server (DATABASE_URL, else embedded
// PostgreSQL 18): its rows read from the --json of real race explore runs (examples/explore-rows-3.spec, a few
// seconds), checked against what the same report's groups say, and the section run end to end as a user runs it
// (`--only done-when:rows`, with and without --check; a figure that is not one: one line, exit 2). No figure's
// value is asserted: a loaded machine may make any of them miss its limit, and the row must then say so.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { withCpu } from '../../speed/cpu.js'
import { formatRows, jobsRow, parseRun, raceJson, RUNS, runRow, type ChildRun } from '../../speed/done-when.js'
import { ROOT, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let rows3: ChildRun
before(async () => {
  server = await useServer()
  rows3 = await raceJson([path.join('examples', 'explore-rows-3.spec')], server.url, 120)
})
after(async () => {
  await server.stop()
})

const ROWS = RUNS.find((r) => r.key === 'rows')!
const report = (c: ChildRun) => JSON.parse(c.stdout) as { complete: boolean; runs: number; search: string; groups: { key: string; held: boolean | null }[] }

/** The bench script as a child: its stdout, stderr and exit code. */
function bench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
    delete env.DATABASE_URL
    const child = spawn(process.execPath, [path.join(ROOT, 'dist', 'speed', 'explore.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
    child.on('error', reject)
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, stdout, stderr })))
  })
}

test("a real run: parseRun reads complete, runs and the verdict the report's groups give, and the row is met exactly when they are within the limit", () => {
  assert.equal(rows3.code, 0, rows3.stderr)
  const j = report(rows3)
  const p = parseRun(rows3)
  assert.equal(p.error, undefined)
  assert.equal(p.complete, j.complete)
  assert.equal(p.runs, j.runs)
  assert.equal(p.search, j.search)
  assert.equal(p.code, 0)
  // The verdict from the counts, beside the groups' own word: violated when a group did not hold, held when all did.
  const want = j.groups.some((g) => g.held === false) ? 'violated' : j.groups.every((g) => g.held === true) ? 'held' : 'unknown'
  assert.equal(p.verdict, want)
  assert.deepEqual(p.groups, j.groups.map((g) => g.key).sort())
  const row = runRow(ROWS, p)
  assert.equal(row.met, j.complete && j.runs <= ROWS.maxRuns!)
  assert.match(row.measured, new RegExp(`^${j.complete ? 'complete' : 'NOT complete'} \\(${j.search}\\), ${want}, exit 0, ${j.runs} runs, `))
  assert.match(row.yardstick, /the orders of its steps, \d+/)
})

test('formatRows: the figure, its limit, met or not and the measured value on one line, the yardstick under it, then K of M met', () => {
  const row = runRow(ROWS, parseRun(rows3))
  // The same run judged against a limit one run below what it took: not met, and counted so.
  const tight = runRow({ ...ROWS, maxRuns: report(rows3).runs - 1 }, parseRun(rows3))
  assert.equal(tight.met, false)
  const lines = formatRows([row, tight])
  const [first, , second] = lines.slice(1)
  assert.ok(first.startsWith(row.figure) && first.includes(row.limit) && first.endsWith(row.measured), first)
  assert.match(first, row.met ? /  met +complete/ : /  NOT MET  /)
  assert.match(second, /  NOT MET  /)
  assert.match(lines[2], /^ +yardstick: the orders of its steps/)
  assert.equal(lines[lines.length - 1], `done-when: ${row.met ? 1 : 0} of 2 met`)
})

test('a child with no report (race refused its input, exit 2) is a row not met that says why', async () => {
  const c = await raceJson([path.join('examples', 'no-such-file.spec')], server.url, 60)
  assert.equal(c.code, 2)
  const p = parseRun(c)
  assert.match(p.error ?? '', /^exit 2, no --json report: /)
  const row = runRow(ROWS, p)
  assert.equal(row.met, false)
  assert.match(formatRows([row])[1], /NOT MET +exit 2, no --json report/)
})

test('a sampled run is not complete (its report says complete: the sample ran whole), and the row is not met', async () => {
  const c = await raceJson([path.join('examples', 'explore-rows-3.spec'), '--sample', '3'], server.url, 120)
  const j = JSON.parse(c.stdout) as { search: string; runs: number }
  assert.equal(j.search, 'sample')
  const p = parseRun(c)
  assert.equal(p.complete, false)
  assert.equal(p.runs, j.runs)
  const row = runRow(ROWS, p)
  assert.equal(row.met, false)
  assert.match(row.measured, /^NOT complete \(sample\), /)
})

test('jobsRow: two real runs alike (--jobs 1 and --jobs 2) are the same; two runs of different specs are not, and not met', async () => {
  const twoRun = await withCpu(() => raceJson([path.join('examples', 'explore-rows-3.spec'), '--jobs', '2'], server.url, 120))
  const oneRun = await withCpu(() => raceJson([path.join('examples', 'explore-rows-3.spec'), '--jobs', '1'], server.url, 120))
  const [one, two] = [parseRun(oneRun.value), parseRun(twoRun.value)]
  const alike = jobsRow([{ one, two }])
  assert.match(alike.measured, new RegExp(`, same groups, shortest and runs \\(${one.runs} runs, ${one.groups.length} groups\\)$`))
  // With the machine's CPU read around each run, the floor it allows follows (speed/cpu.ts).
  if (oneRun.cpuMs !== undefined && twoRun.cpuMs !== undefined) {
    const withFloor = jobsRow([{ one, two, cpu: { one: oneRun.cpuMs, two: twoRun.cpuMs } }], 2)
    assert.match(withFloor.measured, /groups\); CPU: --jobs 1 kept \d+\.\d\d cores busy \(\d+\.\d\d CPU-s\), --jobs 2 used \d+\.\d\d CPU-s: on 2 cores at least \d+\.\d\dx --jobs 1's time$/)
  }
  assert.equal(alike.met, two.seconds / one.seconds <= 0.75)
  const other = parseRun(await raceJson([path.join('examples', 'explore-orders-fixed.spec')], server.url, 120))
  const unlike = jobsRow([{ one, two: other }])
  assert.match(unlike.measured, /NOT the same: round 1: .*groups only on --jobs 1: /)
  assert.equal(unlike.met, false)
})

test('npm run bench:explore -- --only done-when:rows: one figure run as the user runs it; --check exits 1 exactly when it is not met', async () => {
  const r = await bench(['--only', 'done-when:rows', '--database-url', server.url])
  assert.equal(r.code, 0, r.stderr)
  const line = r.stdout.split('\n').find((l) => l.startsWith(ROWS.figure))
  assert.ok(line, r.stdout)
  // What the row measured, read back from its own line: met exactly when complete within the limit.
  const m = line.match(/ (met|NOT MET) +(complete|NOT complete) \((\w+)\), (\w+), exit (\d+), (\d+) runs, ([\d.]+) s$/)
  assert.ok(m, line)
  const met = m[2] === 'complete' && Number(m[6]) <= ROWS.maxRuns!
  assert.equal(m[1], met ? 'met' : 'NOT MET')
  assert.match(r.stdout, new RegExp(`\\ndone-when: ${met ? 1 : 0} of 1 met\\n$`))
  assert.doesNotMatch(r.stdout, /yardstick:.*isolationtester|reduced beside --exhaustive/)
  // The server's catalogs under the header: whether autovacuum runs, and their dead rows (what slows every later run).
  assert.match(r.stdout.split('\n')[1], /^  server: autovacuum (on|off); dead rows in its catalogs: pg_attribute [\d,]+, pg_class [\d,]+, pg_depend [\d,]+ \(/)
  const checked = await bench(['--only', 'done-when:rows', '--database-url', server.url, '--check'])
  const again = /\ndone-when: (\d) of 1 met\n$/.exec(checked.stdout)
  assert.ok(again, checked.stdout)
  assert.equal(checked.code, again[1] === '1' ? 0 : 1)
})

test('--only done-when:KEY that names no figure: one line, exit 2, nothing run', async () => {
  const r = await bench(['--only', 'done-when:nope', '--database-url', server.url])
  assert.equal(r.code, 2)
  assert.equal(r.stdout, '')
  assert.equal(r.stderr.trim().split('\n').length, 1)
  assert.match(r.stderr, /--only done-when:nope: not a figure \(one of ledger, locked/)
})
