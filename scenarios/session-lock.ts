// session-lock (advisory-locks §3.2, §6): pg_advisory_lock taken inside a transaction survives its ROLLBACK,
// two takes need two unlocks, and a pooled connection handed back with one lock still taken leaks it: the
// next, unrelated borrower of that connection "holds" a lock it never asked for, and a third request waits
// for it until the pool resets the connection. Not a race but a leak: violated in every schedule, serial
// included. --xact (the fix): pg_advisory_xact_lock, gone with the ROLLBACK: held, nobody waits.
//
// Without a pooler the pool is simulated (req2 and pool borrow req1's connection). Through a real one
// (--pooler pgbouncer) three separate clients s1, s2, s3 go through PgBouncer in transaction mode: s2 lands on
// the server connection s1's lock stayed on, and s3, on another one, waits for a lock nobody in its own code
// took, until its lock_timeout (55P03). In session mode the pool's reset query (DISCARD ALL) unlocks it.
import { anomaly, clean, defineScenario, keyBind, type DocCtx, type Documented, type SessionSpec, type Variant } from '../src/scenario.js'
import { heldByMe, observations, observe, probe } from './_shared/locks.js'

const simulated = (v: Variant) =>
  v.params.xact
    ? clean('pg_advisory_xact_lock ends with its transaction: the next borrower holds nothing, nobody waits', { committed: 5 })
    : anomaly('session-level locks ignore ROLLBACK and outlive the borrower: the next borrower of the connection holds one', { committed: 5 })

/** Through a real pooler: s1, s2, s3 are three clients. */
function throughPool(v: DocCtx): Documented | Documented[] {
  const all = { s1: 'committed', s2: 'committed', s3: 'committed' }
  if (v.params.xact) return clean("pg_advisory_xact_lock ends with s1's transaction: s2's backend holds nothing, s3 gets the key at once", all)
  if (v.pool!.mode === 'session') return clean("session mode: s1's disconnect makes the pool run its reset query (DISCARD ALL unlocks everything) before s2 gets the connection", all)
  const waits = anomaly("the lock stays on the server connection: s2 lands on it and holds it; s3, lent another one, waits for it until lock_timeout", { ...all, s3: '55P03' })
  const same = anomaly("the lock stays on the server connection: s2 holds it, and s3, lent the same connection, is granted it at once (that backend already holds it)", all)
  return v.pool!.size === 1 ? same : v.pool!.size === null ? [waits, same] : waits
}

const leak = (v: DocCtx) => (v.pool ? throughPool(v) : simulated(v))
// One client after another: s3 begins after s2 ended, so the pool lends it the connection s1 and s2 used.
const serial = (v: DocCtx) => (v.pool && !v.params.xact && v.pool.mode !== 'session' ? throughPool({ ...v, pool: { ...v.pool, size: 1 } }) : leak(v))

/** Takes the key twice in a transaction, rolls it back, then unlocks once: the second take is forgotten. */
function holder(take: string): SessionSpec {
  return {
    steps: {
      begin: 'begin',
      lock: take,
      again: take,
      rollback: 'rollback',
      unlock: 'select pg_advisory_unlock(:key) as released',
    },
  }
}

function pooledSessions(take: string): Record<string, SessionSpec> {
  return {
    // Its unlock is autocommit: it runs on whichever connection the pool lends it.
    s1: holder(take),
    // Another client: it takes no lock, and looks at what the backend it was lent holds.
    s2: { steps: { begin: 'begin', mine: observe('locks held by next borrower', heldByMe, 'held'), commit: 'commit' } },
    // A third client asks for the key, waiting at most 500ms.
    s3: { steps: { begin: 'begin', timeout: `select set_config('lock_timeout', '500ms', true)`, lock: 'select pg_advisory_xact_lock(:key)', commit: 'commit' } },
  }
}

/** MySQL's user locks (GET_LOCK) are session-scoped only: there is nothing like --xact to compare with. */
const noXact = (v: Variant) => {
  if (v.params.xact) throw new Error('--xact does not exist on MySQL: GET_LOCK has no transaction-scoped form')
  return anomaly('GET_LOCK is session-scoped: ROLLBACK does not release it, a second GET_LOCK needs a second RELEASE_LOCK, and the next borrower of the connection holds it', { committed: 5 })
}

/** The same story with GET_LOCK / RELEASE_LOCK / IS_FREE_LOCK / IS_USED_LOCK / RELEASE_ALL_LOCKS (MySQL 5.7+, MariaDB 10.5+). */
function mySessions(): Record<string, SessionSpec> {
  const note = (what: string, expr: string) => `insert into observations (session, what, n) select :session, '${what}', ${expr}`
  return {
    req1: {
      steps: {
        begin: 'start transaction',
        lock: 'select get_lock(:lock, 0) as got',
        again: 'select get_lock(:lock, 0) as got',
        rollback: 'rollback',
        unlock: 'select release_lock(:lock) as released',
      },
    },
    other: { steps: { afterRollback: note('free after rollback', 'is_free_lock(:lock)'), afterUnlock: note('free after one unlock', 'is_free_lock(:lock)') } },
    req2: { shares: 'req1', steps: { begin: 'start transaction', mine: note('locks held by next borrower', 'coalesce(is_used_lock(:lock) = connection_id(), 0)'), commit: 'commit' } },
    req3: { steps: { begin: 'start transaction', lock: 'select get_lock(:lock, 10) as got', commit: 'commit' } },
    pool: { shares: 'req1', steps: { reset: 'select release_all_locks() as released' } },
  }
}

export default defineScenario({
  id: 'session-lock',
  title: 'pg_advisory_lock survives ROLLBACK and leaks through a connection pool',
  source: { article: 'advisory-locks', section: '6' },
  story: [
    'req1 borrows a pooled connection, begins, takes pg_advisory_lock(key) twice, and rolls back.',
    "After the ROLLBACK another connection's pg_try_advisory_lock(key) is still false: session locks ignore transactions.",
    'req1 unlocks once (true) and hands the connection back to the pool; the key is still taken: two takes need two unlocks.',
    'req2, an unrelated request, borrows the same connection (same backend pid): pg_locks shows it holding a lock it never took.',
    'req3, on its own connection, asks for the key and waits, until the pool resets the connection (pg_advisory_unlock_all, part of DISCARD ALL).',
    '--xact takes pg_advisory_xact_lock instead: the ROLLBACK releases it, the next borrower holds nothing, req3 does not wait.',
    'Through a real PgBouncer (--pooler pgbouncer, transaction mode, 2 server connections) three clients: s1 takes the lock twice, rolls back and unlocks once;',
    "s2 is lent the same server connection and holds the lock; s3, lent the other one while s2's transaction runs, waits for it until its lock_timeout (55P03).",
    'In session mode (--pool-mode session) s1 keeps its connection until it disconnects, and the reset query (DISCARD ALL) unlocks everything: no leak.',
  ],
  params: {
    xact: {
      flag: '--xact',
      description: 'take pg_advisory_xact_lock instead (the fix)',
      kind: 'boolean',
      default: false,
    },
  },
  sessionCount: { default: 5, min: 5, max: 5 },
  // MySQL's begin is a plain START TRANSACTION: InnoDB's default level, REPEATABLE READ.
  isolation: ({ engine }) => (engine === 'mysql' ? 'repeatable read' : 'read committed'),
  setup: ({ engine }) =>
    engine === 'mysql'
      ? [`create table observations (seq bigint auto_increment primary key, session varchar(20) not null, what varchar(60) not null, n bigint not null)`]
      : [observations],
  binds: { key: keyBind('setup_request'), lock: { describe: "'setup_request:' || user (a GET_LOCK name)", value: (ctx) => `setup_request:${ctx.user}` } },
  sessions: ({ params, engine, pool }) => {
    if (engine === 'mysql') return mySessions()
    const take = `select ${params.xact ? 'pg_advisory_xact_lock' : 'pg_advisory_lock'}(:key)`
    if (pool) return pooledSessions(take)
    return {
      // Then the connection goes back to the pool.
      req1: holder(take),
      other: { steps: { afterRollback: probe('free after rollback'), afterUnlock: probe('free after one unlock') } },
      // The next borrower of req1's connection: it takes no lock, and looks at what its backend holds.
      req2: { shares: 'req1', steps: { begin: 'begin', mine: observe('locks held by next borrower', heldByMe, 'held'), commit: 'commit' } },
      req3: { steps: { begin: 'begin', lock: 'select pg_advisory_xact_lock(:key)', commit: 'commit' } },
      // The pool finally resets the connection (pg_advisory_unlock_all is part of DISCARD ALL).
      pool: { shares: 'req1', steps: { reset: 'select pg_advisory_unlock_all()' } },
    }
  },
  permutation: ({ pool }) =>
    !pool
      ? 'req1.begin req1.lock req1.again req1.rollback other.afterRollback req1.unlock other.afterUnlock ' +
        'req2.begin req2.mine req2.commit req3.begin req3.lock pool.reset req3.commit'
      : // s3 begins while s2's transaction holds the connection s1 used, so the pool lends s3 another one;
        // with a pool of one s3 can only begin after s2 ends, on that same connection.
        pool.size === 1
        ? 's1.begin s1.lock s1.again s1.rollback s1.unlock s2.begin s2.mine s2.commit s3.begin s3.timeout s3.lock s3.commit'
        : 's1.begin s1.lock s1.again s1.rollback s1.unlock s2.begin s2.mine s3.begin s3.timeout s3.lock s2.commit s3.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "a lock taken in a transaction is gone when it ends, and no borrower holds a lock it didn't take",
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select after_rollback = 1 and next_holds = 0 as held, after_rollback, after_unlock, next_holds
  from (select max(case when what = 'free after rollback' then n end) as after_rollback,
               max(case when what = 'free after one unlock' then n end) as after_unlock,
               max(case when what = 'locks held by next borrower' then n end) as next_holds
          from observations) o`
        : // Through a pooler no session probes after the rollback (after_rollback is NULL): only the borrower counts.
          `select after_rollback is distinct from 0 and next_holds = 0 as held, after_rollback, after_unlock, next_holds
  from (select max(n) filter (where what = 'free after rollback') as after_rollback,
               max(n) filter (where what = 'free after one unlock') as after_unlock,
               max(n) filter (where what = 'locks held by next borrower') as next_holds
          from observations) o`,
    observed: (r) => {
      const taken = (v: unknown) => (v === null || v === undefined ? '?' : Number(v) === 1 ? 'free' : 'still taken')
      const probed = r.after_rollback === null || r.after_rollback === undefined ? '' : `after rollback ${taken(r.after_rollback)}, after one unlock ${taken(r.after_unlock)}, `
      return `${probed}next borrower holds ${r.next_holds ?? '?'}`
    },
  },
  // A leak, not a race: one session after another shows it just the same.
  documented: { postgres: { lockstep: leak, serial }, mysql: { lockstep: noXact, serial: noXact } },
  pooled: { size: 2, modes: ['transaction', 'session'] },
  checks: [
    { label: 'xact', params: { xact: true }, engines: ['postgres'] },
    { label: 'session mode', pool: { mode: 'session' }, engines: ['postgres'] },
  ],
})
