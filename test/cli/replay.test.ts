// Issue 42, item 2, through the real CLI and the API on a real server: race explore --save and race run --save write
// a counterexample file (racelab-counterexample/1) bound to the race file and the local modules it imports; race
// replay runs it again with the same outcome (20 of 20), refuses changed code with one line (exit 2) unless
// --guided, and a bad file is one line, exit 2. The node:test and vitest regression tests docs/counterexamples.md
// shows run here as they stand there: they fail on the race and pass on the fix.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { replay, RaceError } from '../../src/index.js'
import { oneCleanLine } from '../support/faults.js'
import { race, ROOT, schemasOf, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let admin: Sql
const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'race-replay-'))
const at = (f: string) => path.join(proj, f)
const sha = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex')

before(async () => {
  server = await useServer()
  admin = postgres(server.url, { max: 1, onnotice: () => {} })
  for (const f of ['withdraw.race.mjs', 'withdraw.mjs', 'withdraw-setup.mjs']) fs.copyFileSync(path.join(ROOT, 'examples', 'app', f), at(f))
  // A project whose node_modules holds racelab (this checkout), for the documentation's test file.
  fs.mkdirSync(at('node_modules'))
  fs.symlinkSync(ROOT, at('node_modules/racelab'), 'dir')
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'vitest'), at('node_modules/vitest'), 'dir')
  fs.writeFileSync(at('package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }))
})
after(async () => {
  fs.rmSync(proj, { recursive: true, force: true })
  await admin?.end()
  await server?.stop()
})

const cli = async (args: string[]) => {
  const r = await race(args, { url: server.url, cwd: proj, timeoutMs: 240_000 })
  assert.deepEqual(await schemasOf(admin, r.pid), [], 'nothing left behind')
  return r
}

/** A file docs/counterexamples.md shows under `<!-- test file: name -->`, as it stands there. */
function docFile(name: string): string {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'counterexamples.md'), 'utf8')
  const m = new RegExp(`<!-- test file: ${name.replace(/\./g, '\\.')} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(doc)
  assert.ok(m, `docs/counterexamples.md shows ${name}`)
  return m[1]
}

/** `node --test FILE` (or vitest run FILE) in the project, on the test server. */
function nodeTest(file: string, runner: 'node' | 'vitest' = 'node'): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const { NODE_TEST_CONTEXT: _, ...outer } = process.env
    const args = runner === 'node' ? ['--test', '--test-reporter=spec', file] : [path.join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', file]
    const child = spawn(process.execPath, args, { cwd: proj, env: { ...outer, DATABASE_URL: server.url, NO_COLOR: '1', FORCE_COLOR: '0', CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

interface Cx {
  format: string
  from: string
  race: { id: string; ref: string; builtIn: boolean; kind: string; sha256: string }
  modules: { path: string; sha256: string }[]
  server: { version: string; product: string }
  isolation: { asked: string | null; sessions: Record<string, string | null> }
  n: number
  params: Record<string, unknown>
  schedule: string
  judged: { held: boolean | null; observed: string; outcomes: Record<string, string> }
  outcome: Record<string, unknown>
}
const read = (f: string) => JSON.parse(fs.readFileSync(at(f), 'utf8')) as Cx

test('race explore --save writes the shortest violating interleaving, bound to the race file and the modules it imports', async () => {
  const r = await cli(['explore', 'withdraw.race.mjs', '--json', '--save', 'cx.json'])
  assert.equal(r.code, 0, r.stderr)
  const j = JSON.parse(r.stdout) as { shortest: Record<string, unknown> & { line: string; observed: string }; server: { version: string } }
  assert.match(r.stderr, /^race: --save: the shortest violating interleaving written to cx\.json/m)
  const cx = read('cx.json')
  assert.equal(cx.format, 'racelab-counterexample/1')
  assert.equal(cx.from, 'explore')
  assert.deepEqual(cx.race, { id: 'withdraw', ref: 'withdraw.race.mjs', builtIn: false, kind: 'application', sha256: sha(at('withdraw.race.mjs')) })
  assert.deepEqual(cx.modules, [{ path: 'withdraw.mjs', sha256: sha(at('withdraw.mjs')) }, { path: 'withdraw-setup.mjs', sha256: sha(at('withdraw-setup.mjs')) }])
  assert.equal(cx.schedule, j.shortest.line)
  assert.deepEqual(cx.outcome, j.shortest, 'the outcome is what --json gives for that interleaving')
  assert.equal(cx.judged.held, false)
  assert.equal(cx.judged.observed, 'balance=40 withdrawn=120')
  assert.equal(cx.server.version, j.server.version)
  assert.deepEqual(cx.isolation, { asked: 'default', sessions: { s1: 'read committed', s2: 'read committed' } })
  assert.deepEqual([cx.n, cx.params], [2, { isolation: 'default' }])
})

test('race replay reproduces the saved outcome 20 times out of 20 (the API, one process), and the CLI says STILL FAILS, exit 1', async () => {
  const saved = read('cx.json')
  for (let k = 1; k <= 20; k++) {
    const r = await replay(at('cx.json'), { databaseUrl: server.url })
    assert.equal(r.exitCode, 1, `replay ${k}: ${r.text}`)
    assert.equal(r.result, 'still-fails', `replay ${k}`)
    assert.ok(r.same, `replay ${k}: ${r.summary}`)
    assert.deepEqual(r.now, saved.judged, `replay ${k}`)
    assert.equal(r.order, saved.schedule, `replay ${k} ran the saved order`)
    assert.equal(r.ok, false)
  }
  // Saved elsewhere (another racelab, server, level): said in a note each, and replayed all the same.
  const other = { ...saved, racelab: '0.0.1', server: { ...saved.server, version: '9.6' }, isolation: { ...saved.isolation, sessions: { ...saved.isolation.sessions, s1: 'serializable' } } }
  fs.writeFileSync(at('other.json'), JSON.stringify(other))
  const o = await replay(at('other.json'), { databaseUrl: server.url })
  assert.equal(o.exitCode, 1, o.text)
  assert.deepEqual(o.notes, [
    `saved by racelab 0.0.1, replayed by ${(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}`,
    `saved on PostgreSQL 9.6, replayed on PostgreSQL ${saved.server.version}`,
    'the sessions ran at other levels than saved: s1 read committed (saved serializable)',
  ])
  assert.match(o.text, /^note: saved on PostgreSQL 9\.6/m)
  const c = await cli(['replay', 'cx.json'])
  assert.equal(c.code, 1, c.stderr)
  assert.match(c.stdout, /replay cx\.json: STILL FAILS\s+still fails: it\s+violated the\s+invariant, as saved/)
  assert.match(c.stdout, /observed balance=40 withdrawn=120 {2}VIOLATED/)
  assert.equal(c.stderr, '')
})

test('race run --save writes its failing trial and replay runs it; nothing failed: nothing written, one line, the same exit code', async () => {
  const line = read('cx.json').schedule
  const r = await cli(['run', 'withdraw.race.mjs', '--schedule', line, '--save', 'run.json'])
  assert.equal(r.code, 0, r.stderr)
  const cx = read('run.json')
  assert.equal(cx.from, 'run')
  assert.equal(cx.schedule, line)
  assert.equal(cx.judged.held, false)
  assert.equal((cx.outcome as { order: string }).order, line)
  const again = await cli(['replay', 'run.json', '--json'])
  assert.equal(again.code, 1, again.stderr)
  assert.equal((JSON.parse(again.stdout) as { result: string }).result, 'still-fails')
  // Serial: nothing violates. The exit code is the run's own (a deviation from expect: 'violated').
  const plain = await cli(['run', 'withdraw.race.mjs', '--schedule', 'serial'])
  const none = await cli(['run', 'withdraw.race.mjs', '--schedule', 'serial', '--save', 'none.json'])
  assert.equal(none.code, plain.code)
  oneCleanLine(none.stderr, /--save none\.json: no trial violated the invariant or failed: nothing written/)
  assert.ok(!fs.existsSync(at('none.json')))
  // A folder that is not there: refused before anything runs.
  const bad = await cli(['run', 'withdraw.race.mjs', '--save', 'nowhere/cx.json'])
  assert.equal(bad.code, 2)
  oneCleanLine(bad.stderr, /--save nowhere\/cx\.json: no folder/)
  const levels = await cli(['explore', 'withdraw.race.mjs', '--isolation', 'all', '--save', 'levels.json'])
  assert.equal(levels.code, 2)
  oneCleanLine(levels.stderr, /--save writes one exploration's counterexample: give one --isolation level/)
})

test('a bad counterexample file is one line, exit 2, from the CLI and the API', async () => {
  const good = read('cx.json') as unknown as Record<string, unknown>
  const cases: [string, string, RegExp][] = [
    ['not-json.json', '{ "format": ', /not-json\.json: not a counterexample file race can replay \(not JSON/],
    ['other.json', JSON.stringify({ ...good, format: 'racelab-counterexample/9' }), /its format is "racelab-counterexample\/9", this racelab reads racelab-counterexample\/1: a newer racelab wrote it/],
    ['no-schedule.json', JSON.stringify({ ...good, schedule: undefined }), /"schedule" is missing or malformed/],
    ['array.json', '[]', /not a JSON object/],
    ['bad-schedule.json', JSON.stringify({ ...good, schedule: 's1.q1 s9.q1' }), /s9/],
  ]
  for (const [name, body, re] of cases) {
    fs.writeFileSync(at(name), body)
    const r = await cli(['replay', name])
    assert.equal(r.code, 2, `${name}: ${r.stderr}`)
    oneCleanLine(r.stderr, re)
    const e = await replay(at(name), { databaseUrl: server.url }).then(() => undefined, (x: unknown) => x)
    assert.ok(e instanceof RaceError && e.exitCode === 2 && re.test(e.message), `${name}: ${String(e)}`)
  }
  const gone = await cli(['replay', 'gone.json'])
  assert.equal(gone.code, 2)
  oneCleanLine(gone.stderr, /gone\.json: no such file/)
  const dir = await cli(['replay', 'node_modules'])
  assert.equal(dir.code, 2)
  oneCleanLine(dir.stderr, /node_modules: not a counterexample file race can replay \(not a regular file\)/)
})

test("the documentation's regression tests (node:test, vitest) fail while the code still fails the counterexample", async () => {
  fs.copyFileSync(at('cx.json'), at('withdraw.cx.json'))
  fs.writeFileSync(at('withdraw.cx.test.mjs'), docFile('withdraw.cx.test.mjs'))
  fs.writeFileSync(at('withdraw.cx.vitest.test.mjs'), docFile('withdraw.cx.vitest.test.mjs'))
  const r = await nodeTest('withdraw.cx.test.mjs')
  assert.equal(r.code, 1, r.out)
  assert.match(r.out, /STILL FAILS\s+still fails: it\s+violated the\s+invariant, as saved/)
  const v = await nodeTest('withdraw.cx.vitest.test.mjs', 'vitest')
  assert.equal(v.code, 1, v.out)
  assert.match(v.out, /STILL FAILS/)
  assert.match(v.out, /Tests {2}1 failed \(1\)/)
})

test('after a change to the imported module replay refuses in one line (exit 2); --guided runs it, and the fix passes', async () => {
  const src = fs.readFileSync(at('withdraw.mjs'), 'utf8')
  const fixed = src.replace("'select balance from accounts where id = $1'", "'select balance from accounts where id = $1 for update'")
  assert.notEqual(fixed, src)
  fs.writeFileSync(at('withdraw.mjs'), fixed)
  const r = await cli(['replay', 'cx.json'])
  assert.equal(r.code, 2)
  oneCleanLine(r.stderr, /^race: cx\.json: withdraw\.mjs changed since the counterexample was saved: .*--guided follows the saved order/)
  assert.equal(r.stdout, '')
  const e = await replay(at('cx.json'), { databaseUrl: server.url }).then(() => undefined, (x: unknown) => x)
  assert.ok(e instanceof RaceError && e.exitCode === 2 && /withdraw\.mjs changed.*\{ guided: true \}/.test(e.message), String(e))
  const g = await cli(['replay', 'cx.json', '--guided', '--json'])
  assert.equal(g.code, 0, g.stderr + g.stdout)
  const doc = JSON.parse(g.stdout) as { result: string; changed: string[]; followed: { steps: number; of: number; stoppedAt?: string }; now: { held: boolean; outcomes: Record<string, string> }; summary: string }
  assert.equal(doc.result, 'passes')
  assert.deepEqual(doc.changed, ['withdraw.mjs changed'])
  assert.equal(doc.now.held, true)
  // s2's read now waits for s1's lock: the saved order is followed up to there, and the line says where it left it.
  assert.ok(doc.followed.steps < doc.followed.of && doc.followed.steps >= 3, JSON.stringify(doc.followed))
  assert.match(doc.summary, /guided: followed \d+ of 8 saved steps, then at step \d+: the file says s\d\.q\d, the run took s\d\.q\d/)
  const t = await nodeTest('withdraw.cx.test.mjs')
  assert.equal(t.code, 0, t.out)
  const v = await nodeTest('withdraw.cx.vitest.test.mjs', 'vitest')
  assert.equal(v.code, 0, v.out)
  assert.match(v.out, /Tests {2}1 passed \(1\)/)
})
