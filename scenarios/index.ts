// Every scenario, in the order `race list` shows them.
import type { Scenario } from '../src/scenario.js'
import broken from './broken.js'
import forUpdate from './for-update.js'
import advisory from './advisory.js'
import uniqueIndex from './unique-index.js'
import serializable from './serializable.js'
import repeatableRead from './repeatable-read.js'

export const scenarios: readonly Scenario[] = [broken, forUpdate, advisory, uniqueIndex, serializable, repeatableRead]
