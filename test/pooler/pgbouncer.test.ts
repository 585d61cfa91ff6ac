// A real PgBouncer between race and the server (the embedded PostgreSQL 18 by default, DATABASE_URL when set):
// the leak of advisory-locks §6 seen backend by backend, the xact-lock scenarios unchanged, race check and race
// bench through it, --pooled, and nothing left behind: no pgbouncer process, no folder, also after Ctrl-C and
// SIGKILL. Every test here needs the pgbouncer binary: without it they are skipped, saying why.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { findPgbouncer, POOLER_DIR_PREFIX, startPooler } from '../../src/servers/pooler.js'
import { resolveTarget } from '../../src/db/target.js'
import type { SessionReport, TrialFacts } from '../../src/engine/types.js'
import type { Pool } from '../../src/scenario.js'
import { leftBy, oneCleanLine } from '../support/faults.js'
import { alive, runDirsOf, spawnRace, until, type Child } from '../support/procs.js'
import { race, runScenario, useLab } from '../support/server.js'

function why(): string | false {
  try {
    findPgbouncer()
  } catch (e) {
    return `needs PgBouncer: ${(e as Error).message}`
  }
  if (os.userInfo().uid === 0) {
    try {
      fs.accessSync('/etc/passwd')
      if (!/^postgres:/m.test(fs.readFileSync('/etc/passwd', 'utf8'))) return 'needs a postgres OS user: PgBouncer refuses to run as root'
    } catch {
      /* not Linux-like: let race say it */
    }
  }
  return false
}
const skip = why()
const ctx = useLab()

const by = (t: TrialFacts, name: string): SessionReport => t.sessions.find((s) => s.name === name)!
const backendsOf = (s: SessionReport, steps?: string[]) => (s.steps ?? []).filter((x) => !steps || steps.includes(x.step)).map((x) => x.backend)
const POOL: Pool = { kind: 'pgbouncer', mode: 'transaction', size: 2, resetAlways: false }

/** The PgBouncer folders (and their pgbouncer pids) a race process owns. */
function poolersOf(pid: number): { dir: string; pgbouncer: number }[] {
  const out: { dir: string; pgbouncer: number }[] = []
  for (const name of fs.readdirSync(os.tmpdir()).filter((d) => d.startsWith(POOLER_DIR_PREFIX))) {
    const dir = path.join(os.tmpdir(), name)
    try {
      if (JSON.parse(fs.readFileSync(path.join(dir, 'race-owner.json'), 'utf8')).pid !== pid) continue
      out.push({ dir, pgbouncer: Number(fs.readFileSync(path.join(dir, 'pgbouncer.pid'), 'utf8').trim()) || 0 })
    } catch {
      /* being created or removed: look again */
    }
  }
  return out
}

function nothingLeft(pid: number, seen: { dir: string; pgbouncer: number }[] = []): void {
  assert.deepEqual(poolersOf(pid), [], 'no PgBouncer folder of this race left')
  for (const p of seen) {
    assert.ok(!fs.existsSync(p.dir), `${p.dir} removed`)
    if (p.pgbouncer) assert.ok(!alive(p.pgbouncer), `pgbouncer ${p.pgbouncer} stopped`)
  }
}

test('session-lock through PgBouncer (transaction mode): s2 lands on the backend s1 locked on and holds it; s3 waits on another until 55P03', { skip }, async () => {
  const [t] = (await runScenario(ctx.lab, 'session-lock', { pool: POOL })).trials
  assert.deepEqual(t.comparison, { matched: true, deviations: [] })
  assert.equal(t.verdict, 'anomaly')
  assert.equal(t.invariant.observed, 'next borrower holds 1')
  const [b1] = backendsOf(by(t, 's1'), ['begin'])
  assert.ok(b1 && b1 > 0)
  assert.deepEqual(backendsOf(by(t, 's1'), ['begin', 'lock', 'again', 'rollback']), [b1, b1, b1, b1], 'its transaction stayed on one server connection')
  assert.deepEqual(backendsOf(by(t, 's2')), [b1, b1, b1], 's2, another client, ran on the backend s1 used')
  const s3 = by(t, 's3')
  assert.equal(s3.sqlstate, '55P03')
  assert.ok(backendsOf(s3).every((b) => b !== null && b !== b1), 's3 was lent the other server connection')
  assert.ok(s3.waitedMs > 0, 's3 was seen waiting (the pooler said which backend it ran on; the server that it was blocked)')
  assert.ok(t.events.some((e) => e.session === 's2' && e.kind === 'ok' && e.backend === b1), 'the timeline names the backend')
  const [x] = (await runScenario(ctx.lab, 'session-lock', { pool: POOL, params: { xact: true } })).trials
  assert.equal(x.verdict, 'clean')
  assert.equal(x.invariant.observed, 'next borrower holds 0')
})

test('pool-isolation-leak through PgBouncer: transaction mode leaks SERIALIZABLE to the next client; reset-always and session mode do not', { skip }, async () => {
  const pool: Pool = { ...POOL, size: 1 }
  const [leak] = (await runScenario(ctx.lab, 'pool-isolation-leak', { pool })).trials
  assert.equal(leak.verdict, 'anomaly')
  assert.equal(by(leak, 'b').isolation, 'serializable', 'b asked for nothing and ran at SERIALIZABLE')
  assert.deepEqual(backendsOf(by(leak, 'b')), backendsOf(by(leak, 'a'), ['a_begin', 'a_work', 'a_commit']))
  const [always] = (await runScenario(ctx.lab, 'pool-isolation-leak', { pool: { ...pool, resetAlways: true } })).trials
  assert.equal(always.verdict, 'clean')
  assert.equal(by(always, 'a').isolation, 'read committed', "the reset after A's SET took A's own level too")
  assert.ok(always.comparison.matched, always.comparison.deviations.join('; '))
  const [session] = (await runScenario(ctx.lab, 'pool-isolation-leak', { pool: { ...pool, mode: 'session' } })).trials
  assert.equal(session.verdict, 'clean')
  assert.equal(by(session, 'b').isolation, 'read committed')
})

test('prepared-statement through PgBouncer: c2 runs the statement c1 prepared; c1 finds its own missing (26000)', { skip }, async () => {
  const [t] = (await runScenario(ctx.lab, 'prepared-statement', { pool: POOL })).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(by(t, 'c1').sqlstate, '26000')
  assert.equal(t.invariant.observed, "c2 ran c1's")
  const [prepared] = backendsOf(by(t, 'c1'), ['prepare'])
  assert.deepEqual(backendsOf(by(t, 'c2')), [prepared, prepared, prepared], 'c2 ran on the backend c1 prepared on')
  const [ran] = backendsOf(by(t, 'c1'), ['run'])
  assert.ok(ran && ran !== prepared, 'c1 ran on another one')
  const [direct] = (await runScenario(ctx.lab, 'prepared-statement')).trials
  assert.equal(direct.verdict, 'prevented')
  assert.equal(by(direct, 'c2').sqlstate, '26000')
})

test('race run session-lock --pooler pgbouncer: the leak, backend by backend; nothing left', { skip }, async () => {
  // Wide: what is read here is each line's content, not how it wraps (the next test reads the widths).
  const r = await race(['run', 'session-lock', '--pooler', 'pgbouncer'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /pooler {5}PgBouncer \d+\.\d+\.\d+, transaction mode, pool size 2/)
  const s1 = /backends {3}s1 {2}(\d+): begin, lock, again, rollback/.exec(r.stdout)
  assert.ok(s1, r.stdout)
  assert.match(r.stdout, new RegExp(`\\n {11}s2  ${s1[1]}, the one s1 used: begin, mine, commit`))
  assert.match(r.stdout, /s3 .* failed in lock .* 55P03 lock_not_available/)
  assert.match(r.stdout, /expected {3}anomaly: s1 committed, s2 committed, s3 55P03  MATCH/)
  nothingLeft(r.pid)
})

test('COLUMNS=80 and 120: a pooled run fits (the backends column and lines, the timeline with its backends), and keeps them whole', { skip }, async () => {
  for (const w of [80, 120]) {
    const r = await race(['run', 'session-lock', '--pooler', 'pgbouncer', '--timeline'], { url: ctx.server.url, env: { COLUMNS: String(w) } })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    const wide = r.stdout.split('\n').filter((l) => [...l].length > w)
    assert.deepEqual(wide, [], `at ${w} columns`)
    // Read back without the wraps, the backends lines say the same as at any width.
    const flat = r.stdout.replace(/\n +/g, ' ')
    const s1 = /backends +s1 +(\d+): begin, lock, again, rollback/.exec(flat)
    assert.ok(s1, r.stdout)
    assert.match(flat, new RegExp(`s2 +${s1[1]}, the one s1 used: begin, mine, commit`))
    assert.match(r.stdout, /│ backends │/)
    assert.match(r.stdout, new RegExp(`^\\S+ +${s1[1]} lock → ok`, 'm'), 'the timeline names the backend of each step')
    nothingLeft(r.pid)
  }
})

test('race run session-lock --pooler pgbouncer on the embedded default: PgBouncer in front of race\'s own PostgreSQL 18; both gone after', { skip }, async () => {
  const r = await race(['run', 'session-lock', '--pooler', 'pgbouncer'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /PostgreSQL 18\.\d+ \(embedded\)/)
  assert.match(r.stdout, /expected {3}anomaly: s1 committed, s2 committed, s3 55P03  MATCH/)
  nothingLeft(r.pid)
  assert.deepEqual(runDirsOf(r.pid), [], 'the embedded server is gone too')
})

test('race run advisory --pooler pgbouncer --n 5 --max-pending 3: 3 committed, 2 rejected, each on a backend', { skip }, async () => {
  const r = await race(['run', 'advisory', '--pooler', 'pgbouncer', '--n', '5', '--max-pending', '3', '--json'], { url: ctx.server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.match(doc.pooler, /^PgBouncer .*transaction mode, pool size 5/)
  assert.equal(doc.sessions.filter((s: SessionReport) => s.outcome === 'committed').length, 3)
  assert.equal(doc.sessions.filter((s: SessionReport) => s.reason === 'pending limit reached').length, 2)
  for (const s of doc.sessions as SessionReport[]) assert.ok(s.steps!.length && s.steps!.every((x) => typeof x.backend === 'number'), `${s.name}: every step in a transaction`)
  assert.equal(doc.matched, true)
  nothingLeft(r.pid)
})

test('race check --pooler pgbouncer: every pooled case behaves as documented', { skip }, async () => {
  const r = await race(['check', '--pooler', 'pgbouncer', '--json'], { url: ctx.server.url, timeoutMs: 180_000 })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.equal(doc.matched, true)
  const cases = doc.results.map((x: { scenario: string; case: string }) => `${x.scenario} ${x.case}`)
  for (const c of ['session-lock default', 'session-lock session mode', 'pool-isolation-leak reset query always', 'prepared-statement default', 'advisory n=5 max-pending=3']) assert.ok(cases.includes(c), c)
  assert.ok(doc.results.every((x: { pool?: Pool; matched: boolean }) => x.pool?.kind === 'pgbouncer' && x.matched))
  nothingLeft(r.pid)
})

test('race bench --pooler pgbouncer: direct, direct with unnamed statements, and pooled, side by side; nothing left', { skip }, async () => {
  const r = await race(['bench', '--pooler', 'pgbouncer', '--workload', 'advisory', '--isolation', 'rc', '--clients', '2', '--duration', '1s', '--warmup', '0s', '--json'], { url: ctx.server.url, timeoutMs: 120_000 })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.match(doc.pooler, /^PgBouncer .*transaction mode, pool size 2/)
  const [cell] = doc.cells
  for (const k of ['race', 'unnamed', 'pooled']) assert.ok(cell[k].txns > 0 && cell[k].failures === 0, k)
  assert.equal(cell.pooledPerDirect, cell.pooled.tps / cell.unnamed.tps)
  assert.equal(cell.unnamedPerPrepared, cell.unnamed.tps / cell.race.tps)
  nothingLeft(r.pid)
})

/** A pooled run held (--hold) with its PgBouncer up: the folder and the pgbouncer pid. */
async function heldPooledRun(): Promise<{ child: Child; p: { dir: string; pgbouncer: number } }> {
  const child = spawnRace(['run', 'advisory', '--pooler', 'pgbouncer', '--hold', '30s', '--lock-timeout', '60s'], ctx.server.url)
  await until('the hold', () => /holding for/.test(child.stderr()))
  const [p] = poolersOf(child.child.pid!)
  assert.ok(p && p.pgbouncer && alive(p.pgbouncer), 'its PgBouncer runs')
  return { child, p }
}

test('Ctrl-C during a pooled run: exit 130, PgBouncer stopped, its folder removed', { skip }, async () => {
  const { child, p } = await heldPooledRun()
  child.child.kill('SIGINT')
  const r = await child.done
  assert.equal(r.code, 130, r.stderr)
  oneCleanLine(r.stderr.replace(/^holding for [^\n]*\n  race locks[^\n]*\n/, ''), /interrupted by SIGINT: stopped, cleaned up/)
  nothingLeft(child.child.pid!, [p])
  assert.deepEqual(await leftBy(ctx.lab.control, child), [])
})

test('SIGKILL during a pooled run: the orphaned PgBouncer and its folder are reaped by the next race command', { skip }, async () => {
  const { child, p } = await heldPooledRun()
  child.child.kill('SIGKILL')
  await child.done
  assert.ok(alive(p.pgbouncer) && fs.existsSync(p.dir), 'race could not stop it: an orphan')
  const next = await race(['run', 'advisory'], { url: ctx.server.url })
  assert.equal(next.code, 0, next.stderr)
  nothingLeft(child.child.pid!, [p])
})

test('--pooled: a pooler that refuses search_path is one line (exit 3); the same run against a server that passes it works', { skip }, async () => {
  // A PgBouncer started here plays the user's pooler: PgBouncer 1.18 refuses search_path as a startup parameter.
  const theirs = await startPooler({ target: resolveTarget(ctx.server.url), config: { mode: 'transaction', size: 2, resetAlways: false }, setup: { schema: 'public' }, connectTimeoutMs: 5000 })
  try {
    const r = await race(['run', 'advisory', '--pooled', '--database-url', theirs.target.url!])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    oneCleanLine(r.stderr, /the pooler at .* refused race's session \(08P01: unsupported startup parameter: search_path\)/)
    assert.doesNotMatch(r.stderr, new RegExp(encodeURIComponent(new URL(theirs.target.url!).password)), 'no password printed')
  } finally {
    await theirs.stop()
  }
  const ok = await race(['run', 'advisory', '--pooled', '--n', '3', '--database-url', ctx.server.url], { env: { COLUMNS: '200' } })
  assert.equal(ok.code, 0, ok.stdout + ok.stderr)
  assert.match(ok.stdout, /a pooler; control direct to /)
})

test('pooler input: one line, exit 2 (or 3 without the binary), before any connection', async () => {
  for (const [args, re] of [
    [['run', 'advisory', '--pooler', 'pgpool'], /--pooler takes pgbouncer/],
    [['run', 'advisory', '--pool-size', '3'], /--pool-size configures the pooler race starts: add --pooler pgbouncer/],
    [['run', 'advisory', '--pooler', 'pgbouncer', '--pool-mode', 'sessions'], /--pool-mode takes transaction, session or statement/],
    [['run', 'advisory', '--pooler', 'pgbouncer', '--pool-size', '0'], /--pool-size/],
    [['run', 'advisory', '--pooler', 'pgbouncer', '--pooled'], /--pooler and --pooled exclude each other/],
    [['run', 'advisory', '--pooler', 'pgbouncer', '--n', '5', '--pool-size', '2'], /needs --pool-size 5 or more \(got 2\)/],
    [['check', 'deadlock', '--pooler', 'pgbouncer'], /deadlock documents no outcome through a pooler/],
    // The pooler is PostgreSQL's: a MySQL/MariaDB URL is refused before anything connects.
    [['run', 'session-lock', '--pooler', 'pgbouncer', '--database-url', 'mysql://root@127.0.0.1:1/test'], /--pooler is for PostgreSQL poolers such as PgBouncer, and --database-url is MySQL\/MariaDB/],
    [['check', '--pooled', '--database-url', 'mariadb://root@127.0.0.1:1/test'], /--pooled is for PostgreSQL poolers/],
    [['bench', '--pooler', 'pgbouncer', '--database-url', 'mysql://root@127.0.0.1:1/test'], /--pooler is for PostgreSQL poolers/],
  ] as const) {
    const r = await race([...args], { env: { RACE_PGBOUNCER: process.execPath } })
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    oneCleanLine(r.stderr, re)
  }
  const r = await race(['run', 'advisory', '--pooler', 'pgbouncer'], { url: 'postgres://nobody@127.0.0.1:1/none', env: { RACE_PGBOUNCER: '/nonexistent/pgbouncer' } })
  assert.equal(r.code, 3)
  oneCleanLine(r.stderr, /RACE_PGBOUNCER=\/nonexistent\/pgbouncer is not an executable file: .*apt-get install -y pgbouncer/)
})
