// Faults in `race spec`: the server closes a connection the spec runs on. A session's own backend ends itself,
// is terminated by another session while it waits for a lock, or times out idle (idle_session_timeout): race goes
// on as isolationtester does (the FATAL error in the transcript; a later step of that session fails to be sent,
// exit 1), says in one line on stderr which session the server ended and why when the spec failed (and nothing
// beside the transcript when it ran to its end, as isolationtester), and never spins on the closed
// socket. race's own control connection terminated mid-spec stops the spec: exit 3, one line. Each ends in
// bounded time, with isolationtester's transcript, and nothing left behind. Every wait here is on the server's
// state (a lock, a backend gone), never a guessed delay; a hang shows as the child killed by the test's bound.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import { spawn } from 'node:child_process'
import { startEmbedded } from '../../src/servers/embedded.js'
import { binariesFor, isolationTester } from '../../src/servers/versions.js'
import { baseEnv, NATIVE, runTo, testerFor } from '../support/conformance.js'
import { leftBy, oneCleanLine, outside, useOutside } from '../support/faults.js'
import { race } from '../support/server.js'

const ctx = useOutside()
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-spec-lost-'))
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function specFile(name: string, text: string): string {
  const f = path.join(dir, `${name}.spec`)
  fs.writeFileSync(f, text)
  return f
}

/** race spec on the test server, bounded: a hang is the child killed (code null), which fails the test. */
async function raceSpec(file: string) {
  const r = await race(['spec', file, '--schema', '--run-timeout', '90s'], { url: ctx.server.url, timeoutMs: 120_000 })
  assert.notEqual(r.code, null, `race spec did not end within the test's bound (a hang); stdout: ${r.stdout}`)
  return r
}

const CLOSED = 'FATAL:  terminating connection due to administrator command\nserver closed the connection unexpectedly\n'

test("a session that terminates its own backend: the step shows the FATAL, the next step fails to be sent (exit 1, as isolationtester's), one line says why (not a spin at the next step)", async () => {
  const file = specFile('self-terminate', 'session s1\nstep a { select pg_terminate_backend(pg_backend_pid()); }\nstep b { select 1; }\n')
  const r = await raceSpec(file)
  assert.equal(r.code, 1, r.stderr)
  oneCleanLine(r.stderr, /self-terminate\.spec: the server closed session s1's connection \(57P01 admin_shutdown: terminating connection due to administrator command\) in step a$/)
  assert.ok(r.stdout.includes(`step a: select pg_terminate_backend(pg_backend_pid());\n${CLOSED}`), r.stdout)
  assert.ok(r.stdout.endsWith('failed to send query for step b: no connection to the server\n\n'), r.stdout)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [], 'no schema left')
})

test('a spec whose session ends its own backend in its last step runs to its end, as isolationtester (exit 0), and race prints nothing beside the transcript', async () => {
  const file = specFile('self-terminate-last', 'setup { create table w (x int); }\nteardown { drop table w; }\nsession s1\nstep a { select pg_terminate_backend(pg_backend_pid()); }\nsession s2\nstep b { insert into w values (1); }\nstep c { select count(*) from w; }\npermutation a b c\n')
  const r = await raceSpec(file)
  assert.equal(r.code, 0, r.stderr)
  // isolationtester prints nothing about it but the FATAL in the transcript (conformance/specs/session-ends-itself.spec
  // compares the two on the same server).
  assert.equal(r.stderr, '')
  assert.match(r.stdout, /step c: select count\(\*\) from w;\ncount\n-----\n    1\n\(1 row\)\n\n$/)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [], 'no schema left')
})

test('a session terminated by another while it waits for a lock: <... completed> with the FATAL, then its next step fails to be sent (exit 1)', async () => {
  // s2 holds the lock s1 waits for, and terminates exactly the backends it blocks (s1): no name matching.
  const file = specFile(
    'terminated-waiting',
    `session s1
step a { select pg_advisory_xact_lock(1); }
step b { select 1; }
session s2
step h { begin; select pg_advisory_xact_lock(1); }
step k { select count(pg_terminate_backend(pid)) from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid)); }
step c { commit; }
permutation h a k b c
`,
  )
  const r = await raceSpec(file)
  assert.equal(r.code, 1, r.stderr)
  oneCleanLine(r.stderr, /the server closed session s1's connection \(57P01 admin_shutdown: .*\) in step a$/)
  assert.match(r.stdout, /step a: select pg_advisory_xact_lock\(1\); <waiting \.\.\.>\n/)
  assert.ok(r.stdout.includes(`step a: <... completed>\n${CLOSED}`), r.stdout)
  assert.ok(r.stdout.endsWith('failed to send query for step b: no connection to the server\n\n'), r.stdout)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
})

test('a session ended by idle_session_timeout between its steps: its next step shows the FATAL (57P05), the spec ends as isolationtester (exit 0), nothing beside the transcript', async () => {
  // s1 records its backend and sets a short idle_session_timeout; s2 waits (on the server) until that backend
  // is gone, so s1's next step meets a connection the server has already closed.
  const file = specFile(
    'idle-timeout',
    `setup { create table pids (pid int); }
session s1
setup { insert into pids select pg_backend_pid(); set idle_session_timeout = '50ms'; }
step b { select 1; }
session s2
step w { do $$ begin while exists (select 1 from pg_stat_activity where pid = (select pid from pids)) loop perform pg_sleep(0.01); perform pg_stat_clear_snapshot(); end loop; end $$; }
permutation w b
`,
  )
  const r = await raceSpec(file)
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stderr, '')
  assert.ok(r.stdout.includes('step b: select 1;\nFATAL:  terminating connection due to idle-session timeout\nserver closed the connection unexpectedly\n'), r.stdout)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
})

test("race's own control backend terminated mid-spec: the spec stops (exit 3, one line), its sessions are ended and its schema dropped", async () => {
  // Step a ends the backend that marks the run's schema as alive (the mark names it); step b then waits on a
  // lock the test holds, so only race stopping the run can end it. Carrying on would leave the live run's
  // schema to be reaped by the next race command.
  const key = 7212100000000000020n
  const holder = outside(ctx.server.url, 'race-test holder')
  await holder`select pg_advisory_lock(${String(key)}::bigint)`
  try {
    const file = specFile(
      'control-lost',
      `session s1
step a { select pg_terminate_backend((substr(obj_description(oid, 'pg_namespace'), 6)::jsonb ->> 'backend')::int) from pg_namespace where nspname = current_schema(); }
step b { select pg_advisory_lock(${key}); }
`,
    )
    const r = await raceSpec(file)
    assert.equal(r.code, 3, r.stderr)
    oneCleanLine(r.stderr, /control-lost\.spec: lost race's control connection to .* mid-run \(CONNECTION_CLOSED\): something ended it; the spec stopped, its sessions were ended and its schema dropped/)
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [], 'the run dropped its own schema')
  } finally {
    await holder.end({ timeout: 1 })
  }
})

test("race's transcript of a spec that loses a session is isolationtester's, to its end (both fail to send the next step and exit 1)", async (t) => {
  const [r0] = await ctx.sql`select current_setting('server_version_num')::int as v`
  const tester = testerFor(Number(r0.v))
  if (!tester) return t.skip(`no isolationtester for PostgreSQL ${r0.v} on this machine`)
  const file = specFile(
    'against-isolationtester',
    `session s1
step a { select pg_advisory_xact_lock(2); }
step b { select 1; }
session s2
step h { begin; select pg_advisory_xact_lock(2); }
step k { select count(pg_terminate_backend(pid)) from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid)); }
step c { commit; }
permutation h a k b c
`,
  )
  const r = await raceSpec(file)
  assert.equal(r.code, 1, r.stderr)
  const oracle = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const env: NodeJS.ProcessEnv = { ...process.env, LD_LIBRARY_PATH: path.join(NATIVE, 'lib') }
    for (const k of ['PGOPTIONS', 'PGAPPNAME', 'PGDATESTYLE', 'PGTZ']) delete env[k]
    const child = spawn(tester, [ctx.server.url], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, out })))
    child.stdin.end(fs.readFileSync(file))
  })
  assert.equal(oracle.code, 1, oracle.out)
  assert.equal(r.stdout, oracle.out, 'the same transcript')
  assert.ok(oracle.out.endsWith('failed to send query for step b: no connection to the server\n\n'), oracle.out)
})

test('a role whose sessions end after idle_session_timeout: race spec ends in one line (exit 3), nothing left, no hang', async () => {
  // Every connection of the run is this role's, race's own control too (idle while the spec runs): the step
  // waits until that backend is gone, so the spec outlasts the timeout whatever the machine's load.
  const role = `race_test_idle_${process.pid}`
  const password = `p${process.pid}x${Date.now()}`
  await ctx.sql.unsafe(`create role ${role} login password '${password}'; alter role ${role} set idle_session_timeout = '300ms'`)
  try {
    const [db] = await ctx.sql`select current_database() as d`
    await ctx.sql.unsafe(`grant create on database "${db.d}" to ${role}`)
    const u = new URL(ctx.server.url)
    u.username = role
    u.password = password
    const file = specFile(
      'role-idle-timeout',
      `session s1
step w { do $$ begin while exists (select 1 from pg_stat_activity where pid = (select (substr(obj_description(oid, 'pg_namespace'), 6)::jsonb ->> 'backend')::int from pg_namespace where nspname = current_schema())) loop perform pg_sleep(0.01); perform pg_stat_clear_snapshot(); end loop; end $$; }
step b { select 1; }
`,
    )
    const r = await race(['spec', file, '--schema', '--run-timeout', '90s'], { url: u.toString(), timeoutMs: 120_000 })
    assert.notEqual(r.code, null, 'no hang')
    assert.equal(r.code, 3, r.stdout + r.stderr)
    oneCleanLine(r.stderr, /lost race's control connection|the server closed (session \w+|race's isolationtester control connection)'s connection/)
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
  } finally {
    await ctx.sql.unsafe(`drop owned by ${role}; drop role ${role}`)
  }
})

test("on PostgreSQL 14 race's transcript of a lost session is 14's isolationtester's, whose libpq repeats the server's FATAL line", { skip: process.env.DATABASE_URL ? 'the --pg runs are on the first pass (no DATABASE_URL)' : false }, async () => {
  const bins = await binariesFor(14)
  const server = await startEmbedded({ pg: 14 })
  try {
    const file = specFile('lost-on-14', 'session s1\nstep a { select pg_terminate_backend(pg_backend_pid()); }\nsession s2\nstep b { select 1; }\npermutation a b\n')
    const r = await race(['spec', file, '--database-url', server.url, '--run-timeout', '90s'], { timeoutMs: 120_000 })
    assert.equal(r.code, 0, r.stderr)
    const out = path.join(dir, 'lost-on-14.isolationtester')
    const env: NodeJS.ProcessEnv = { ...baseEnv(), LD_LIBRARY_PATH: path.join(bins.native, 'lib') }
    assert.equal(await runTo(isolationTester(bins), [server.url], env, file, out, 120_000), 0)
    const oracle = fs.readFileSync(out, 'latin1')
    assert.ok(oracle.includes(`FATAL:  terminating connection due to administrator command\n${CLOSED}`), oracle)
    assert.equal(r.stdout, oracle)
  } finally {
    await server.stop()
  }
})
