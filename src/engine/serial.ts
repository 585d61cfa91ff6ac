// --oracle serial, the pure part: what one trial's outcome is (the rows of the run's tables, each session's ending
// and an application session's return value), and whether it is an outcome some serial order of the sessions gives.
// No database here: engine/oracle.ts runs the serial orders and reads the tables; this compares what it read.
//
// A serial order runs each session's whole transaction (or function) after the one before. Every prefix of every
// order is a serial outcome too: the sessions after it did not run. A session that failed in a trial with an error
// by which the server (or the schema) refuses a transaction (class 40: 40001, 40P01; or a SQLSTATE the race declares
// as its prevention) rolled back: it may stand for a session that did not run, so the trial is compared with the
// serial orders of the others. Everything else must match exactly: a session that committed where the serial order
// rejected it, or returned another value, is no serial outcome.
import { isConcurrencyControl } from '../db/sqlstate.js'
import type { SessionReport } from './types.js'

/** Sessions at most for --oracle serial: all n! orders are run (5! = 120 trials before the race). */
export const SERIAL_MAX_SESSIONS = 5

/** Each table's rows, each row as canonical JSON, sorted. */
export type TableRows = Record<string, string[]>

/** How a session ended, as the oracle compares it: committed, rejected, failed 40001, ...; and what it returned. */
export interface SessionEnding {
  name: string
  ending: string
  /** An application session that committed: its function's return value, as canonical JSON (absent: undefined). */
  returned?: string
}

/** One trial's outcome. */
export interface Outcome {
  tables: TableRows
  sessions: SessionEnding[]
}

/** One serial outcome: the sessions that ran, in their order, and what they left. */
export interface SerialOutcome {
  order: string[]
  tables: TableRows
  /** The endings of the sessions in `order` (the others did not run). */
  sessions: SessionEnding[]
}

/** The oracle's answer for one trial. */
export interface SerialVerdict {
  held: boolean | null
  /** One line: what differs from every serial order, and the closest one's difference. */
  note: string
  /** The closest serial order (its sessions, in order), when violated. */
  closest?: string[]
}

/** Every order of `names` (n! of them), in lexicographic order of positions. */
export function permutations<T>(names: readonly T[]): T[][] {
  if (names.length <= 1) return [[...names]]
  const out: T[][] = []
  names.forEach((x, i) => {
    for (const rest of permutations([...names.slice(0, i), ...names.slice(i + 1)])) out.push([x, ...rest])
  })
  return out
}

/**
 * A value as JSON whose object keys are sorted: two equal rows (or return values) give the same text whatever the
 * driver's key order. bigint as its digits, a Date as ISO, a Buffer as \x hex, undefined as null.
 */
export function canonicalJson(v: unknown): string {
  try {
    return JSON.stringify(canon(v, new Set(), 0)) ?? 'null'
  } catch {
    // A getter that throws: the value's own text.
    return JSON.stringify(String(v))
  }
}

/** Deeper than this, or met again inside itself, a value is written as a mark, not walked (an ORM entity's graph). */
const DEPTH = 16

function canon(v: unknown, seen: Set<object>, depth: number): unknown {
  if (v === undefined || typeof v === 'function' || typeof v === 'symbol') return null
  if (typeof v === 'bigint') return v.toString()
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? String(v) : v.toISOString()
  if (Buffer.isBuffer(v)) return `\\x${v.toString('hex')}`
  if (v instanceof Uint8Array) return `\\x${Buffer.from(v).toString('hex')}`
  if (!v || typeof v !== 'object') return typeof v === 'number' && !Number.isFinite(v) ? String(v) : v
  if (seen.has(v)) return '[circular]'
  if (depth >= DEPTH) return '[deeper]'
  seen.add(v)
  try {
    if (Array.isArray(v)) return v.map((x) => canon(x, seen, depth + 1))
    const o = v as Record<string, unknown>
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, canon(o[k], seen, depth + 1)]),
    )
  } finally {
    seen.delete(v)
  }
}

/**
 * A table's rows, canonical: the columns in `skip` left out (what the server fills in at insert: a sequence, an
 * identity, now()), each row as canonical JSON with `user` (the trial's user uuid) written :user, sorted.
 */
export function canonicalRows(rows: readonly Record<string, unknown>[], skip: ReadonlySet<string>, user?: string): string[] {
  return rows
    .map((r) => {
      const text = canonicalJson(Object.fromEntries(Object.entries(r).filter(([k]) => !skip.has(k))))
      return user ? text.split(user).join(':user') : text
    })
    .sort()
}

/** A session's ending as the oracle compares it. */
export function endingOf(s: Pick<SessionReport, 'outcome' | 'sqlstate'>): string {
  return s.outcome === 'failed' && s.sqlstate ? `failed ${s.sqlstate}` : s.outcome
}

/**
 * A session that may stand for one that did not run: it failed with an error by which the server's concurrency
 * control rolls a transaction back (class 40, 55P03, InnoDB's lock wait timeout) or with a SQLSTATE the race declares
 * (its prevention, a spec's `prevented by`, a documented outcome's code).
 */
export function mayBeAbsent(s: Pick<SessionReport, 'outcome' | 'sqlstate' | 'thrown'>, declared: Iterable<string> = []): boolean {
  if (s.outcome !== 'failed' || !s.sqlstate || s.thrown) return false
  if (isConcurrencyControl(s.sqlstate)) return true
  const code = s.sqlstate.slice(0, 5)
  return [...declared].some((p) => p === s.sqlstate || p.slice(0, 5) === code)
}

/** Whether a session's ending (and return value) is the same. */
function sameEnding(a: SessionEnding, b: SessionEnding): boolean {
  return a.ending === b.ending && (a.returned ?? '') === (b.returned ?? '')
}

function sameRows(a: readonly string[] = [], b: readonly string[] = []): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** What differs between a trial and one serial outcome: tables by name, sessions by name. */
function differences(trial: Outcome, s: SerialOutcome, absent: (name: string) => boolean): { tables: string[]; sessions: string[] } {
  const names = [...new Set([...Object.keys(trial.tables), ...Object.keys(s.tables)])].sort()
  const tables = names.filter((t) => !sameRows(trial.tables[t], s.tables[t]))
  const sessions = trial.sessions
    .filter((x) => {
      const ran = s.sessions.find((y) => y.name === x.name)
      return ran ? !sameEnding(x, ran) : !absent(x.name)
    })
    .map((x) => x.name)
  return { tables, sessions }
}

/** Rows of `a` not in `b` (as multisets). */
function minus(a: readonly string[] = [], b: readonly string[] = []): string[] {
  const left = [...b]
  return a.filter((x) => {
    const i = left.indexOf(x)
    if (i < 0) return true
    left.splice(i, 1)
    return false
  })
}

function clip(text: string, max = 80): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text
}

function rowsText(rows: string[]): string {
  const shown = rows.slice(0, 2).map((r) => clip(r)).join(', ')
  return rows.length > 2 ? `${shown} and ${rows.length - 2} more` : shown
}

function endingText(e: SessionEnding | undefined): string {
  if (!e) return 'did not run'
  return e.returned !== undefined ? `${e.ending}, returned ${clip(e.returned, 40)}` : e.ending
}

/** The serial order's name: its sessions in order (s1 then s2), or none ran. */
export function orderText(order: readonly string[]): string {
  return order.length > 1 ? order.join(' then ') : order.length ? `${order[0]} alone` : 'none of the sessions'
}

/**
 * Judges one trial against the serial outcomes: held when one of them is the trial's (tables equal; each session
 * that ran in it ended the same way and returned the same; each other session may be absent), else violated, naming
 * what differs from every serial outcome and the closest one's difference (one line).
 */
export function judgeSerial(trial: Outcome, serial: readonly SerialOutcome[], absent: (name: string) => boolean): SerialVerdict {
  if (!serial.length) return { held: null, note: 'no serial order was run' }
  // The serial outcomes in which the trial's sessions line up (every session of the trial that did not run in it
  // may be absent): what differs is named among these, and the closest is one of them where there is one.
  const all = serial.map((s) => ({ s, d: differences(trial, s, absent) }))
  const held = all.find((x) => !x.d.tables.length && !x.d.sessions.length)
  if (held) return { held: true, note: `as ${orderText(held.s.order)}, serially` }
  const aligned = all.filter((x) => trial.sessions.every((t) => x.s.order.includes(t.name) || absent(t.name)))
  const size = (x: (typeof all)[number]) => x.d.tables.length + x.d.sessions.length
  // The closest: the fewest differences, one in which the sessions line up first.
  const best = [...aligned, ...all].reduce((a, x) => (size(x) < size(a) ? x : a))
  // Named: the tables and sessions that differ from every serial outcome; where none does alone, those that differ
  // from every one in which the sessions line up (else it is their combination).
  const namedAmong = (diffs: typeof all) => {
    const always = (kind: 'tables' | 'sessions', name: string) => diffs.every((x) => x.d[kind].includes(name))
    return [
      ...[...new Set(diffs.flatMap((x) => x.d.tables))].sort().filter((t) => always('tables', t)).map((t) => `table ${t}`),
      ...trial.sessions.filter((x) => always('sessions', x.name)).map((x) => `${x.name} (${endingText(x)})`),
    ]
  }
  const first = namedAmong(all)
  const named = first.length || !aligned.length ? first : namedAmong(aligned)
  const { s, d } = best
  const parts = [
    ...d.tables.map((t) => {
      const extra = minus(trial.tables[t], s.tables[t])
      const missing = minus(s.tables[t], trial.tables[t])
      return `${t} has ${extra.length ? rowsText(extra) : 'no other row'}${missing.length ? ` where it had ${rowsText(missing)}` : ' besides its rows'}`
    }),
    ...d.sessions.map((name) => `${name} ${endingText(trial.sessions.find((x) => x.name === name))} where it ${(() => {
      const e = s.sessions.find((x) => x.name === name)
      return e ? `was ${endingText(e)}` : 'did not run'
    })()}`),
  ]
  const head = named.length ? `${named.join(', ')} ${named.length > 1 ? 'differ' : 'differs'} from every serial order` : 'no serial order gives this together'
  return { held: false, note: `${head} (closest, ${orderText(s.order)}: ${parts.join('; ')})`, closest: [...s.order] }
}

/**
 * The serial outcomes one serial run gives: the run of `order` and each of its prefixes (the later sessions did not
 * run). `prefixTables[k]`: the tables when the first k sessions had ended (k = 0 .. n; the last is the trial's end).
 */
export function prefixOutcomes(order: readonly string[], prefixTables: readonly (TableRows | undefined)[], endings: readonly SessionEnding[]): SerialOutcome[] {
  const out: SerialOutcome[] = []
  prefixTables.forEach((tables, k) => {
    if (!tables) return
    const ran = order.slice(0, k)
    out.push({ order: ran, tables, sessions: ran.map((name) => endings.find((e) => e.name === name)!).filter(Boolean) })
  })
  return out
}

/** The serial outcomes without repeats (the same prefix reached by several orders). */
export function distinct(outcomes: readonly SerialOutcome[]): SerialOutcome[] {
  const seen = new Set<string>()
  return outcomes.filter((o) => {
    const key = JSON.stringify([[...o.order].sort(), o.tables, [...o.sessions].sort((a, b) => a.name.localeCompare(b.name))])
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
