// dirty-read (isolation-levels article, dirty read): T1 sets a balance to 0 and rolls back; T2 reads it in
// between. PostgreSQL never shows uncommitted data, not even at READ UNCOMMITTED: T2 reads the committed 100
// at every level, without waiting.
import { anomaly, clean, defineScenario, levelParam, serialized, step, type SessionSpec } from '../src/scenario.js'
import { begin, isolationParam, readsTable, recordRead, otherLevels } from './_shared/isolation.js'
import { M, keep, myBegin, myReadsTable } from './_shared/innodb.js'

const WHO = { t1: 'rejected: T1 changes its mind', t2: 'committed' }
const NEVER = (why: string) => clean(`dirty read not possible: ${why}`, WHO)

export default defineScenario({
  id: 'dirty-read',
  title: 'dirty read: PostgreSQL never shows uncommitted data, not even at READ UNCOMMITTED',
  source: { article: 'isolation-levels', section: 'Anomalies: dirty read' },
  story: [
    'T1 sets account 1 (balance 100) to 0 and has not committed; T2 reads the balance; T1 rolls back.',
    'The article: T2 reads 0, a state that never existed, and it lists READ UNCOMMITTED as allowing it.',
    'PostgreSQL: T2 reads 100 at every level, READ UNCOMMITTED included (it behaves as READ COMMITTED), and nobody waits.',
    'The read is kept in the reads table by the same statement; the invariant compares it with the committed balance.',
  ],
  params: isolationParam('read committed', ['read uncommitted']),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [`create table accounts (id int primary key, balance int not null)`, `insert into accounts values (1, 100)`, engine === 'mysql' ? myReadsTable : readsTable],
  sessions: ({ params, engine }): Record<string, SessionSpec> =>
    engine === 'mysql'
      ? {
          t1: { steps: { begin: myBegin(String(params.isolation)), update: 'update accounts set balance = 0 where id = 1', rollback: step('rollback', { rejectIf: () => 'T1 changes its mind' }) } },
          t2: { steps: { begin: myBegin(String(params.isolation)), read: 'select balance as value from accounts where id = 1', keep: keep('read'), commit: 'commit' } },
        }
      : {
          t1: { steps: { begin: begin(params), update: 'update accounts set balance = 0 where id = 1', rollback: step('rollback', { rejectIf: () => 'T1 changes its mind' }) } },
          t2: { steps: { begin: begin(params), read: recordRead('read', 'select balance as value from accounts where id = 1'), commit: 'commit' } },
        },
  permutation: ({ engine }) =>
    engine === 'mysql' ? 't1.begin t1.update t2.begin t2.read t2.keep t1.rollback t2.commit' : 't1.begin t1.update t2.begin t2.read t1.rollback t2.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'T2 read only committed data: its read equals the committed balance',
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select \`read\` = committed as held, \`read\`, committed
  from (select (select cast(value as signed) from read_log where session = 't2') as \`read\`, (select balance from accounts where id = 1) as committed) x`
        : `select read = committed as held, read, committed
  from (select (select value::int from reads where session = 't2') as read, (select balance from accounts where id = 1) as committed) x`,
    observed: (r) => `T2 read ${r.read ?? 'nothing'}, committed ${r.committed}`,
  },
  documented: {
    postgres: {
      // Table 13.1: dirty read "Allowed, but not in PG" at READ UNCOMMITTED, not possible above.
      levels: {
        'read uncommitted': NEVER('PostgreSQL runs READ UNCOMMITTED as READ COMMITTED (13.2)'),
        'read committed': NEVER('a statement sees only committed rows (13.2.1)'),
        'repeatable read': NEVER('one snapshot of committed rows (13.2.2)'),
        serializable: NEVER('one snapshot of committed rows'),
      },
      serial: clean('T1 rolled back before T2 began', WHO),
    },
    mysql: {
      levels: {
        'read uncommitted': anomaly(`${M.RU}: T2 reads 0`, WHO),
        'read committed': NEVER('a consistent read sees only committed rows (InnoDB: Consistent Nonlocking Reads)'),
        'repeatable read': NEVER('a consistent read sees only committed rows'),
        // SERIALIZABLE: T2's read is a shared locking read: it waits for T1's row lock, and reads 100 after the rollback.
        serializable: serialized(`${M.SER}: T2's read waits for T1 and reads the rolled-back row's committed 100`, WHO),
      },
      serial: clean('T1 rolled back before T2 began', WHO),
    },
  },
  checks: otherLevels('read committed', ['read uncommitted']),
})
