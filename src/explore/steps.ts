// What the search knows of a race before any run: what it is expected to end as, the points each session's declared
// steps give (the count of orders), the steps that are not choices (a spec session's setup and teardown), and whether
// a step may touch what the whole database shares (then the search runs on one job).
import fs from 'node:fs'
import path from 'node:path'
import { DEFINES_CODE, sharesDatabase } from '../engine/footprint.js'
import { levelSet, pointsOfStep, snapshotAfter } from '../engine/points.js'
import { commitBody, NOT_SPLIT } from '../engine/session.js'
import { expectsOverride, isFileScenario } from '../specfile/common.js'
import { shownBlock } from '../specfile/guard.js'
import type { ExpectOverride } from '../judge/index.js'
import { documentedFor, type Plan } from '../plan.js'
import { applicationOf, kindOf, type Documented, type Scenario } from '../scenario.js'
import { ordersOf } from './enumerate.js'
import type { StrategyFacts } from './strategy.js'


/**
 * The expectation explore judges by: --expect, else the spec's expect line (none: report only), else, for a scenario
 * with documented outcomes (built-in or a .mjs module), violated when any documented outcome is an anomaly, else held.
 */
export function expectationOf(s: Scenario, p: Plan, given?: 'held' | 'violated'): ExpectOverride {
  if (given) return given
  const own = expectsOverride(s)
  if (own) return own
  // A spec with no expect line promises nothing: report only.
  if (s.expects === 'reported') return undefined
  const docs = documentedAll(s, p)
  return docs.some((d) => d.verdict === 'anomaly') ? 'violated' : 'held'
}

/** Every outcome the scenario documents for this variant, whatever the schedule: the SQLSTATEs its trials may end with. */
export function documentedAll(s: Scenario, p: Plan): Documented[] {
  return (['lockstep', 'serial', 'barrier'] as const).flatMap((schedule) => {
    try {
      return documentedFor(s, { ...p.variant, schedule, windowMs: 0 })
    } catch {
      return []
    }
  })
}

/** A spec session's own setup and teardown blocks run first and last, as isolationtester runs them: not choices. */
export function pinned(s: Scenario, p: Plan, i: number, k: number): 'first' | 'last' | undefined {
  // An index beyond the sessions is an application race's query offered with a fault (--inject): never pinned.
  if (!isFileScenario(s) || !p.sessions[i]) return undefined
  const steps = p.sessions[i].steps
  if (k === 0 && steps[0]?.name === 'setup') return 'first'
  if (k === steps.length - 1 && k > 0 && steps[k].name === 'teardown') return 'last'
  return undefined
}

/** Each session's points that are choices (engine/points.ts), for declared steps: what the count of orders is made of. */
export function pointCounts(s: Scenario, p: Plan): number[] {
  return p.sessions.map((x, i) => pointsOf(x.steps.filter((_, k) => !pinned(s, p, i, k)).map((st) => st.def.sql)))
}

/**
 * Jobs have a schema each, but advisory keys, pg_locks, pg_stat_activity and database settings are the whole
 * database's: a step that may touch them runs on one job, or the jobs' trials would see each other (issue 38).
 * Code the setup defines (a function, trigger, view, rule...) may reach such state without naming it in a step.
 */
export function sharesState(s: Scenario, p: Plan): boolean {
  // An application race's steps are its functions' queries: the text of its module and the files it imports by a
  // relative path stands for them here (a word of it is enough), and each query is checked as it comes (trial.ts).
  const app = applicationOf(s)
  const steps = app ? Boolean(app.file && codeSharesDatabase(app.file)) : p.sessions.some((x) => x.steps.some((st) => sharesDatabase(st.def.sql)))
  return steps || p.setup.map(shownBlock).some((sql) => sharesDatabase(sql) || DEFINES_CODE.test(sql))
}

/** Imports by a relative path: `from './x.mjs'`, `import('./x')`, `require('../x')`. */
const RELATIVE = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\1/g

/**
 * Whether the race module `file`, or a file it imports by a relative path (at most 200 files), names what the whole
 * database shares (footprint.ts sharesDatabase). A file that cannot be read counts as naming it.
 */
export function codeSharesDatabase(file: string): boolean {
  const seen = new Set<string>()
  const todo = [path.resolve(file)]
  while (todo.length) {
    const f = todo.pop()!
    if (seen.has(f)) continue
    if (seen.size >= 200) return true
    seen.add(f)
    const found = [f, ...['.mjs', '.js', '.ts', '.mts', '.cjs', '/index.js', '/index.mjs'].map((x) => f + x)].find((x) => fs.existsSync(x) && fs.statSync(x).isFile())
    if (!found) return true
    const text = fs.readFileSync(found, 'utf8')
    if (sharesDatabase(text)) return true
    for (const m of text.matchAll(RELATIVE)) todo.push(path.resolve(path.dirname(found), m[2]))
  }
  return false
}

/**
 * The points of a session's declared steps: one each, and two for a statement that would commit by itself (it runs,
 * then commits: Session.openCommit), as far as the steps' own BEGIN and COMMIT say (what the server does decides in
 * the run; this count is what the report promises before it).
 */

/** What PostgreSQL refuses inside a transaction block (25001), for the count only: the run learns it from the server. */
const WHOLE = /^\s*(vacuum|cluster|reindex|checkpoint|alter\s+system|(create|drop)\s+(database|tablespace|subscription)|(create|drop)\s+(unique\s+)?index\s+concurrently)\b/i

export function pointsOf(sqls: readonly string[]): number {
  let inTx = false
  // The transaction has taken its snapshot (a snapshot point is offered before a NOWAIT/SKIP LOCKED that takes it).
  let taken = false
  let level: string | undefined
  let n = 0
  for (const sql of sqls) {
    // Several statements (or a snapshot point): a point each (engine/points.ts), and the commit point after them.
    // The level a BEGIN names (at READ COMMITTED no snapshot point: the run asks the server where none is named).
    const opens = /^\s*(begin|start\s+transaction)\b/i.test(sql)
    if (opens || !inTx) level = levelSet(sql)
    else level = levelSet(sql) ?? level
    const plan = pointsOfStep(sql, inTx, taken, NOT_SPLIT, level !== 'read committed' && level !== 'read uncommitted')
    if (plan) {
      n += plan.points.length
      if (plan.commit || plan.implicit) {
        n++
        inTx = false
        taken = false
      } else {
        inTx = true
        taken = snapshotAfter(sql, taken)
      }
      continue
    }
    taken = snapshotAfter(sql, taken)
    n++
    // `begin; ...; commit` as one step: its run, then its COMMIT (Session.commitBody).
    if (commitBody(sql, inTx) !== undefined) {
      n++
      inTx = false
    } else if (/^\s*(begin|start\s+transaction)\b/i.test(sql)) inTx = true
    else if (/^\s*(commit|end|abort)\b/i.test(sql) || (/^\s*rollback\b/i.test(sql) && !/^\s*rollback\s+(work\s+|transaction\s+)?to\b/i.test(sql))) inTx = false
    else if (!inTx && sql.trim() !== '' && !NOT_SPLIT.test(sql) && !WHOLE.test(sql)) n++
  }
  return n
}

/**
 * What the search knows of a race before it runs it (strategy.ts StrategyFacts). An application race's steps are the
 * queries its functions send, discovered as they run: a session's count may differ from one interleaving to the next
 * (count, then insert or throw). The tree's branching is known only where it is reached, so the count of orders is
 * not known before: the first run (the first ready session at every choice) gives each session's queries along it,
 * and their orders decide between every interleaving and a sample. Injected faults (--inject) are more choices of a
 * session than its next query.
 */
export function searchFacts(scenario: Scenario, p: Plan): StrategyFacts {
  const app = kindOf(scenario).type === 'application'
  const counts = app ? [] : pointCounts(scenario, p)
  const a = applicationOf(scenario)
  return { app, faulted: Boolean(a?.faults), isolated: a?.isolated === true, sessions: p.sessions.length, counts, orders: app ? 0n : ordersOf(counts) }
}
