// limit-lock (advisory §9): a lock function in the same query level as LIMIT can lock more keys than rows
// returned. Measured (postgres-facts.md): the article's own SELECT-list example locks exactly the limit,
// because the select list is evaluated after Limit; the danger is the lock in WHERE of a query that sorts
// before it limits ("grab a job"): 100 rows, thousands of locks. The safe form fixes the rows in a subquery
// and locks in the outer query: 100 rows, 100 locks. Invariant: locks held = rows returned, for every form.
import { defineScenario, expectBy, type Params, type SessionSpec, type StepDef } from '../src/scenario.js'
import { heldByMe, key, observations, observe } from './_fixtures/locks.js'

const foo = `create table foo as select id, (id * 7919) % 1000 as v from generate_series(1, 20000) as id`

/** Keys are base + id: the trial's own key range, so no other run's (or application's) keys are touched. */
const base = (ctx: { user: string }) => `${(BigInt(key('limit-lock', ctx)) >> 16n) << 16n}::bigint`

const FORMS: Record<string, { sql: string; run: (b: string) => string }> = {
  where: {
    sql: `select id from foo where id > 12345 and pg_try_advisory_xact_lock(:base + id) order by v limit 100`,
    run: (b) => `select id from foo where id > 12345 and pg_try_advisory_xact_lock(${b} + id) order by v limit 100`,
  },
  subquery: {
    sql: `select q.id, pg_try_advisory_xact_lock(:base + q.id) from (select id from foo where id > 12345 order by v limit 100) q`,
    run: (b) =>
      `select q.id, pg_try_advisory_xact_lock(${b} + q.id) as locked from (select id from foo where id > 12345 order by v limit 100) q`,
  },
}

function grab(form: string): SessionSpec {
  const f = FORMS[form]
  const grabStep: StepDef = { sql: f.sql, run: (sql, ctx) => f.run(base(ctx)) }
  return {
    steps: {
      begin: 'begin',
      grab: grabStep,
      rows: observe('rows returned', (ctx) => String(ctx.prior.grab.length), ':rows returned by grab', 'rows'),
      locks: observe('locks held', () => heldByMe, `(${heldByMe})`, 'locks'),
      commit: 'commit',
    },
  }
}

function forms(p: Params): string[] {
  return p.form === 'both' ? ['where', 'subquery'] : [String(p.form)]
}

export default defineScenario({
  id: 'limit-lock',
  title: 'a lock function beside LIMIT locks more keys than rows it returns',
  source: 'advisory-lock article §9 (the measured dangerous form)',
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
  defaultN: 2,
  nRange: [2, 2],
  isolation: () => 'read committed',
  setup: [foo, observations],
  sessions: (p) => Object.fromEntries(forms(p).map((f) => [f, grab(f)])),
  // One form after the other: they use the same key range.
  lockstep: (p) => forms(p).map((f) => `${f}.begin ${f}.grab ${f}.rows ${f}.locks ${f}.commit`).join(' '),
  defaultSchedule: 'lockstep',
  invariant: {
    description: () => 'every form holds exactly as many advisory locks as rows it returned',
    query: (sql) =>
      sql`select session, max(n) filter (where what = 'rows returned')::int as rows, max(n) filter (where what = 'locks held')::int as locks
          from observations group by session order by session desc`,
    observed: (rows) => rows.map((r) => `${r.session}: ${r.rows} rows, ${r.locks} locks`).join('; '),
    holds: (rows) => rows.length > 0 && rows.every((r) => r.rows === r.locks),
  },
  // Not a race: one session is enough, so serial runs show the same.
  expect: (ctx) => {
    const v = ctx.params.form === 'subquery' ? 'clean' : 'anomaly'
    return expectBy({ lockstep: [v], barrier: [v], serial: [v] })(ctx)
  },
  checks: [{ label: 'subquery', params: { form: 'subquery' } }],
})
