// skip-locked (isolation-levels article, SKIP LOCKED queue workers): N workers take one job each from a queue.
// With SKIP LOCKED every job is processed exactly once and no worker waits (held, clean); at SERIALIZABLE
// nobody waits either, but SSI's predicate locks fail all but one with 40001 and the retry loop recovers
// (held, prevented). --no-skip-locked: the workers queue behind the first one's row lock (held, serialized)
// at READ COMMITTED; at REPEATABLE READ and SERIALIZABLE the waiters get 40001 and retry (held, prevented).
import { clean, defineScenario, levelParam, prevented, replicate, serialized, step, type Documented, type Variant, type Who } from '../src/scenario.js'
import { begin, isolationParam } from './_fixtures/isolation.js'

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
  setup: [
    `create table job_queue (id int primary key, payload text not null, status text not null default 'pending', created_at timestamptz not null, completed_at timestamptz)`,
    `create table processed (job_id int not null, worker text not null)`,
    // one job per possible worker; the workers see only the first n
    `insert into job_queue (id, payload, created_at) select g, 'job ' || g, now() + g * interval '1 ms' from generate_series(1, 500) g`,
  ],
  sessions: ({ params, n }) =>
    replicate(n, {
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
    sql: `select count(*) = count(distinct job_id) as held, count(*)::int as processed, count(distinct job_id)::int as distinct_jobs,
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
  },
  checks: [
    { label: 'no skip locked', params: { skipLocked: false } },
    { label: 'serializable', params: { isolation: 'serializable' } },
    { label: 'no skip locked, repeatable read', params: { skipLocked: false, isolation: 'repeatable read' } },
  ],
})
