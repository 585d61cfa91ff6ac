// The pooler's pure parts: which cases race check --pooler runs and whether each is sound, the reset and
// connect queries race's PgBouncer runs, the binary lookup, and a documented SQLSTATE in the judge.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkCases } from '../../src/run/check.js'
import { findPgbouncer, resetSql, setupSql } from '../../src/servers/pooler.js'
import { RunError } from '../../src/errors.js'
import { documentedCodes, judge } from '../../src/judge/index.js'
import { checkScenario, documentedFor, plan } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { defaultParams, type Pool } from '../../src/scenario.js'

const PGB: Pool = { kind: 'pgbouncer', mode: 'transaction', size: 0, resetAlways: false }

test('race check --pooler: only the scenarios documented through a pooler, each pooled case sound and documented', async () => {
  const cases = await checkCases([], 'postgres', PGB)
  const ids = new Set(cases.map((k) => k.scenario.id))
  for (const id of ['session-lock', 'pool-isolation-leak', 'prepared-statement', 'advisory', 'try-advisory', 'lock-timeout', 'other-users', 'shared-lock', 'limit-lock']) {
    assert.ok(ids.has(id), `${id} runs through the pooler`)
  }
  for (const id of ['deadlock', 'repeatable-read', 'broken', 'write-skew']) assert.ok(!ids.has(id), `${id} is not documented through a pooler`)
  for (const k of cases) {
    assert.ok(k.pool && k.pool.size! > 0, `${k.scenario.id} (${k.label}) has a sized pool`)
    assert.deepEqual(checkScenario(k.scenario, k.params, k.n, 'postgres', k.pool), [], `${k.scenario.id} (${k.label})`)
    assert.ok(documentedFor(k.scenario, { params: k.params, n: k.n, engine: 'postgres', pool: k.pool, schedule: 'lockstep', windowMs: 0 }).length)
  }
  // The session-mode and reset-always cases run only through a pooler; the application's DISCARD ALL does not.
  const leak = cases.filter((k) => k.scenario.id === 'pool-isolation-leak').map((k) => k.label)
  assert.deepEqual(leak, ['default', 'per transaction', 'reset query always', 'session mode'])
  const direct = (await checkCases([])).filter((k) => k.scenario.id === 'pool-isolation-leak').map((k) => k.label)
  assert.deepEqual(direct, ['default', 'per transaction', 'discard all'])
  await assert.rejects(checkCases(['deadlock'], 'postgres', PGB), /deadlock documents no outcome through a pooler/)
})

test('a pooled variant has separate clients (no borrowed connection) and a pool size of its own', async () => {
  const s = await findScenario('session-lock')
  const pool = { ...PGB, size: 2 }
  const p = plan(s, { params: defaultParams(s), n: 5, engine: 'postgres', pool })
  assert.deepEqual(p.sessions.map((x) => x.name), ['s1', 's2', 's3'])
  assert.ok(p.sessions.every((x) => !x.spec.shares))
  const direct = plan(s, { params: defaultParams(s), n: 5, engine: 'postgres' })
  assert.ok(direct.sessions.some((x) => x.spec.shares), 'without a pooler the pool is simulated')
  // Documented per pool: transaction mode leaks; session mode resets; an undocumented mode documents nothing.
  const doc = (x: Pool) => documentedFor(s, { params: defaultParams(s), n: 5, engine: 'postgres', pool: x, schedule: 'lockstep', windowMs: 0 })
  assert.equal(doc(pool)[0].verdict, 'anomaly')
  assert.equal(doc(pool)[0].who.s3, '55P03')
  assert.equal(doc({ ...pool, mode: 'session' })[0].verdict, 'clean')
  assert.deepEqual(doc({ ...pool, mode: 'statement' }), [])
  assert.deepEqual(documentedFor(await findScenario('deadlock'), { params: { ordered: false }, n: 2, engine: 'postgres', pool, schedule: 'lockstep', windowMs: 0 }), [])
})

test("the pool's queries: search_path on every server connection; the reset is DISCARD ALL spelled out, then the search_path again", () => {
  assert.equal(setupSql({ schema: 'race_x_1' }), 'set search_path to "race_x_1"')
  assert.equal(setupSql({ schema: 'race_x_1', settings: { default_transaction_isolation: 'read committed' } }), `set search_path to "race_x_1"; set default_transaction_isolation to 'read committed'`)
  const reset = resetSql({ schema: 'race_x_1' })
  for (const part of ['close all', 'set session authorization default', 'reset all', 'deallocate all', 'unlisten *', 'select pg_advisory_unlock_all()', 'discard plans', 'discard temp', 'discard sequences']) {
    assert.ok(reset.includes(part), part)
  }
  assert.ok(reset.endsWith('set search_path to "race_x_1"'))
})

test('no pgbouncer: one line saying how to install it (exit 3)', () => {
  assert.throws(() => findPgbouncer({ PATH: '/nonexistent' }, []), (e: unknown) => e instanceof RunError && /PgBouncer is not installed .*apt-get install -y pgbouncer/.test(e.message))
  assert.throws(() => findPgbouncer({ RACE_PGBOUNCER: '/nonexistent/pgbouncer' }), (e: unknown) => e instanceof RunError && /RACE_PGBOUNCER=\/nonexistent\/pgbouncer is not an executable file/.test(e.message))
})

test('a SQLSTATE the documentation names is the server refusing, not an error no scenario expects', () => {
  const sessions = [
    { name: 'c1', outcome: 'committed' as const, sqlstate: null, errors: [], waitedMs: 0, step: 'run', reason: null },
    { name: 'c2', outcome: 'failed' as const, sqlstate: '26000', errors: ['26000'], waitedMs: 0, step: 'run', reason: 'prepared statement "add_request" does not exist' },
  ]
  assert.equal(judge(sessions, { held: true }).verdict, 'unknown')
  const codes = documentedCodes([{ who: { c1: 'committed', c2: '26000' } }])
  assert.deepEqual([...codes], ['26000'])
  assert.deepEqual(judge(sessions, { held: true }, codes), { verdict: 'prevented', why: 'held: the server raised 26000 invalid_sql_statement_name' })
  assert.equal(judge(sessions, { held: false }, codes).verdict, 'anomaly')
})
