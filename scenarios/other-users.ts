// other-users (advisory §4): the key is per user, so requests for different users never wait for each other
// (d1..dN: all committed, waited 0), while as many requests for one user are serialized (u1..uN: one
// committed, the rest rejected after waiting). One run shows both. Serialized.
import { defineScenario, expectBy, type Params, type SessionSpec, type Step } from '../src/scenario.js'
import { advisoryKey } from '../src/scenario.js'
import { table } from './_fixtures/setup-requests.js'
import { userOf } from './_fixtures/locks.js'

/** The §4 steps for the session's user: its own (d*) or the shared one (u*). */
function steps(p: Params): Record<string, Step> {
  const who = (ctx: { user: string; session: string }) => (ctx.session.startsWith('d') ? userOf(ctx) : ctx.user)
  return {
    begin: 'begin',
    isolation: 'set transaction isolation level read committed',
    lock: {
      sql: `select pg_advisory_xact_lock(:key) -- key = sha256('setup_request:' || :user)[0:8]; d* sessions each have their own user`,
      run: (sql, ctx) => `select pg_advisory_xact_lock(${advisoryKey('setup_request', who(ctx))}::bigint)`,
    },
    check: {
      sql: `select count(*) from setup_requests where user_id = :user and status = 'pending'`,
      run: (sql, ctx) => sql`select count(*)::int as pending from setup_requests where user_id = ${who(ctx)} and status = 'pending'`,
    },
    insert: {
      sql: `-- if pending >= 1: rollback, 409\ninsert into setup_requests (user_id, status) values (:user, 'pending')`,
      run: (sql, ctx) =>
        Number(ctx.prior.check[0]?.pending) >= 1
          ? ctx.reject('pending request exists')
          : sql`insert into setup_requests (user_id, status) values (${who(ctx)}, 'pending')`,
    },
    commit: 'commit',
  }
}

export default defineScenario({
  id: 'other-users',
  title: 'per-user keys: different users never wait, one user is serialized',
  source: 'advisory-lock article §4',
  story: [
    "d1..dN each act for a different user; u1..uN all act for the same user. Everyone runs the §4 code: lock the user's key, check, insert.",
    "The d sessions' keys differ, so none of them waits: all commit, waited 0 ms.",
    'The u sessions share one key: the first commits, the others wait for it, then see its row and get 409.',
    'Invariant: at most one pending request per user, and every d user got theirs.',
  ],
  params: {},
  defaultN: 2,
  nRange: [1, 50],
  isolation: () => 'read committed',
  setup: [table],
  sessions: (p, n) => {
    const out: Record<string, SessionSpec> = {}
    for (let i = 1; i <= n; i++) out[`d${i}`] = { steps: steps(p), racePoint: 'check' }
    for (let i = 1; i <= n; i++) out[`u${i}`] = { steps: steps(p), racePoint: 'check' }
    return out
  },
  invariant: {
    description: () => 'at most 1 pending request per user; each different user has one',
    query: (sql, ctx) =>
      sql`select count(*) filter (where user_id <> ${ctx.user})::int as others, count(distinct user_id) filter (where user_id <> ${ctx.user})::int as other_users,
                 count(*) filter (where user_id = ${ctx.user})::int as same
          from setup_requests where status = 'pending'`,
    observed: (rows) => `different users: ${rows[0]?.others} pending for ${rows[0]?.other_users} users; same user: ${rows[0]?.same} pending`,
    holds: (rows) => rows[0]?.others === rows[0]?.other_users && Number(rows[0]?.same) <= 1,
  },
  expect: expectBy({ lockstep: ['serialized'] }),
  checks: [{ label: 'n=4', n: 4 }],
})
