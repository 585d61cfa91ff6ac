// race as a project installs it: the tarball `npm run pack` makes, installed into a fresh folder outside the checkout,
// and there, as a user would: `npx race run advisory` and `npx race check` (the embedded server, or DATABASE_URL's when
// the suite runs against one), a .mjs scenario importing racelab by name, a node:test file using run(), and a .mts file
// type-checked against the package's types. npx runs offline: it can only find the project's own race, never fetch a
// package (the registry's `race` is someone else's).
import assert from 'node:assert/strict'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { race, ROOT } from '../support/server.js'

let work: string
let proj: string
let tarball: string

interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/** A command in the project folder; offline, so npm cannot fetch anything. */
function sh(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 240_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    // Without NODE_TEST_CONTEXT: a node --test started here reports to its own stdout, not to this test runner.
    const { NODE_TEST_CONTEXT: _, ...outer } = process.env
    const child = spawn(cmd, args, { cwd: proj, env: { ...outer, npm_config_offline: 'true', npm_config_update_notifier: 'false', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

before(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'racelab-installed-'))
  proj = path.join(work, 'my-app')
  fs.mkdirSync(proj)
  tarball = execFileSync(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'pack.js'), '--out', work], { encoding: 'utf8' }).trim()
  fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }, null, 2))
})
after(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

test('the tarball holds what runs: compiled code, the scenario index, types, bin; no tests, sources, maps or scripts', () => {
  const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n')
  for (const f of ['package/bin/race', 'package/dist/src/cli.js', 'package/dist/src/start.js', 'package/dist/src/cli.bundle.cjs', 'package/dist/src/cli.bundle.cache', 'package/dist/src/index.js', 'package/dist/src/index.d.ts', 'package/dist/src/api.d.ts', 'package/dist/scenarios/index.json', 'package/dist/scenarios/advisory.js', 'package/README.md']) {
    assert.ok(files.includes(f), `${f} is in the tarball`)
  }
  // The README's links to the documents reach files in the package too.
  const readme = execFileSync('tar', ['-xzOf', tarball, 'package/README.md'], { encoding: 'utf8' })
  const linked = [...readme.matchAll(/\]\((docs\/[^)#]+\.md)/g)].map((m) => `package/${m[1]}`)
  assert.ok(linked.length >= 5, `${linked.length} links to docs/`)
  assert.deepEqual(linked.filter((f) => !files.includes(f)), [], 'every linked document is in the tarball')
  const stray = files.filter((f) => /^package\/(test|src|scripts|bench|conformance|examples|scenarios)\//.test(f) || /\/dist\/(test|bench|conformance|scripts)\//.test(f) || f.endsWith('.map') || f.endsWith('.ts') && !f.endsWith('.d.ts'))
  assert.deepEqual(stray, [])
  const manifest = JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' })) as Record<string, unknown>
  assert.equal(manifest.name, 'racelab')
  assert.deepEqual(manifest.bin, { race: 'bin/race' })
  assert.equal(manifest.scripts, undefined, 'no scripts: nothing for npm to run or to warn about on install')
})

test('a tarball packed without its build (npm pack --ignore-scripts, no dist/): its race says so in one line, exit 3', () => {
  // What npm pack makes when scripts are off (ignore-scripts=true in an .npmrc, or the flag) in a tree not built.
  const tree = path.join(work, 'unbuilt')
  fs.mkdirSync(path.join(tree, 'bin'), { recursive: true })
  for (const f of ['package.json', 'README.md', 'bin/race']) fs.copyFileSync(path.join(ROOT, f), path.join(tree, f))
  fs.cpSync(path.join(ROOT, 'docs'), path.join(tree, 'docs'), { recursive: true })
  const out = path.join(work, 'unbuilt-packed') // not beside the real tarball: both are racelab-<version>.tgz
  fs.mkdirSync(out)
  const [made] = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', out], { cwd: tree, encoding: 'utf8' })) as { filename: string }[]
  execFileSync('tar', ['-xzf', path.join(out, made.filename), '-C', out])
  assert.equal(fs.existsSync(path.join(out, 'package', 'dist')), false, 'the tarball has no dist/')
  const r = spawnSync(process.execPath, [path.join(out, 'package', 'bin', 'race'), 'run', 'advisory'], { encoding: 'utf8' })
  assert.equal(r.status, 3, r.stderr)
  assert.equal(r.stdout, '')
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines.length, 1, r.stderr)
  assert.match(lines[0], /^race: could not run: racelab in .* is not built \(it has no dist\/\): .*npm run build.*npm run pack/)
})

test('npm install of the tarball into a project outside the checkout: no install script of racelab to approve', async () => {
  const r = await sh('npm', ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline'], { npm_config_offline: 'false' })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.doesNotMatch(r.stdout + r.stderr, /racelab@[^\s]* \(/, 'racelab has no install script for allowScripts')
  assert.ok(fs.existsSync(path.join(proj, 'node_modules', '.bin', 'race')))
  const installed = JSON.parse(fs.readFileSync(path.join(proj, 'node_modules', 'racelab', 'package.json'), 'utf8')) as { version: string }
  const v = await sh('npx', ['race', '--version'])
  assert.equal(v.code, 0, v.stderr)
  assert.equal(v.stdout.trim(), installed.version, "npx race is the project's racelab")
})

test('as root, a project under a private folder: the embedded server runs from a copy of its binaries the postgres user can read, exit 0', { skip: process.getuid?.() !== 0 && 'race runs the embedded server as postgres only when it is root' }, async () => {
  // mkdtemp made the folder 0700, as a project under /root is.
  assert.equal(fs.statSync(work).mode & 0o777, 0o700)
  const r = await sh('npx', ['race', 'run', 'advisory', '--n', '5', '--max-pending', '3', '--no-color'], { DATABASE_URL: '', PGHOST: '', PGDATABASE: '' }).finally(() => fs.chmodSync(work, 0o755))
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /PostgreSQL 18\.\d+ \(embedded\)/)
  assert.match(r.stdout, /^ {11}MATCH$/m)
  // npm wrote the package's files in its own order, with new times: the bundle still runs (its modules did not change).
  const v = await sh('npx', ['race', '--version'], { RACE_CODE_CACHE: 'check' })
  assert.equal(v.code, 0, v.stderr)
  assert.equal(v.stderr, 'race: code cache accepted\n')
})

test('npx race run advisory --n 5 --max-pending 3 in the project: MATCH, exit 0', async () => {
  const r = await sh('npx', ['race', 'run', 'advisory', '--n', '5', '--max-pending', '3', '--no-color'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /invariant {2}at most 3 pending requests for the user: observed 3 pending {2}HELD/)
  assert.match(r.stdout, /^ {11}MATCH$/m)
})

test('npx race check in the project: every built-in scenario as documented', async () => {
  const r = await sh('npx', ['race', 'check', '--json'])
  const doc = JSON.parse(r.stdout) as { exitCode: number; matched: boolean; results: { scenario: string; case: string; matched: boolean; deviations: string[] }[] }
  const off = doc.results.filter((c) => !c.matched).map((c) => `${c.scenario} ${c.case}: ${c.deviations.join('; ')}`)
  assert.equal(r.code, 0, off.join('\n') + r.stderr)
  assert.equal(doc.exitCode, 0)
  assert.equal(doc.matched, true)
  assert.ok(doc.results.length >= 30, `${doc.results.length} cases`)
  assert.deepEqual(off, [])
})

// The checkout's own example, copied into the project as a user would write it there.
const COUPON = fs.readFileSync(path.join(ROOT, 'examples', 'coupon.race.mjs'), 'utf8')

test("a .mjs scenario importing racelab by name runs in the project, and its mistakes are one line", async () => {
  fs.writeFileSync(path.join(proj, 'coupon.race.mjs'), COUPON)
  const r = await sh('npx', ['race', 'run', './coupon.race.mjs', '--no-color'], { COLUMNS: '200' })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /redeemed at most once: observed uses=2 {2}VIOLATED/)
  assert.match(r.stdout, /expected {3}anomaly: s1 committed, s2 committed {2}MATCH/)
  const mistakes: [string, (s: string) => string, RegExp][] = [
    ['no-count', (s) => s.replace(/ {2}sessionCount: .*\n/, ''), /sessionCount is missing: say how many sessions it runs, e\.g\. sessionCount: \{ default: 2 \}/],
    ['string-setup', (s) => s.replace(/setup: \[.*\],/, "setup: 'create table coupons (code text primary key, uses int)',"), /setup must be a list of SQL statements, one string each/],
    ['replicate-no-n', (s) => s.replace('replicate(v.n, {', 'replicate({').replace('\n    }),', '\n    }, 2),'), /replicate\(n, session\): n is how many sessions \(v\.n\), got an object/],
    ['no-default', () => 'export const x = 1\n', /its default export must be defineScenario\(\{ id, sessionCount, setup, sessions, invariant, documented \}\) from 'racelab', got nothing/],
  ]
  // The project's installed race itself: npx finding it is shown above, and costs seconds a run.
  const bin = path.join(proj, 'node_modules', '.bin', 'race')
  for (const [name, edit, msg] of mistakes) {
    fs.writeFileSync(path.join(proj, `${name}.mjs`), edit(COUPON))
    const m = await sh(bin, ['run', `./${name}.mjs`])
    assert.equal(m.code, 2, `${name}: ${m.stdout}${m.stderr}`)
    assert.equal(m.stderr.trim().split('\n').length, 1, m.stderr)
    assert.match(m.stderr, msg)
  }
})

test('a node:test file using run() from racelab', async () => {
  fs.writeFileSync(
    path.join(proj, 'races.test.mjs'),
    `import { test } from 'node:test'
import assert from 'node:assert/strict'
import { run, RaceError } from 'racelab'

test('the advisory-lock fix holds with 5 sessions', async () => {
  const r = await run('advisory', { n: 5, params: { maxPending: 3 } })
  assert.ok(r.ok, r.text)
  assert.equal(r.invariant.held, true)
  assert.equal(r.sessions.filter((s) => s.outcome === 'committed').length, 3)
})

test('check-then-insert without the lock loses, in lockstep', async () => {
  const r = await run('./coupon.race.mjs')
  assert.equal(r.verdict, 'anomaly', r.text)
  assert.ok(r.ok, r.text)
  const held = await run('broken', { schedule: 'lockstep', expect: 'held' })
  assert.equal(held.ok, false, 'expect held fails on a violation')
  assert.equal(held.exitCode, 1)
})

test('bad input rejects with the one line and exit code 2', async () => {
  await assert.rejects(run('advisroy'), (e) => e instanceof RaceError && e.exitCode === 2 && /did you mean 'advisory'/.test(e.message))
  await assert.rejects(run('advisory', { params: { maxPendng: 3 } }), (e) => e.exitCode === 2 && /params\\.maxPendng is not a param of advisory/.test(e.message))
})
`,
  )
  const r = await sh(process.execPath, ['--test', '--test-reporter=spec', 'races.test.mjs'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /pass 3/)
  assert.match(r.stdout, /fail 0/)
})

test("a .mts file type-checks against the package's types (and a wrong option is a type error)", async () => {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--skipLibCheck', '--typeRoots', path.join(ROOT, 'node_modules', '@types')]
  fs.writeFileSync(path.join(proj, 'good.mts'), `import { run, defineScenario, type RunResult } from 'racelab'\nconst r: RunResult = await run('advisory', { n: 5, params: { maxPending: 3 } })\nconst v: string = r.verdict\nexport { v, defineScenario }\n`)
  fs.writeFileSync(path.join(proj, 'bad.mts'), `import { run } from 'racelab'\nawait run('advisory', { sessions: 5 })\n`)
  // One tsc over both (its start-up is most of its time): every error it reports is bad.mts's one.
  const r = await sh(process.execPath, [tsc, ...args, 'good.mts', 'bad.mts'])
  assert.notEqual(r.code, 0)
  const errors = r.stdout.split('\n').filter((l) => /error TS\d+/.test(l))
  assert.equal(errors.length, 1, r.stdout + r.stderr)
  assert.match(errors[0], /^bad\.mts\(2,.*'sessions' does not exist in type 'RunOptions'/)
})

/**
 * The project's own dependencies for the tests below, at the versions the checkout tests (racelab needs none of them
 * itself): one npm install for all of them, the first test that needs them waits for it.
 */
let libsInstalled: Promise<void> | undefined
function installLibs(): Promise<void> {
  libsInstalled ??= (async () => {
    const dev = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies
    const libs = ['pg', 'typeorm', 'prisma', '@prisma/client', '@prisma/adapter-pg', 'vitest', 'jest'].map((p) => `${p}@${dev[p]}`)
    const i = await sh('npm', ['install', ...libs, '--no-audit', '--no-fund', '--prefer-offline'], { npm_config_offline: 'false' })
    assert.equal(i.code, 0, i.stdout + i.stderr)
  })()
  return libsInstalled
}

test('a TypeORM function and a Prisma 7 function race in the project as they race in the checkout', async () => {
  await installLibs()
  // The checkout's examples, copied as a user's own files.
  const ex = path.join(ROOT, 'examples', 'app')
  for (const f of ['orders.mjs', 'orders-typeorm.mjs', 'orders-typeorm.race.mjs', 'orders-prisma.mjs', 'orders-prisma.race.mjs']) fs.copyFileSync(path.join(ex, f), path.join(proj, f))
  fs.mkdirSync(path.join(proj, 'prisma'), { recursive: true })
  fs.copyFileSync(path.join(ex, 'prisma', 'schema.prisma'), path.join(proj, 'prisma', 'schema.prisma'))
  // prisma generate needs only npm packages; its CLI's engine download (not from the npm registry) is skipped.
  const g = await sh('npx', ['prisma', 'generate', '--schema', 'prisma/schema.prisma'], { PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' })
  assert.equal(g.code, 0, g.stdout + g.stderr)
  assert.ok(fs.existsSync(path.join(proj, 'prisma', 'generated', 'index.js')))
  // The checkout's own example needs its client too (not committed; app/app-layers generates it): made here when this
  // file runs first, so that the result does not depend on the order of the suite's files.
  if (!fs.existsSync(path.join(ex, 'prisma', 'generated', 'index.js'))) {
    const c = await sh(process.execPath, [path.join(ROOT, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', path.join(ex, 'prisma', 'schema.prisma')], { PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' })
    assert.equal(c.code, 0, c.stdout + c.stderr)
  }
  for (const lib of ['typeorm', 'prisma']) {
    const args = ['run', `orders-${lib}.race.mjs`, '--n', '3', '--schedule', 'lockstep', '--json']
    const here = await sh('npx', ['race', ...args])
    assert.equal(here.code, 0, here.stdout + here.stderr)
    const there = await race(args.map((a) => (a.endsWith('.race.mjs') ? path.join(ex, a) : a)), { url: process.env.DATABASE_URL })
    assert.equal(there.code, 0, there.stderr)
    const pick = (out: string) => {
      const j = JSON.parse(out) as { verdict: string; order: string; matched: boolean; sessions: { name: string; outcome: string }[] }
      return { verdict: j.verdict, order: j.order, matched: j.matched, outcomes: j.sessions.map((x) => `${x.name} ${x.outcome}`) }
    }
    assert.deepEqual(pick(here.stdout), pick(there.stdout), lib)
    assert.equal(pick(here.stdout).verdict, 'anomaly', lib)
  }
})

/** The test files docs/app-races.md shows (section 10), as they stand there. */
function docFile(name: string): string {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'app-races.md'), 'utf8')
  const m = new RegExp(`<!-- test file: ${name.replace(/\./g, '\\.')} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(doc)
  assert.ok(m, `docs/app-races.md shows ${name}`)
  return m[1]
}

test("vitest and Jest in the project run the documentation's test files: run() and explore() pass on the fix, and fail with race's report on the race", async () => {
  await installLibs()
  const ex = path.join(ROOT, 'examples', 'app')
  for (const f of ['orders.mjs', 'orders.race.mjs', 'orders-locked.race.mjs']) fs.copyFileSync(path.join(ex, f), path.join(proj, f))
  const runners = {
    vitest: { cmd: ['vitest', 'run'], env: {} },
    jest: { cmd: ['jest'], env: { NODE_OPTIONS: '--experimental-vm-modules' } },
  }
  for (const [name, r] of Object.entries(runners)) {
    const file = `orders.${name}.test.mjs`
    const text = docFile(file)
    fs.writeFileSync(path.join(proj, file), text)
    const ok = await sh('npx', [...r.cmd, file], { ...r.env, NO_COLOR: '1', FORCE_COLOR: '0', CI: 'true' })
    assert.equal(ok.code, 0, `${name}: ${ok.stdout}${ok.stderr}`)
    assert.match(ok.stdout + ok.stderr, /2 passed/, name)
    // The same file on the race without its lock: both tests fail, each with what race found.
    const racy = `racy.${name}.test.mjs`
    fs.writeFileSync(path.join(proj, racy), text.replaceAll('./orders-locked.race.mjs', './orders.race.mjs'))
    const bad = await sh('npx', [...r.cmd, racy], { ...r.env, NO_COLOR: '1', FORCE_COLOR: '0', CI: 'true' })
    const out = bad.stdout + bad.stderr
    assert.equal(bad.code, 1, `${name}: ${out}`)
    assert.match(out, /2 failed/, name)
    assert.match(out, /invariant {2}select count\(\*\) <= 1 from orders where status = 'pending': observed\s+VIOLATED/, `${name}: the run's report is the failure message`)
    assert.match(out, /expected {3}held {2}DEVIATION/, name)
    assert.match(out, /\d+ of \d+ interleavings violate; replay: race run .*orders\.race\.mjs --n 2 --schedule "s1\.q1 /, name)
  }
})
