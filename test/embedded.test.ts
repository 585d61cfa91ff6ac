// The embedded default, as a new user meets it: no database configured at all. The server is stopped and
// its folder removed on success, on a deviation (exit code kept), on Ctrl-C and SIGTERM, and after SIGKILL
// the next run reaps the orphan.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { DIR_PREFIX } from '../src/db/embedded.js'
import { BIN, race } from './helpers.js'

function ourDirs(): string[] {
  return fs.readdirSync(os.tmpdir()).filter((d) => d.startsWith(DIR_PREFIX))
}

function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false
  } catch {
    return false
  }
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

test('the README command works with no database configured, and leaves nothing behind', async () => {
  const before = ourDirs()
  const r = await race(['run', 'advisory', '--n', '5', '--max-pending', '3'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /PostgreSQL 18\.\d+ \(embedded\)/)
  assert.equal((r.stdout.match(/│ committed/g) ?? []).length, 3, r.stdout)
  assert.equal((r.stdout.match(/│ rejected: pending limit reached/g) ?? []).length, 2, r.stdout)
  assert.match(r.stdout, /observed 3 pending\s+HELD/)
  assert.match(r.stdout, /MATCH/)
  assert.deepEqual(ourDirs().filter((d) => !before.includes(d)), [])
})

test('the exit code survives the embedded server: a deviation exits 1', async () => {
  const r = await race(['run', 'advisory', '--schedule', 'lockstep', '--expect', 'violated'])
  assert.equal(r.code, 1, r.stderr)
})

/** The race process that made a server folder (its marker file), so concurrent runs are never confused. */
function ownerOf(dir: string): number | undefined {
  try {
    return JSON.parse(fs.readFileSync(path.join(os.tmpdir(), dir, 'race-owner.json'), 'utf8')).pid
  } catch {
    return undefined
  }
}

/** Backends of a postmaster that are running a statement: their process title ends with the command tag. */
function busyBackends(postmaster: number): number {
  let n = 0
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid !== postmaster) continue
      const title = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim()
      if (/^postgres: postgres postgres .* SELECT$/.test(title)) n++
    } catch {
      /* the process went away while we looked */
    }
  }
  return n
}

/**
 * Starts race on the embedded default with a 20s window, and waits (by looking at the server's backends, not
 * by sleeping a guessed time) until both sessions sit in the window's pg_sleep: the race is under way.
 */
async function startRacing(): Promise<{ child: ChildProcess; dir: string; postmaster: number; exited: Promise<number | null> }> {
  const before = new Set(ourDirs())
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.DATABASE_URL
  const child = spawn(process.execPath, [BIN, 'run', 'broken', '--window', '20s', '--step-timeout', '30s'], { env, stdio: 'ignore' })
  const exited = new Promise<number | null>((r) => child.on('exit', (code, sig) => r(code ?? (sig ? -1 : null))))
  for (let i = 0; i < 600; i++) {
    const dir = ourDirs().find((d) => !before.has(d) && ownerOf(d) === child.pid)
    const pidFile = dir && path.join(os.tmpdir(), dir, 'data', 'postmaster.pid')
    if (pidFile && fs.existsSync(pidFile)) {
      const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0])
      if (postmaster && busyBackends(postmaster) >= 2) return { child, dir: path.join(os.tmpdir(), dir!), postmaster, exited }
    }
    await sleep(25)
  }
  child.kill('SIGKILL')
  throw new Error('race never got to the race')
}

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
