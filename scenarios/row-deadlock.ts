// row-deadlock (isolation-levels article, deadlock detection): two transfers update the same two rows in
// opposite order. At every level PostgreSQL's deadlock detector (after deadlock_timeout) fails one with
// deadlock_detected (40P01) and the other commits (held, prevented). --ordered: both update the lower id
// first: no deadlock; the second waits (held, serialized) at READ COMMITTED, and fails with 40001 above it.
import { clean, defineScenario, levelParam, prevented, serialized, type Params, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam } from './_fixtures/isolation.js'

interface Leg {
  id: number
  delta: number
}

const set = (l: Leg) => `update accounts set balance = balance ${l.delta >= 0 ? '+' : '-'} ${Math.abs(l.delta)} where id = ${l.id}`

/** One transfer as two UPDATEs; the second also writes the ledger row (in the same statement). */
function transfer(p: Params, first: Leg, second: Leg): SessionSpec {
  return {
    steps: {
      begin: begin(p),
      first: set(first),
      second: `with u as (${set(second)} returning id)
insert into transfers select :session, ${Math.abs(first.delta)} from u returning session`,
      commit: 'commit',
    },
  }
}

const BOTH = { t1: 'committed', t2: 'committed' }

export default defineScenario({
  id: 'row-deadlock',
  title: 'two transfers lock rows in opposite order: deadlock_detected (40P01); a fixed order has none',
  source: { article: 'isolation-levels', section: 'Lock internals: deadlock detection' },
  story: [
    'T1 moves 100 from account 1 to account 2; T2 moves 50 from account 2 to account 1.',
    "The article's interleaving: T1 updates 1, T2 updates 2, T1 updates 2 (waits for T2), T2 updates 1 (waits for T1).",
    'After deadlock_timeout (1s by default) PostgreSQL finds the cycle and fails one with 40P01; the other commits.',
    '--ordered: each transfer updates the lower account id first, so the second one just waits: no deadlock.',
  ],
  params: {
    ...isolationParam(),
    ordered: { flag: '--ordered', description: 'update the accounts in id order (the fix): no deadlock', kind: 'boolean', default: false },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: [
    `create table accounts (id int primary key, balance int not null)`,
    `insert into accounts values (1, 500), (2, 500)`,
    `create table transfers (session text primary key, amount int not null)`,
  ],
  sessions: ({ params }) => ({
    t1: transfer(params, { id: 1, delta: -100 }, { id: 2, delta: 100 }),
    t2: params.ordered ? transfer(params, { id: 1, delta: 50 }, { id: 2, delta: -50 }) : transfer(params, { id: 2, delta: -50 }, { id: 1, delta: 50 }),
  }),
  permutation: 't1.begin t2.begin t1.first t2.first t1.second t2.second t1.commit t2.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'money conserved (1000) and balances match the committed transfers',
    sql: `select total = 1000 and a1 = want1 as held, total, a1, want1, committed
  from (select (select sum(balance)::int from accounts) as total,
               (select balance from accounts where id = 1) as a1,
               500 - coalesce((select sum(case session when 't1' then 100 else -50 end) from transfers), 0)::int as want1,
               (select coalesce(string_agg(session, ', ' order by session), 'none') from transfers) as committed) x`,
    observed: (r) => `total ${r.total}, account 1 ${r.a1} (want ${r.want1}), committed ${r.committed}`,
  },
  documented: {
    postgres: {
      lockstep: (v) => {
        // t1 began waiting first, so its deadlock_timeout usually runs out first: it runs the check, finds the
        // cycle and is the one cancelled (deadlock.c: the process that detects a hard deadlock aborts itself). Both
        // wait 1s, a few ms apart: on a loaded machine t2's check can run first. The manual (13.3.4 Deadlocks):
        // which transaction is aborted "is difficult to predict and should not be relied upon".
        if (!v.params.ordered) {
          return [
            prevented('deadlock detected after deadlock_timeout: the waiter that checks first is cancelled', { t1: '40P01', t2: 'committed' }),
            prevented('deadlock detected after deadlock_timeout: t2 checked first (13.3.4: which one is not to be relied upon)', { t1: 'committed', t2: '40P01' }),
          ]
        }
        if (v.params.isolation === 'read committed') return serialized('t2 waits for t1, then updates the new row versions (13.2.1)', BOTH)
        return prevented('t2 waited for a row t1 changed after t2\'s snapshot: 40001 (13.2.2)', { t1: 'committed', t2: '40001' })
      },
      serial: clean('one transfer after the other', BOTH),
    },
  },
  checks: [
    { label: 'ordered', params: { ordered: true } },
    { label: 'serializable', params: { isolation: 'serializable' } },
    { label: 'ordered, repeatable read', params: { ordered: true, isolation: 'repeatable read' } },
  ],
})
