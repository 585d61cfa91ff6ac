// docs/dev/test-map.md (CONTRIBUTING.md, "Layout"): the table from each src module to the tests that reach it is what
// scripts/test-map.ts writes from the import lines today, and no module of src/ is left that no test reaches.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BY_PATH, TEST_MAP_DOC, testMap, testMapDoc } from '../../scripts/test-map.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

test('docs/dev/test-map.md is what scripts/test-map.ts writes now (npm run readme, or npm run test-map, rewrites it)', () => {
  assert.ok(fs.existsSync(TEST_MAP_DOC), 'docs/dev/test-map.md is missing: run npm run test-map')
  assert.equal(fs.readFileSync(TEST_MAP_DOC, 'utf8'), testMapDoc(), 'docs/dev/test-map.md is out of date: run npm run test-map')
})

test('every module of src/ is reached by a test, directly or on the way', () => {
  const m = testMap()
  assert.ok(m.modules.length > 100, `read ${m.modules.length} modules of src/`)
  assert.deepEqual(m.unreached, [], `modules no test reaches: ${m.unreached.join(', ')}`)
})

test('the arrows that are no import line are still in their source files', () => {
  for (const b of BY_PATH) {
    assert.ok(fs.readFileSync(path.join(ROOT, 'src', b.from), 'utf8').includes(b.shown), `src/${b.from} no longer says ${b.shown}`)
    assert.ok(fs.existsSync(path.join(ROOT, 'src', b.to)), `src/${b.to} is gone`)
  }
})

test('the map reads the arrows: an import, a helper that runs the CLI, and a module reached only through another', () => {
  const m = testMap()
  // This file imports scripts/test-map.ts, which imports no src module: it reaches none.
  assert.ok(![...m.direct.values(), ...m.onTheWay.values()].some((ts) => ts.includes('pure/test-map')))
  // pure/app-parts imports lex.ts itself, and app/parts.ts, which imports lex.ts too: it is listed once, as an import.
  assert.ok(m.direct.get('src/lex.ts')!.includes('pure/app-parts'))
  assert.ok(!m.onTheWay.get('src/lex.ts')!.includes('pure/app-parts'))
  // cli/cli runs bin/race through support/server.ts's race(): it reaches the commander program on the way.
  assert.ok(m.onTheWay.get('src/cli.ts')!.includes('cli/cli'))
  // pure/layers imports nothing of src/ and runs no CLI.
  assert.ok(!m.onTheWay.get('src/cli.ts')!.includes('pure/layers'))
})
