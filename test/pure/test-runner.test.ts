// npm test's runner (scripts/test.ts): every test file exactly once, the slowest named ones first, each of those a
// file that exists (a renamed file would otherwise drop back to its place by name, unnoticed).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { FIRST, SERIAL, serialServer, testFiles, timeSummary } from '../../scripts/test.js'

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

test("npm test's tail: two lanes, one a server, and no file of one lane opens the other lane's server", () => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
  const name = (f: string) => path.relative(root, f).slice(0, -'.test.js'.length)
  const files = testFiles(root)
  const lanes = { MariaDB: files.filter((f) => serialServer(name(f)) === 'MariaDB'), 'PostgreSQL 15': files.filter((f) => serialServer(name(f)) === 'PostgreSQL 15') }
  assert.ok(lanes.MariaDB.some((f) => name(f) === 'innodb/innodb'))
  assert.ok(lanes['PostgreSQL 15'].some((f) => name(f) === 'cli/explore-jobs'))
  for (const f of files) assert.equal(SERIAL(name(f)), serialServer(name(f)) !== null, name(f))
  // What opens PostgreSQL in a test file (its own server, the machine's PostgreSQL 15), and what opens MariaDB
  const opens = {
    PostgreSQL: /\buseServer\(|\bserverUrls\(|\bPG15\b|:5432\b|\bopenLab\(|from 'postgres'/,
    MariaDB: /\bMYSQL_URL\b|mysql:\/\/|:3306\b|from 'mariadb'/,
  }
  for (const f of lanes.MariaDB) assert.doesNotMatch(fs.readFileSync(f, 'utf8'), opens.PostgreSQL, `${name(f)} (MariaDB lane) opens PostgreSQL`)
  for (const f of lanes['PostgreSQL 15']) assert.doesNotMatch(fs.readFileSync(f, 'utf8'), opens.MariaDB, `${name(f)} (PostgreSQL 15 lane) opens MariaDB`)
})

test("npm test's time summary: the slowest files first, all of them added up, the tail's share of the wall time", () => {
  const times = Array.from({ length: 20 }, (_, i) => ({ file: `a/f${i}`, ms: (i + 1) * 1000, serial: i === 3 || i === 19 }))
  const lines = timeSummary(times, { parallel: 150_000, serial: 50_000 })
  assert.equal(lines.length, 15 + 2)
  assert.match(lines[0], /the 15 slowest of 20 test files/)
  assert.match(lines[1], /^# {3}a\/f19 +20\.0 s {2}\(serial\)$/)
  assert.match(lines[15], /^# {3}a\/f5 +6\.0 s$/)
  assert.ok(!lines.some((l) => /a\/f4 /.test(l)), 'the 16th slowest is not listed')
  assert.match(lines[16], /all files added up: 210\.0 s; two at a time: 150\.0 s of wall time; the serial tail \(2 files, 24\.0 s\): 50\.0 s, 25% of the 200\.0 s in all/)
})
