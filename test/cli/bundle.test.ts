// bin/race runs the CLI as one file from V8's code cache (src/start.ts, scripts/bundle.ts): the same race as its
// modules one by one (RACE_BUNDLE=0), byte for byte where the output does not depend on time, errors included.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { race, ROOT, useServer, type TestServer } from '../support/server.js'

const MODULES = { RACE_BUNDLE: '0' }

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

test('the build made the bundle and a code cache this Node.js takes', async () => {
  for (const f of ['cli.bundle.cjs', 'cli.bundle.cache']) assert.ok(fs.existsSync(path.join(ROOT, 'dist', 'src', f)), f)
  const r = await race(['--version'], { env: { RACE_CODE_CACHE: 'check' } })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stderr, 'race: code cache accepted\n')
  const modules = await race(['--version'], { env: { ...MODULES, RACE_CODE_CACHE: 'check' } })
  assert.equal(modules.stderr, '', 'RACE_BUNDLE=0 loads the modules, not the bundle')
  assert.equal(modules.stdout, r.stdout)
})

test('list, show, help and bad input print the same bytes and exit the same from the bundle as from the modules', async () => {
  const cases = [['list'], ['show', 'advisory'], ['run', '--help'], ['run', 'advisory', '--n', '0'], ['run', 'no-such-race'], ['run', 'advisory', '--schedule', 'sideways']]
  for (const args of cases) {
    const [a, b] = await Promise.all([race(args), race(args, { env: MODULES })])
    assert.equal(a.code, b.code, args.join(' '))
    assert.equal(a.stdout, b.stdout, args.join(' '))
    assert.equal(a.stderr, b.stderr, args.join(' '))
  }
})

test("a user's module that imports racelab, outside any project, runs from the bundle as from the modules", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-bundle-'))
  try {
    // Outside the project: 'racelab' resolves to the running race's package (self-hook.ts, found from
    // the bundle's folder as from the modules'). A refusal of what the module exports is still one line, exit 2.
    const typo = path.join(dir, 'typo.race.mjs')
    fs.writeFileSync(typo, "import { defineAppRace } from 'racelab'\nexport default defineAppRace({ driver: 'pg', session: async (db) => { await db.query('select 1') }, invariant: 'select true', expect: 'held', prevension: ['23505'] })\n")
    for (const env of [{}, MODULES]) {
      const r = await race(['run', typo], { url: server.url, env })
      assert.equal(r.code, 2, r.stderr)
      assert.match(r.stderr, /^race: .*"prevension" is not a field of defineAppRace/)
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    }
    const coupon = path.join(dir, 'coupon.race.mjs')
    fs.copyFileSync(path.join(ROOT, 'examples', 'coupon.race.mjs'), coupon)
    const args = ['run', coupon, '--json']
    const [a, b] = await Promise.all([race(args, { url: server.url }), race(args, { url: server.url, env: MODULES })])
    assert.equal(a.code, 0, a.stderr)
    assert.equal(b.code, 0, b.stderr)
    for (const k of ['verdict', 'matched', 'expected', 'violations']) assert.deepEqual(JSON.parse(a.stdout)[k], JSON.parse(b.stdout)[k], k)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a module changed after the bundle was built (tsc alone after npm run build) runs, not the older bundle, with one line saying so; a module only touched does not stop the bundle', async () => {
  // A copy of the built racelab, times kept: its bundle is as fresh as ours. Then one of the modules the bundle was
  // built from changes, as tsc alone would leave it: bin/race must run that module's new code.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-stale-bundle-'))
  try {
    for (const p of ['bin', 'dist/src', 'dist/scenarios', 'package.json']) fs.cpSync(path.join(ROOT, p), path.join(dir, p), { recursive: true, preserveTimestamps: true })
    fs.symlinkSync(fs.realpathSync(path.join(ROOT, 'node_modules')), path.join(dir, 'node_modules'))
    const bin = path.join(dir, 'bin', 'race')
    const fresh = await race(['--version'], { bin, env: { RACE_CODE_CACHE: 'check' } })
    assert.equal(fresh.code, 0, fresh.stderr)
    assert.equal(fresh.stderr, 'race: code cache accepted\n', 'the copy runs its bundle')
    const mod = path.join(dir, 'dist', 'src', 'report', 'width.js')
    const later = new Date(fs.statSync(path.join(dir, 'dist', 'src', 'cli.bundle.cjs')).mtimeMs + 2000)
    // Written again with the same text (tsc re-emitting it, or npm writing an installed package's files in its own
    // order): newer than the bundle, but the code the bundle holds: the bundle runs.
    fs.writeFileSync(mod, fs.readFileSync(mod))
    fs.utimesSync(mod, later, later)
    const same = await race(['--version'], { bin, env: { RACE_CODE_CACHE: 'check' } })
    assert.equal(same.stderr, 'race: code cache accepted\n', 'a module touched, not changed: the bundle runs')
    fs.appendFileSync(mod, "\nprocess.stderr.write('the new code of report/width.js ran\\n')\n")
    fs.utimesSync(mod, later, later)
    const r = await race(['--version'], { bin, env: { RACE_CODE_CACHE: 'check' } })
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, fresh.stdout)
    assert.equal(r.stderr, 'race: dist/src/report/width.js changed since the bundle dist/src/cli.bundle.cjs was built: running the modules instead (npm run build makes the bundle again)\nthe new code of report/width.js ran\n')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
