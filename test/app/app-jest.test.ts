// A TypeScript race module under Jest (issue 39, item 16): Jest refuses module hooks (tsx's too), so race imports the
// .ts module through Jest, whose transform compiles it. The transform, the configuration and the test file are the
// ones docs/app-races.md shows, as they stand there, in a project folder outside the checkout whose node_modules
// holds racelab (this checkout), pg, esbuild and Jest's globals; Jest is the checkout's. Without the transform, run()
// rejects with one line, exit 2, naming what to do.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { ROOT, useServer, type TestServer } from '../support/server.js'

let server: TestServer
const proj = fs.mkdtempSync(path.join(os.tmpdir(), 'racelab-jest-'))

/** A file docs/app-races.md shows under `<!-- test file: name -->`, as it stands there. */
function docFile(name: string): string {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'app-races.md'), 'utf8')
  const m = new RegExp(`<!-- test file: ${name.replace(/\./g, '\\.')} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(doc)
  assert.ok(m, `docs/app-races.md shows ${name}`)
  return m[1]
}

function jest(file: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const { NODE_TEST_CONTEXT: _, ...outer } = process.env
    const env = { ...outer, DATABASE_URL: server.url, NODE_OPTIONS: '--experimental-vm-modules', NO_COLOR: '1', FORCE_COLOR: '0', CI: 'true' }
    const child = spawn(process.execPath, [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--rootDir', proj, '--runInBand', file], { cwd: proj, env, stdio: ['ignore', 'pipe', 'pipe'] })
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

before(async () => {
  server = await useServer()
  fs.mkdirSync(path.join(proj, 'node_modules'))
  fs.symlinkSync(ROOT, path.join(proj, 'node_modules', 'racelab'), 'dir')
  for (const p of ['pg', 'esbuild', '@jest']) fs.symlinkSync(path.join(ROOT, 'node_modules', p), path.join(proj, 'node_modules', p), 'dir')
  fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }))
  for (const f of ['orders.race.ts', 'orders-typed.ts']) fs.copyFileSync(path.join(ROOT, 'examples', 'app', f), path.join(proj, f))
  fs.writeFileSync(path.join(proj, 'orders-ts.jest.test.mjs'), docFile('orders-ts.jest.test.mjs'))
})
after(async () => {
  fs.rmSync(proj, { recursive: true, force: true })
  await server?.stop()
})

test("without a transform for .ts, Jest's run() of a TypeScript race module rejects with one line naming the fix, exit 2", async () => {
  fs.writeFileSync(path.join(proj, 'bare.test.mjs'), `import { test } from '@jest/globals'
import { run } from 'racelab'
test('bare', async () => {
  const e = await run('./orders.race.ts', { n: 2, schedule: 'lockstep' }).then(() => undefined, (err) => err)
  if (!e) throw new Error('run() resolved')
  console.log(JSON.stringify({ exitCode: e.exitCode, message: e.message }))
}, 60_000)
`)
  const r = await jest('bare.test.mjs')
  assert.equal(r.code, 0, r.out)
  const m = /\{"exitCode":\d+,"message":".*"\}/.exec(r.out)
  assert.ok(m, r.out)
  const e = JSON.parse(m[0]) as { exitCode: number; message: string }
  assert.equal(e.exitCode, 2)
  assert.doesNotMatch(e.message, /\n/)
  assert.match(e.message, /^\.\/orders\.race\.ts: a TypeScript race module here .* importing it failed \(.*\): give the runner a transform for \.ts files \(docs\/app-races\.md\) or give race the compiled \.mjs$/)
})

test("with the documentation's transform and configuration, Jest runs the documentation's test of a TypeScript race module", async () => {
  fs.writeFileSync(path.join(proj, 'jest-esbuild.cjs'), docFile('jest-esbuild.cjs'))
  fs.writeFileSync(path.join(proj, 'jest.config.js'), docFile('jest.config.js'))
  const r = await jest('orders-ts.jest.test.mjs')
  assert.equal(r.code, 0, r.out)
  assert.match(r.out, /Tests: {7}1 passed, 1 total/)
  // The same file against a race whose expectation is wrong: Jest fails it with race's report.
  fs.writeFileSync(path.join(proj, 'held.race.ts'), fs.readFileSync(path.join(proj, 'orders.race.ts'), 'utf8').replace("expect: 'violated'", "expect: 'held'"))
  fs.writeFileSync(path.join(proj, 'held.test.mjs'), docFile('orders-ts.jest.test.mjs').replace('./orders.race.ts', './held.race.ts'))
  const bad = await jest('held.test.mjs')
  assert.equal(bad.code, 1, bad.out)
  assert.match(bad.out, /expected {3}held {2}DEVIATION/)
})
