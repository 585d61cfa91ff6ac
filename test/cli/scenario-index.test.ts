// The scenario index (dist/scenarios/index.json): what list, show, run and help read instead of every scenario
// module. Fresh after the build, right (the same summaries the modules give), detected stale when a scenario file
// or the fingerprint changes and then rewritten, and list's output the same with it, without it, and stale.
// Edits happen in a copy of the package (its dist/ and bin/), never in the one the other tests use.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { POOLER_DIR_PREFIX as COMMON_PREFIX } from '../../src/run/lab.js'
import { POOLER_DIR_PREFIX } from '../../src/servers/pooler.js'
import { unavailableOn } from '../../src/plan.js'
import { indexState, INDEX_FILE, scenarios, summaries, summaryOf } from '../../src/registry.js'
import { ENGINES } from '../../src/scenario.js'
import { ROOT, race } from '../support/server.js'

/** A copy of the package: dist/src, dist/scenarios, bin, package.json, and node_modules linked. */
let copy: string
before(() => {
  copy = fs.mkdtempSync(path.join(os.tmpdir(), 'race-index-'))
  for (const part of ['dist/src', 'dist/scenarios', 'bin']) fs.cpSync(path.join(ROOT, part), path.join(copy, part), { recursive: true, preserveTimestamps: true })
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'))
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'))
})
after(() => {
  fs.rmSync(copy, { recursive: true, force: true })
})

const bin = () => path.join(copy, 'bin', 'race')
const index = () => path.join(copy, 'dist', 'scenarios', 'index.json')
const readIndex = () => JSON.parse(fs.readFileSync(index(), 'utf8')) as { files: Record<string, [number, number]>; hash: string; scenarios: { id: string; title: string }[] }

/** The copy's registry, loaded fresh (a module instance of its own, so its cache starts empty). */
async function copyState(): Promise<{ fresh: boolean; why?: string }> {
  const m = (await import(`${path.join(copy, 'dist', 'src', 'registry.js')}?at=${Date.now()}${Math.random()}`)) as typeof import('../../src/registry.js')
  return m.indexState()
}

/** What race list prints in every form: the table, JSON, and the MySQL/MariaDB form. */
async function lists(): Promise<string[]> {
  const out: string[] = []
  for (const args of [['list'], ['list', '--json'], ['list', '--database-url', 'mysql://root@127.0.0.1:3306/test']]) {
    const r = await race(args, { bin: bin() })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.equal(r.stderr, '')
    out.push(r.stdout)
  }
  return out
}

test('the build writes a fresh index, and it says what the scenario modules say', async () => {
  execFileSync(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'scenario-index.js')], { stdio: 'pipe' })
  const state = await indexState()
  assert.ok(state.fresh, state.fresh ? '' : state.why)
  const fromModules = (await scenarios()).map(summaryOf)
  assert.deepEqual(await summaries(), JSON.parse(JSON.stringify(fromModules)))
  assert.deepEqual(JSON.parse(fs.readFileSync(INDEX_FILE, 'utf8')).scenarios, JSON.parse(JSON.stringify(fromModules)))
  // The reason a scenario does not run on an engine is the one race run gives (plan.unavailableOn).
  for (const s of await scenarios()) for (const e of ENGINES) assert.equal(summaryOf(s).unavailable[e], unavailableOn(s, e), `${s.id} on ${e}`)
})

test('list prints the same with the index, without it, and with a stale one; a stale or missing index is rewritten', async () => {
  const want = await lists()
  assert.ok((await copyState()).fresh)
  const scenarioFile = path.join(copy, 'dist', 'scenarios', 'advisory.js')

  // Touched (same contents, new mtime): still fresh (the contents' hash agrees), and the new mtime is recorded.
  const later = new Date(Date.now() + 60_000)
  fs.utimesSync(scenarioFile, later, later)
  assert.ok((await copyState()).fresh)
  assert.equal(readIndex().files['scenarios/advisory.js'][1], fs.statSync(scenarioFile).mtimeMs)

  // Edited (a comment added): stale; list loads the modules, prints the same, and rewrites the index.
  fs.appendFileSync(scenarioFile, '\n// edited by a test\n')
  assert.deepEqual(await copyState(), { fresh: false, why: 'the scenario files changed' })
  assert.deepEqual(await lists(), want)
  assert.ok((await copyState()).fresh, 'rewritten by list')

  // Missing: the same output, and written again.
  fs.rmSync(index())
  assert.deepEqual(await copyState(), { fresh: false, why: 'missing' })
  assert.deepEqual(await lists(), want)
  assert.ok(fs.existsSync(index()) && (await copyState()).fresh)

  // A fingerprint that does not match (a wrong mtime and hash): stale, rewritten.
  const bad = readIndex()
  bad.files['scenarios/broken.js'][1] += 1
  bad.hash = 'not the hash'
  fs.writeFileSync(index(), JSON.stringify(bad))
  assert.deepEqual(await copyState(), { fresh: false, why: 'the scenario files changed' })
  assert.deepEqual(await lists(), want)
  assert.ok((await copyState()).fresh)

  // Not JSON: rewritten too.
  fs.writeFileSync(index(), '{ not json')
  assert.deepEqual(await copyState(), { fresh: false, why: 'unreadable' })
  assert.deepEqual(await lists(), want)
  assert.ok((await copyState()).fresh)
})

test('a changed scenario reaches list through the stale index: a new title, a new scenario file', async () => {
  const broken = path.join(copy, 'dist', 'scenarios', 'broken.js')
  const text = fs.readFileSync(broken, 'utf8')
  const title = /title: '([^']+)'/.exec(text)?.[1]
  assert.ok(title, 'broken.js declares its title as a string')
  fs.writeFileSync(broken, text.replace(`title: '${title}'`, "title: 'a title the test gave it'"))
  fs.writeFileSync(path.join(copy, 'dist', 'scenarios', 'broken-copy.js'), text.replace(`id: 'broken'`, `id: 'broken-copy'`))
  const r = await race(['list', '--json'], { bin: bin() })
  assert.equal(r.code, 0, r.stderr)
  const rows = JSON.parse(r.stdout) as { id: string; title: string }[]
  assert.equal(rows.find((x) => x.id === 'broken')?.title, 'a title the test gave it')
  assert.equal(rows.find((x) => x.id === 'broken-copy')?.title, title)
  assert.ok((await copyState()).fresh)
  assert.ok(readIndex().scenarios.some((s) => s.id === 'broken-copy'))
  // run and show know its flags from the same index: the new scenario runs its own way (here: shown).
  const shown = await race(['show', 'broken-copy'], { bin: bin() })
  assert.equal(shown.code, 0, shown.stderr)
})

test('the PgBouncer folder prefix the reaper looks for before loading the pooler is the pooler\'s own', () => {
  assert.equal(COMMON_PREFIX, POOLER_DIR_PREFIX)
})
