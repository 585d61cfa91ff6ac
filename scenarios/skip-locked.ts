// skip-locked (isolation article, SELECT FOR UPDATE SKIP LOCKED): N workers take one job each from a queue.
// With SKIP LOCKED every job is processed exactly once and no worker waits (held, clean); at SERIALIZABLE
// nobody waits either, but SSI's predicate locks fail all but one with 40001 and the retry loop recovers
// (held, prevented).
// --no-skip-locked: the workers queue behind the first one's row lock (held, serialized, waits shown) at
// READ COMMITTED; at REPEATABLE READ and SERIALIZABLE the waiters get 40001 and retry (held, prevented).
import { defineScenario, expectBy, replicate } from '../src/scenario.js'
import { begin, isolationParam, level } from './_fixtures/isolation.js'

export default defineScenario({
  id: 'skip-locked',
  title: 'queue workers with FOR UPDATE SKIP LOCKED: every job once, nobody waits',
  source: 'isolation-levels article, SELECT FOR UPDATE SKIP LOCKED: キュー・ワーカーパターン',
  story: [
    'A job_queue with one pending job per worker. Each worker takes the oldest pending job it can lock, marks it',
    'completed, records who processed it, and commits.',
    'SKIP LOCKED: each worker skips the rows the others hold and gets its own job at once: no waits, no duplicates.',
    '--no-skip-locked: plain FOR UPDATE; every worker queues behind the first job\'s lock and re-checks the next row',
    'after each commit. At REPEATABLE READ and SERIALIZABLE the waiters fail with 40001 and retry (--retries).',
    'The article says SKIP LOCKED works at any level. It does, but at SERIALIZABLE the scan of the queue is a predicate',
    'read: every worker read what the others wrote, so SSI fails all but one with 40001 (nobody waited); only the retry',
    'loop makes that safe.',
  ],
  params: {
    ...isolationParam(),
    skipLocked: { flag: '--no-skip-locked', description: 'take jobs with plain FOR UPDATE instead of FOR UPDATE SKIP LOCKED', kind: 'boolean', default: true },
    retries: { flag: '--retries <k>', description: 'retry a transaction that failed with 40001 up to k times', kind: 'whole', default: 4, min: 0 },
  },
  defaultN: 4,
  nRange: [1, 500],
  isolation: level,
  setup: [
    `create table job_queue (id int primary key, payload text not null, status text not null default 'pending', created_at timestamptz not null, completed_at timestamptz)`,
    `create table processed (job_id int not null, worker text not null)`,
    // one job per possible worker; the invariant counts only the first n
    `insert into job_queue (id, payload, created_at) select g, 'job ' || g, now() + g * interval '1 ms' from generate_series(1, 500) g`,
  ],
  sessions: (p, n) =>
    replicate(n, {
      steps: {
        begin: begin(p),
        take: {
          sql: `select id, payload from job_queue where status = 'pending' and id <= :n order by created_at limit 1 for update${p.skipLocked ? ' skip locked' : ''}`,
          run: (sql) =>
            sql.unsafe(
              `select id, payload from job_queue where status = 'pending' and id <= $1 order by created_at limit 1 for update${p.skipLocked ? ' skip locked' : ''}`,
              [n],
            ),
        },
        complete: {
          sql: `-- no job: nothing to do (the worker sleeps and retries)\nupdate job_queue set status = 'completed', completed_at = now() where id = :id  -- and processed (job_id, worker)`,
          run: (sql, ctx) => {
            const job = ctx.prior.take[0]
            if (!job) return ctx.reject('queue empty')
            return sql`with u as (update job_queue set status = 'completed', completed_at = now() where id = ${Number(job.id)} returning id)
                       insert into processed select u.id, ${ctx.session} from u returning job_id`
          },
        },
        commit: 'commit',
      },
      retries: Number(p.retries),
    }),
  invariant: {
    description: () => 'every job processed exactly once',
    query: (sql, ctx) => sql`
      select (select count(*)::int from job_queue where id <= ${ctx.n} and status = 'pending') as pending,
             (select count(*)::int from processed) as processed,
             (select count(distinct job_id)::int from processed) as distinct_jobs`,
    observed: ([r]) => `${r.processed} processed, ${r.distinct_jobs} distinct, ${r.pending} still pending`,
    holds: ([r]) => Number(r.pending) === 0 && Number(r.processed) === Number(r.distinct_jobs),
  },
  expect: (ctx) => {
    const lv = level(ctx.params)
    const v = ctx.params.skipLocked ? (lv === 'serializable' ? 'prevented' : 'clean') : lv === 'read committed' ? 'serialized' : 'prevented'
    return expectBy({ lockstep: [v] })(ctx)
  },
  checks: [
    { label: 'no skip locked', params: { skipLocked: false } },
    { label: 'serializable', params: { isolation: 'serializable' } },
    { label: 'no skip locked, repeatable read', params: { skipLocked: false, isolation: 'repeatable read' } },
  ],
})

