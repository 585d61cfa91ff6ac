// race bench against a real server (DATABASE_URL, else embedded PostgreSQL 18): the oltp mix, retry counting
// with a forced 40001, the CLI end to end (JSON, HTML, pgbench), bad input. Ratios are printed, never asserted.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { Sql } from 'postgres'
import { connect, endQuietly } from '../../src/db/connect.js'
import { resolveTarget, type Target } from '../../src/db/target.js'
import { runCell } from '../../src/bench/runner.js'
import { BEGIN, COMMIT, oltp, type Workload } from '../../src/bench/workloads.js'
import { NEEDS } from '../support/tools.js'
import { race, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let target: Target
let control: Sql
const schema = `race_bench_test_${process.pid}`

before(async () => {
  server = await useServer()
  target = resolveTarget(server.url)
  control = connect(target, { connectTimeoutMs: 5000, applicationName: 'race bench test' })
  await control.unsafe(`drop schema if exists "${schema}" cascade; create schema "${schema}"`)
  await control.unsafe(`set search_path to "${schema}"`)
  await oltp({ hot: 10, hotRows: 100, rows: 2000 }).setup(control)
})
after(async () => {
  await control?.unsafe(`drop schema if exists "${schema}" cascade`).catch(() => {})
  await endQuietly(control)
  await server?.stop()
})

const cell = (workload: Workload, o: { level?: string; clients?: number; durationMs?: number; maxTries?: number } = {}) =>
  runCell({
    workload,
    level: o.level ?? 'read committed',
    clients: o.clients ?? 4,
    durationMs: o.durationMs ?? 1500,
    warmupMs: 0,
    maxTries: o.maxTries ?? 10,
    target,
    schema,
    connectTimeoutMs: 5000,
    statementTimeoutMs: 10_000,
    driver: 'wire',
  })

test('oltp: the generator mix is 80/15/5 within a few percent over a short run', async () => {
  const s = await cell(oltp({ hot: 10, hotRows: 100, rows: 2000 }))
  const total = s.mix.read + s.mix.update + s.mix.range
  assert.equal(total, s.txns)
  assert.ok(total > 200, `too few transactions to judge a mix: ${total}`)
  for (const [kind, want] of [['read', 0.8], ['update', 0.15], ['range', 0.05]] as const) {
    const got = s.mix[kind] / total
    // A few percent, or 4 standard deviations of a binomial fraction when the run was short.
    const tol = Math.max(0.03, 4 * Math.sqrt((want * (1 - want)) / total))
    assert.ok(Math.abs(got - want) <= tol, `${kind}: ${(got * 100).toFixed(1)}% of ${total}, want ${want * 100}% +- ${(tol * 100).toFixed(1)}`)
  }
  assert.equal(s.failures, 0, JSON.stringify(s.failuresByCode))
  assert.ok(s.tps > 0 && s.latencyMs.p50 > 0 && s.latencyMs.p50 <= s.latencyMs.p95 && s.latencyMs.p95 <= s.latencyMs.p99)
})

/**
 * The first transaction of the run reads row 1 under REPEATABLE READ, then another connection updates row 1
 * and commits, then the transaction updates row 1: PostgreSQL must answer 40001. Every later attempt runs
 * without interference. So the run has exactly one 40001: retried once (max-tries 10) or a failure (max-tries 1).
 */
function forcedConflict(): Workload {
  const base = oltp({ hot: 0, hotRows: 100, rows: 2000 })
  let forced = false
  return {
    ...base,
    next(t) {
      base.next(t)
      if (!forced) t.kind = 1
    },
    async attempt(c, t) {
      if (forced) return base.attempt(c, t)
      forced = true
      const r = await c.run([BEGIN, { stmt: 'read', params: [1] }])
      assert.equal(r.code, null)
      await control.unsafe(`update "${schema}".accounts set balance = balance + 1 where id = 1`)
      return c.run([{ stmt: 'update', params: [1, r.values[1] ?? '0', 1] }, COMMIT])
    },
  }
}

test('a forced 40001 is retried as a whole and counted (max-tries 10)', async () => {
  const s = await cell(forcedConflict(), { level: 'repeatable read', clients: 1, durationMs: 500 })
  assert.equal(s.retries, 1)
  assert.equal(s.retried, 1)
  assert.equal(s.failures, 0, JSON.stringify(s.failuresByCode))
})

test('a forced 40001 with max-tries 1 is a failure counted by SQLSTATE, not hidden', async () => {
  const s = await cell(forcedConflict(), { level: 'repeatable read', clients: 1, durationMs: 500, maxTries: 1 })
  assert.equal(s.retries, 0)
  assert.equal(s.failures, 1)
  assert.equal(s.failuresByCode['40001']?.count, 1)
  assert.equal(s.failuresByCode['40001']?.condition, 'serialization_failure')
})

async function benchSchemas(): Promise<number> {
  const [r] = await control`select count(*)::int as n from pg_namespace where nspname like 'race\\_bench\\_%' and nspname <> ${schema}`
  return Number(r.n)
}

test('CLI: one hot row under REPEATABLE READ retries conflicts and reports them in --json; schema dropped', async () => {
  const before = await benchSchemas()
  const r = await race(
    ['bench', '--workload', 'oltp', '--hot', '100', '--hot-rows', '1', '--rows', '1000', '--isolation', 'rc,rr', '--clients', '4', '--duration', '1s', '--warmup', '0', '--json'],
    { url: server.url },
  )
  assert.equal(r.code, 0, r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.equal(doc.command, 'bench')
  assert.equal(doc.cells.length, 2)
  const [rc, rr] = doc.cells
  assert.equal(rc.isolation, 'read committed')
  assert.equal(rc.vsRc, 1)
  assert.equal(rc.race.retries, 0, 'READ COMMITTED waits instead of failing')
  assert.equal(rc.article, null, 'the article publishes no ratio for 100% hot')
  assert.ok(rr.race.retries + rr.race.failures > 0, `4 clients updating one row under RR saw no 40001: ${JSON.stringify(rr.race)}`)
  assert.equal(await benchSchemas(), before, 'the bench schema was dropped')
})

test('CLI: --vs-pgbench runs the same script through pgbench; --html writes a self-contained page', { skip: NEEDS.pgbench }, async () => {
  const file = path.join(os.tmpdir(), `race-bench-${process.pid}.html`)
  try {
    const r = await race(
      ['bench', '--hot', '10', '--rows', '1000', '--isolation', 'rc', '--clients', '2', '--duration', '1s', '--warmup', '0', '--vs-pgbench', '--html', file, '--json'],
      { url: server.url },
    )
    assert.equal(r.code, 0, r.stderr)
    const [c] = JSON.parse(r.stdout).cells
    assert.ok(c.pgbench.tps > 0, JSON.stringify(c.pgbench))
    assert.equal(c.pgbench.failures, 0)
    assert.ok(c.pgbench.mix.read > c.pgbench.mix.update && c.pgbench.mix.update > 0 && c.pgbench.mix.range > 0, JSON.stringify(c.pgbench.mix))
    assert.equal(typeof c.racePerPgbench, 'number')
    assert.equal(c.article, 1) // the article normalises to READ COMMITTED = 1.0
    const page = fs.readFileSync(file, 'utf8')
    assert.match(page, /<svg/)
    assert.doesNotMatch(page, /<script|<link|src=|href=|@import|url\(/i, 'no network resources')
  } finally {
    fs.rmSync(file, { force: true })
  }
})

test('CLI: bad input is one line and exit 2, before any connection', async () => {
  const cases: [string[], RegExp][] = [
    [['--isolation', 'snapshot'], /--isolation 'snapshot' is not an isolation level/],
    [['--isolation', 'rc,read uncommitted'], /READ UNCOMMITTED/],
    [['--clients', '0'], /--clients must be at least 1/],
    [['--hot', '150'], /--hot 150: a percentage of accesses is at most 100/],
    [['--hot', 'lots'], /--hot takes percentages/],
    [['--duration', 'forever'], /--duration takes a duration like 300ms, 2s or 1m, got 'forever'/],
    [['--workload', 'tpcc'], /--workload 'tpcc' does not exist/],
    [['--workload', 'advisory', '--hot', '10'], /--hot applies to the oltp workload only/],
    [['--users', '5'], /--users applies to the advisory workload only/],
    [['--max-tries', '0'], /--max-tries must be at least 1/],
    [['--hot-rows', '1000', '--rows', '1000'], /--rows 1000 must be at least --hot-rows \+ 100/],
  ]
  for (const [args, want] of cases) {
    // An unreachable URL proves the input was refused before connecting (connecting would exit 3).
    const r = await race(['bench', ...args], { url: 'postgres://nobody@127.0.0.1:1/none' })
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, want)
    assert.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`)
  }
})
