// One way a trial runs, with no database: the engine knows no application race (it picks a trial runner by the
// scenario's kind and imports nothing of src/app), one chooser serves every runner, and the engine's refusals name
// no CLI flag (the commands word them, as they always printed them).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { appScenario } from '../../src/app/scenario.js'
import { cliWords } from '../../src/commands/words.js'
import { plainWords, refused, type Refusal } from '../../src/engine/refusals.js'
import type { TrialContext } from '../../src/engine/runner.js'
import { pickedOf } from '../../src/engine/schedule.js'
import type { Moment } from '../../src/engine/types.js'
import { RunError, UsageError } from '../../src/errors.js'
import { plan } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { kindOf } from '../../src/scenario.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

test('the engine imports nothing of src/app: an application race brings its runner with its scenario', () => {
  const dir = path.join(ROOT, 'src', 'engine')
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.ts'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8')
    assert.doesNotMatch(text, /from '\.\.\/app\/|import\('\.\.\/app\//, f)
    assert.doesNotMatch(text, /\.app\b/, `${f} tests no scenario's app`)
  }
})

test("a scenario's kind: built-ins are statements; a race module's scenario is an application race with its own runner", async () => {
  assert.deepEqual(kindOf(await findScenario('advisory')), { type: 'statements' })
  const s = appScenario({ driver: 'pg', session: async () => {}, invariant: 'select true', expect: 'held' }, 'x.race.mjs')
  const kind = kindOf(s)
  assert.equal(kind.type, 'application')
  assert.equal(typeof (kind.type === 'application' && kind.runner), 'function')
})

test('an application race refuses what it cannot do before any connection: in plain words from the engine, in flags from the CLI', () => {
  const s = appScenario({ driver: 'pg', session: async () => {}, invariant: 'select true', expect: 'held' }, 'x.race.mjs')
  const p = plan(s, { params: {}, n: 2, engine: 'postgres' })
  const kind = kindOf(s)
  assert.ok(kind.type === 'application')
  const ctx = (word?: TrialContext['cfg']['word']): TrialContext =>
    ({
      lab: {} as TrialContext['lab'],
      cfg: { plan: p, schedule: 'barrier', trials: 1, stepTimeoutMs: 1000, connectTimeoutMs: 1000, keep: false, holdMs: 5000, word },
      signal: new AbortController().signal,
      whenAborted: () => new Promise<never>(() => {}),
      describeStuck: () => {},
      evaluate: async () => ({ description: '', observed: '', held: true }),
    }) as unknown as TrialContext
  assert.throws(() => kind.runner(ctx()), (e: unknown) => e instanceof UsageError && e.message === 'x is an application race: it cannot hold its locks for a look from outside')
  assert.throws(() => kind.runner(ctx(cliWords)), (e: unknown) => e instanceof UsageError && e.message === 'x is an application race: --hold is not available for it')
})

const every: Refusal[] = [
  { kind: 'own-server', scenario: { id: 'slow', ownServer: { why: 'stops the server', settings: {} } } },
  { kind: 'room', n: 10000, free: 96, max: 100 },
  { kind: 'barrier-shares', scenario: 'leak', pairs: [['s2', 's1']] },
  { kind: 'too-many-connections', message: 'too many connections for role "r"' },
  { kind: 'shared-backend', pids: [7, 7], engine: 'postgres' },
  { kind: 'application', scenario: 'orders', cannot: 'step' },
  { kind: 'application', scenario: 'orders', cannot: 'window' },
  { kind: 'application', scenario: 'orders', cannot: 'hold' },
  { kind: 'application', scenario: 'orders', cannot: 'pool' },
]

test("the engine's own words for what it refuses name no flag; exit 2 for bad input, 3 for what the server did", () => {
  for (const r of every) assert.doesNotMatch(plainWords(r), /--[a-z]/, r.kind)
  assert.ok(refused(every[1]) instanceof UsageError)
  assert.ok(refused(every[3]) instanceof RunError)
  assert.ok(refused(every[4]) instanceof RunError)
  assert.equal(refused(every[1], () => undefined).message, plainWords(every[1]), 'undefined from the caller: the plain words')
})

test("the CLI's words are the lines race printed before the engine stopped naming flags", () => {
  assert.deepEqual(every.map(cliWords), [
    "slow stops the server, so it runs only on race's own embedded server: leave out --database-url (and unset DATABASE_URL and PG*)",
    '--n 10000 needs 10000 connections, but the server has room for 96 more (max_connections 100): use --n 96 or fewer',
    'leak: sessions s2 and s1 take turns on one pooled connection, which a barrier cannot start together: use --schedule lockstep, serial or a permutation',
    'the server refused a connection: too many connections for role "r" (53300 too_many_connections): use a smaller --n, or raise the limit',
    'two sessions share a backend (pids 7, 7): is a pooler in between? Say so with --pooled',
    'orders is an application race: --step is not available for it (its steps are known only as the function sends them)',
    "orders is an application race: --window has no race point to sleep at; mark one in your code with ctx.point('check') and stand the barrier there (barrier: 'check')",
    'orders is an application race: --hold is not available for it',
    "orders is an application race: its sessions are the driver's own connections, not a pooler's clients (leave out --pooler/--pooled)",
  ])
  assert.equal(cliWords({ kind: 'shared-backend', pids: [3, 3], engine: 'mysql' }), 'two sessions share a backend (pids 3, 3): is a pooler in between?')
  assert.equal(cliWords({ kind: 'room', n: 5, free: -1, max: 10 }), '--n 5 needs 5 connections, but the server has room for 0 more (max_connections 10): use --n 1 or fewer')
})

test('one chooser for every runner: it picks a ready step by its index or its session, and nothing else', () => {
  const m: Moment = {
    ready: [
      { session: 's1', index: 0, label: 's1.begin', sql: 'begin' },
      { session: 's3', index: 2, label: 's3.q2', sql: 'select 1' },
    ],
    blocked: [{ session: 's2', index: 1, label: 's2.lock' }],
    done: [],
    order: ['s1.setup'],
  }
  assert.equal(pickedOf(m, 1), 1)
  assert.equal(pickedOf(m, 's3'), 1)
  assert.equal(pickedOf(m, 's1'), 0)
  for (const bad of [2, -1, 0.5, 's2', 'nobody']) {
    assert.throws(() => pickedOf(m, bad), (e: unknown) => e instanceof UsageError && /is not one of the ready sessions \(s1, s3\)/.test(e.message), String(bad))
  }
})
