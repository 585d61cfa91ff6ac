// lost-update-atomic (isolation article, fix 1): UPDATE accounts SET balance = balance + 50. The writes
// overlap: T2's UPDATE waits for T1's row lock. READ COMMITTED: T2 re-evaluates on T1's committed row,
// balance 120 (held, serialized). REPEATABLE READ and SERIALIZABLE: T2 fails with 40001 (held, prevented).
import { defineScenario } from '../src/scenario.js'
import { expectDocumented, isolationParam, level, otherLevels } from './_fixtures/isolation.js'
import { atomic, invariant, tables } from './_fixtures/lost-update.js'

export default defineScenario({
  id: 'lost-update-atomic',
  title: 'lost update fixed with an atomic UPDATE (balance = balance + 50)',
  source: 'isolation-levels article, 更新の消失 / FIX Option 1',
  story: [
    'No read-modify-write in the application: the arithmetic happens in the UPDATE.',
    "The default interleaving overlaps the writes (worse than the article's): T2's UPDATE waits for T1's row lock.",
    'READ COMMITTED: when T1 commits, T2 re-reads the new row version and adds to it: 100 + 50 - 30 = 120.',
    'At REPEATABLE READ and SERIALIZABLE the waiting UPDATE fails with 40001 instead: the application must retry.',
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: tables,
  sessions: (p) => ({ t1: atomic(p, 't1'), t2: atomic(p, 't2') }),
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t2.begin t1.update t2.update t1.commit t2.commit',
  invariant,
  expect: expectDocumented('lost-update-atomic'),
  checks: otherLevels(),
})
