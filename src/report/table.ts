// The results table (one row per session), the invariant, the verdict against the documented outcome.
import type { Summary } from '../judge/index.js'
import type { SessionReport, TrialFacts } from '../engine/types.js'
import type { Verdict } from '../scenario.js'
import type { Level } from '../levels.js'
import Table from 'cli-table3'
import { outcomeColor, verdictColor, type Style } from './color.js'
import { columns, hang, joinFit, strip, truncate, widest, width, wrap } from './width.js'

/** How a column gives way when the table is wider than the screen. */
export interface Col {
  /** Columns with a higher value give way first (default 1); 0 never narrows (an id, a number). */
  shrink?: number
  /** The narrowest it may become (default: 8, or its natural width if smaller). */
  min?: number
  /**
   * 'wrap' (default) breaks the text into lines; 'cut' ends it with … (for what matters least); or per line of
   * the cell's text (e.g. wrap the first line, cut the second).
   */
  overflow?: 'wrap' | 'cut' | ((line: number) => 'wrap' | 'cut')
  /** Leave the column out when every cell in it is empty (e.g. sqlstate when nothing failed). */
  dropIfEmpty?: boolean
}


export type CellValue = string | number | bigint | null | undefined | { content: string; colSpan: number; overflow?: 'wrap' | 'cut' }

/**
 * Column widths that fit `budget` (the width minus borders and padding): natural widths when they fit; else the
 * columns that give way first narrow, the widest of them a column at a time, down to their minimum, then the next.
 * `words` (each column's longest word) is a floor kept first: no column breaks a word (a SQLSTATE, a header) while
 * another column can still wrap at a space; only when every column is down to its longest word do words break.
 */
export function fitWidths(natural: readonly number[], cols: readonly Col[], budget: number, words: readonly number[] = []): number[] {
  const w = [...natural]
  const min = natural.map((n, i) => Math.min(n, cols[i]?.shrink === 0 ? n : (cols[i]?.min ?? 8)))
  const whole = min.map((m, i) => Math.min(natural[i], Math.max(m, words[i] ?? 0)))
  const total = () => w.reduce((a, x) => a + x, 0)
  const groups = [...new Set(cols.map((c) => c?.shrink ?? 1).concat(natural.map(() => 1)))].filter((g) => g > 0).sort((a, b) => b - a)
  for (const floor of [whole, min]) {
    for (const g of groups) {
      while (total() > budget) {
        let at = -1
        for (let i = 0; i < w.length; i++) if ((cols[i]?.shrink ?? 1) === g && w[i] > floor[i] && (at < 0 || w[i] > w[at])) at = i
        if (at < 0) break
        w[at]--
      }
    }
  }
  return w
}

/** The widest word (text between spaces) of a cell's lines. */
function longestWord(s: string): number {
  return Math.max(0, ...strip(s).split(/[ \n]+/).map(width))
}

/**
 * A boxed table that fits `width` columns (default: the terminal's, or 80): cells wrap at spaces, or are cut with
 * … in columns marked 'cut'. A header rule separates the header from the rows. A row may be a single cell
 * spanning every column (a group heading).
 */
export function fitTable(c: Style, head: readonly string[], rows: readonly (readonly CellValue[])[], cols: readonly Col[] = [], w = columns()): string {
  const text = (v: CellValue) => (v === null || v === undefined ? '' : typeof v === 'object' ? v.content : String(v))
  const isSpan = (r: readonly CellValue[]) => r.length === 1 && r[0] !== null && typeof r[0] === 'object'
  const keep = head.map((_, i) => !(cols[i]?.dropIfEmpty && rows.every((r) => isSpan(r) || !text(r[i]))))
  const heads = head.filter((_, i) => keep[i])
  const specs: Col[] = head.map((_, i) => cols[i] ?? {}).filter((_, i) => keep[i])
  const body = rows.map((r) => (isSpan(r) ? r : r.filter((_, i) => keep[i])))
  const n = heads.length
  const natural = heads.map((h, i) => Math.max(widest(h), ...body.filter((r) => r.length === n).map((r) => widest(text(r[i])))))
  // A column whose text is cut (…) has no words to keep whole.
  const cuts = (i: number) => specs[i]?.overflow === 'cut'
  const words = heads.map((h, i) => (cuts(i) ? 0 : Math.max(longestWord(h), ...body.filter((r) => r.length === n).map((r) => longestWord(text(r[i]))))))
  const widths = fitWidths(natural, specs, w - (3 * n + 1), words)
  const fit = (v: string, i: number) =>
    v
      .split('\n')
      .flatMap((l, k) => {
        const o = specs[i]?.overflow
        return (typeof o === 'function' ? o(k) : o) === 'cut' ? [truncate(l, widths[i])] : wrap(l, widths[i])
      })
      .join('\n')
  const span = widths.reduce((a, x) => a + x, 0) + 3 * (n - 1)
  // race decided every cell's lines; cli-table3 draws them (padding of one space, a rule under the header only).
  const table = new Table({
    head: heads.map((h, i) => fit(c.bold(h), i)),
    chars: CHARS,
    style: { head: [], border: [], 'padding-left': 1, 'padding-right': 1, compact: true },
    colWidths: widths.map((x) => x + 2),
  })
  for (const r of body) {
    if (isSpan(r) && n > 1) {
      const v = r[0] as { content: string; overflow?: 'wrap' | 'cut' }
      table.push([{ content: (v.overflow === 'cut' ? v.content.split('\n').map((l) => truncate(l, span)) : wrap(v.content, span)).join('\n'), colSpan: n }])
      continue
    }
    table.push(r.map((v, i) => fit(text(v), i)))
  }
  return table.toString()
}

/** Rules and borders, no colour in them; a rule under the header, so it reads as one without colour too. */
const CHARS = {
  top: '─', 'top-mid': '┬', 'top-left': '┌', 'top-right': '┐',
  bottom: '─', 'bottom-mid': '┴', 'bottom-left': '└', 'bottom-right': '┘',
  left: '│', 'left-mid': '├', mid: '─', 'mid-mid': '┼', right: '│', 'right-mid': '┤', middle: '│',
}

/** A table built row by row and fitted to the screen when printed (`widths` is ignored: kept for old callers). */
export function plainTable(c: Style, head: string[], _widths?: (number | null)[], cols: Col[] = []): { push(...rows: CellValue[][]): number; toString(): string } {
  const rows: CellValue[][] = []
  return { push: (...r: CellValue[][]) => rows.push(...r), toString: () => fitTable(c, head, rows, cols) }
}

export function outcomeText(s: SessionReport): string {
  if (s.outcome === 'rejected') return `rejected: ${s.reason}`
  if (s.outcome === 'failed') return `failed in ${s.step}${s.sqlstate ? '' : `: ${s.reason ?? ''}`}`
  if (s.outcome === 'lost') return `lost in ${s.step}`
  if (s.outcome === 'timeout') return `timeout in ${s.step}`
  return s.retries ? `committed after ${s.retries} retr${s.retries === 1 ? 'y' : 'ies'}` : 'committed'
}

export function sessionsTable(c: Style, t: TrialFacts, w = columns()): string {
  // Through a pooler a session is a client with no backend of its own: the column lists the backends it ran on.
  const pooled = t.sessions.some((s) => s.steps)
  const rows = t.sessions.map((s) => {
    const state = s.sqlstate ? `${s.sqlstate} ${s.condition ?? ''}`.trim() : s.errors.length ? `(${s.errors.join(', ')} ${s.retries ? 'retried' : 'caught'})` : ''
    return [s.name, s.steps ? backendsOf(s).join(', ') || '?' : s.pid, outcomeColor(c, outcomeText(s)), state, fmtMs(s.waitedMs), fmtMs(s.ms)]
  })
  // The outcome is what differs between sessions: it wraps last; sqlstate goes when nobody has one.
  const cols: Col[] = [{ shrink: 0 }, pooled ? { min: 8 } : { shrink: 0 }, { min: 16 }, { dropIfEmpty: true, min: 5, shrink: 2 }, { shrink: 0 }, { shrink: 0 }]
  return fitTable(c, ['session', pooled ? 'backends' : 'pid', 'outcome', 'sqlstate', 'waited', 'total'], rows, cols, w)
}

/** The distinct backends a pooled session's steps ran on, in order. */
function backendsOf(s: SessionReport): number[] {
  return [...new Set((s.steps ?? []).map((x) => x.backend).filter((b): b is number => b !== null))]
}

/**
 * Through a pooler: which server backend ran each client's steps, and whose backend it was before ("s2 ran on
 * backend 4711, the one s1 used"). Steps race did not see on a backend (autocommit statements, which the pooler
 * lends a server connection only while they run) are counted, never guessed.
 */
export function backendLines(c: Style, t: TrialFacts, w = columns()): string[] {
  if (!t.sessions.some((s) => s.steps)) return []
  const firstUser = new Map<number, string>()
  const width = Math.max(...t.sessions.map((s) => s.name.length))
  const lines: string[] = []
  for (const s of t.sessions) {
    const steps = s.steps ?? []
    const parts: string[] = []
    for (const b of backendsOf(s)) {
      const which = steps.filter((x) => x.backend === b).map((x) => x.step)
      const prior = firstUser.get(b)
      parts.push(`${b}${prior ? `, the one ${prior} used` : ''}: ${which.join(', ')}`)
      if (!prior) firstUser.set(b, s.name)
    }
    const unseen = steps.filter((x) => x.backend === null).map((x) => x.step)
    if (unseen.length) parts.push(`not seen: ${unseen.join(', ')} (autocommit: lent a server connection only while it ran)`)
    if (!steps.length) parts.push('no statement sent')
    // One line per session; parts that do not fit go on lines of their own, under the first part.
    const lead = `${lines.length ? ' '.repeat(11) : c.dim('backends') + '   '}${s.name.padEnd(width)}  `
    lines.push(...joinFit([lead + parts[0], ...parts.slice(1)], ' · ', w, 11 + width + 2))
  }
  return lines
}

export function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`
}

/** A labelled line ("verdict    ..."): the label padded to 11, the text wrapped under itself. */
export function labelled(label: string, text: string, w = columns()): string {
  return hang(`${label.padEnd(9)}  ${text}`, w, 11).join('\n')
}

/**
 * The levels the sessions really ran at (SHOW transaction_isolation, read in each session), and a warning
 * when the server gave a session another level than the scenario is documented for.
 */
export function isolationLine(c: Style, t: TrialFacts, documented: Record<string, Level | null>, w = columns(), asked?: string): string {
  const seen = new Map<string, string[]>()
  for (const s of t.sessions) seen.set(s.isolation ?? '?', [...(seen.get(s.isolation ?? '?') ?? []), s.name])
  const ran = seen.size === 1 ? [...seen.keys()][0] : [...seen].map(([l, who]) => `${who.join(', ')}: ${l}`).join('; ')
  const off = t.sessions.filter((s) => documented[s.name] && s.isolation && s.isolation !== documented[s.name])
  // --isolation set on an application race's or a spec's connections: a session whose own code named another level.
  const own = asked ? t.sessions.filter((s) => s.isolation && s.isolation !== '?' && s.isolation !== asked).map((s) => s.name) : []
  const note =
    (off.length ? c.red(`  documented for ${[...new Set(off.map((s) => documented[s.name]))].join(', ')}: the server overrode it`) : '') +
    (own.length ? c.yellow(`  ${own.join(', ')}: not ${asked}, as --isolation set on the connection: the code names its own level (not overridden)`) : '')
  return hang(`${c.dim('isolation')}  ${ran} ${c.dim('(read from each session)')}${note}`, w, 11).join('\n')
}

export function invariantLine(c: Style, t: TrialFacts, w = columns()): string {
  const inv = t.invariant
  const state = inv.held === null ? verdictColor(c, 'unknown') : verdictColor(c, inv.held ? 'HELD' : 'VIOLATED')
  return labelled('invariant', `${inv.description}: observed ${inv.observed}  ${state}${inv.error ? `  (${inv.error})` : ''}`, w)
}

export function verdictLine(c: Style, s: Summary, why?: string, w = columns()): string {
  const m = verdictColor(c, s.matched ? 'MATCH' : 'DEVIATION')
  return [labelled('verdict', `${verdictColor(c, s.verdict)}${why ? ` (${why})` : ''}`, w), labelled('expected', `${s.expected.join('; or ')}  ${m}`, w)].join('\n')
}

/** What differs from the documentation, one line each (nothing when it matched). */
export function deviationLines(c: Style, s: Summary, w = columns()): string[] {
  if (s.matched || !s.deviations.length) return []
  const which = s.trials > 1 ? ` (${s.deviating} of ${s.trials} trials deviate; the first:)` : ''
  return [c.red(`deviation${which}`), ...s.deviations.flatMap((d) => hang(c.red(`  ${d}`), w, 4))]
}

/** For --trials: how often each verdict and each outcome happened. */
export function trialsTable(c: Style, trials: readonly (TrialFacts & { verdict: Verdict })[], s: Summary, w = columns()): string {
  const outcomes = new Map<string, number>()
  for (const t of trials) {
    for (const r of t.sessions) {
      const key = r.outcome === 'failed' ? `failed ${r.sqlstate ?? ''} ${r.condition ?? ''}`.trim() : r.outcome === 'rejected' ? `rejected: ${r.reason}` : r.outcome
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
    }
  }
  const rows = [...outcomes].sort((a, b) => b[1] - a[1]).map(([k, v]) => [outcomeColor(c, k), v, (v / trials.length).toFixed(2)])
  const verdicts = Object.entries(s.tally)
    .map(([v, k]) => `${verdictColor(c, v)} ${k}`)
    .join(', ')
  return `${fitTable(c, ['outcome', 'sessions', 'per trial'], rows, [{}, { shrink: 0 }, { shrink: 0 }], w)}\n${labelled('verdicts', verdicts, w)}\nviolated in ${s.violations}/${s.trials} trials`
}
