// Every scenario, in the order `race list` shows them.
import type { Scenario } from '../src/scenario.js'
import broken from './broken.js'
import forUpdate from './for-update.js'
import advisory from './advisory.js'
import uniqueIndex from './unique-index.js'
import serializable from './serializable.js'
import repeatableRead from './repeatable-read.js'
import tryAdvisory from './try-advisory.js'
import lockTimeout from './lock-timeout.js'
import deadlock from './deadlock.js'
import limitLock from './limit-lock.js'
import sharedLock from './shared-lock.js'
import otherUsers from './other-users.js'
import parentRow from './parent-row.js'
import sessionLock from './session-lock.js'
import dirtyRead from './dirty-read.js'
import nonRepeatableRead from './non-repeatable-read.js'
import phantom from './phantom.js'
import readSkew from './read-skew.js'
import lostUpdate from './lost-update.js'
import lostUpdateAtomic from './lost-update-atomic.js'
import lostUpdateForUpdate from './lost-update-for-update.js'
import lostUpdateVersion from './lost-update-version.js'
import writeSkew from './write-skew.js'
import predicateRead from './predicate-read.js'
import predicateDelete from './predicate-delete.js'
import serializableRetry from './serializable-retry.js'
import skipLocked from './skip-locked.js'
import rowDeadlock from './row-deadlock.js'
import poolIsolationLeak from './pool-isolation-leak.js'

export const scenarios: readonly Scenario[] = [
  // the advisory-lock article: check-then-insert and its fixes (§1-§5)
  broken,
  forUpdate,
  advisory,
  uniqueIndex,
  serializable,
  repeatableRead,
  // the advisory-lock article: the rest (§2-§11)
  tryAdvisory,
  lockTimeout,
  sessionLock,
  parentRow,
  otherUsers,
  deadlock,
  limitLock,
  sharedLock,
  // the isolation-levels article: anomalies and the patterns that close them
  dirtyRead,
  nonRepeatableRead,
  phantom,
  readSkew,
  lostUpdate,
  lostUpdateAtomic,
  lostUpdateForUpdate,
  lostUpdateVersion,
  writeSkew,
  predicateRead,
  predicateDelete,
  serializableRetry,
  skipLocked,
  rowDeadlock,
  poolIsolationLeak,
]

/** The isolation-levels article's anomalies: what PostgreSQL documents for each, and the rows of race matrix. */
export { DOCUMENTED, MATRIX_IDS, LEVELS, type Documented, type Level } from './_fixtures/isolation.js'
