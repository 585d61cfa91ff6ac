// The results table (one row per session), the invariant, the verdict against the documented outcome.
import type { Summary } from '../judge/index.js'
import type { SessionReport, TrialFacts } from '../engine/types.js'
import type { Level, Verdict } from '../scenario.js'
import { c, outcomeColor, verdictColor } from './color.js'
import { columns, hang, joinFit, pad, truncate, widest, width, wrap } from './width.js'
export { columns } from './width.js'

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
 */
export function fitWidths(natural: readonly number[], cols: readonly Col[], budget: number): number[] {
  const w = [...natural]
  const min = natural.map((n, i) => Math.min(n, cols[i]?.shrink === 0 ? n : (cols[i]?.min ?? 8)))
  const total = () => w.reduce((a, x) => a + x, 0)
  const groups = [...new Set(cols.map((c) => c?.shrink ?? 1).concat(natural.map(() => 1)))].filter((g) => g > 0).sort((a, b) => b - a)
  for (const g of groups) {
    while (total() > budget) {
      let at = -1
      for (let i = 0; i < w.length; i++) if ((cols[i]?.shrink ?? 1) === g && w[i] > min[i] && (at < 0 || w[i] > w[at])) at = i
      if (at < 0) break
      w[at]--
    }
  }
  return w
}

/**
 * A boxed table that fits `width` columns (default: the terminal's, or 80): cells wrap at spaces, or are cut with
 * … in columns marked 'cut'. A header rule separates the header from the rows. A row may be a single cell
 * spanning every column (a group heading).
 */
export function fitTable(head: readonly string[], rows: readonly (readonly CellValue[])[], cols: readonly Col[] = [], w = columns()): string {
  const text = (v: CellValue) => (v === null || v === undefined ? '' : typeof v === 'object' ? v.content : String(v))
  const isSpan = (r: readonly CellValue[]) => r.length === 1 && r[0] !== null && typeof r[0] === 'object'
  const keep = head.map((_, i) => !(cols[i]?.dropIfEmpty && rows.every((r) => isSpan(r) || !text(r[i]))))
  const heads = head.filter((_, i) => keep[i])
  const specs: Col[] = head.map((_, i) => cols[i] ?? {}).filter((_, i) => keep[i])
  const body = rows.map((r) => (isSpan(r) ? r : r.filter((_, i) => keep[i])))
  const n = heads.length
  const natural = heads.map((h, i) => Math.max(widest(h), ...body.filter((r) => r.length === n).map((r) => widest(text(r[i])))))
  const widths = fitWidths(natural, specs, w - (3 * n + 1))
  const fit = (v: string, i: number) =>
    v
      .split('\n')
      .flatMap((l, k) => {
        const o = specs[i]?.overflow
        return (typeof o === 'function' ? o(k) : o) === 'cut' ? [truncate(l, widths[i])] : wrap(l, widths[i])
      })
      .join('\n')
  const span = widths.reduce((a, x) => a + x, 0) + 3 * (n - 1)
  const lines = [heads.map((h, i) => fit(c.bold(h), i))]
  for (const r of body) {
    if (isSpan(r) && n > 1) {
      const v = r[0] as { content: string; overflow?: 'wrap' | 'cut' }
      lines.push([(v.overflow === 'cut' ? v.content.split('\n').map((l) => truncate(l, span)) : wrap(v.content, span)).join('\n')])
      continue
    }
    lines.push(r.map((v, i) => fit(text(v), i)))
  }
  return drawTable(lines, widths)
}

/**
 * Draws the fitted cells in a box (race's own renderer; the layout cli-table3 drew for race, character for
 * character): padding of one space, a rule under the header row and none between the other rows, a row of one
 * cell spanning every column. `widths` are the columns' text widths (without padding).
 */
function drawTable(rows: readonly (readonly string[])[], widths: readonly number[]): string {
  const n = widths.length
  const out: string[] = []
  // The width of cell i of a row (a row of one cell spans every column: their widths and the rules between).
  const cellWidths = (row: readonly string[]) => (row.length === 1 && n > 1 ? [widths.reduce((a, x) => a + x + 3, -3)] : widths)
  rows.forEach((row, y) => {
    const ws = cellWidths(row)
    if (y === 0) out.push('┌' + widths.map((w) => '─'.repeat(w + 2)).join('┬') + '┐')
    // Under the header: the columns of the row below meet it (a spanning row closes them with ┴).
    if (y === 1) out.push('├' + widths.map((w) => '─'.repeat(w + 2)).join(ws.length === 1 ? '┴' : '┼') + '┤')
    const cells = row.map((text) => colorizeLines(text.split('\n')))
    const height = Math.max(1, ...cells.map((l) => l.length))
    for (let k = 0; k < height; k++) {
      out.push('│' + cells.map((l, i) => (k < l.length ? ` ${fill(l[k], ws[i])} ` : ' '.repeat(ws[i] + 2))).join('│') + '│')
    }
    if (y === rows.length - 1) out.push('└' + ws.map((w) => '─'.repeat(w + 2)).join('┴') + '┘')
  })
  return out.join('\n')
}

// Each line of a cell opens the styles the line before it left open and closes the ones it leaves open, so that
// a style never runs into the border (bold, italic, underline, inverse, strikethrough, a colour, a background).
const STYLE_CODES: Record<string, [string, boolean]> = {
  '\u001b[1m': ['bold', true], '\u001b[22m': ['bold', false],
  '\u001b[3m': ['italics', true], '\u001b[23m': ['italics', false],
  '\u001b[4m': ['underline', true], '\u001b[24m': ['underline', false],
  '\u001b[7m': ['inverse', true], '\u001b[27m': ['inverse', false],
  '\u001b[9m': ['strikethrough', true], '\u001b[29m': ['strikethrough', false],
}
const STYLE_ON: Record<string, string> = { bold: '\u001b[1m', italics: '\u001b[3m', underline: '\u001b[4m', inverse: '\u001b[7m', strikethrough: '\u001b[9m' }
const STYLE_OFF: Record<string, string> = { bold: '\u001b[22m', italics: '\u001b[23m', underline: '\u001b[24m', inverse: '\u001b[27m', strikethrough: '\u001b[29m' }

interface StyleState {
  on: Record<string, boolean>
  fg?: string
  bg?: string
}

// eslint-disable-next-line no-control-regex
const CODE = /\u001b\[((?:\d*;){0,5}\d*)m/g

/** The state after one colour code. */
function apply(state: StyleState, code: string, params: string): void {
  const n = params ? Number.parseInt(params.split(';')[0], 10) : 0
  if ((n >= 30 && n <= 39) || (n >= 90 && n <= 97)) state.fg = code
  else if ((n >= 40 && n <= 49) || (n >= 100 && n <= 107)) state.bg = code
  else if (n === 0) {
    state.on = {}
    state.fg = state.bg = undefined
  } else if (STYLE_CODES[code]) state.on[STYLE_CODES[code][0]] = STYLE_CODES[code][1]
}

function readState(line: string): StyleState {
  const state: StyleState = { on: {} }
  for (const m of line.matchAll(CODE)) apply(state, m[0], m[1])
  return state
}

/** Closes what `state` leaves open, at the end of `line`. */
function unwind(state: StyleState, line: string): string {
  let out = line
  for (const k of Object.keys(state.on)) if (state.on[k]) out += STYLE_OFF[k]
  if (state.bg && state.bg !== '\u001b[49m') out += '\u001b[49m'
  if (state.fg && state.fg !== '\u001b[39m') out += '\u001b[39m'
  return out
}

/** A line made exactly `w` columns wide: padded with spaces, or (wider) cut. */
function fill(line: string, w: number): string {
  const n = width(line)
  return n > w ? pad(cut(line, w), w) : line + ' '.repeat(w - n)
}

/**
 * A line cut to `w` columns ending in …, when it is wider (never for a fitted cell, whose lines already fit):
 * the text up to w - 1 columns with the codes inside it, its open styles closed.
 */
function cut(line: string, w: number): string {
  if (width(line) <= w) return line
  const room = w - 1
  const texts = line.split(/\u001b\[(?:\d*;){0,5}\d*m/)
  const codes = [...line.matchAll(CODE)]
  const state: StyleState = { on: {} }
  let out = ''
  let used = 0
  for (let i = 0; used < room; i++) {
    let t = texts[i] ?? ''
    if (used + width(t) > room) {
      while (width(t) > room - used) t = t.slice(0, -1)
    }
    out += t
    used += width(t)
    if (used < room) {
      const m = codes[i]
      if (!m) break
      out += m[0]
      apply(state, m[0], m[1])
    }
  }
  return unwind(state, out) + '…'
}

function colorizeLines(lines: readonly string[]): string[] {
  let state: StyleState = { on: {} }
  return lines.map((text) => {
    let line = text
    for (const k of Object.keys(state.on)) if (state.on[k]) line = STYLE_ON[k] + line
    if (state.bg && state.bg !== '\u001b[49m') line = state.bg + line
    if (state.fg && state.fg !== '\u001b[39m') line = state.fg + line
    state = readState(line)
    return unwind(state, line)
  })
}

/** A table built row by row and fitted to the screen when printed (`widths` is ignored: kept for old callers). */
export function plainTable(head: string[], _widths?: (number | null)[], cols: Col[] = []): { push(...rows: CellValue[][]): number; toString(): string } {
  const rows: CellValue[][] = []
  return { push: (...r: CellValue[][]) => rows.push(...r), toString: () => fitTable(head, rows, cols) }
}

export function outcomeText(s: SessionReport): string {
  if (s.outcome === 'rejected') return `rejected: ${s.reason}`
  if (s.outcome === 'failed') return `failed in ${s.step}${s.sqlstate ? '' : `: ${s.reason ?? ''}`}`
  if (s.outcome === 'lost') return `lost in ${s.step}`
  if (s.outcome === 'timeout') return `timeout in ${s.step}`
  return s.retries ? `committed after ${s.retries} retr${s.retries === 1 ? 'y' : 'ies'}` : 'committed'
}

export function sessionsTable(t: TrialFacts, w = columns()): string {
  // Through a pooler a session is a client with no backend of its own: the column lists the backends it ran on.
  const pooled = t.sessions.some((s) => s.steps)
  const rows = t.sessions.map((s) => {
    const state = s.sqlstate ? `${s.sqlstate} ${s.condition ?? ''}`.trim() : s.errors.length ? `(${s.errors.join(', ')} retried)` : ''
    return [s.name, s.steps ? backendsOf(s).join(', ') || '?' : s.pid, outcomeColor(outcomeText(s)), state, fmtMs(s.waitedMs), fmtMs(s.ms)]
  })
  // The outcome is what differs between sessions: it wraps last; sqlstate goes when nobody has one.
  const cols: Col[] = [{ shrink: 0 }, pooled ? { min: 8 } : { shrink: 0 }, { min: 16 }, { dropIfEmpty: true, min: 5, shrink: 2 }, { shrink: 0 }, { shrink: 0 }]
  return fitTable(['session', pooled ? 'backends' : 'pid', 'outcome', 'sqlstate', 'waited', 'total'], rows, cols, w)
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
export function backendLines(t: TrialFacts, w = columns()): string[] {
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
export function isolationLine(t: TrialFacts, documented: Record<string, Level | null>, w = columns()): string {
  const seen = new Map<string, string[]>()
  for (const s of t.sessions) seen.set(s.isolation ?? '?', [...(seen.get(s.isolation ?? '?') ?? []), s.name])
  const ran = seen.size === 1 ? [...seen.keys()][0] : [...seen].map(([l, who]) => `${who.join(', ')}: ${l}`).join('; ')
  const off = t.sessions.filter((s) => documented[s.name] && s.isolation && s.isolation !== documented[s.name])
  const note = off.length ? c.red(`  documented for ${[...new Set(off.map((s) => documented[s.name]))].join(', ')}: the server overrode it`) : ''
  return hang(`${c.dim('isolation')}  ${ran} ${c.dim('(read from each session)')}${note}`, w, 11).join('\n')
}

export function invariantLine(t: TrialFacts, w = columns()): string {
  const inv = t.invariant
  const state = inv.held === null ? verdictColor('unknown') : verdictColor(inv.held ? 'HELD' : 'VIOLATED')
  return labelled('invariant', `${inv.description}: observed ${inv.observed}  ${state}${inv.error ? `  (${inv.error})` : ''}`, w)
}

export function verdictLine(s: Summary, why?: string, w = columns()): string {
  const m = verdictColor(s.matched ? 'MATCH' : 'DEVIATION')
  return [labelled('verdict', `${verdictColor(s.verdict)}${why ? ` (${why})` : ''}`, w), labelled('expected', `${s.expected.join('; or ')}  ${m}`, w)].join('\n')
}

/** What differs from the documentation, one line each (nothing when it matched). */
export function deviationLines(s: Summary, w = columns()): string[] {
  if (s.matched || !s.deviations.length) return []
  const which = s.trials > 1 ? ` (${s.deviating} of ${s.trials} trials deviate; the first:)` : ''
  return [c.red(`deviation${which}`), ...s.deviations.flatMap((d) => hang(c.red(`  ${d}`), w, 4))]
}

/** For --trials: how often each verdict and each outcome happened. */
export function trialsTable(trials: readonly (TrialFacts & { verdict: Verdict })[], s: Summary, w = columns()): string {
  const outcomes = new Map<string, number>()
  for (const t of trials) {
    for (const r of t.sessions) {
      const key = r.outcome === 'failed' ? `failed ${r.sqlstate ?? ''} ${r.condition ?? ''}`.trim() : r.outcome === 'rejected' ? `rejected: ${r.reason}` : r.outcome
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
    }
  }
  const rows = [...outcomes].sort((a, b) => b[1] - a[1]).map(([k, v]) => [outcomeColor(k), v, (v / trials.length).toFixed(2)])
  const verdicts = Object.entries(s.tally)
    .map(([v, k]) => `${verdictColor(v)} ${k}`)
    .join(', ')
  return `${fitTable(['outcome', 'sessions', 'per trial'], rows, [{}, { shrink: 0 }, { shrink: 0 }], w)}\n${labelled('verdicts', verdicts, w)}\nviolated in ${s.violations}/${s.trials} trials`
}
