// How race explore splits one declared step into the points of its search (issue 38): a step that sends several
// statements is one point per statement, as real sessions' statements interleave (at READ COMMITTED each takes its
// own snapshot, and another session's commit can come between two of them). Pure: no connection.
import { bareWords, statements, triesLock } from '../lex.js'

/**
 * Statements that no other session can observe and that observe nothing of the others: BEGIN takes no snapshot
 * (PostgreSQL takes it at the transaction's first statement that needs one), SET/RESET/SHOW change or read only the
 * session's own settings, SAVEPOINT and RELEASE only mark or fold a subtransaction. SET CONSTRAINTS is not one of them
 * (SET CONSTRAINTS ... IMMEDIATE checks deferred constraints and fires deferred triggers where it runs). Each is merged into the statement
 * after it, so `begin; select ...` is one point: no order of other sessions' steps between them could show.
 */
const QUIET = /^\s*(begin|start\s+transaction|set(?!\s+constraints\b)|reset|show|savepoint|release)\b/i
/** Statements that start, end or prepare a transaction: a step holding one (but its first, or its last lone COMMIT) stays one point. ROLLBACK TO SAVEPOINT is a point of its own (it lets go of locks others may wait for). */
const CONTROL = /^\s*(begin|start\s+transaction|commit|end|rollback(?!\s+(work\s+|transaction\s+)?to\b)|abort|prepare\s+transaction|commit\s+prepared|rollback\s+prepared)\b/i
const OPENS = /^\s*(begin|start\s+transaction)\b/i
const LONE_COMMIT = /^\s*(commit|end)(\s+(work|transaction))?\s*$/i
/** Statements before which no snapshot is taken (a SELECT, a data change, ... takes one). */
const NO_SNAPSHOT = /^\s*(begin|start\s+transaction|set|reset|show|savepoint|release|lock|listen|unlisten|notify|discard|declare|prepare|deallocate)\b/i

/**
 * How many statements of `sql` other sessions can see or be seen by (neither quiet, above, nor one that begins or ends
 * a transaction): a step of two or more run as one point hides the orders between them.
 */
export function seenStatements(sql: string): number {
  return statements(sql).filter((x) => !QUIET.test(x) && !CONTROL.test(x)).length
}

export interface Point {
  /** How the point is named after the step's own name: '' (the first part), '/2', ':snapshot', '/2:snapshot'. */
  suffix: string
  /** What it sends. */
  sql: string
  /** A snapshot point: it takes the transaction's snapshot (`select 1`), a no-op when it is taken already. */
  snapshot?: true
}

export interface StepPoints {
  points: Point[]
  /** The step ends with a lone COMMIT: its commit point comes after the parts (Session.openCommit). */
  commit: boolean
  /** Outside a transaction, not beginning one: race opens one for the step (its commit a point of its own). */
  implicit: boolean
}

/**
 * The points of a step of SQL `sql`, its session in a transaction (`inTx`) or not, its transaction's snapshot taken
 * (`taken`) or not; undefined when the step stays as race explore ran it before (one point, and maybe a commit point):
 * one statement and no snapshot point, a statement that starts or ends a transaction in its middle, a step outside a
 * transaction whose first statement is one that never runs in a transaction race opens (SET ...; ...).
 *
 * Each statement is a point (leading statements no one can observe merged into the one after them); before a
 * statement that tries a lock without waiting (NOWAIT, SKIP LOCKED) as its transaction's first snapshot-taking
 * statement, a snapshot point: at REPEATABLE READ or SERIALIZABLE that statement takes the snapshot and then tries the
 * lock, and another session's commit can come between the two (PostgreSQL then answers 40001).
 */
export function pointsOfStep(sql: string, inTx: boolean, taken: boolean, notSplit: RegExp, snapshots = true): StepPoints | undefined {
  const parts = statements(sql)
  if (!parts.length) return undefined
  let commit = false
  if (parts.length >= 2 && LONE_COMMIT.test(parts[parts.length - 1])) {
    commit = true
    parts.pop()
  }
  const opens = OPENS.test(parts[0])
  let implicit = false
  if (!inTx && !opens) {
    // `update ...; commit` outside a transaction, or `set ...; update ...`: as before.
    if (commit || notSplit.test(parts[0])) return undefined
    implicit = true
  }
  if (parts.slice(opens ? 1 : 0).some((x) => CONTROL.test(x))) return undefined
  // Leading quiet statements join the statement after them; trailing ones the statement before them.
  const groups: string[][] = []
  let pending: string[] = []
  for (const x of parts) {
    pending.push(x)
    if (!QUIET.test(x)) {
      groups.push(pending)
      pending = []
    }
  }
  if (pending.length) {
    if (groups.length) groups[groups.length - 1].push(...pending)
    else groups.push(pending)
  }
  let snap = inTx && !opens ? taken : false
  const points: Point[] = []
  groups.forEach((g, k) => {
    const at = g.findIndex((x) => !QUIET.test(x))
    const name = k ? `/${k + 1}` : ''
    if (at >= 0 && !snap && snapshots && triesLock(g[at])) {
      points.push({ suffix: `${name}:snapshot`, sql: [...g.slice(0, at), 'select 1'].join(';\n'), snapshot: true })
      points.push({ suffix: name, sql: g.slice(at).join(';\n') })
    } else points.push({ suffix: name, sql: g.join(';\n') })
    if (g.some((x) => !NO_SNAPSHOT.test(x))) snap = true
  })
  if (points.length < 2) return undefined
  return { points, commit, implicit }
}

/**
 * Whether the session's transaction has taken its snapshot after `sql` ran, from whether it had before (`taken`):
 * a BEGIN, COMMIT or ROLLBACK starts afresh, a statement that needs a snapshot takes it. The same rule for the run
 * (Session) and the count the report promises before it (explore's pointsOf).
 */
export function snapshotAfter(sql: string, taken: boolean): boolean {
  for (const x of statements(sql)) {
    if (CONTROL.test(x)) taken = false
    else if (!NO_SNAPSHOT.test(x)) taken = true
  }
  return taken
}

/**
 * The isolation level the statements before a snapshot point set for its transaction (BEGIN/START TRANSACTION/SET
 * TRANSACTION ... ISOLATION LEVEL x), lower case, or undefined when they set none.
 */
export function levelSet(sql: string): string | undefined {
  let level: string | undefined
  for (const x of statements(sql)) {
    const m = /^\s*(?:begin|start\s+transaction|set\s+transaction)\b.*?\bisolation\s+level\s+(read\s+committed|read\s+uncommitted|repeatable\s+read|serializable)\b/is.exec(bareWords(x))
    if (m) level = m[1].toLowerCase().replace(/\s+/g, ' ')
  }
  return level
}
