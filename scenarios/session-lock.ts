// session-lock (advisory §3.2, §6): pg_advisory_lock taken inside a transaction survives its ROLLBACK, two
// takes need two unlocks, and a pooled connection handed back with one lock still taken leaks it: the next,
// unrelated borrower of that connection "holds" a lock it never asked for, and a third request waits for it
// until the pool resets the connection. Not a race but a leak: violated in every schedule, serial included.
// --xact (the fix): pg_advisory_xact_lock, gone with the ROLLBACK: held, nobody waits.
import { defineScenario, expectBy, type Params, type SessionSpec } from '../src/scenario.js'
import { heldByMe, key, lockStep, observations, observe, probe } from './_fixtures/locks.js'

const NS = 'setup_request'

function sessions(p: Params): Record<string, SessionSpec> {
  const fn = p.xact ? 'pg_advisory_xact_lock' : 'pg_advisory_lock'
  return {
    req1: {
      steps: {
        begin: 'begin',
        lock: lockStep(fn, NS),
        again: lockStep(fn, NS),
        rollback: 'rollback',
        unlock: {
          sql: `select pg_advisory_unlock(:key) -- one unlock; the second is forgotten, the connection goes back to the pool`,
          run: (sql, ctx) => `select pg_advisory_unlock(${key(NS, ctx)}::bigint) as released`,
        },
      },
    },
    other: {
      steps: {
        afterRollback: probe('free after rollback', NS),
        afterUnlock: probe('free after one unlock', NS),
      },
    },
    req2: {
      shares: 'req1',
      steps: {
        begin: 'begin',
        mine: observe('locks held by next borrower', () => heldByMe, `(${heldByMe}) -- this request took none`, 'held'),
        commit: 'commit',
      },
    },
    req3: {
      steps: {
        begin: 'begin',
        lock: lockStep('pg_advisory_xact_lock', NS),
        commit: 'commit',
      },
    },
    pool: {
      shares: 'req1',
      steps: {
        reset: {
          sql: 'select pg_advisory_unlock_all() -- the pool finally resets the connection (part of DISCARD ALL)',
          run: () => 'select pg_advisory_unlock_all()',
        },
      },
    },
  }
}

export default defineScenario({
  id: 'session-lock',
  title: 'pg_advisory_lock survives ROLLBACK and leaks through a connection pool',
  source: 'advisory-lock article §3.2, §6',
  story: [
    'req1 borrows a pooled connection, begins, takes pg_advisory_lock(key) twice, and rolls back.',
    "After the ROLLBACK another connection's pg_try_advisory_lock(key) is still false: session locks ignore transactions.",
    'req1 unlocks once (true) and hands the connection back to the pool; the key is still taken: two takes need two unlocks.',
    "req2, an unrelated request, borrows the same connection (same backend pid): pg_locks shows it holding a lock it never took.",
    "req3, on its own connection, asks for the key and waits, until the pool resets the connection (pg_advisory_unlock_all, part of DISCARD ALL).",
    '--xact takes pg_advisory_xact_lock instead: the ROLLBACK releases it, the next borrower holds nothing, req3 does not wait.',
  ],
  params: {
    xact: {
      flag: '--xact',
      description: 'take pg_advisory_xact_lock instead (the fix)',
      kind: 'boolean',
      default: false,
    },
  },
  defaultN: 5,
  nRange: [5, 5],
  isolation: () => 'read committed',
  setup: [observations],
  sessions: (p) => sessions(p),
  lockstep: () =>
    'req1.begin req1.lock req1.again req1.rollback other.afterRollback req1.unlock other.afterUnlock ' +
    'req2.begin req2.mine req2.commit req3.begin req3.lock pool.reset req3.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: () => "a lock taken in a transaction is gone when it ends, and no borrower holds a lock it didn't take",
    query: (sql) => sql`select what, n::int from observations order by seq`,
    observed: (rows) => {
      const o = Object.fromEntries(rows.map((r) => [r.what, Number(r.n)]))
      const taken = (v: number | undefined) => (v === 1 ? 'free' : v === 0 ? 'still taken' : '?')
      return `after rollback ${taken(o['free after rollback'])}, after one unlock ${taken(o['free after one unlock'])}, next borrower holds ${o['locks held by next borrower'] ?? '?'}`
    },
    holds: (rows) => {
      const o = Object.fromEntries(rows.map((r) => [r.what, Number(r.n)]))
      return o['free after rollback'] === 1 && o['locks held by next borrower'] === 0
    },
  },
  // A leak, not a race: one session after another shows it just the same.
  expect: (ctx) => {
    const v = ctx.params.xact ? 'clean' : 'anomaly'
    return expectBy({ lockstep: [v], barrier: [], serial: [v] })(ctx)
  },
  checks: [{ label: 'xact', params: { xact: true } }],
})
