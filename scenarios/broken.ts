// broken (advisory-locks §1): check-then-insert in one READ COMMITTED transaction. Every session sees no
// pending request and every one inserts: the user has n pending requests.
import { defineScenario, replicate } from '../src/scenario.js'
import { checkThenInsert, invariant, myCheckThenInsert, myTable, racesThrough, table } from './_fixtures/setup-requests.js'

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
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  sessions: ({ n, engine }) => replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert() : checkThenInsert(), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: racesThrough("READ COMMITTED: no check sees another session's uncommitted insert, so every session inserts"),
    // InnoDB at READ COMMITTED: each check is a consistent read of committed rows, and a plain INSERT takes no lock another one waits for.
    mysql: racesThrough("READ COMMITTED: each check is a consistent read that sees no uncommitted insert (InnoDB: Consistent Nonlocking Reads), so every session inserts"),
  },
})
