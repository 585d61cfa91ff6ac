// lost-update-version (isolation-levels article, fix 3: optimistic version column): UPDATE ... WHERE version = :v.
// READ COMMITTED: T2's UPDATE matches 0 rows, T2 rolls back, reads again and succeeds on its 2nd attempt:
// balance 120 (held, nobody waited or failed). REPEATABLE READ and SERIALIZABLE: T2's UPDATE fails with
// 40001 before it can see the new version (held, prevented).
import { clean, defineScenario, levelParam } from '../src/scenario.js'
import { isolationParam, otherLevels } from './_shared/isolation.js'
import { BOTH, documented, invariant, myOptimistic, myPermutation, myTables, myVersioned, tables, versioned } from './_shared/lost-update.js'

export default defineScenario({
  id: 'lost-update-version',
  title: 'lost update fixed with an optimistic version column and a bounded retry loop',
  source: { article: 'isolation-levels', section: 'Application patterns: optimistic locking with a version column' },
  story: [
    "The article's update_product_price: read (balance, version); UPDATE ... WHERE id = 1 AND version = :v.",
    '0 rows means someone else won: roll back, read again, try again, at most --max-tries attempts.',
    "The article's interleaving at READ COMMITTED: T2's first UPDATE matches nothing; its 2nd attempt writes 120.",
    'At REPEATABLE READ and SERIALIZABLE the first UPDATE fails with 40001 instead of matching 0 rows.',
  ],
  params: {
    ...isolationParam(),
    maxTries: { flag: '--max-tries <k>', description: 'attempts of the optimistic loop before giving up', kind: 'whole', default: 3, min: 1 },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => (engine === 'mysql' ? myTables : tables),
  sessions: ({ params: p, engine }) => (engine === 'mysql' ? { t1: myVersioned(p, 't1'), t2: myVersioned(p, 't2') } : { t1: versioned(p, 't1'), t2: versioned(p, 't2') }),
  defaultSchedule: 'lockstep',
  permutation: ({ engine }) =>
    engine === 'mysql'
      ? myPermutation('t1.begin t1.read t2.begin t2.read t1.update t1.commit t2.update t2.commit')
      : 't1.begin t1.read t2.begin t2.read t1.update t1.commit t2.update t2.commit',
  invariant,
  documented: {
    postgres: documented((v) =>
      Number(v.params.maxTries) > 1
        ? clean('WHERE version = :v matches nothing; t2 reads again and its next try writes (nobody waits)', BOTH)
        : clean('WHERE version = :v matches nothing and no try is left: t2 gives up', { t1: 'committed', t2: 'rejected: the version changed on every try: OptimisticLockError' }),
    ),
    mysql: myOptimistic(),
  },
  checks: [...otherLevels(), { label: 'read uncommitted', params: { isolation: 'read uncommitted' }, engines: ['mysql'] },],
})
