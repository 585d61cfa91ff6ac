// vacuum-horizon (isolation-levels article, common pitfall 3: a long transaction blocks VACUUM): a REPEATABLE
// READ transaction stays open while another session updates K rows; VACUUM leaves the K dead tuples in place
// (not yet removable: the open snapshot may still need them); after the long transaction ends, the same VACUUM
// removes them. --idle-timeout: idle_in_transaction_session_timeout ends the forgotten transaction (25P03 on its
// next statement), and VACUUM proceeds. The long transaction sets it (SET LOCAL) once it has taken its snapshot:
// set on the connection, it would also count race's own pauses between long's first steps (a step is sent only
// after the control connection has seen the last one finish), and a loaded machine could stretch one of those
// beyond the timeout, ending long before its snapshot existed (25P03 or a lost connection in mark or read). Every figure is read from the server (pg_stat_user_tables.n_dead_tup,
// which VACUUM itself sets to the dead tuples it could not remove).
import { clean, defineScenario, keyBind, anomaly, prevented, type Documented, type Params, type SessionSpec, type Variant } from '../src/scenario.js'
import { observations, observe } from './_shared/locks.js'

const deadTuples = `select n_dead_tup from pg_stat_user_tables where relid = 'items'::regclass`

/** Whether the forgotten transaction is still open: it holds :key (advisory, transaction level) until it ends. */
const longOpen = `select count(*) from pg_locks where locktype = 'advisory' and granted and objsubid = 1
   and ((classid::bigint << 32) | objid::bigint) = :key`

/**
 * Who else could hold the horizon back: any other backend of this database (or prepared transaction, or
 * replication slot) whose snapshot or transaction is as old as the writer's update. If VACUUM leaves dead tuples
 * while only such outsiders are open, this run cannot tell what the forgotten transaction did.
 */
const horizonHolders = `select count(*) from pg_stat_activity
   where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()
     and (age(backend_xmin) >= age(w.xid) or age(backend_xid) >= age(w.xid))) +
  (select count(*) from pg_prepared_xacts where age(transaction) >= age(w.xid)) +
  (select count(*) from pg_replication_slots where age(xmin) >= age(w.xid)`

/** The writer's xid (written down by its update) as a 32-bit xid, for age(). */
const writerXid = `(select (n % 4294967296)::text::xid as xid from observations where what = 'writer xid')`

function vacuumSteps(label: string): Record<string, string> {
  return {
    [`open${label}`]: observe(`long open at vacuum ${label}`, longOpen),
    [`holders${label}`]: observe(`horizon holders at vacuum ${label}`, `with w as ${writerXid} select (${horizonHolders}) from w`),
    [`vacuum${label}`]: 'vacuum items',
    [`after${label}`]: observe(`dead after vacuum ${label}`, deadTuples, 'dead'),
  }
}

function sessions(p: Params): Record<string, SessionSpec> {
  const idle = Number(p.idleTimeout) > 0
  const vac: Record<string, string> = { before: observe('dead before vacuum', deadTuples, 'dead') }
  // Without the timeout VACUUM runs once while the transaction is open, and again after it ended. With it,
  // VACUUM runs after the server ended the transaction (wait: until its key is free, no sleep).
  if (!idle) Object.assign(vac, vacuumSteps('1'))
  vac.wait = 'select pg_advisory_xact_lock(:key)'
  Object.assign(vac, vacuumSteps(idle ? '1' : '2'))
  return {
    long: {
      steps: {
        begin: 'begin isolation level repeatable read',
        // Held until the transaction ends: how vac knows that it ended, without a sleep.
        mark: 'select pg_advisory_xact_lock(:key)',
        // The harmless-looking query that takes the snapshot; then the developer goes to lunch.
        read: 'select count(*)::int as rows from tiny',
        // The timeout counts from here: the snapshot exists, and only the lunch is left to time.
        ...(idle ? { lunch: `set local idle_in_transaction_session_timeout = ${Number(p.idleTimeout)}` } : {}),
        commit: 'commit',
      },
    },
    writer: {
      steps: {
        update: `with u as (update items set v = v + 1 returning 1)
insert into observations (session, what, n)
select :session, 'rows updated', count(*) from u
union all select :session, 'writer xid', pg_current_xact_id()::text::bigint
returning n`,
        // Pending statistics are sent within a second; this sends them now, so n_dead_tup is current.
        flush: 'select pg_stat_force_next_flush()',
      },
    },
    vac: { steps: vac },
  }
}

const ALL = { long: 'committed', writer: 'committed', vac: 'committed' }

function documented(v: Variant): Documented {
  if (Number(v.params.idleTimeout) > 0) {
    return prevented('the server ends the idle transaction (25P03 on its next statement); VACUUM then removes every dead tuple', { ...ALL, long: '25P03' })
  }
  return anomaly('the open snapshot keeps the dead tuples: VACUUM cannot remove them until the transaction ends', ALL)
}

export default defineScenario({
  id: 'vacuum-horizon',
  title: 'a forgotten transaction keeps VACUUM from removing dead tuples',
  source: { article: 'isolation-levels', section: 'Common pitfalls: 3. long transactions block VACUUM' },
  story: [
    "long begins at REPEATABLE READ and reads a tiny table (its snapshot is taken), then sits idle in transaction: the developer went to lunch.",
    'writer updates --updates K rows of items (autovacuum off for it): K dead tuples, counted by pg_stat_user_tables.',
    "VACUUM items cannot remove them: long's snapshot is older than the updates, so they are dead but not yet removable; VACUUM sets n_dead_tup to what it left.",
    'long commits; the same VACUUM now removes them all.',
    '--idle-timeout 500ms: the server ends long after 500 ms idle in transaction (idle_in_transaction_session_timeout, the article\'s fix, which long sets for its transaction once it has read); VACUUM then removes them; long\'s next statement gets 25P03.',
    "vac knows long ended by waiting for an advisory key long holds (no sleep). A dead tuple left while only another backend's old snapshot was open makes the run undecided.",
  ],
  params: {
    updates: { flag: '--updates <k>', description: 'rows the writer updates (dead tuples it leaves)', kind: 'whole', default: 10, min: 1, max: 100_000 },
    idleTimeout: {
      flag: '--idle-timeout <duration>',
      description: 'idle_in_transaction_session_timeout for the forgotten transaction, from once it has read (0ms: none set)',
      kind: 'duration',
      default: 0,
    },
  },
  sessionCount: { default: 3, min: 3, max: 3 },
  isolation: () => ({ long: 'repeatable read', writer: 'read committed', vac: null }),
  setup: [
    observations,
    `create table items (id int primary key, v int not null) with (autovacuum_enabled = false)`,
    `insert into items select g, 0 from generate_series(1, :updates) g`,
    `create table tiny (x int)`,
    `insert into tiny values (1)`,
  ],
  binds: { key: keyBind('vacuum-horizon') },
  sessions: (v) => sessions(v.params),
  permutation: ({ params }) =>
    Number(params.idleTimeout) > 0
      ? 'long.begin long.mark long.read long.lunch writer.update writer.flush vac.before vac.wait(wait) vac.open1 vac.holders1 vac.vacuum1 vac.after1 long.commit'
      : 'long.begin long.mark long.read writer.update writer.flush vac.before vac.open1 vac.holders1 vac.vacuum1 vac.after1 long.commit vac.wait vac.open2 vac.holders2 vac.vacuum2 vac.after2',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'the first VACUUM after the updates removes every dead tuple',
    sql: `with o as (select what, max(n) as n from observations group by what)
select case when after1 is null then null when after1 = 0 then true when open1 > 0 then false when holders1 > 0 then null else false end as held,
       updated, before, after1, open1, holders1, after2
  from (select (select n from o where what = 'rows updated')::int as updated, (select n from o where what = 'dead before vacuum')::int as before,
               (select n from o where what = 'dead after vacuum 1')::int as after1, (select n from o where what = 'long open at vacuum 1')::int as open1,
               (select n from o where what = 'horizon holders at vacuum 1')::int as holders1, (select n from o where what = 'dead after vacuum 2')::int as after2) x`,
    observed: (r) =>
      `${r.updated ?? '?'} rows updated, ${r.before ?? '?'} dead tuples; VACUUM ${r.open1 ? 'while long was open' : 'after long ended'} left ${r.after1 ?? '?'}` +
      (r.after2 !== null ? `; after long ended, VACUUM left ${r.after2}` : '') +
      (r.holders1 && !r.open1 && r.after1 ? ` (${r.holders1} backends outside this run held old snapshots)` : ''),
  },
  postgresSince: { major: 15, why: 'pg_stat_force_next_flush(), without which pg_stat_user_tables counts dead tuples only after a delay' },
  unavailable: { mysql: "VACUUM and dead tuples are PostgreSQL's; InnoDB purges old row versions from its undo log by itself" },
  documented: {
    postgres: {
      lockstep: documented,
      serial: clean('one after another the long transaction has ended before the updates: VACUUM removes them', ALL),
    },
  },
  // Short, so that the time a backend outside the run could hold the horizon (updates to VACUUM) is short too.
  checks: [{ label: 'idle timeout 200ms', params: { idleTimeout: 200 } }],
})
