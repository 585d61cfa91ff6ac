// The check-then-insert family of the advisory-lock article (§1-§5): one table, one invariant, the steps
// its variants share. Each scenario differs from `broken` only where the article's code differs.
import { advisoryKey, type Invariant, type Params, type Step, type StepDef } from '../../src/scenario.js'

export const table = `create table setup_requests (
  id         uuid        primary key default gen_random_uuid(),
  user_id    uuid        not null,
  status     text        not null check (status in ('pending', 'completed', 'cancelled')),
  created_at timestamptz not null default now()
)`

/** §5: the constraint that makes the invariant the database's own. */
export const partialUniqueIndex = `create unique index setup_requests_one_pending_per_user
  on setup_requests (user_id) where status = 'pending'`

/** §1: "is there a pending request?"; §2 adds FOR UPDATE, which locks no row that does not exist yet. */
export function checkExists(forUpdate = false): StepDef {
  const tail = forUpdate ? ' for update' : ''
  return {
    sql: `select 1 from setup_requests where user_id = :user and status = 'pending'${tail}`,
    run: (sql, ctx) =>
      sql`select 1 as found from setup_requests where user_id = ${ctx.user} and status = 'pending' ${forUpdate ? sql`for update` : sql``}`,
  }
}

/** §1: insert unless the check found one (then the application answers 409). */
export const insertUnlessFound: StepDef = {
  sql: `-- if the check found a pending request: rollback, 409\ninsert into setup_requests (user_id, status) values (:user, 'pending')`,
  run: (sql, ctx) =>
    ctx.prior.check.length > 0
      ? ctx.reject('pending request exists')
      : sql`insert into setup_requests (user_id, status) values (${ctx.user}, 'pending')`,
}

/** §4: the advisory-lock version, with max_pending and lock_timeout; `guard` is its SET TRANSACTION line (§5.2). */
export function advisorySteps(p: Params, guard = true): Record<string, Step> {
  return {
    begin: 'begin',
    ...(guard ? { isolation: 'set transaction isolation level read committed' } : {}),
    timeout: {
      sql: `select set_config('lock_timeout', '${p.lockTimeout}ms', true)`,
      run: (sql, ctx) => sql`select set_config('lock_timeout', ${`${ctx.params.lockTimeout}ms`}, true)`,
    },
    lock: {
      sql: `select pg_advisory_xact_lock(:key) -- key = sha256('setup_request:' || :user)[0:8]`,
      run: (sql, ctx) => sql`select pg_advisory_xact_lock(${String(advisoryKey('setup_request', ctx.user))}::bigint)`,
    },
    check: {
      sql: `select count(*) from setup_requests where user_id = :user and status = 'pending'`,
      run: (sql, ctx) =>
        sql`select count(*)::int as pending from setup_requests where user_id = ${ctx.user} and status = 'pending'`,
    },
    insert: {
      sql: `-- if pending >= max_pending: rollback, 409\ninsert into setup_requests (user_id, status) values (:user, 'pending')`,
      run: (sql, ctx) =>
        Number(ctx.prior.check[0]?.pending) >= Number(ctx.params.maxPending ?? 1)
          ? ctx.reject('pending limit reached')
          : sql`insert into setup_requests (user_id, status) values (${ctx.user}, 'pending')`,
    },
    commit: 'commit',
  }
}

export const advisoryParams = {
  maxPending: {
    flag: '--max-pending <n>',
    description: 'pending requests a user may have (the business rule)',
    kind: 'whole',
    default: 1,
    min: 1,
  },
  lockTimeout: {
    flag: '--lock-timeout <duration>',
    description: 'lock_timeout for the advisory lock, set with set_config(..., true)',
    kind: 'duration',
    default: 2000,
  },
} as const

/** At most max-pending (1 unless the scenario takes --max-pending) pending requests for the user. */
export const invariant: Invariant = {
  description: (p) => `at most ${p.maxPending ?? 1} pending request${Number(p.maxPending ?? 1) === 1 ? '' : 's'} for the user`,
  query: (sql, ctx) =>
    sql`select count(*)::int as pending from setup_requests where user_id = ${ctx.user} and status = 'pending'`,
  observed: (rows) => `${rows[0]?.pending} pending`,
  holds: (rows, p) => Number(rows[0]?.pending) <= Number(p.maxPending ?? 1),
}
