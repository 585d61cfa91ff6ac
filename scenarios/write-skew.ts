// write-skew (isolation-levels article, write skew): two doctors on call; each sees two on call and goes off
// call. READ COMMITTED and REPEATABLE READ: nobody is on call (violated). SERIALIZABLE: SSI sees the
// read/write dependency cycle and fails t2 with 40001: one doctor stays on call (held, prevented).
// --form for-update (common pitfall 2's fix): the check locks the rows it counts (SELECT ... FOR UPDATE), so
// t2's check waits for t1; at READ COMMITTED it then counts one doctor on call and stays; at REPEATABLE READ
// and SERIALIZABLE it fails with 40001 instead (t1 changed a row it locks after its snapshot).
import { anomaly, clean, defineScenario, levelParam, prevented, serialized, step, type DocEntry, type Documented, type Params } from '../src/scenario.js'
import { RR_UPDATE, SER_SSI, begin, isolationParam, otherLevels } from './_shared/isolation.js'
import { DEADLOCK, M, myBegin, withInnodb } from './_shared/innodb.js'

const BOTH = { t1: 'committed', t2: 'committed' }
const LAST = 'I am the last doctor on call'

/** The check; --form for-update locks the rows it counts (common pitfall 2's fix). */
const check = (p: Params) =>
  p.form === 'for-update'
    ? 'select count(*)::int as on_call from (select id from doctors where on_call for update) d'
    : 'select count(*)::int as on_call from doctors where on_call'

/** What `plain` documents, or with --form for-update: t2's check waits for t1's row lock, and the level decides. */
const orForUpdate = (plain: Documented): DocEntry => (v) =>
  v.params.form !== 'for-update'
    ? plain
    : v.params.isolation === 'read committed'
      ? serialized("t2's check waits for t1's lock, then re-reads the row t1 changed: one doctor on call, t2 stays (13.2.1)", { t1: 'committed', t2: `rejected: ${LAST}` })
      : prevented(`t2's check waits for t1's lock; ${RR_UPDATE}`, { t1: 'committed', t2: '40001' })

const scenario = defineScenario({
  id: 'write-skew',
  title: 'write skew: doctors on call, at least one must stay on call',
  source: { article: 'isolation-levels', section: 'Anomalies: write skew' },
  story: [
    'Constraint: at least one doctor must be on call. Doctors 1 and 2 are on call.',
    'T1 counts 2 on call and goes off call; T2 counted 2 as well and goes off call too: nobody is on call.',
    'Each transaction is right on its own; they read the same rows and write different ones.',
    'REPEATABLE READ does not help (PostgreSQL RR is snapshot isolation). SERIALIZABLE fails T2 with 40001.',
    "--form for-update (pitfall 2's fix): the check locks the rows it counts, so T2's check waits for T1; at READ COMMITTED it then counts 1 and T2 stays; above it T2 gets 40001.",
  ],
  params: {
    ...isolationParam(),
    form: {
      flag: '--form <form>',
      description: 'the check: plain (count) or for-update (count the rows it locks with SELECT ... FOR UPDATE)',
      kind: 'choice',
      choices: ['plain', 'for-update'],
      default: 'plain',
    },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: [
    `create table doctors (id int primary key, name text not null, on_call boolean not null)`,
    `insert into doctors values (1, 'Alice', true), (2, 'Bob', true)`,
  ],
  sessions: ({ params }) => {
    const doctor = (id: number) => ({
      steps: {
        begin: begin(params),
        check: check(params),
        off: step(`update doctors set on_call = false where id = ${id}`, {
          rejectIf: ({ prior }) => prior.check.on_call < 2 && 'I am the last doctor on call',
        }),
        commit: 'commit',
      },
    })
    return { t1: doctor(1), t2: doctor(2) }
  },
  permutation: 't1.begin t1.check t2.begin t2.check t1.off t1.commit t2.off t2.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'at least one doctor on call',
    sql: `select count(*) >= 1 as held, count(*)::int as on_call from doctors where on_call`,
    observed: (r) => `${r.on_call} on call`,
  },
  documented: {
    postgres: {
      // Table 13.1 serialization anomaly: possible at READ COMMITTED and REPEATABLE READ, not at SERIALIZABLE.
      levels: {
        'read committed': orForUpdate(anomaly('serialization anomaly possible', BOTH)),
        'repeatable read': orForUpdate(anomaly('serialization anomaly possible: RR is snapshot isolation (13.2.2)', BOTH)),
        serializable: orForUpdate(prevented(SER_SSI, { t1: 'committed', t2: '40001' })),
      },
      serial: clean('t2 counts one doctor on call and stays', { t1: 'committed', t2: 'rejected: I am the last doctor on call' }),
    },
  },
  checks: [
    ...otherLevels(),
    // --form for-update is written for PostgreSQL (the InnoDB form below takes plain counts).
    { label: 'for-update', params: { form: 'for-update' }, engines: ['postgres'] },
    { label: 'for-update, repeatable read', params: { form: 'for-update', isolation: 'repeatable read' }, engines: ['postgres'] },
    { label: 'for-update, serializable', params: { form: 'for-update', isolation: 'serializable' }, engines: ['postgres'] },
  ],
})

// InnoDB (MySQL/MariaDB): the same doctors. The article: "MySQL RR does not prevent write skew". InnoDB's
// SERIALIZABLE is two-phase locking: both counts take shared locks, each UPDATE waits for the other's, a
// deadlock, and InnoDB rolls one back (either: both are the same size).
export default withInnodb(scenario, {
  sessions: ({ params }) => {
    const doctor = (id: number) => ({
      steps: {
        begin: myBegin(String(params.isolation)),
        check: 'select count(*) as on_call from doctors where on_call',
        off: step(`update doctors set on_call = false where id = ${id}`, {
          rejectIf: ({ prior }) => prior.check.on_call < 2 && 'I am the last doctor on call',
        }),
        commit: 'commit',
      },
    })
    return { t1: doctor(1), t2: doctor(2) }
  },
  invariantSql: `select count(*) >= 1 as held, count(*) as on_call from doctors where on_call`,
  documented: {
    levels: {
      'read uncommitted': anomaly(M.RU, BOTH),
      'read committed': anomaly(M.RC, BOTH),
      'repeatable read': anomaly(`${M.RR}: each count reads its snapshot, each UPDATE a row the other never wrote`, BOTH),
      serializable: [prevented(M.DEADLOCK, { t1: 'committed', t2: DEADLOCK }), prevented(M.DEADLOCK, { t1: DEADLOCK, t2: 'committed' })],
    },
    serial: clean('t2 counts one doctor on call and stays', { t1: 'committed', t2: 'rejected: I am the last doctor on call' }),
  },
  checks: [{ label: 'read uncommitted', params: { isolation: 'read uncommitted' } }],
})
