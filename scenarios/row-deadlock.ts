// row-deadlock (isolation article, デッドロック検出): two transfers update the same two rows in opposite order.
// At every level PostgreSQL's deadlock detector (after deadlock_timeout) fails one with deadlock_detected
// (40P01) and the other commits (held, prevented). --ordered: both update the lower id first: no deadlock;
// the second waits (held, serialized) at READ COMMITTED, and fails with 40001 at REPEATABLE READ and above.
import { defineScenario, expectBy } from '../src/scenario.js'
import { begin, isolationParam, level } from './_fixtures/isolation.js'

interface Leg {
  id: number
  delta: number
}

/** One transfer as two UPDATEs; the second also writes the ledger row (in the same statement). */
function transfer(p: Record<string, unknown>, session: string, first: Leg, second: Leg) {
  const set = (l: Leg) => `update accounts set balance = balance ${l.delta >= 0 ? '+' : '-'} ${Math.abs(l.delta)} where id = ${l.id}`
  return {
    steps: {
      begin: begin(p as never),
      first: set(first),
      second: {
        sql: `${set(second)}  -- and the ledger row in transfers`,
        run: (sql: import('postgres').Sql) =>
          sql.unsafe(`with u as (${set(second)} returning id) insert into transfers select '${session}', ${Math.abs(first.delta)} from u returning session`),
      },
      commit: 'commit',
    },
  }
}

export default defineScenario({
  id: 'row-deadlock',
  title: 'two transfers lock rows in opposite order: deadlock_detected (40P01); a fixed order has none',
  source: 'isolation-levels article, デッドロック検出',
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
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [
    `create table accounts (id int primary key, balance int not null)`,
    `insert into accounts values (1, 500), (2, 500)`,
    `create table transfers (session text primary key, amount int not null)`,
  ],
  sessions: (p) => ({
    t1: transfer(p, 't1', { id: 1, delta: -100 }, { id: 2, delta: 100 }),
    t2: p.ordered ? transfer(p, 't2', { id: 1, delta: 50 }, { id: 2, delta: -50 }) : transfer(p, 't2', { id: 2, delta: -50 }, { id: 1, delta: 50 }),
  }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t2.begin t1.first t2.first t1.second t2.second t1.commit t2.commit',
  invariant: {
    description: () => 'money conserved (1000) and balances match the committed transfers',
    query: (sql) => sql`
      select (select sum(balance)::int from accounts) as total,
             (select balance from accounts where id = 1) as a1,
             500 - coalesce((select sum(case session when 't1' then 100 else -50 end) from transfers), 0)::int as want1,
             (select coalesce(string_agg(session, ', ' order by session), 'none') from transfers) as committed`,
    observed: ([r]) => `total ${r.total}, account 1 ${r.a1} (want ${r.want1}), committed ${r.committed}`,
    holds: ([r]) => Number(r.total) === 1000 && Number(r.a1) === Number(r.want1),
  },
  expect: (ctx) =>
    expectBy({ lockstep: [!ctx.params.ordered ? 'prevented' : level(ctx.params) === 'read committed' ? 'serialized' : 'prevented'] })(ctx),
  checks: [
    { label: 'ordered', params: { ordered: true } },
    { label: 'serializable', params: { isolation: 'serializable' } },
    { label: 'ordered, repeatable read', params: { ordered: true, isolation: 'repeatable read' } },
  ],
})
