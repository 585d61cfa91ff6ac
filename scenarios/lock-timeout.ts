// lock-timeout (advisory-locks §4, §10): one session holds the key; the others wait with lock_timeout 200ms
// and fail with lock_not_available (55P03), which the application reports as LockBusy; after the holder
// rolls back, a retry takes the key and succeeds. Prevented: one pending request, the retry's.
import { clean, defineScenario, prevented, serialized, step, type Params, type SessionSpec, type Step } from '../src/scenario.js'
import { LIMIT, advisorySteps, binds, invariant, table } from './_shared/setup-requests.js'

const HOLDER = "the holder's request fails"

function request(p: Params): Record<string, Step> {
  const s = advisorySteps(p)
  delete s.isolation
  return s
}

export default defineScenario({
  id: 'lock-timeout',
  title: 'lock_timeout bounds the wait: 55P03 (LockBusy), then a retry succeeds',
  source: { article: 'advisory-locks', section: '10' },
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
  sessionCount: { default: 2, min: 1, max: 50 },
  isolation: 'read committed',
  setup: [table],
  binds,
  sessions: ({ params, n }) => {
    const out: Record<string, SessionSpec> = {
      holder: {
        steps: {
          begin: 'begin',
          lock: 'select pg_advisory_xact_lock(:key)',
          rollback: step('rollback', { rejectIf: () => "the holder's request fails" }),
        },
      },
    }
    for (let i = 1; i <= n; i++) out[`s${i}`] = { steps: request(params) }
    out.retry = { steps: request(params) }
    return out
  },
  // Each waiter's lock step is awaited (wait): its wait ends by itself, at lock_timeout, before the holder rolls back.
  permutation: ({ n }) => {
    const w = Array.from({ length: n }, (_, i) => `s${i + 1}`)
    return [
      'holder.begin holder.lock',
      ...w.map((s) => `${s}.begin ${s}.timeout ${s}.lock(wait) ${s}.check ${s}.insert ${s}.commit`),
      'holder.rollback',
      'retry.begin retry.timeout retry.lock retry.check retry.insert retry.commit',
    ].join(' ')
  },
  defaultSchedule: 'lockstep',
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: ({ n }) =>
        prevented('every request waits lock_timeout for the held key, then fails with 55P03; the retry after the rollback commits', {
          holder: `rejected: ${HOLDER}`,
          retry: 'committed',
          '55P03': n,
        }),
      serial: ({ n }) =>
        clean('one after another nobody waits: the first request commits, the later ones see it', {
          holder: `rejected: ${HOLDER}`,
          s1: 'committed',
          [`rejected: ${LIMIT}`]: n,
        }),
      // Free-running, the holder lets go at once: whoever waits longer than lock_timeout fails, one commits.
      barrier: ({ n }) => {
        const who = { holder: `rejected: ${HOLDER}`, committed: 1, '55P03': [0, n], [`rejected: ${LIMIT}`]: [0, n] } as const
        return [
          prevented('a request waited longer than lock_timeout: 55P03', who),
          serialized('the requests waited for each other', who),
          clean('nobody was seen waiting', who),
        ]
      },
    },
  },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  checks: [{ label: 'n=4', n: 4 }],
  unavailable: { mysql: "lock_timeout raising 55P03 is PostgreSQL's; GET_LOCK's timeout returns 0, not an error (advisory's 'busy: GET_LOCK timed out' is that path)" },
})
