// MySQL/MariaDB faults that reached the user as "internal error ... please report it" or as a run that could not
// work (issue 20): Ctrl-C/SIGTERM after the GET_LOCK waiters gave up (the connector's own KILL failing with 1094),
// an account's MAX_USER_CONNECTIONS (1226), and --window (PostgreSQL's pg_sleep on MariaDB, 42000/1305). Skipped,
// saying so, when no server answers at MYSQL_URL. Accounts are made here with unique names and dropped after.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { BIN, race } from '../support/server.js'
import { MYSQL_URL, databasesOf, until, useMysql } from './support.js'

const my = useMysql()

/** A race child that holds its race (--hold), resolved once it says so on stderr. */
function holding(args: string[]): Promise<{ pid: number; done: Promise<{ code: number | null; stderr: string }>; kill: (sig: NodeJS.Signals) => void }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    const done = new Promise<{ code: number | null; stderr: string }>((r) => child.on('close', (code) => r({ code, stderr: err })))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    void done.then(() => clearTimeout(timer))
    child.stderr.on('data', (d) => {
      err += d
      if (err.includes('holding for')) resolve({ pid: child.pid!, done, kill: (sig) => child.kill(sig) })
    })
    void done.then(({ code }) => reject(new Error(`exited ${code} before holding: ${err}`)))
  })
}

/** Threads in the run's database that have waited in GET_LOCK for at least `seconds` (the server's TIME column). */
async function userLockWaits(db: string, seconds: number): Promise<number> {
  const rows = (await my.conn!.query(`select count(*) as n from information_schema.processlist where db = ? and state = 'User lock' and time >= ?`, [db, seconds])) as { n: number }[]
  return Number(rows[0].n)
}

for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  test(`${sig} while the GET_LOCK waiters wait and the race holds: exit ${code}, one line, the database dropped`, async (t) => {
    if (my.why) return t.skip(my.why)
    const a = await holding(['run', 'advisory', '--n', '3', '--hold', '20s', '--database-url', MYSQL_URL, '--run-timeout', '60s'])
    const [db] = await databasesOf(my.conn!, a.pid)
    assert.ok(db, 'the run has its database')
    // s2 and s3 wait in GET_LOCK while s1 holds (--hold extends their lock timeout). A signal once they had waited
    // a couple of seconds (by the server's own count) ended in the connector's destroy() KILLing a thread race's
    // cleanup had already ended: 1094 Unknown thread id, "internal error", exit 3 (6 of 6 tries before the fix).
    await until(async () => (await userLockWaits(db, 2)) === 2, 'both waiters 2 s in GET_LOCK')
    a.kill(sig)
    const r = await a.done
    assert.equal(r.code, code, r.stderr)
    // The holding line names the run's thread ids, which the server counts up for every job on it: one of them can
    // be 1094 (it was, in a run of the suite); only race's other lines may not carry the error's code.
    const said = r.stderr.split('\n').filter((l) => !l.startsWith('holding for ')).join('\n')
    assert.doesNotMatch(said, /internal error|1094|please report/)
    assert.match(r.stderr, new RegExp(`race: interrupted by ${sig}: stopped, cleaned up\\n$`))
    assert.deepEqual(await databasesOf(my.conn!, a.pid), [], 'nothing left')
  })
}

test("an account's MAX_USER_CONNECTIONS below --n (1226): one line naming the limit, exit 3, nothing left", async (t) => {
  if (my.why) return t.skip(my.why)
  const user = `race_t_${randomBytes(4).toString('hex')}`
  const password = `pw-${randomBytes(6).toString('hex')}`
  await my.conn!.query(`create user '${user}'@'%' identified by '${password}' with max_user_connections 4`)
  try {
    await my.conn!.query(`grant all on *.* to '${user}'@'%'`)
    const u = new URL(MYSQL_URL)
    u.username = user
    u.password = password
    const r = await race(['run', 'advisory', '--n', '5', '--database-url', u.toString()])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.match(r.stderr, /^race: the server refused a session's connection: .*\(42000\/1226 ER_USER_LIMIT_REACHED\): .*use a smaller --n, or raise the account's MAX_USER_CONNECTIONS$/m)
    assert.doesNotMatch(r.stderr, /internal error|please report|\n\s+at /)
    assert.ok(!r.stderr.includes(password), 'no password shown')
    assert.deepEqual(await databasesOf(my.conn!, r.pid), [])
  } finally {
    await my.conn!.query(`drop user if exists '${user}'@'%'`)
  }
})

test("--window on MariaDB sleeps with the engine's own SLEEP, and race show prints what runs", async (t) => {
  if (my.why) return t.skip(my.why)
  const r = await race(['run', 'advisory', '--window', '50ms', '--database-url', MYSQL_URL, '--json'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.deepEqual(doc.sessions.map((s: { outcome: string }) => s.outcome).sort(), ['committed', 'rejected'])
  assert.equal(doc.matched, true)
  const show = await race(['show', 'advisory', '--database-url', MYSQL_URL], { env: { COLUMNS: '200' } })
  assert.equal(show.code, 0, show.stderr)
  assert.match(show.stdout, /race point: --window <d> sleeps here, between check and write: select sleep\(0\.3\) for --window 300ms/)
  assert.doesNotMatch(show.stdout, /pg_sleep/)
})

test('every session\'s isolation level is read on InnoDB, a rejected one\'s and a deadlock victim\'s too: none is "?"', async (t) => {
  if (my.why) return t.skip(my.why)
  const r = await race(['run', 'advisory', '--n', '3', '--schedule', 'lockstep', '--database-url', MYSQL_URL, '--json'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout) as { sessions: { outcome: string; isolation: string | null }[] }
  assert.deepEqual(doc.sessions.map((s) => s.outcome).sort(), ['committed', 'rejected', 'rejected'])
  assert.deepEqual(doc.sessions.map((s) => s.isolation), ['read committed', 'read committed', 'read committed'])
  const d = await race(['run', 'lost-update', '--isolation', 'serializable', '--database-url', MYSQL_URL, '--json'])
  assert.equal(d.code, 0, d.stdout + d.stderr)
  const dd = JSON.parse(d.stdout) as { sessions: { sqlstate: string | null; isolation: string | null }[] }
  assert.ok(dd.sessions.some((s) => s.sqlstate === '40001/1213'), 'a deadlock victim')
  assert.deepEqual(dd.sessions.map((s) => s.isolation), ['serializable', 'serializable'])
})
