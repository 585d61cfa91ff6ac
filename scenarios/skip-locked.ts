// skip-locked (isolation-levels article, SKIP LOCKED queue workers): N workers take one job each from a queue.
// With SKIP LOCKED every job is processed exactly once and no worker waits (held, clean); at SERIALIZABLE
// nobody waits either, but SSI's predicate locks fail all but one with 40001 and the retry loop recovers
// (held, prevented). --no-skip-locked: the workers queue behind the first one's row lock (held, serialized)
// at READ COMMITTED; at REPEATABLE READ and SERIALIZABLE the waiters get 40001 and retry (held, prevented).
import { clean, defineScenario, levelParam, prevented, replicate, serialized, step, type Documented, type Variant, type Who } from '../src/scenario.js'
import { begin, isolationParam } from './_shared/isolation.js'
import { DEADLOCK, M, myBegin } from './_shared/innodb.js'

/** Every worker commits, or, without retries, the ones that lost with 40001 are reported. */
const done = (v: Variant): Who => (Number(v.params.retries) > 0 ? { committed: v.n } : { committed: [1, v.n], '40001': [0, v.n - 1] })

function lockstep(v: Variant): Documented {
  const level = v.params.isolation
  if (v.n === 1) return clean('one worker alone', { committed: 1 })
  if (v.params.skipLocked) {
    if (level !== 'serializable') return clean('each worker skips the rows the others hold and takes its own job at once', { committed: v.n })
    return prevented('SSI: every worker read the queue the others wrote (a predicate read): 40001 for the losers, nobody waited', done(v))
  }
  if (level === 'read committed') return serialized('plain FOR UPDATE: each worker waits for the row ahead of it, then takes the next pending one (13.2.1)', { committed: v.n })
  return prevented('a worker that waited for a row another one changed fails with 40001 (13.2.2)', done(v))
}

/**
 * InnoDB. At READ COMMITTED (and READ UNCOMMITTED) a locking read takes record locks only: SKIP LOCKED never waits,
 * plain FOR UPDATE queues. At REPEATABLE READ and SERIALIZABLE the scan of the (status, created_at) index takes
 * next-key locks (the record and the gap before it), and marking a job completed inserts a new index entry:
 * 'completed' sorts before 'pending', into the gap the first worker's next-key lock covers, so the other workers'
 * UPDATEs wait for it (an insert intention lock waits for a gap lock). Without SKIP LOCKED the waiting takes and
 * that insert deadlock: 1213, and the retry loop recovers (InnoDB Locking: next-key and insert intention locks).
 */
function myLockstep(v: Variant): Documented {
  if (v.n === 1) return clean('one worker alone', { committed: 1 })
  const gaps = v.params.isolation === 'repeatable read' || v.params.isolation === 'serializable'
  if (v.params.skipLocked) {
    if (!gaps) return clean('SKIP LOCKED: a locking read that never waits; it leaves out the rows others hold (InnoDB: Locking Reads)', { committed: v.n })
    return serialized("SKIP LOCKED never waits, but each UPDATE of status inserts an index entry into a gap the first worker's next-key lock covers, and waits", { committed: v.n })
  }
  if (!gaps) return serialized(`plain FOR UPDATE: each worker waits for the row ahead of it, then takes the next pending one (${M.LOCKING})`, { committed: v.n })
  const who: Who = Number(v.params.retries) > 0 ? { committed: v.n } : { committed: [1, v.n], [DEADLOCK]: [0, v.n - 1] }
  return prevented(`the waiting FOR UPDATEs and the first worker's index insert deadlock: ${M.DEADLOCK}; the retry loop recovers`, who)
}

export default defineScenario({
  id: 'skip-locked',
  title: 'queue workers with FOR UPDATE SKIP LOCKED: every job once, nobody waits',
  source: { article: 'isolation-levels', section: 'Application patterns: SKIP LOCKED queue workers' },
  story: [
    'A job_queue with one pending job per worker. Each worker takes the oldest pending job it can lock, marks it',
    'completed, records who processed it, and commits.',
    'SKIP LOCKED: each worker skips the rows the others hold and gets its own job at once: no waits, no duplicates.',
    "--no-skip-locked: plain FOR UPDATE; every worker queues behind the first job's lock and re-checks the next row",
    'after each commit. At REPEATABLE READ and SERIALIZABLE the waiters fail with 40001 and retry (--retries).',
    'The article says SKIP LOCKED works at any level. It does, but at SERIALIZABLE the scan of the queue is a predicate',
    'read: every worker read what the others wrote, so SSI fails all but one with 40001 (nobody waited); only the retry',
    'loop makes that safe. The invariant is what the pattern promises: no job processed twice.',
  ],
  params: {
    ...isolationParam(),
    skipLocked: { flag: '--no-skip-locked', description: 'take jobs with plain FOR UPDATE instead of FOR UPDATE SKIP LOCKED', kind: 'boolean', default: true },
    retries: { flag: '--retries <k>', description: 'retry a transaction that failed with 40001 up to k times', kind: 'whole', default: 4, min: 0 },
  },
  sessionCount: { default: 4, min: 1, max: 500 },
  isolation: levelParam,
  setup: ({ engine, n }) =>
    engine === 'mysql'
      ? [
          // The index the article's query needs on InnoDB: without it, ORDER BY created_at sorts every pending row,
          // and a locking read locks every row it reads, not only the one LIMIT 1 returns (measured: with a filter
          // on the primary key the optimizer scanned it, worker 1 locked all n jobs, and the others found none).
          `create table job_queue (id int primary key, payload varchar(50) not null, status varchar(20) not null default 'pending',
  created_at datetime(6) not null, completed_at datetime(6), key job_queue_pending (status, created_at))`,
          `create table processed (job_id int not null, worker varchar(10) not null)`,
          `insert into job_queue (id, payload, created_at)
  select n, concat('job ', n), timestamp '2026-01-01 00:00:00' + interval n * 1000 microsecond
    from (with recursive g (n) as (select 1 union all select n + 1 from g where n < ${n}) select n from g) x`,
        ]
      : [
    `create table job_queue (id int primary key, payload text not null, status text not null default 'pending', created_at timestamptz not null, completed_at timestamptz)`,
    `create table processed (job_id int not null, worker text not null)`,
    // one job per possible worker; the workers see only the first n
    `insert into job_queue (id, payload, created_at) select g, 'job ' || g, now() + g * interval '1 ms' from generate_series(1, 500) g`,
        ],
  sessions: ({ params, n, engine }) =>
    engine === 'mysql'
      ? replicate(n, {
          steps: {
            begin: myBegin(String(params.isolation)),
            // The article's query as it is: the queue holds exactly n jobs.
            take: `select id, payload from job_queue where status = 'pending' order by created_at limit 1 for update${params.skipLocked ? ' skip locked' : ''}`,
            complete: step(`update job_queue set status = 'completed', completed_at = now(6) where id = :take.id`, { rejectIf: ({ prior }) => !prior.take && 'queue empty' }),
            record: `insert into processed values (:take.id, :session)`,
            commit: 'commit',
          },
          retry: { max: Number(params.retries), on: ['40001'], backoff: true },
        })
      : replicate(n, {
      steps: {
        begin: begin(params),
        take: `select id, payload from job_queue where status = 'pending' and id <= :n order by created_at limit 1 for update${params.skipLocked ? ' skip locked' : ''}`,
        complete: step(
          `with u as (update job_queue set status = 'completed', completed_at = now() where id = :take.id returning id)
insert into processed select u.id, :session from u returning job_id`,
          { rejectIf: ({ prior }) => !prior.take && 'queue empty' },
        ),
        commit: 'commit',
      },
      retry: { max: Number(params.retries), on: ['40001'], backoff: true },
    }),
  invariant: {
    description: 'no job processed twice',
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select count(*) = count(distinct job_id) as held, count(*) as processed, count(distinct job_id) as distinct_jobs,
       (select count(*) from job_queue where id <= :n and status = 'pending') as pending
  from processed`
        : `select count(*) = count(distinct job_id) as held, count(*)::int as processed, count(distinct job_id)::int as distinct_jobs,
       (select count(*)::int from job_queue where id <= :n and status = 'pending') as pending
  from processed`,
    observed: (r) => `${r.processed} processed, ${r.distinct_jobs} distinct, ${r.pending} still pending`,
  },
  documented: {
    postgres: {
      lockstep,
      serial: (v) => clean('one worker after another, each takes the next job', { committed: v.n }),
      barrier: (v) => [lockstep(v), serialized('some workers waited for each other', { committed: v.n }), clean('the workers did not overlap', { committed: v.n })],
    },
    mysql: {
      lockstep: myLockstep,
      serial: (v) => clean('one worker after another, each takes the next job', { committed: v.n }),
      barrier: (v) => [myLockstep(v), serialized('some workers waited for each other', { committed: v.n }), clean('the workers did not overlap', { committed: v.n })],
    },
  },
  checks: [
    { label: 'repeatable read', params: { isolation: 'repeatable read' }, engines: ['mysql'] },
    { label: 'no skip locked', params: { skipLocked: false } },
    { label: 'serializable', params: { isolation: 'serializable' } },
    { label: 'no skip locked, repeatable read', params: { skipLocked: false, isolation: 'repeatable read' } },
  ],
})
