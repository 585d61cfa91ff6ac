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

export const scenarios: readonly Scenario[] = [broken, forUpdate, advisory, uniqueIndex, serializable, repeatableRead, tryAdvisory, lockTimeout, sessionLock, parentRow, otherUsers, deadlock, limitLock, sharedLock]
