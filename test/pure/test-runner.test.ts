// npm test's runner (scripts/test.ts): every test file exactly once, the slowest named ones first, each of those a
// file that exists (a renamed file would otherwise drop back to its place by name, unnoticed).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { FIRST, testFiles } from '../../scripts/test.js'

test('npm test runs every test file once, the slowest first', () => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
  const files = testFiles(root)
  const onDisk = fs
    .readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => fs.readdirSync(path.join(root, d.name)).filter((f) => f.endsWith('.test.js')).map((f) => path.join(root, d.name, f)))
  assert.deepEqual([...files].sort(), onDisk.sort())
  assert.equal(new Set(files).size, files.length)
  for (const f of FIRST) assert.ok(fs.existsSync(path.join(root, `${f}.test.js`)), `${f} is a test file`)
  assert.deepEqual(
    files.slice(0, FIRST.length).map((f) => path.relative(root, f)),
    FIRST.map((f) => `${f}.test.js`),
  )
})
