// try-advisory (advisory-locks §4.1): pg_try_advisory_xact_lock never waits. The session that gets the key
// goes on; every other one is answered `busy` at once (rejected, waited 0 ms) and told to retry. Held: one
// pending. --holder-fails: the holder rolls back after the busy answers were given: nobody succeeded.
import { clean, defineScenario, replicate, step, type Params, type Step, type Variant } from '../src/scenario.js'
import { EXISTS, binds, invariant, table } from './_shared/setup-requests.js'

const BUSY = 'busy: retry later (the holder may still fail)'
const FAILED = 'holder failed after others were told busy'

function steps(p: Params): Record<string, Step> {
  return {
    begin: 'begin',
    isolation: 'set transaction isolation level read committed',
    try: 'select pg_try_advisory_xact_lock(:key) as acquired',
    check: step(`select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`, {
      rejectIf: ({ prior }) => !prior.try.acquired && 'busy: retry later (the holder may still fail)',
    }),
    insert: step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
      rejectIf: ({ prior }) => prior.check.pending >= 1 && 'pending request exists',
    }),
    commit: p.holderFails ? step('rollback', { rejectIf: () => 'holder failed after others were told busy' }) : 'commit',
  }
}

/** The holder's end: committed, or (--holder-fails) told no by its own application. */
const holder = (v: Variant) => (v.params.holderFails ? `rejected: ${FAILED}` : 'committed')

export default defineScenario({
  id: 'try-advisory',
  title: 'pg_try_advisory_xact_lock: busy at once instead of waiting',
  source: { article: 'advisory-locks', section: '4.1' },
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
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: [table],
  binds,
  sessions: ({ params, n }) => replicate(n, { steps: steps(params), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: (v) => clean('the first try gets the key; every other try answers false at once, nobody waits', v.n > 1 ? { [holder(v)]: 1, [`rejected: ${BUSY}`]: v.n - 1 } : { [holder(v)]: 1 }),
      serial: (v) =>
        v.params.holderFails
          ? clean('each one in turn gets the key and then fails', { [`rejected: ${FAILED}`]: v.n })
          : clean('each one in turn gets the key; its check sees the first request', v.n > 1 ? { committed: 1, [`rejected: ${EXISTS}`]: v.n - 1 } : { committed: 1 }),
      // Free-running: a try after the holder's commit gets the key and is then told no by the check.
      barrier: (v) =>
        v.params.holderFails
          ? clean('whoever held the key failed; the others were busy', { [`rejected: ${FAILED}`]: [1, v.n], [`rejected: ${BUSY}`]: [0, v.n - 1] })
          : clean('one gets through; the others were busy or saw its request', { committed: 1, [`rejected: ${BUSY}`]: [0, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 1] }),
    },
  },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  checks: [
    { label: 'n=5', n: 5 },
    { label: 'holder fails', params: { holderFails: true } },
  ],
  unavailable: { mysql: 'pg_try_advisory_xact_lock ends with the transaction; GET_LOCK(name, 0) does not (session-lock shows what a session-scoped lock does instead)' },
})
