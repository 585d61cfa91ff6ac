// Row footprints, for race explore's reduced search: which rows of a table a step read, locked or changed, where race
// can tell; else the table, as footprint.ts gives it.
//
// A step's rows are told only where nothing else can be true of it (soundness first):
//  - its SQL is one statement (a BEGIN before it aside) of one of three shapes, every word of which race knows:
//      select <columns or *> from T where K = <integer> [for update | for no key update | for share | for key share]
//      update T set <column> = <expression>, ... where K = <integer>     (no column K set; an expression is columns,
//                                                                         integers, + - * / % and parentheses)
//      delete from T where K = <integer>
//    with T an unquoted, unqualified name and K T's primary key: no function is called, no other table is named;
//  - the catalogs (doubt.ts Facts.plain) say T is a plain table whose rows nothing else reaches: a one-column integer
//    primary key, not generated, no other unique index or exclusion constraint, no trigger (nor foreign key, whose
//    checks and cascades are triggers), rule, row-level security, inheritance or partition, nothing tainted or
//    deferrable (doubt.ts); T is among the relations the session's backend holds a lock on after the step, and no
//    other relation of T's name is;
//  - no session of the trial holds SIRead locks: SERIALIZABLE's predicate locks may cover an index page or a whole
//    table, so SSI may order steps on different rows (the table stays the unit there).
// Such a step reads `rel:T#k` (what its row k holds, committed) instead of `rel:T`, and a locking or changing one
// writes `rows:T#k` (row k's lock) instead of `rows:T`; T's indexes go with T. The equality on the primary key means
// the statement reaches row k alone, whatever the plan: at READ COMMITTED another session's change of another row,
// committed or not, changes nothing of what it reads, locks or writes. Resources `X#k` and `X` overlap
// (explore/reduce.ts conflicts): a step on row k still conflicts with one that reads or writes all of T.
//
// A transaction's commit writes `rel:T#k` for the rows its steps changed or locked instead of `rel:T`, when every
// step of that transaction was seen (no pinned setup or teardown block ran while it was open), and each one that may
// have changed T (holds a row-change lock on it after it) told its rows; a step that did not (an insert, a statement
// of another shape, one unclassified) makes the commit write all of T, as before. An update that sets K, an insert,
// anything that may change which rows a predicate matches, thus writes the whole table and meets every read of T,
// rows or not.
import type { Facts } from './doubt.js'
import type { Seen, Touched } from './footprint.js'

/** What a statement of a known shape does to one row of one table. */
export interface RowStep {
  kind: 'read' | 'lock' | 'write'
  /** The table's name as written (lower case: unquoted names fold to it). */
  table: string
  column: string
  /** The key, canonical (an integer's digits). */
  key: string
}

const ID = '[a-z_][a-z0-9_]*'
const INT = '[+-]?\\d+'
/** K = n or n = K, K optionally qualified by the table's name: [qualifier, column, key] (key from either side). */
const COND = `(?:(?:(${ID})\\s*\\.\\s*)?(${ID})\\s*=\\s*(${INT})|(${INT})\\s*=\\s*(?:(${ID})\\s*\\.\\s*)?(${ID}))`
const END = '\\s*;?\\s*$'
const SELECT = new RegExp(`^select\\s+(\\*|${ID}(?:\\s*,\\s*${ID})*)\\s+from\\s+(${ID})\\s+where\\s+${COND}(\\s+for\\s+(?:update|no\\s+key\\s+update|share|key\\s+share))?${END}`, 'i')
const UPDATE = new RegExp(`^update\\s+(${ID})\\s+set\\s+([\\s\\S]+?)\\s+where\\s+${COND}${END}`, 'i')
const DELETE = new RegExp(`^delete\\s+from\\s+(${ID})\\s+where\\s+${COND}${END}`, 'i')
/** A leading BEGIN / START TRANSACTION (with its modes: words, commas, spaces) merged into the point. */
const BEGIN = /^\s*(?:begin|start\s+transaction)(?:\s+[a-z ,]*)?;/i
/** An assignment's expression: columns (not called), integers, arithmetic, parentheses. */
const EXPR = /^(?:\s|[a-z_][a-z0-9_]*(?![a-z0-9_]*\s*\()|\d+|[-+*/%()])+$/i
/** Words of the SQL grammar that an expression of the shape above may not hold (they would change its meaning). */
const NOT_COLUMNS = new Set(['select', 'from', 'where', 'default', 'row', 'array', 'case', 'and', 'or', 'not', 'is', 'in', 'returning', 'with', 'set', 'null', 'true', 'false', 'collate', 'at', 'overlaps', 'between', 'like', 'ilike', 'similar', 'escape', 'any', 'all', 'some', 'exists', 'interval', 'operator', 'current_date', 'current_time', 'current_timestamp', 'localtime', 'localtimestamp', 'current_user', 'session_user', 'user', 'current_role', 'current_catalog', 'current_schema'])

function key(s: string): string | undefined {
  try {
    return BigInt(s).toString()
  } catch {
    return undefined
  }
}

/** The condition's [qualifier, column, key] from COND's six groups starting at `g`. */
function cond(m: RegExpMatchArray, g: number): { qual?: string; column: string; key: string } | undefined {
  const k = key(m[g + 2] ?? m[g + 3])
  if (k === undefined) return undefined
  return m[g + 1] !== undefined ? { qual: m[g], column: m[g + 1], key: k } : { qual: m[g + 4], column: m[g + 5], key: k }
}

/** The statement `sql` as a row step, or undefined when it is not of a shape race knows (see the top of this file). */
export function rowStep(sql: string): RowStep | undefined {
  let text = sql.replace(BEGIN, '').trim()
  // One statement, no comment, no quoted name or string: every character is of the grammar above.
  if (/["'$\\;]|--|\/\*/.test(text.replace(/;\s*$/, ''))) return undefined
  text = text.replace(/;\s*$/, '')
  const ok = (table: string, c: ReturnType<typeof cond>, kind: RowStep['kind']): RowStep | undefined =>
    c && (c.qual === undefined || c.qual.toLowerCase() === table.toLowerCase()) ? { kind, table: table.toLowerCase(), column: c.column.toLowerCase(), key: c.key } : undefined
  let m = SELECT.exec(text)
  if (m) return ok(m[2], cond(m, 3), m[9] ? 'lock' : 'read')
  m = DELETE.exec(text)
  if (m) return ok(m[1], cond(m, 2), 'write')
  m = UPDATE.exec(text)
  if (m) {
    const c = cond(m, 3)
    if (!c) return undefined
    for (const a of splitTop(m[2])) {
      const am = new RegExp(`^\\s*(${ID})\\s*=([\\s\\S]*)$`, 'i').exec(a)
      if (!am || !EXPR.test(am[2])) return undefined
      if (am[1].toLowerCase() === c.column.toLowerCase()) return undefined
      for (const w of am[2].match(/[a-z_][a-z0-9_]*/gi) ?? []) if (NOT_COLUMNS.has(w.toLowerCase())) return undefined
    }
    return ok(m[1], c, 'write')
  }
  return undefined
}

/** `a = x, b = (y, z)` split at its top-level commas (undefined parts when parentheses do not balance). */
function splitTop(s: string): string[] {
  const out: string[] = []
  let depth = 0
  let at = 0
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '(') depth++
    else if (s[i] === ')') depth--
    if (depth < 0) return ['(']
    if (s[i] === ',' && depth === 0) {
      out.push(s.slice(at, i))
      at = i + 1
    }
  }
  if (depth !== 0) return ['(']
  out.push(s.slice(at))
  return out
}

/** A relation lock that changes or locks rows (not a sequence: those are seen at once, footprint.ts). */
const changes = (l: Seen['locks'][number]) => l[0] === 'relation' && l[2] && (l[1] === 'RowExclusiveLock' || l[1] === 'RowShareLock') && l[4] !== 'S'

/** A schema-qualified relation name's own name (after the schema's dot: plain tables' names hold no '#' or quotes). */
const nameOf = (rel: string) => rel.slice(rel.lastIndexOf('.') + 1)

/** The table a row step of `sql` reaches, resolved against the session's locks after it, with its row step. */
export function rowTarget(facts: Facts | undefined, sql: string, before: Seen, after: Seen): { table: string; step: RowStep; indexes: string[] } | undefined {
  if (!facts) return undefined
  const step = rowStep(sql)
  if (!step) return undefined
  // The relations of that name the backend holds locks on: exactly one, a plain table keyed by the step's column.
  const named = new Set(after.locks.filter((l) => l[0] === 'relation' && l[3] && nameOf(l[3]) === step.table).map((l) => l[3]))
  if (named.size !== 1) return undefined
  const [table] = named
  const plain = facts.plain.get(table)
  if (!plain || plain.key !== step.column || table.includes('"')) return undefined
  // The statement reached no other relation that it changed or locked rows of for the first time.
  const had = new Set(before.locks.filter(changes).map((l) => l[3]))
  for (const l of after.locks) if (changes(l) && !had.has(l[3]) && l[3] !== table && !plain.indexes.includes(l[3])) return undefined
  return { table, step, indexes: plain.indexes }
}

/** The footprint `fp` of a step with its table's resources narrowed to row `key` (see the top of this file). */
export function narrow(fp: Exclude<Touched, 'all'>, t: { table: string; step: RowStep; indexes: string[] }): Exclude<Touched, 'all'> {
  const mine = new Set([t.table, ...t.indexes].flatMap((r) => [`rel:${r}`, `rows:${r}`]))
  const reads = fp.reads.filter((r) => !mine.has(r))
  const writes = fp.writes.filter((r) => !mine.has(r))
  // A write of the whole table (the step ended its transaction, or SSI) is not narrowed here: kept as it is.
  if (fp.writes.includes(`rel:${t.table}`)) return fp
  reads.push(`rel:${t.table}#${t.step.key}`)
  if (t.step.kind !== 'read') writes.push(`rows:${t.table}#${t.step.key}`)
  return { reads, writes }
}

/**
 * What each open transaction of a trial changed, by table: the rows its steps told, or 'whole'. `blind`: a step was
 * seen without its backend's state, or on a backend two sessions share: no commit is narrowed from then on.
 */
export class RowLedger {
  private readonly tx = new Map<string, Map<string, Set<string> | 'whole'>>()
  blind = false

  /**
   * A step of transaction `tx` (pid:start) ran, and left its backend `after` (undefined: not seen); `told`: its row
   * target, when its footprint was narrowed to it; `unknown`: its footprint was 'all' (it may go on changing rows
   * after this moment: it waits), so the transaction's end is not narrowed.
   */
  step(tx: string, after: Seen | undefined, told: { table: string; step: RowStep; indexes: string[] } | undefined, unknown: boolean): void {
    let m = this.tx.get(tx)
    if (!m) this.tx.set(tx, (m = new Map()))
    if (unknown || !after) {
      m.set('', 'whole')
      return
    }
    if (told) {
      if (told.step.kind === 'read') return
      const had = m.get(told.table)
      if (had === 'whole') return
      m.set(told.table, (had ?? new Set()).add(told.step.key))
      return
    }
    // Not told: every relation its transaction holds a row-change lock on may have been changed by it.
    for (const l of after.locks) if (changes(l)) m.set(l[3], 'whole')
  }

  /** The footprint `fp` of transaction `tx`'s end, its changed tables narrowed to the rows its steps told. */
  end(tx: string, fp: Touched, facts: Facts | undefined): Touched {
    const m = this.tx.get(tx)
    this.tx.delete(tx)
    if (fp === 'all' || this.blind || !m || m.get('') === 'whole' || !facts) return fp
    let writes = [...fp.writes]
    let reads = [...fp.reads]
    for (const [table, rows] of m) {
      const plain = facts.plain.get(table)
      if (rows === 'whole' || !plain || !writes.includes(`rel:${table}`)) continue
      // Every relation of the table whose locks the transaction holds: none may have been changed as a whole.
      if ([table, ...plain.indexes].some((r) => m.get(r) === 'whole')) continue
      const mine = new Set([table, ...plain.indexes].map((r) => `rel:${r}`))
      writes = writes.filter((r) => !mine.has(r))
      reads = reads.filter((r) => !mine.has(r))
      for (const k of rows) writes.push(`rel:${table}#${k}`)
    }
    return { reads, writes }
  }
}
