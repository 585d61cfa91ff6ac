// row-deadlock (isolation-levels article, deadlock detection): two transfers update the same two rows in
// opposite order. At every level PostgreSQL's deadlock detector (after deadlock_timeout) fails one with
// deadlock_detected (40P01) and the other commits (held, prevented). --ordered: both update the lower id
// first: no deadlock; the second waits (held, serialized) at READ COMMITTED, and fails with 40001 above it.
// Detection runs only after deadlock_timeout (--deadlock-timeout, default 1s as in PostgreSQL, set on both
// connections): the victim's wait, shown in its waited column, is documented as at least that long.
import { clean, defineScenario, levelParam, prevented, serialized, type Documented, type Params, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam } from './_shared/isolation.js'
import { DEADLOCK, M, myBegin, withInnodb } from './_shared/innodb.js'

interface Leg {
  id: number
  delta: number
}

const set = (l: Leg) => `update accounts set balance = balance ${l.delta >= 0 ? '+' : '-'} ${Math.abs(l.delta)} where id = ${l.id}`

/** One transfer as two UPDATEs; the second also writes the ledger row (in the same statement). */
function transfer(p: Params, first: Leg, second: Leg): SessionSpec {
  return {
    connection: { deadlock_timeout: `${p.deadlockTimeout}ms` },
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

const scenario = defineScenario({
  id: 'row-deadlock',
  title: 'two transfers lock rows in opposite order: deadlock_detected (40P01); a fixed order has none',
  source: { article: 'isolation-levels', section: 'Lock internals: deadlock detection' },
  story: [
    'T1 moves 100 from account 1 to account 2; T2 moves 50 from account 2 to account 1.',
    "The article's interleaving: T1 updates 1, T2 updates 2, T1 updates 2 (waits for T2), T2 updates 1 (waits for T1).",
    'After deadlock_timeout (--deadlock-timeout, 1s by default as in PostgreSQL) a waiter runs the check, finds the cycle and fails with 40P01; the other commits.',
    'Usually t1, which began waiting a few ms first; on a busy machine t2 may check first: both are documented.',
    "Its waited column shows how long it waited before 40P01: at least deadlock_timeout (the detector does not look sooner).",
    '--ordered: each transfer updates the lower account id first, so the second one just waits: no deadlock.',
  ],
  params: {
    ...isolationParam(),
    ordered: { flag: '--ordered', description: 'update the accounts in id order (the fix): no deadlock', kind: 'boolean', default: false },
    deadlockTimeout: {
      flag: '--deadlock-timeout <duration>',
      description: 'deadlock_timeout of both sessions (set on their connections, which needs a superuser role)',
      kind: 'duration',
      default: 1000,
    },
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
        // Whoever's deadlock_timeout runs out first runs the check, finds the cycle and is the one cancelled
        // (deadlock.c: the process that detects a hard deadlock aborts itself). t1 began waiting first, a few
        // ms before t2, so it usually is; on a loaded machine t2's check can run first. The manual (13.3.4
        // Deadlocks): which transaction is aborted "is difficult to predict and should not be relied upon".
        // Either way the victim waited at least deadlock_timeout.
        if (!v.params.ordered) {
          const ms = Number(v.params.deadlockTimeout)
          const why = 'deadlock detected after deadlock_timeout: the waiter that checks first is cancelled (13.3.4: which one is not to be relied upon)'
          const victim = (name: 't1' | 't2'): Documented => ({ ...prevented(why, { ...BOTH, [name]: '40P01' }), waited: { [name]: ms } })
          return [victim('t1'), victim('t2')]
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

/** InnoDB: the ledger row is a step of its own (no writable CTE), right after the second UPDATE. */
function myTransfer(p: Params, first: Leg, second: Leg): SessionSpec {
  return {
    steps: {
      begin: myBegin(String(p.isolation)),
      first: set(first),
      second: set(second),
      record: `insert into transfers values (:session, ${Math.abs(first.delta)})`,
      commit: 'commit',
    },
  }
}

// InnoDB checks for a deadlock whenever a transaction waits (no deadlock_timeout) and rolls back the one with the
// fewest undo records: here both wrote one row, so either may be chosen. --ordered: t2 just waits, at every level
// (no 40001 at REPEATABLE READ: an UPDATE reads the newest committed row).
export default withInnodb(scenario, {
  setup: [
    `create table accounts (id int primary key, balance int not null)`,
    `insert into accounts values (1, 500), (2, 500)`,
    `create table transfers (session varchar(10) primary key, amount int not null)`,
  ],
  sessions: ({ params }) => ({
    t1: myTransfer(params, { id: 1, delta: -100 }, { id: 2, delta: 100 }),
    t2: params.ordered ? myTransfer(params, { id: 1, delta: 50 }, { id: 2, delta: -50 }) : myTransfer(params, { id: 2, delta: -50 }, { id: 1, delta: 50 }),
  }),
  permutation: 't1.begin t2.begin t1.first t2.first t1.second t2.second t1.record t2.record t1.commit t2.commit',
  invariantSql: `select total = 1000 and a1 = want1 as held, total, a1, want1, committed
  from (select (select cast(sum(balance) as signed) from accounts) as total,
               (select balance from accounts where id = 1) as a1,
               500 - cast(coalesce((select sum(case session when 't1' then 100 else -50 end) from transfers), 0) as signed) as want1,
               (select coalesce(group_concat(session order by session separator ', '), 'none') from transfers) as committed) x`,
  documented: {
    lockstep: (v) =>
      v.params.ordered
        ? serialized(`t2 waits for t1, then updates the committed rows (${M.LOCKING})`, BOTH)
        : [prevented(M.DEADLOCK, { t1: 'committed', t2: DEADLOCK }), prevented(M.DEADLOCK, { t1: DEADLOCK, t2: 'committed' })],
    serial: clean('one transfer after the other', BOTH),
  },
})
