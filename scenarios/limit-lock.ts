// limit-lock (advisory-locks §9): a lock function in the same query level as LIMIT can lock more keys than
// rows returned. Measured: the article's own SELECT-list example locks exactly the limit, because the select
// list is evaluated after Limit; the danger is the lock in WHERE of a query that sorts before it limits
// ("grab a job"): 100 rows, thousands of locks. The safe form fixes the rows in a subquery and locks in the
// outer query: 100 rows, 100 locks. Invariant: locks held = rows returned, for every form.
import { advisoryKey, anomaly, clean, defineScenario, type Params, type SessionSpec, type Variant } from '../src/scenario.js'
import { heldByMe, observations, observe } from './_shared/locks.js'

const foo = `create table foo as select id, (id * 7919) % 1000 as v from generate_series(1, 20000) as id`

/** The queries, each counted by an outer count(*) (which changes nothing: the inner query runs whole). */
const FORMS: Record<string, string> = {
  where: `select id from foo where id > 12345 and pg_try_advisory_xact_lock(:base + id) order by v limit 100`,
  subquery: `select q.id, pg_try_advisory_xact_lock(:base + q.id) as locked from (select id from foo where id > 12345 order by v limit 100) q`,
}

function grab(form: string): SessionSpec {
  return {
    steps: {
      begin: 'begin',
      grab: `with g as (${FORMS[form]}) select count(*)::int as rows from g`,
      rows: observe('rows returned', ':grab.rows::bigint', 'rows'),
      locks: observe('locks held', heldByMe, 'locks'),
      commit: 'commit',
    },
  }
}

const forms = (p: Params): string[] => (p.form === 'both' ? ['where', 'subquery'] : [String(p.form)])

// Not a race: one session shows it just as well, so every schedule documents the same.
const outcome = (v: Variant) =>
  v.params.form === 'subquery'
    ? clean('the subquery fixes the 100 rows first: 100 locks', { committed: 1 })
    : anomaly('the sort needs every row first, so the lock function runs for every row that passes id > 12345', { committed: forms(v.params).length })

export default defineScenario({
  id: 'limit-lock',
  title: 'a lock function beside LIMIT locks more keys than rows it returns',
  source: { article: 'advisory-locks', section: '9' },
  story: [
    'foo has 20,000 rows; a worker grabs 100 with pg_try_advisory_xact_lock in WHERE, ORDER BY v LIMIT 100.',
    'The sort needs every row first, so the lock function runs for every row that passes id > 12345: 100 rows come back, about 7,655 keys are locked (pg_locks).',
    "Note: the article's own example (lock function in the SELECT list, LIMIT 100) locks exactly 100 on PostgreSQL 15 and 18: the select list is evaluated after Limit.",
    'The safe form fixes the 100 rows in a subquery and locks in the outer query: 100 rows, 100 locks.',
    'Each session writes down rows returned and locks held (pg_locks, its own pid) before committing.',
  ],
  params: {
    form: {
      flag: '--form <form>',
      description: 'which query: where (the danger), subquery (the safe form), or both',
      kind: 'choice',
      choices: ['both', 'where', 'subquery'],
      default: 'both',
    },
  },
  sessionCount: { default: 2, min: 1, max: 2 },
  isolation: 'read committed',
  setup: [foo, observations],
  // Keys are base + id: the trial's own key range, so no other run's (or application's) keys are touched.
  binds: { base: { describe: "sha256('limit-lock:' || user), first 8 bytes, low 16 bits cleared", value: (ctx) => (advisoryKey('limit-lock', ctx.user) >> 16n) << 16n } },
  sessions: ({ params }) => Object.fromEntries(forms(params).map((f) => [f, grab(f)])),
  // One form after the other: they use the same key range.
  permutation: ({ params }) => forms(params).map((f) => `${f}.begin ${f}.grab ${f}.rows ${f}.locks ${f}.commit`).join(' '),
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'every form holds exactly as many advisory locks as rows it returned',
    sql: `select bool_and(rows = locks) as held, string_agg(session || ': ' || rows || ' rows, ' || locks || ' locks', '; ' order by session desc) as forms
  from (select session, max(n) filter (where what = 'rows returned') as rows, max(n) filter (where what = 'locks held') as locks
          from observations group by session) o`,
    observed: (r) => String(r.forms ?? 'nothing recorded'),
  },
  documented: { postgres: { lockstep: outcome, serial: outcome, barrier: outcome } },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  checks: [{ label: 'subquery', params: { form: 'subquery' } }],
  unavailable: { mysql: "it needs pg_try_advisory_xact_lock per row of a query; MySQL's only advisory lock, GET_LOCK, is session-scoped and outlives the transaction" },
})
