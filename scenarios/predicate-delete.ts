// predicate-delete (isolation-levels article, phantom read): t1 archives the 'done' items, then deletes the
// 'done' items; t2 inserts a 'done' item and commits in between. READ COMMITTED: the DELETE (a new snapshot)
// removes t2's item, which was never archived: it is gone (violated). REPEATABLE READ and SERIALIZABLE: the
// DELETE sees t1's snapshot, and t2's item survives for the next run (held, nobody waited).
import { anomaly, clean, defineScenario, levelParam, serialized } from '../src/scenario.js'
import { begin, isolationParam, otherLevels } from './_shared/isolation.js'
import { M, myBegin } from './_shared/innodb.js'

const BOTH = { t1: 'committed', t2: 'committed' }

export default defineScenario({
  id: 'predicate-delete',
  title: 'predicate DELETE racing with an insert that matches it (archive, then purge)',
  source: { article: 'isolation-levels', section: 'Anomalies: phantom read' },
  story: [
    "A purge job: copy the 'done' items to archive, then delete the 'done' items, in one transaction.",
    "T2 inserts a new 'done' item and commits between the copy and the delete.",
    "READ COMMITTED: the DELETE takes a new snapshot, sees T2's item and deletes it: never archived, lost.",
    'REPEATABLE READ and SERIALIZABLE: the DELETE sees the same rows the copy saw; the new item waits for the next purge.',
    'A trigger logs every inserted id, so the invariant can ask: is every item in items or in archive?',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) =>
    engine === 'mysql'
      ? [
          `create table items (id int primary key, status varchar(20) not null)`,
          `create table archive (id int primary key, status varchar(20) not null)`,
          `create table items_log (id int primary key)`,
          `create trigger items_logged after insert on items for each row insert into items_log values (new.id)`,
          `insert into items values (1, 'done'), (2, 'pending')`,
        ]
      : [
          `create table items (id int primary key, status text not null)`,
          `create table archive (id int primary key, status text not null)`,
          `create table items_log (id int primary key)`,
          `create function log_item() returns trigger language plpgsql as $$ begin insert into items_log values (new.id); return new; end $$`,
          `create trigger items_logged after insert on items for each row execute function log_item()`,
          `insert into items values (1, 'done'), (2, 'pending')`,
        ],
  sessions: ({ params, engine }) => ({
    t1: {
      steps: {
        begin: engine === 'mysql' ? myBegin(String(params.isolation)) : begin(params),
        archive: `insert into archive select * from items where status = 'done'`,
        purge: `delete from items where status = 'done'`,
        commit: 'commit',
      },
    },
    t2: { steps: { begin: engine === 'mysql' ? myBegin(String(params.isolation)) : begin(params), insert: `insert into items values (3, 'done')`, commit: 'commit' } },
  }),
  permutation: 't1.begin t1.archive t2.begin t2.insert t2.commit t1.purge t1.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'every item ever inserted is in items or in archive',
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select count(*) = 0 as held, count(*) as lost, coalesce(group_concat(l.id separator ', '), '') as ids from items_log l
  where not exists (select 1 from items i where i.id = l.id) and not exists (select 1 from archive a where a.id = l.id)`
        : `select count(*) = 0 as held, count(*)::int as lost, coalesce(string_agg(l.id::text, ', '), '') as ids from items_log l
  where not exists (select 1 from items i where i.id = l.id) and not exists (select 1 from archive a where a.id = l.id)`,
    observed: (r) => (Number(r.lost) ? `item ${r.ids} in neither` : 'every item kept'),
  },
  documented: {
    postgres: {
      levels: {
        'read committed': anomaly('the DELETE finds rows committed after the copy (13.2.1)', BOTH),
        'repeatable read': clean('the DELETE sees only the transaction snapshot (13.2.2)', BOTH),
        serializable: clean('the DELETE sees only the transaction snapshot; no cycle', BOTH),
      },
      serial: clean('t1 purged before t2 inserted', BOTH),
    },
    mysql: {
      // INSERT ... SELECT reads its source as a consistent read at READ COMMITTED (and READ UNCOMMITTED, which works
      // like it otherwise); at REPEATABLE READ and SERIALIZABLE with shared next-key locks (InnoDB: Locks Set by
      // Different SQL Statements). So above READ COMMITTED, T2's INSERT into the scanned range waits for T1.
      levels: {
        'read uncommitted': anomaly(`the DELETE, a locking read, finds the row committed after the copy (${M.LOCKING})`, BOTH),
        'read committed': anomaly(`the DELETE finds the row committed after the copy (${M.LOCKING})`, BOTH),
        'repeatable read': serialized(`the copy (INSERT ... SELECT) takes shared next-key locks on items: T2's INSERT waits until T1 commits (${M.GAP})`, BOTH),
        serializable: serialized(`the copy takes shared next-key locks on items: T2's INSERT waits until T1 commits`, BOTH),
      },
      serial: clean('t1 purged before t2 inserted', BOTH),
    },
  },
  checks: otherLevels(),
})
