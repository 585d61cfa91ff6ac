// two-int-key (advisory-locks §8.3): pg_advisory_xact_lock(namespace_id, resource_id). The same resource id
// under two namespaces is two different locks (no wait); the same namespace and resource serializes. pg_locks
// shows a two-int key as classid = the first int, objid = the second, objsubid = 2; `race locks` prints it as
// the pair (k1, k2) (run with --hold to look).
import { createHash } from 'node:crypto'
import { defineScenario, clean, serialized, type SessionSpec } from '../src/scenario.js'
import { observations } from './_shared/locks.js'

/** The two uses of §8.3's example: the first argument numbers the use. */
const NAMESPACES = { setup_request: 1, withdrawal: 2 } as const

/** What this backend's advisory lock looks like in pg_locks, written down with the moment it got inside. */
const enter = `insert into pairs (session, k1, k2, objsubid)
select :session, classid::bigint, objid::bigint, objsubid from pg_locks
 where locktype = 'advisory' and pid = pg_backend_pid() and granted
returning k1, k2, objsubid`

function user(ns: keyof typeof NAMESPACES): SessionSpec {
  return {
    binds: { namespace: { describe: `${NAMESPACES[ns]} (${ns})`, value: () => NAMESPACES[ns] } },
    steps: {
      begin: 'begin',
      lock: 'select pg_advisory_xact_lock(:namespace, :resource)',
      enter: `with e as (${enter}) insert into observations (session, what, n) select :session, 'enter', 1 from e returning n`,
      leave: `insert into observations (session, what, n) values (:session, 'leave', 1) returning n`,
      commit: 'commit',
    },
  }
}

export default defineScenario({
  id: 'two-int-key',
  title: 'the two-int key: one resource id under two namespaces never collides, one namespace serializes',
  source: { article: 'advisory-locks', section: '8.3' },
  story: [
    "§8.3: pg_advisory_xact_lock(namespace_id, resource_id): the first argument numbers the use (1 setup_request, 2 withdrawal), the second is the resource (an int4 primary key).",
    'a locks (1, R) and b locks (2, R): the same resource id in two namespaces are two different locks, so b goes in beside a.',
    'c locks (1, R) as a does: it waits until a commits.',
    'Each session writes down what pg_locks shows for its lock (classid = first int, objid = second, objsubid = 2) and when it is inside.',
    'Run it with --hold 30s and look with race locks in another terminal: the keys show as pairs (k1, k2).',
  ],
  params: {},
  sessionCount: { default: 3, min: 3, max: 3 },
  isolation: 'read committed',
  setup: [observations, `create table pairs (session text primary key, k1 bigint not null, k2 bigint not null, objsubid int not null)`],
  binds: {
    resource: {
      describe: "R: sha256(user), first 4 bytes, as a non-negative int4 (the user's integer id)",
      value: (ctx) => createHash('sha256').update(ctx.user).digest().readInt32BE(0) & 0x7fffffff,
    },
  },
  sessions: () => ({ a: user('setup_request'), b: user('withdrawal'), c: user('setup_request') }),
  permutation: 'a.begin a.lock a.enter b.begin b.lock b.enter c.begin c.lock b.leave b.commit a.leave a.commit c.enter c.leave c.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'no two sessions are inside with the same (namespace, resource) pair',
    sql: `with span as (select session, min(seq) filter (where what = 'enter') as i, max(seq) filter (where what = 'leave') as o from observations group by session),
     k as (select s.*, p.k1, p.k2, p.objsubid from span s join pairs p using (session))
select case when (select count(*) from k where i is not null and o is not null) < 3 then null else not exists (
         select 1 from k x join k y on x.session < y.session and (x.k1, x.k2) = (y.k1, y.k2) and x.i < y.o and y.i < x.o) end as held,
       (select string_agg(format('%s (%s, %s) objsubid %s', session, k1, k2, objsubid), '; ' order by session) from k) as pairs,
       (select string_agg(x.session || '+' || y.session, ', ' order by x.session, y.session) from k x join k y on x.session < y.session and x.i < y.o and y.i < x.o) as together`,
    observed: (r) => `pg_locks: ${r.pairs ?? 'nothing recorded'}; inside together: ${r.together ?? 'nobody'}`,
  },
  unavailable: { mysql: "pg_advisory_xact_lock(int, int) is PostgreSQL's two-int key; GET_LOCK takes a string name" },
  documented: {
    postgres: {
      lockstep: serialized('c waits for a (same pair); b takes another lock (other namespace) and never waits', { a: 'committed', b: 'committed', c: 'committed' }),
      serial: clean('one after another nobody waits', { a: 'committed', b: 'committed', c: 'committed' }),
    },
  },
})
