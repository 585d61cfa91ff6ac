// mvcc-versions (isolation-levels article, MVCC internals): every UPDATE writes a new row version; each reader
// sees the version its snapshot makes visible. The row's ctid, xmin and xmax before and after updates by two
// sessions, each read's snapshot (pg_current_snapshot(): xmin, xmax, the xids in progress), and, checked by the
// article's four visibility rules, which version each session saw: REPEATABLE READ keeps the old version (its
// xmax is the updater's xid, still in progress for its snapshot); READ COMMITTED sees the new one at its next
// statement.
import { clean, defineScenario, type SessionSpec } from '../src/scenario.js'

/** Every version of every row: who wrote it (its xmin, as the full xid8 the writer read), and where it is. */
const versions = `create table versions (id int not null, at text not null, made_by xid8 not null, writer text not null)`

/** The two accounts, and their first versions, in one statement (one transaction, one xmin). */
const accounts = `with ins as (insert into accounts values (1, 500), (2, 300) returning id, ctid)
insert into versions select id, ctid::text, pg_current_xact_id(), 'setup' from ins`

/** What a read saw: each row's version (ctid, xmin, xmax from its header) and the snapshot it was read with. */
const seen = `create table seen (session text not null, step text not null, id int not null, at text not null,
  row_xmin text not null, row_xmax text not null, balance int not null, snap pg_snapshot not null)`

function read(label: string): string {
  return `insert into seen
select :session, '${label}', id, ctid::text, xmin::text, xmax::text, balance, pg_current_snapshot() from accounts
returning id, at as ctid, row_xmin as xmin, row_xmax as xmax, balance, snap::text as snapshot`
}

/** An update that writes down the new version it made (and the xid it made it with). */
function update(id: number, balance: number): string {
  return `with u as (update accounts set balance = ${balance} where id = ${id} returning id, ctid)
insert into versions select id, ctid::text, pg_current_xact_id(), :session from u
returning at as new_ctid, made_by as xid`
}

const reader = (begin: string): SessionSpec => ({ steps: { begin, read1: read('read1'), read2: read('read2'), commit: 'commit' } })

/**
 * The article's four rules, for xid x and snapshot s: in s's in-progress list (rule 1) or at or after its xmax
 * (rule 2): invisible; committed before s (rule 3): visible. A version is seen when its xmin is visible and its
 * xmax is not (rule 4: a deletion that is visible hides it). Every version is matched to its row by the xid8
 * its writer read, so the 32-bit xmin/xmax of the header are compared modulo 2^32.
 */
const rules = `create function visible(x xid8, s pg_snapshot) returns boolean language sql stable as $$
  select x < pg_snapshot_xmax(s) and not (x = any (array(select pg_snapshot_xip(s)))) and pg_xact_status(x) = 'committed'
$$`

const why = `create function why(x xid8, s pg_snapshot) returns text language sql stable as $$
  select case when x = any (array(select pg_snapshot_xip(s))) then 'in progress for the snapshot (rule 1)'
              when x >= pg_snapshot_xmax(s) then 'began after the snapshot (rule 2)'
              else 'committed before the snapshot (rule 3)' end
$$`

export default defineScenario({
  id: 'mvcc-versions',
  title: 'row versions, snapshots and the four visibility rules: RR keeps the old version, RC moves on',
  source: { article: 'isolation-levels', section: 'MVCC internals' },
  story: [
    'Two accounts. Each UPDATE writes a new version of its row (a new ctid); the old version gets xmax = the updater\'s xid.',
    't1 updates account 1 and stays open; t2 updates account 2 and commits. Then rr (REPEATABLE READ) and rc (READ COMMITTED) read both rows:',
    "their snapshot lists t1's xid as in progress, so both see account 1's old version (its xmax is t1's, not visible yet) and t2's new version of account 2.",
    't1 commits, and t2 updates account 2 again. rr reads again with the same snapshot: still the old versions. rc takes a new snapshot at its next statement: the new ones.',
    "Every read writes down each row's ctid, xmin, xmax and its snapshot (pg_current_snapshot()); the invariant checks each against the article's four rules.",
  ],
  params: {},
  sessionCount: { default: 4, min: 4, max: 4 },
  isolation: () => ({ t1: 'read committed', t2: 'read committed', rr: 'repeatable read', rc: 'read committed' }),
  setup: [`create table accounts (id int primary key, balance int not null)`, versions, accounts, seen, rules, why],
  sessions: () => ({
    t1: { steps: { begin: 'begin', update: update(1, 600), commit: 'commit' } },
    t2: { steps: { begin: 'begin', update: update(2, 400), commit: 'commit', begin2: 'begin', update2: update(2, 450), commit2: 'commit' } },
    rr: reader('begin isolation level repeatable read'),
    rc: reader('begin isolation level read committed'),
  }),
  permutation: 't1.begin t1.update t2.begin t2.update t2.commit rr.begin rr.read1 rc.begin rc.read1 t1.commit t2.begin2 t2.update2 t2.commit2 rr.read2 rc.read2 rr.commit rc.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "every read saw, of each row, exactly the version the article's four rules make visible in its snapshot",
    sql: `with v as (  -- each version, with the xid that replaced it (its xmax), if any
  select v.*, (select w.made_by from versions w where w.id = v.id and w.made_by > v.made_by order by w.made_by limit 1) as replaced_by from versions v),
pick as (      -- for each read and row: the versions the rules make visible
  select s.session, s.step, s.id, s.at as seen_ctid, s.balance, s.row_xmin as seen_xmin, s.row_xmax as seen_xmax, s.snap::text as snap,
         array_agg(v.at) filter (where visible(v.made_by, s.snap) and (v.replaced_by is null or not visible(v.replaced_by, s.snap))) as ruled,
         max(v.replaced_by::text) filter (where v.at = s.at) as deleter
    from seen s join v on v.id = s.id group by 1, 2, 3, 4, 5, 6, 7, 8),
checked as (
  select p.*, ruled = array[seen_ctid] and (seen_xmax = '0' or seen_xmax = (deleter::numeric % 4294967296)::text) as ok from pick p),
per_read as (  -- one line per read: its snapshot, then each row's version
  select session, step, snap, bool_and(ok) as ok, count(*) as n,
         string_agg(format('account %s %s=%s xmin %s xmax %s%s', id, seen_ctid, balance, seen_xmin, seen_xmax,
                           case when seen_xmax = '0' then '' else ' (' || why(deleter::xid8, snap::pg_snapshot) || ': still visible)' end), ', ' order by id) as rows
    from checked group by session, step, snap)
select case when sum(n) < 8 then null else bool_and(ok) end as held,
       count(*) filter (where not ok)::int as off,
       string_agg(format('%s %s, snapshot %s: %s', session, step, snap, rows), '; ' order by session desc, step) as reads
  from per_read`,
    observed: (r) => `${r.off === 0 ? 'as the rules say' : `${r.off ?? '?'} reads differ from the rules`}: ${r.reads ?? 'nothing read'}`,
  },
  unavailable: { mysql: "it reads PostgreSQL's row versions (ctid, xmin, xmax) and pg_current_snapshot(); InnoDB keeps old versions in its undo log" },
  documented: {
    postgres: {
      lockstep: clean('REPEATABLE READ reads its first snapshot throughout; READ COMMITTED takes a new snapshot per statement (13.2.1, 13.2.2)', {
        t1: 'committed',
        t2: 'committed',
        rr: 'committed',
        rc: 'committed',
      }),
      serial: clean('one after another every read sees the latest committed versions', { t1: 'committed', t2: 'committed', rr: 'committed', rc: 'committed' }),
    },
  },
})
