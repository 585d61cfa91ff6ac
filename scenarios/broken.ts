// broken (advisory-locks §1): check-then-insert in one READ COMMITTED transaction. Every session sees no
// pending request and every one inserts: the user has n pending requests.
import { defineScenario, replicate } from '../src/scenario.js'
import { checkThenInsert, invariant, racesThrough, table } from './_fixtures/setup-requests.js'

export default defineScenario({
  id: 'broken',
  title: 'check-then-insert in one READ COMMITTED transaction (TOCTOU)',
  source: { article: 'advisory-locks', section: '1' },
  story: [
    'Rule: one pending setup request per user; a second request gets 409.',
    'Each session checks for a pending request, finds none, and inserts one.',
    "READ COMMITTED: each statement sees what was committed when it started, so neither check sees the other's uncommitted insert.",
    'A transaction around check and insert does not help: both commit, and the user has two pending requests.',
  ],
  params: {},
  sessionCount: { default: 2 },
  isolation: 'read committed',
  setup: [table],
  sessions: ({ n }) => replicate(n, { steps: checkThenInsert(), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: racesThrough("READ COMMITTED: no check sees another session's uncommitted insert, so every session inserts"),
  },
})
