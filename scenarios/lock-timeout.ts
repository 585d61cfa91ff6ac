// lock-timeout (advisory §4, §10): one session holds the key; the others wait with lock_timeout 200ms and
// fail with lock_not_available (55P03), which the application reports as LockBusy; after the holder rolls
// back, a retry takes the key and succeeds. Prevented: one pending request, the retry's.
import { defineScenario, expectBy, type Params, type SessionSpec, type Step } from '../src/scenario.js'
import { advisorySteps, invariant, table } from './_fixtures/setup-requests.js'
import { lockStep } from './_fixtures/locks.js'

function request(p: Params): Record<string, Step> {
  const s = advisorySteps(p)
  delete s.isolation
  return s
}

export default defineScenario({
  id: 'lock-timeout',
  title: 'lock_timeout bounds the wait: 55P03 (LockBusy), then a retry succeeds',
  source: 'advisory-lock article §4, §10',
  story: [
    "A holder takes the user's advisory key and keeps its transaction open.",
    "Each request sets lock_timeout for its transaction (set_config('lock_timeout', '200ms', true), i.e. SET LOCAL) and asks for the key.",
    'They wait 200 ms, then fail with lock_not_available (55P03): the application answers LockBusy (409/503, retry).',
    'The holder rolls back; the retry asks for the key again, gets it at once, checks (0 pending) and inserts.',
  ],
  params: {
    lockTimeout: {
      flag: '--lock-timeout <duration>',
      description: 'lock_timeout for the advisory lock, set with set_config(..., true)',
      kind: 'duration',
      default: 200,
    },
  },
  defaultN: 2,
  nRange: [1, 50],
  isolation: () => 'read committed',
  setup: [table],
  sessions: (p, n) => {
    const out: Record<string, SessionSpec> = {
      holder: {
        steps: {
          begin: 'begin',
          lock: lockStep('pg_advisory_xact_lock', 'setup_request'),
          rollback: { sql: 'rollback -- the holder\'s request fails', run: (sql, ctx) => ctx.reject('rolled back') },
        },
      },
    }
    for (let i = 1; i <= n; i++) out[`s${i}`] = { steps: request(p) }
    out.retry = { steps: request(p) }
    return out
  },
  // Each waiter's lock step is awaited (wait): its wait ends by itself, at lock_timeout, before the holder rolls back.
  lockstep: (p, n) => {
    const w = Array.from({ length: n }, (_, i) => `s${i + 1}`)
    return [
      'holder.begin holder.lock',
      ...w.map((s) => `${s}.begin ${s}.timeout ${s}.lock(wait) ${s}.check ${s}.insert ${s}.commit`),
      'holder.rollback',
      'retry.begin retry.timeout retry.lock retry.check retry.insert retry.commit',
    ].join(' ')
  },
  defaultSchedule: 'lockstep',
  invariant,
  expect: expectBy({ lockstep: ['prevented'], barrier: ['prevented', 'serialized', 'clean'] }),
  checks: [{ label: 'n=4', n: 4 }],
})
