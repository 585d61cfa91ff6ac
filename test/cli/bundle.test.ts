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
    // Outside the project: 'racelab' resolves to the running race's package (isolation/self-hook.ts, found from
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
