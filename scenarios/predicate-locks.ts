// predicate-locks (isolation-levels article, PostgreSQL predicate locks (SSI)): the doctors of write skew at
// SERIALIZABLE. After the reads, each session's SIReadLock rows in pg_locks (locktype, relation, page, tuple),
// as the article prints them; then SSI fails one session with 40001 (t2, in its update, once t1 has committed).
// At READ COMMITTED and REPEATABLE READ there are no SIReadLocks, and both doctors go off call. --scan index
// reads through the on_call index: tuple and index-page locks, as in the article; a sequential scan of the
// small table locks the whole relation. The scan is pinned in the transaction (step `scan`): a role or database
// whose planner settings differ (enable_indexscan = off, enable_seqscan = off) cannot turn the flag into a label.
import { anomaly, clean, defineScenario, levelParam, prevented, step, type Params, type SessionSpec } from '../src/scenario.js'
import { SER_SSI, begin, isolationParam } from './_shared/isolation.js'

/** This backend's predicate locks, one row: how many, and each as "locktype relation page tuple". */
const siread = `select count(*)::int as siread,
       coalesce(string_agg(concat_ws(' ', locktype, relation::regclass, page, tuple), ', ' order by locktype desc, relation::regclass::text, page, tuple), 'none') as locks
  from pg_locks where mode = 'SIReadLock' and pid = pg_backend_pid()`

/**
 * --scan, made true whatever the role's or database's planner settings: every scan method set for this transaction
 * (set_config(..., true) is SET LOCAL), so the count has one plan left: a Seq Scan, or an Index Scan on
 * doctors_on_call. The planner's costs then choose nothing.
 */
export function pinScan(scan: string): string {
  const on = scan === 'index' ? ['enable_indexscan'] : ['enable_seqscan']
  const all = ['enable_seqscan', 'enable_indexscan', 'enable_indexonlyscan', 'enable_bitmapscan', 'enable_tidscan']
  return `select ${all.map((g) => `set_config('${g}', '${on.includes(g) ? 'on' : 'off'}', true)`).join(',\n       ')}`
}

function doctor(p: Params, id: number): SessionSpec {
  return {
    steps: {
      begin: begin(p),
      scan: pinScan(String(p.scan)),
      check: 'select count(*)::int as on_call from doctors where on_call',
      locks: siread,
      off: step(`update doctors set on_call = false where id = ${id}`, {
        rejectIf: ({ prior }) => prior.check.on_call < 2 && 'I am the last doctor on call',
      }),
      commit: 'commit',
    },
  }
}

const BOTH = { t1: 'committed', t2: 'committed' }
const LAST = 'I am the last doctor on call'

export default defineScenario({
  id: 'predicate-locks',
  title: "SSI's predicate locks: the SIReadLocks of write skew's reads, then 40001",
  source: { article: 'isolation-levels', section: 'Lock internals: PostgreSQL predicate locks (SSI)' },
  story: [
    'The doctors of write skew: Alice and Bob on call, Carol not. t1 and t2 each count the doctors on call (2) and go off call.',
    "At SERIALIZABLE each read leaves SIReadLock markers in pg_locks: they block nobody, they record what was read. After its read each session lists its own (locktype, relation, page, tuple).",
    'A sequential scan of this small table marks the whole relation; --scan index reads through the on_call index and marks the tuples and the index page, as the article shows.',
    "Each session pins its scan first (step scan: every enable_*scan set for the transaction), so the role's or database's planner settings cannot make --scan a label.",
    "t1 goes off call and commits. t2's update then closes a read/write dependency cycle: SSI fails it with 40001 in that step, and one doctor stays on call.",
    'At READ COMMITTED and REPEATABLE READ there are no SIReadLocks, and nobody stays on call.',
  ],
  params: {
    ...isolationParam('serializable'),
    scan: {
      flag: '--scan <scan>',
      description: 'how the count reads doctors, pinned in each transaction: seq (only enable_seqscan on) or index (only enable_indexscan on: an Index Scan on the on_call index)',
      kind: 'choice',
      choices: ['seq', 'index'],
      default: 'seq',
    },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: [
    `create table doctors (id int primary key, name text not null, on_call boolean not null)`,
    `create index doctors_on_call on doctors (on_call)`,
    `insert into doctors values (1, 'Alice', true), (2, 'Bob', true), (3, 'Carol', false)`,
  ],
  sessions: ({ params }) => ({ t1: doctor(params, 1), t2: doctor(params, 2) }),
  permutation: 't1.begin t1.scan t1.check t2.begin t2.scan t2.check t1.locks t2.locks t1.off t1.commit t2.off t2.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'at least one doctor on call',
    sql: `select count(*) >= 1 as held, count(*)::int as on_call,
       :t1.locks.siread::int as t1_n, :t1.locks.locks::text as t1_locks, :t2.locks.siread::int as t2_n, :t2.locks.locks::text as t2_locks
  from doctors where on_call`,
    observed: (r) => `${r.on_call} on call; SIReadLocks after the reads: t1 ${r.t1_n ?? '?'} (${r.t1_locks ?? '?'}), t2 ${r.t2_n ?? '?'} (${r.t2_locks ?? '?'})`,
  },
  unavailable: { mysql: "it shows SSI's SIReadLock rows in pg_locks; InnoDB's SERIALIZABLE is two-phase locking (see gap-lock)" },
  documented: {
    postgres: {
      lockstep: (v) =>
        v.params.isolation === 'serializable'
          ? prevented(`${SER_SSI}: t2's update, after t1 committed`, { t1: 'committed', t2: '40001' })
          : anomaly('no predicate locks below SERIALIZABLE: both go off call (13.2.1, 13.2.2)', BOTH),
      serial: clean('t2 counts one doctor on call and stays', { t1: 'committed', t2: 'rejected: I am the last doctor on call' }),
      // Free-running, either doctor may be the one SSI fails, or the one that comes second and stays.
      barrier: (v) => {
        const who = { committed: [1, 2], '40001': [0, 1], [`rejected: ${LAST}`]: [0, 1] } as const
        const stays = clean('one read after the other committed: it counts one doctor on call and stays', who)
        if (v.params.isolation === 'serializable') return [prevented(SER_SSI, who), stays]
        return [anomaly('no predicate locks below SERIALIZABLE: both go off call', who), stays]
      },
    },
  },
  checks: [
    { label: 'index scan', params: { scan: 'index' } },
    { label: 'read committed', params: { isolation: 'read committed' } },
  ],
})
