// try-advisory (advisory §4.1): pg_try_advisory_xact_lock never waits. The session that gets the key goes on;
// every other one is answered `busy` at once (rejected, waited 0 ms) and told to retry. Held: one pending.
// --holder-fails: the holder rolls back after the busy answers were given: nobody succeeded, 0 pending.
import { defineScenario, expectBy, replicate, type Params, type Step } from '../src/scenario.js'
import { invariant, table } from './_fixtures/setup-requests.js'
import { key } from './_fixtures/locks.js'

function steps(p: Params): Record<string, Step> {
  return {
    begin: 'begin',
    isolation: 'set transaction isolation level read committed',
    try: {
      sql: `select pg_try_advisory_xact_lock(:key) -- key = sha256('setup_request:' || :user)[0:8]`,
      run: (sql, ctx) => `select pg_try_advisory_xact_lock(${key('setup_request', ctx)}::bigint) as acquired`,
    },
    check: {
      sql: `-- if not acquired: rollback, 409 busy (retry later)\nselect count(*) from setup_requests where user_id = :user and status = 'pending'`,
      run: (sql, ctx) =>
        ctx.prior.try[0]?.acquired !== true
          ? ctx.reject('busy: retry later (the holder may still fail)')
          : sql`select count(*)::int as pending from setup_requests where user_id = ${ctx.user} and status = 'pending'`,
    },
    insert: {
      sql: `-- if pending >= 1: rollback, 409\ninsert into setup_requests (user_id, status) values (:user, 'pending')`,
      run: (sql, ctx) =>
        Number(ctx.prior.check[0]?.pending) >= 1
          ? ctx.reject('pending request exists')
          : sql`insert into setup_requests (user_id, status) values (${ctx.user}, 'pending')`,
    },
    commit: p.holderFails
      ? { sql: `rollback -- --holder-fails: the holder's request fails after all`, run: (sql, ctx) => ctx.reject('holder failed after others were told busy') }
      : 'commit',
  }
}

export default defineScenario({
  id: 'try-advisory',
  title: 'pg_try_advisory_xact_lock: busy at once instead of waiting',
  source: 'advisory-lock article §4.1',
  story: [
    'Every request tries the same advisory key for its user with pg_try_advisory_xact_lock: it never waits.',
    'The first gets true and goes on to check and insert; every other one gets false and answers 409 busy at once (waited 0 ms).',
    'Busy does not mean the holder will succeed: with --holder-fails the holder rolls back after the others were told busy, and the user ends with no request at all.',
    'So busy must tell the client it may retry.',
  ],
  params: {
    holderFails: {
      flag: '--holder-fails',
      description: 'the session that got the key rolls back at the end (its request fails)',
      kind: 'boolean',
      default: false,
    },
  },
  defaultN: 2,
  isolation: () => 'read committed',
  setup: [table],
  sessions: (p, n) => replicate(n, { steps: steps(p), racePoint: 'check' }),
  invariant,
  expect: expectBy({ lockstep: ['clean'], barrier: ['clean'] }),
  checks: [
    { label: 'n=5', n: 5 },
    { label: 'holder fails', params: { holderFails: true } },
  ],
})
