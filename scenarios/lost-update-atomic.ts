// lost-update-atomic (isolation-levels article, fix 1): UPDATE accounts SET balance = balance + 50. The writes
// overlap: T2's UPDATE waits for T1's row lock. READ COMMITTED: T2 re-evaluates on T1's committed row,
// balance 120 (held, serialized). REPEATABLE READ and SERIALIZABLE: T2 fails with 40001 (held, prevented).
import { serialized, defineScenario, levelParam } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { BOTH, atomic, documented, invariant, myAtomic, myPermutation, myTables, myWaits, tables } from './_shared/lost-update.js'

export default defineScenario({
  id: 'lost-update-atomic',
  title: 'lost update fixed with an atomic UPDATE (balance = balance + 50)',
  source: { article: 'isolation-levels', section: 'Application patterns: read-modify-write and its fixes' },
  story: [
    'No read-modify-write in the application: the arithmetic happens in the UPDATE.',
    "The default interleaving overlaps the writes (worse than the article's): T2's UPDATE waits for T1's row lock.",
    'READ COMMITTED: when T1 commits, T2 re-reads the new row version and adds to it: 100 + 50 - 30 = 120.',
    'At REPEATABLE READ and SERIALIZABLE the waiting UPDATE fails with 40001 instead: the application must retry.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => (engine === 'mysql' ? myTables : tables),
  sessions: ({ params: p, engine }) => (engine === 'mysql' ? { t1: myAtomic(p, 't1'), t2: myAtomic(p, 't2') } : { t1: atomic(p, 't1'), t2: atomic(p, 't2') }),
  defaultSchedule: 'lockstep',
  permutation: ({ engine }) => (engine === 'mysql' ? myPermutation('t1.begin t2.begin t1.update t2.update t1.commit t2.commit') : 't1.begin t2.begin t1.update t2.update t1.commit t2.commit'),
  invariant,
  documented: {
    postgres: documented(serialized('the second UPDATE waits, then re-evaluates on the new row version (13.2.1)', BOTH)),
    // No 40001 at REPEATABLE READ on InnoDB: an UPDATE reads the newest committed row whatever the level.
    mysql: myWaits("t2's UPDATE waits for t1's row lock, then adds to the committed 150"),
  },
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] },],
})
