// Issue 42, item 2, without a server: which local modules a counterexample file binds itself to (the static walk of
// evidence/modules.ts, as docs/counterexamples.md describes it), and how far a guided replay followed the saved order.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import { localImports, relativeSpecifiers } from '../../src/evidence/modules.js'
import { followedOf } from '../../src/evidence/replay.js'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-cx-modules-'))
after(() => fs.rmSync(dir, { recursive: true, force: true }))
const put = (f: string, body: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true })
  fs.writeFileSync(path.join(dir, f), body)
}

test('the specifiers read: static imports and re-exports, import() and require() with a literal; not comments, not packages', () => {
  const text = `import { a } from './a.mjs'
import './side.js'
export { b } from "../b.js"
export * from './star.mjs'
const c = await import('./c.mjs')
const d = require('./d.cjs')
import pg from 'pg'
// import { no } from './commented.mjs'
/* import { no2 } from './block.mjs' */
const url = 'http://example.com/x' // a URL in a string is no import
const dynamic = import(name)`
  assert.deepEqual(relativeSpecifiers(text).sort(), ['../b.js', './a.mjs', './c.mjs', './d.cjs', './side.js', './star.mjs'])
})

test('the walk is transitive, resolves as the loaders do (.js naming a .ts source, no extension, an index file), and leaves out node_modules', () => {
  put('race/app.race.ts', `import { f } from './lib/f.js'\nimport { g } from './lib/g'\nimport { h } from './h'\nimport x from './node_modules/pkg/index.js'\nimport { gone } from './gone.js'`)
  put('race/lib/f.ts', `export { k } from '../../shared/k.mjs'\nexport const f = 1`)
  put('race/lib/g.mjs', `export const g = 1`)
  put('race/h/index.ts', `import { f } from '../lib/f.js'\nexport const h = 1`)
  put('race/node_modules/pkg/index.js', `export default 1`)
  put('shared/k.mjs', `import { app } from '../race/app.race.ts'\nexport const k = 1`)
  const found = localImports(path.join(dir, 'race/app.race.ts')).map((f) => path.relative(dir, f).split(path.sep).join('/'))
  assert.deepEqual(found, ['race/lib/f.ts', 'race/lib/g.mjs', 'race/h/index.ts', 'shared/k.mjs'])
})

test("a guided replay's answer says how far the saved order was followed, and where it was left", () => {
  assert.deepEqual(followedOf('s1.q1 s2.q1 s1.q2', ['s1.q1', 's2.q1', 's1.q2']), { steps: 3, of: 3 })
  assert.deepEqual(followedOf('s1.q1 s2.q1 s1.q2 s2.q2', ['s1.q1', 's1.q2', 's2.q1']), { steps: 1, of: 4, stoppedAt: 'at step 2: the file says s2.q1, the run took s1.q2' })
  assert.deepEqual(followedOf('s1.q1 s2.q1', ['s1.q1']), { steps: 1, of: 2, stoppedAt: 'at step 2: the file says s2.q1, the run took nothing (every session had ended)' })
  assert.equal(followedOf('s1.q1', undefined), undefined)
})
