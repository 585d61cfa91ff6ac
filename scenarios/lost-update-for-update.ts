// lost-update-for-update (isolation-levels article, fix 2): SELECT ... FOR UPDATE before the read-modify-write.
// READ COMMITTED: T2's SELECT FOR UPDATE waits for T1 and then returns 150; balance 120 (held, serialized).
// REPEATABLE READ and SERIALIZABLE: the waiting SELECT FOR UPDATE fails with 40001 (held, prevented).
import { serialized, defineScenario, levelParam } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { BOTH, documented, invariant, myPermutation, myReadModifyWrite, myTables, myWaits, readModifyWrite, tables } from './_shared/lost-update.js'

export default defineScenario({
  id: 'lost-update-for-update',
  title: 'lost update fixed with SELECT ... FOR UPDATE (pessimistic)',
  source: { article: 'isolation-levels', section: 'Application patterns: read-modify-write and its fixes' },
  story: [
    "The article's read-modify-write, but the read takes the row lock: select balance ... for update.",
    "The article's interleaving: T2's read now waits until T1 commits, then returns 150, and T2 writes 120.",
    'At REPEATABLE READ and SERIALIZABLE the waiting read fails with 40001 instead: the application must retry.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => (engine === 'mysql' ? myTables : tables),
  sessions: ({ params: p, engine }) =>
    engine === 'mysql' ? { t1: myReadModifyWrite(p, 't1', true), t2: myReadModifyWrite(p, 't2', true) } : { t1: readModifyWrite(p, 't1', true), t2: readModifyWrite(p, 't2', true) },
  defaultSchedule: 'lockstep',
  permutation: ({ engine }) =>
    engine === 'mysql'
      ? myPermutation('t1.begin t1.read t2.begin t2.read t1.update t1.commit t2.update t2.commit')
      : 't1.begin t1.read t2.begin t2.read t1.update t1.commit t2.update t2.commit',
  invariant,
  documented: {
    postgres: documented(serialized('FOR UPDATE waits, then returns the new row version (13.2.1)', BOTH)),
    // InnoDB: the locking read waits, then returns the newest committed row (150) at every level, REPEATABLE READ too.
    mysql: myWaits("t2's SELECT ... FOR UPDATE waits for t1, then returns the committed 150"),
  },
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] },],
})
