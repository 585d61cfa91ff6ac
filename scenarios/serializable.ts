// serializable (advisory-locks §5.1): the broken code at SERIALIZABLE. SSI sees the read/write dependencies and
// fails every loser with serialization_failure (40001). With --retries the loser runs its whole transaction
// again and is then told no by the business rule.
import { clean, defineScenario, prevented, replicate, serialized, type Variant } from '../src/scenario.js'
import { EXISTS, checkThenInsert, invariant, myCheckThenInsert, myTable, oneByOne, table } from './_shared/setup-requests.js'
import { DEADLOCK } from './_shared/innodb.js'

const WHY = 'SSI: each read the empty set the others write into; the first to commit wins, the rest fail with 40001'
const losers = (v: Variant): string => (Number(v.params.retries) > 0 ? `rejected: ${EXISTS}` : '40001')
const WHY_2PL =
  "InnoDB's SERIALIZABLE is two-phase locking: each check is a shared locking read that locks the empty range (next-key locks), each INSERT waits for the other's: a deadlock, 1213 for one (SQLSTATE 40001)"
const myLosers = (v: Variant): string => (Number(v.params.retries) > 0 ? `rejected: ${EXISTS}` : DEADLOCK)

export default defineScenario({
  id: 'serializable',
  title: 'SERIALIZABLE (SSI) detects the check-then-insert race',
  source: { article: 'advisory-locks', section: '5.1' },
  story: [
    'The broken code, unchanged, but begin isolation level serializable.',
    'Each transaction read the (empty) set the other one writes into: a read/write dependency cycle.',
    'PostgreSQL fails one of them with serialization_failure (40001): one pending request remains.',
    'The price is a retry loop around the whole transaction (--retries K: exponential backoff with jitter, 40001 only); the retried loser then sees the row and gets 409.',
  ],
  params: {
    retries: {
      flag: '--retries <k>',
      description: 'retry a transaction that failed with 40001 up to k times',
      kind: 'whole',
      default: 0,
      min: 0,
    },
  },
  sessionCount: { default: 2 },
  isolation: 'serializable',
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  sessions: ({ params, n, engine }) =>
    replicate(n, {
      steps: engine === 'mysql' ? myCheckThenInsert(false, 'serializable') : checkThenInsert('begin isolation level serializable'),
      racePoint: 'check',
      retry: { max: Number(params.retries), on: ['40001'], backoff: true },
    }),
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: (v) => (v.n > 1 ? prevented(WHY, { committed: 1, [losers(v)]: v.n - 1 }) : clean('one request alone', { committed: 1 })),
      serial: (v) => clean('one after another there is no overlap, so nothing to detect', oneByOne(v, 1, EXISTS)),
      barrier: (v) => {
        if (v.n === 1) return clean('one request alone', { committed: 1 })
        const apart = clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))
        // With retries every loser ends told no, however the race went; without, some may check too late to conflict.
        if (Number(v.params.retries) > 0) return [prevented(WHY, oneByOne(v, 1, EXISTS)), apart]
        return [prevented(WHY, { committed: 1, '40001': [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), apart]
      },
    },
    // The same code on InnoDB is prevented too, by locks instead of SSI: the article's 2PL.
    mysql: {
      lockstep: (v) => (v.n === 2 ? prevented(WHY_2PL, { committed: 1, [myLosers(v)]: 1 }) : prevented(WHY_2PL, { committed: 1, [myLosers(v)]: v.n - 1 })),
      serial: (v) => clean('one after another there is no overlap', oneByOne(v, 1, EXISTS)),
      barrier: (v) => {
        if (v.n === 1) return clean('one request alone', { committed: 1 })
        const apart = clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))
        if (Number(v.params.retries) > 0) return [prevented(WHY_2PL, oneByOne(v, 1, EXISTS)), serialized('a check waited for a committed insert', oneByOne(v, 1, EXISTS)), apart]
        return [
          prevented(WHY_2PL, { committed: 1, [DEADLOCK]: [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }),
          serialized('a check waited for a committed insert', oneByOne(v, 1, EXISTS)),
          apart,
        ]
      },
    },
  },
  checks: [{ label: 'retries=3', params: { retries: 3 } }],
})
