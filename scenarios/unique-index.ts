// unique-index (advisory-locks §5): the broken code, with a partial unique index on pending requests. The
// second insert waits for the first transaction, then fails with unique_violation (23505): held.
import { clean, defineScenario, prevented, replicate } from '../src/scenario.js'
import { EXISTS, checkThenInsert, invariant, oneByOne, partialUniqueIndex, table } from './_fixtures/setup-requests.js'

const WHY = "every insert after the first waits on the first one's index entry, then fails with unique_violation"

export default defineScenario({
  id: 'unique-index',
  title: 'a partial unique index holds the invariant even for the broken code',
  source: { article: 'advisory-locks', section: '5' },
  story: [
    "create unique index ... on setup_requests (user_id) where status = 'pending'.",
    'The broken check-then-insert races as before: both checks find nothing.',
    "The second insert waits on the first transaction's index entry; when that commits, it fails with unique_violation (23505).",
    'A constraint binds every write path (admin screens, future batch jobs); an advisory lock binds only code that takes it.',
  ],
  params: {},
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: [table, partialUniqueIndex],
  sessions: ({ n }) => replicate(n, { steps: checkThenInsert(), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: ({ n }) => (n > 1 ? prevented(WHY, { committed: 1, '23505': n - 1 }) : clean('one request alone', { committed: 1 })),
      serial: (v) => clean('each check sees the requests committed before it', oneByOne(v, 1, EXISTS)),
      // Free-running: a session whose check comes after the first commit is told no instead.
      barrier: (v) =>
        v.n > 1
          ? [prevented(WHY, { committed: 1, '23505': [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))]
          : clean('one request alone', { committed: 1 }),
    },
  },
})
