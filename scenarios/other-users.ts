// other-users (advisory-locks §4): the key is per user, so requests for different users never wait for each
// other (d1..dN: all committed, waited 0), while as many requests for one user are serialized (u1..uN: one
// committed, the rest rejected after waiting). One run shows both.
import { clean, defineScenario, keyBind, serialized, step, type SessionSpec, type Variant, type Who } from '../src/scenario.js'
import { EXISTS, binds, table } from './_shared/setup-requests.js'
import { userOf } from './_shared/locks.js'

function request(own: boolean): SessionSpec {
  return {
    // The d sessions each act for a user of their own (and so take a key of their own).
    ...(own ? { binds: { user: { describe: 'a different user for each d session', value: userOf }, key: keyBind('setup_request', userOf) } } : {}),
    steps: {
      begin: 'begin',
      isolation: 'set transaction isolation level read committed',
      lock: 'select pg_advisory_xact_lock(:key)',
      check: `select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`,
      insert: step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
        rejectIf: ({ prior }) => prior.check.pending >= 1 && 'pending request exists',
      }),
      commit: 'commit',
    },
    racePoint: 'check',
  }
}

const who = (v: Variant): Who => (v.n > 1 ? { committed: v.n + 1, [`rejected: ${EXISTS}`]: v.n - 1 } : { committed: 2 })

export default defineScenario({
  id: 'other-users',
  title: 'per-user keys: different users never wait, one user is serialized',
  source: { article: 'advisory-locks', section: '4' },
  story: [
    "d1..dN each act for a different user; u1..uN all act for the same user. Everyone runs the §4 code: lock the user's key, check, insert.",
    "The d sessions' keys differ, so none of them waits: all commit, waited 0 ms.",
    'The u sessions share one key: the first commits, the others wait for it, then see its row and get 409.',
    'Invariant: at most one pending request per user, and every d user got theirs.',
  ],
  params: {},
  sessionCount: { default: 2, min: 1, max: 50 },
  isolation: 'read committed',
  setup: [table],
  binds,
  sessions: ({ n }) => {
    const out: Record<string, SessionSpec> = {}
    for (let i = 1; i <= n; i++) out[`d${i}`] = request(true)
    for (let i = 1; i <= n; i++) out[`u${i}`] = request(false)
    return out
  },
  invariant: {
    description: 'at most 1 pending request per user; each different user has one',
    sql: `select others = :n and other_users = :n and same <= 1 as held, others, other_users, same
  from (select count(*) filter (where user_id <> :user)::int as others,
               count(distinct user_id) filter (where user_id <> :user)::int as other_users,
               count(*) filter (where user_id = :user)::int as same
          from setup_requests where status = 'pending') x`,
    observed: (r) => `different users: ${r.others} pending for ${r.other_users} users; same user: ${r.same} pending`,
  },
  documented: {
    postgres: {
      lockstep: (v) => (v.n > 1 ? serialized("the u sessions wait for each other's key; the d sessions never wait", who(v)) : clean('nobody shares a key', who(v))),
      serial: (v) => clean('one after another nobody waits', who(v)),
    },
  },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  checks: [{ label: 'n=4', n: 4 }],
  unavailable: { mysql: 'not written for InnoDB yet: it needs GET_LOCK per user, as advisory does for one user' },
})
