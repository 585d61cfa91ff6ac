// The check-then-insert family of the advisory-locks article (§1-§5): one table, one invariant, the steps
// its variants share, and the outcomes they document. Each scenario differs from `broken` only where the
// article's code differs.
import { anomaly, clean, keyBind, prevented, serialized, step, type Bind, type DocEntry, type Documented, type EngineDoc, type Invariant, type Params, type SessionSpec, type Step, type Variant, type Who } from '../../src/scenario.js'
import type { Level } from '../../src/levels.js'

export const table = `create table setup_requests (
  id         uuid        primary key default gen_random_uuid(),
  user_id    uuid        not null,
  status     text        not null check (status in ('pending', 'completed', 'cancelled')),
  created_at timestamptz not null default now()
)`

/** §5: the constraint that makes the invariant the database's own. */
export const partialUniqueIndex = `create unique index setup_requests_one_pending_per_user
  on setup_requests (user_id) where status = 'pending'`

/** The application's answer when the check finds a pending request (the article's 409). */
export const EXISTS = 'pending request exists'
/** The same, with a --max-pending limit (§4's max_pending). */
export const LIMIT = 'pending limit reached'

/** §1: "is there a pending request?"; §2 adds FOR UPDATE, which locks no row that does not exist yet. */
export function checkExists(forUpdate = false): string {
  return `select 1 as found from setup_requests where user_id = :user and status = 'pending'${forUpdate ? ' for update' : ''}`
}

/** §1: insert unless the check found one (then the application answers 409). */
export const insertUnlessFound = step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
  rejectIf: ({ prior }) => prior.check && 'pending request exists',
})

/** The article's code says begin (READ COMMITTED, the default); another level (--isolation) is asked for on the BEGIN. */
export const beginAt = (p: Params): string => (p.isolation === undefined || p.isolation === 'read committed' ? 'begin' : `begin isolation level ${p.isolation}`)

/** The steps of §1 (and §2 with FOR UPDATE): begin, check, insert, commit. */
export function checkThenInsert(begin = 'begin', forUpdate = false): Record<string, Step> {
  return { begin, check: checkExists(forUpdate), insert: insertUnlessFound, commit: 'commit' }
}

/**
 * `:key`: the user's advisory key in the setup_request namespace (§8.1). `:lock`: MySQL's GET_LOCK takes a name (up
 * to 64 characters), not a number: the namespace and the user, as the article builds its key from.
 */
export const binds: Record<string, Bind> = {
  key: keyBind('setup_request'),
  lock: { describe: "'setup_request:' || user (a GET_LOCK name)", value: (ctx) => `setup_request:${ctx.user}` },
}

/**
 * §4 on MySQL: GET_LOCK is the only advisory lock there, and it is session-scoped: COMMIT does not release it, so the
 * application releases it after COMMIT, and in its finally when it says no (the session's `release`). GET_LOCK
 * answers 0 when its timeout runs out (no error): the application then says busy.
 */
export function myAdvisory(p: Params, level = 'read committed'): SessionSpec {
  return {
    steps: {
      begin: `set transaction isolation level ${level}; start transaction`,
      lock: 'select get_lock(:lock, :lockTimeout / 1000) as got',
      check: step(`select count(*) as pending from setup_requests where user_id = :user and status = 'pending'`, {
        rejectIf: ({ prior }) => prior.lock.got !== 1 && 'busy: GET_LOCK timed out',
      }),
      insert: step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
        rejectIf: ({ prior, params }) => prior.check.pending >= (params.maxPending ?? 1) && 'pending limit reached',
      }),
      commit: 'commit',
      unlock: 'select release_lock(:lock) as released',
    },
    racePoint: 'check',
    release: 'select release_lock(:lock) as released',
  }
}

/** §4: the advisory-lock version, with max_pending and lock_timeout; `guard` is its SET TRANSACTION line (§5.2). */
export function advisorySteps(p: Params, guard = true): Record<string, Step> {
  return {
    begin: 'begin',
    ...(guard ? { isolation: 'set transaction isolation level read committed' } : {}),
    timeout: `select set_config('lock_timeout', '${p.lockTimeout}ms', true)`,
    lock: 'select pg_advisory_xact_lock(:key)',
    check: `select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`,
    insert: step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
      rejectIf: ({ prior, params }) => prior.check.pending >= (params.maxPending ?? 1) && 'pending limit reached',
    }),
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
    holdExtends: true,
  },
} as const

/** At most `max` pending requests for the user (`max` is SQL: 1, or :maxPending). */
export function invariant(max: '1' | ':maxPending' = '1'): Invariant {
  return {
    description: (p) => `at most ${p.maxPending ?? 1} pending request${Number(p.maxPending ?? 1) === 1 ? '' : 's'} for the user`,
    sql: ({ engine }) =>
      engine === 'mysql' ? myInvariantSql(max) : `select count(*) <= ${max} as held, count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`,
    observed: (r) => `${r.pending} pending`,
  }
}

// ---- InnoDB forms (MySQL/MariaDB) ----

/** setup_requests in MySQL's types; the run's database is fresh, so the table has no other rows. */
export const myTable = `create table setup_requests (
  id         bigint       auto_increment primary key,
  user_id    char(36)     not null,
  status     varchar(20)  not null check (status in ('pending', 'completed', 'cancelled')),
  created_at timestamp(6) not null default current_timestamp(6)
)`

/**
 * §5 in MySQL's form: MySQL has no partial index, but a unique index ignores rows with a NULL in it, so a generated
 * column that is 1 while the request is pending (NULL otherwise), unique together with the user, makes "one pending
 * request per user" a constraint. (MariaDB 10.11 refuses a generated column that returns user_id from a CASE:
 * 1901, "cannot be used in the GENERATED ALWAYS AS clause"; a number is accepted.)
 */
export const myPendingUnique = `alter table setup_requests
  add column pending tinyint as (if(status = 'pending', 1, null)) stored,
  add unique key setup_requests_one_pending_per_user (user_id, pending)`

/** The steps of §1 (and §2) on InnoDB, at READ COMMITTED as the article writes them. */
export function myCheckThenInsert(forUpdate = false, level = 'read committed'): Record<string, Step> {
  return { begin: `set transaction isolation level ${level}; start transaction`, check: checkExists(forUpdate), insert: insertUnlessFound, commit: 'commit' }
}

/** The invariant, MySQL's SQL. */
export function myInvariantSql(max: '1' | ':maxPending' = '1'): string {
  return `select count(*) <= ${max} as held, count(*) as pending from setup_requests where user_id = :user and status = 'pending'`
}

/** n requests one after another (or serialized by a lock): the first `max` commit, the rest are told no. */
export function oneByOne(v: Variant, max: number, reason: string): Who {
  const committed = Math.min(v.n, max)
  return v.n > committed ? { committed, [`rejected: ${reason}`]: v.n - committed } : { committed }
}

/**
 * What the unguarded check-then-insert (broken, for-update) is documented to do: in lockstep every check runs
 * before any insert, so every session inserts; free-running sessions may or may not overlap.
 */
export function racesThrough(race: string): EngineDoc {
  const alone = clean('one request alone', { committed: 1 })
  return {
    lockstep: ({ n }) => (n > 1 ? anomaly(race, { committed: n }) : alone),
    serial: (v) => clean('each check sees the requests committed before it', oneByOne(v, 1, EXISTS)),
    barrier: (v) =>
      v.n > 1
        ? [anomaly(race, { committed: [2, v.n], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))]
        : alone,
  }
}

/** What a check-then-insert variant does at one isolation level: races through, or prevented (the losers' ending). */
export type LevelOutcome = { races: string } | { prevented: string; losers: string; wait?: boolean }

/**
 * A variant of the family on the isolation grid (a row of race matrix): per level, it races through as
 * racesThrough documents, or all but one session end as `losers` (a SQLSTATE). Free-running, a session that
 * checks after the winner committed is told no instead; with `wait` (a locking read) a check may also wait for the
 * winner's commit and then be told no.
 */
export function onTheGrid(levels: Partial<Record<Level, LevelOutcome>>): EngineDoc {
  const alone = clean('one request alone', { committed: 1 })
  const apart = (v: Variant) => clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))
  const at = (v: Variant): LevelOutcome | undefined => levels[String(v.params.isolation) as Level]
  const lockstep = (o: LevelOutcome): DocEntry =>
    'races' in o ? racesThrough(o.races).lockstep! : (v) => (v.n > 1 ? prevented(o.prevented, { committed: 1, [o.losers]: v.n - 1 }) : alone)
  return {
    levels: Object.fromEntries(Object.entries(levels).map(([l, o]) => [l, lockstep(o!)])),
    serial: (v) => clean('each check sees the requests committed before it', oneByOne(v, 1, EXISTS)),
    barrier: (v) => {
      const o = at(v)
      if (!o) return []
      if ('races' in o) return (racesThrough(o.races).barrier as (v: Variant) => Documented | Documented[])(v)
      if (v.n === 1) return alone
      return [
        prevented(o.prevented, { committed: 1, [o.losers]: [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }),
        ...(o.wait ? [serialized('a check waited for the committed insert', oneByOne(v, 1, EXISTS))] : []),
        apart(v),
      ]
    },
  }
}
