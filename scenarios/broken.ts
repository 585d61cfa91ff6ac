// broken (advisory-locks §1): check-then-insert in one READ COMMITTED transaction. Every session sees no
// pending request and every one inserts: the user has n pending requests.
// --isolation puts the same code on the isolation grid (a row of race matrix): REPEATABLE READ does not help
// either (each check reads its snapshot, the inserts are different rows); SERIALIZABLE prevents it, by SSI on
// PostgreSQL (40001) and by two-phase locking on InnoDB (a deadlock, 1213).
import { defineScenario, levelParam, replicate } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { DEADLOCK, M } from './_shared/innodb.js'
import { beginAt, checkThenInsert, invariant, myCheckThenInsert, myTable, onTheGrid, table } from './_shared/setup-requests.js'

const PG_RC = "READ COMMITTED: no check sees another session's uncommitted insert, so every session inserts"
const MY_RC = 'READ COMMITTED: each check is a consistent read that sees no uncommitted insert (InnoDB: Consistent Nonlocking Reads), so every session inserts'

export default defineScenario({
  id: 'broken',
  title: 'check-then-insert in one READ COMMITTED transaction (TOCTOU)',
  source: { article: 'advisory-locks', section: '1' },
  story: [
    'Rule: one pending setup request per user; a second request gets 409.',
    'Each session checks for a pending request, finds none, and inserts one.',
    "READ COMMITTED: each statement sees what was committed when it started, so neither check sees the other's uncommitted insert.",
    'A transaction around check and insert does not help: both commit, and the user has two pending requests.',
    '--isolation: REPEATABLE READ does not help either; SERIALIZABLE fails all but one (PostgreSQL 40001, InnoDB a deadlock).',
  ],
  params: isolationParam(),
  sessionCount: { default: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [engine === 'mysql' ? myTable : table],
  sessions: ({ n, engine, params }) =>
    replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert(false, String(params.isolation)) : checkThenInsert(beginAt(params)), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: onTheGrid({
      'read committed': { races: PG_RC },
      'repeatable read': { races: 'REPEATABLE READ: each check reads its snapshot, and the inserts are new rows no other transaction changed, so nothing conflicts (13.2.2)' },
      serializable: { prevented: 'SSI: each check read the empty set the others write into; the first to commit wins, the rest fail with 40001 (13.2.3)', losers: '40001' },
    }),
    // InnoDB: READ UNCOMMITTED, READ COMMITTED and REPEATABLE READ race through (no check locks anything);
    // SERIALIZABLE makes the check a locking read, and the inserts deadlock.
    mysql: onTheGrid({
      'read uncommitted': { races: `${M.RU}; in lockstep every check runs before any insert, so every session inserts` },
      'read committed': { races: MY_RC },
      'repeatable read': { races: `${M.RR}: each check sees no pending request, and a plain INSERT takes no lock another one waits for` },
      serializable: { prevented: `${M.SER}: each check locks the empty range, each INSERT waits for the others' lock; ${M.DEADLOCK}`, losers: DEADLOCK, wait: true },
    }),
  },
  // race check runs the whole column of the matrix for it.
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] }],
})
