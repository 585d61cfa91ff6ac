// broken (advisory-locks §1): check-then-insert in one READ COMMITTED transaction. Every session sees no
// pending request and every one inserts: the user has n pending requests.
// --isolation puts the same code on the isolation grid (a row of race matrix): REPEATABLE READ does not help
// either (each check reads its snapshot, the inserts are different rows); SERIALIZABLE prevents it, by SSI on
// PostgreSQL (40001) and by two-phase locking on InnoDB (a deadlock, 1213).
import { clean, defineScenario, levelParam, prevented, replicate, serialized, type DocEntry, type Params, type Variant } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_fixtures/isolation.js'
import { DEADLOCK, M } from './_fixtures/innodb.js'
import { EXISTS, checkThenInsert, invariant, myCheckThenInsert, myTable, oneByOne, racesThrough, table } from './_fixtures/setup-requests.js'

/** The article's code says begin (READ COMMITTED, the default); another level is asked for on the BEGIN. */
const begin = (p: Params) => (p.isolation === 'read committed' ? 'begin' : `begin isolation level ${p.isolation}`)

const PG_RC = "READ COMMITTED: no check sees another session's uncommitted insert, so every session inserts"
const PG_RR = 'REPEATABLE READ: each check reads its snapshot, and the inserts are new rows no other transaction changed, so nothing conflicts (13.2.2)'
const PG_SER = 'SSI: each check read the empty set the others write into; the first to commit wins, the rest fail with 40001 (13.2.3)'
const MY_RC = "READ COMMITTED: each check is a consistent read that sees no uncommitted insert (InnoDB: Consistent Nonlocking Reads), so every session inserts"
const MY_SER = `${M.SER}: each check locks the empty range, each INSERT waits for the others' lock; ${M.DEADLOCK}`

/** READ COMMITTED and the levels that race through the same way, documented as racesThrough does. */
const through = (why: string): DocEntry => racesThrough(why).lockstep!
const alone = clean('one request alone', { committed: 1 })
const apart = (v: Variant) => clean('the sessions happened not to overlap', oneByOne(v, 1, EXISTS))

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
    replicate(n, { steps: engine === 'mysql' ? myCheckThenInsert(false, String(params.isolation)) : checkThenInsert(begin(params)), racePoint: 'check' }),
  invariant: invariant(),
  documented: {
    postgres: {
      levels: {
        'read committed': through(PG_RC),
        'repeatable read': through(PG_RR),
        serializable: (v) => (v.n > 1 ? prevented(PG_SER, { committed: 1, '40001': v.n - 1 }) : alone),
      },
      serial: racesThrough(PG_RC).serial,
      barrier: (v) => {
        if (v.params.isolation !== 'serializable') return (racesThrough(PG_RC).barrier as (v: Variant) => ReturnType<typeof apart>[])(v)
        if (v.n === 1) return alone
        // Free-running, a session may check after another committed: it is then told no instead of failing.
        return [prevented(PG_SER, { committed: 1, '40001': [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }), apart(v)]
      },
    },
    // InnoDB: READ UNCOMMITTED, READ COMMITTED and REPEATABLE READ race through (no check locks anything);
    // SERIALIZABLE makes the check a locking read, and the inserts deadlock.
    mysql: {
      levels: {
        'read uncommitted': through(`${M.RU}; in lockstep every check runs before any insert, so every session inserts`),
        'read committed': through(MY_RC),
        'repeatable read': through(`${M.RR}: each check sees no pending request, and a plain INSERT takes no lock another one waits for`),
        serializable: (v) => (v.n > 1 ? prevented(MY_SER, { committed: 1, [DEADLOCK]: v.n - 1 }) : alone),
      },
      serial: racesThrough(MY_RC).serial,
      barrier: (v) => {
        if (v.params.isolation !== 'serializable') return (racesThrough(MY_RC).barrier as (v: Variant) => ReturnType<typeof apart>[])(v)
        if (v.n === 1) return alone
        return [
          prevented(MY_SER, { committed: 1, [DEADLOCK]: [1, v.n - 1], [`rejected: ${EXISTS}`]: [0, v.n - 2] }),
          serialized('a check waited for a committed insert', oneByOne(v, 1, EXISTS)),
          apart(v),
        ]
      },
    },
  },
  // race check runs the whole column of the matrix for it.
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] }],
})
