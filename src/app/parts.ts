// A query string of several statements (node-postgres's simple query), as race explore runs it: statement by statement,
// each its own point, as other sessions' statements run between them in real life (at READ COMMITTED each takes its
// own snapshot). Pure: no connection.
import { lexeme, statements } from '../lex.js'

/** One part of a string: the original text it is sent as (comments kept), and where it starts in the string. */
export interface Part {
  text: string
  start: number
}

/** The statements of `sql` as spans of the original text (outside quotes, dollar quotes and comments, split at `;`). */
export function statementSpans(sql: string): Part[] {
  const out: Part[] = []
  let from = 0
  let seen = false
  const push = (end: number) => {
    if (seen) out.push({ text: sql.slice(from, end), start: from })
    seen = false
  }
  let i = 0
  while (i < sql.length) {
    const l = lexeme(sql, i)
    if (l) {
      if (l.kind !== 'comment') seen = true
      i = l.end
      continue
    }
    if (sql[i] === ';') {
      push(i)
      from = i + 1
      i++
      continue
    }
    if (!/\s/.test(sql[i])) seen = true
    i++
  }
  push(sql.length)
  return out
}

/** Statements no other session can observe (they take no lock, change no data): run with the statement after them. */
const UNSEEN = /^\s*(begin|start\s+transaction|set(?!\s+constraints\b)|reset|show|savepoint|release)\b/i
/** Statements that begin, end or mark a transaction. */
const CONTROL = /^\s*(begin|start\s+transaction|commit|end|rollback|abort|prepare\s+transaction|savepoint|release)\b/i
const BEGIN = /^\s*(begin|start\s+transaction)\b/i
const ENDS = (x: string) => /^\s*(commit|end|rollback|abort|prepare\s+transaction)\b/i.test(x) && !/^\s*rollback\s+((work|transaction)\s+)?to\b/i.test(x)

/**
 * How race runs a string of several statements one by one, or undefined when it runs it whole (one statement, or a
 * shape whose transactions race could not keep exactly as one simple query keeps them). `wrap`: the string runs
 * outside a transaction and controls none, so PostgreSQL runs it as one implicit transaction: race opens one for it
 * (committed at the string's commit point, rolled back when a statement fails). Otherwise the string runs inside an
 * explicit transaction throughout (`inTx`, or its first statement begins one), which only its last statement may end.
 * Leading statements no other session can observe are merged into the next part (and trailing ones into the last).
 */
export function stringParts(sql: string, inTx: boolean): { parts: Part[]; wrap: boolean } | undefined {
  const stmts = statements(sql)
  const spans = statementSpans(sql)
  if (stmts.length < 2 || spans.length !== stmts.length) return undefined
  let wrap = false
  if (!inTx && !BEGIN.test(stmts[0])) {
    if (stmts.some((x) => CONTROL.test(x))) return undefined
    wrap = true
  } else if (stmts.some((x, i) => (i > 0 && BEGIN.test(x)) || (i < stmts.length - 1 && ENDS(x)))) return undefined
  const parts: Part[] = []
  let lead: number | undefined
  for (let i = 0; i < spans.length; i++) {
    const from = lead ?? i
    if (UNSEEN.test(stmts[i]) && i < spans.length - 1) {
      lead ??= i
      continue
    }
    lead = undefined
    const start = spans[from].start
    parts.push({ text: sql.slice(start, spans[i].start + spans[i].text.length), start })
  }
  // Trailing statements no one sees (`...; set x = 1`) go with the part before them.
  while (parts.length > 1 && UNSEEN.test(statements(parts[parts.length - 1].text)[0] ?? '') && statements(parts[parts.length - 1].text).every((x) => UNSEEN.test(x))) {
    const last = parts.pop()!
    const prev = parts[parts.length - 1]
    prev.text = sql.slice(prev.start, last.start + last.text.length)
  }
  return parts.length > 1 ? { parts, wrap } : undefined
}

/** Statements that take no snapshot (PostgreSQL runs them without one): a transaction's snapshot is not taken by them. */
export const TAKES_NO_SNAPSHOT = /^\s*(begin|start|commit|end|rollback|abort|savepoint|release|prepare|set|reset|show|lock|listen|notify|unlisten|fetch|move|close|discard|deallocate)\b/i
