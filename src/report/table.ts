// The results table (one row per session), the invariant, the verdict against the expectation.
import Table from 'cli-table3'
import type { Summary } from '../judge/index.js'
import type { SessionReport, TrialResult } from '../engine/types.js'
import { c, outcomeColor, verdictColor } from './color.js'

/** Borders without colour codes; `widths` (null = natural) wraps long cells at word boundaries. */
export function plainTable(head: string[], widths?: (number | null)[]): Table.Table {
  return new Table({
    head: head.map((h) => c.bold(h)),
    style: { head: [], border: [], 'padding-left': 1, 'padding-right': 1 },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    ...(widths ? { colWidths: widths, wordWrap: true } : {}),
  })
}

export function outcomeText(s: SessionReport): string {
  if (s.outcome === 'rejected') return `rejected: ${s.reason}`
  if (s.outcome === 'failed') return `failed in ${s.step}`
  if (s.outcome === 'lost') return `lost in ${s.step}`
  if (s.outcome === 'timeout') return `timeout in ${s.step}`
  return s.retries ? `committed after ${s.retries} retr${s.retries === 1 ? 'y' : 'ies'}` : 'committed'
}

export function sessionsTable(t: TrialResult): string {
  const table = plainTable(['session', 'pid', 'outcome', 'sqlstate', 'waited', 'total'])
  for (const s of t.sessions) {
    const state = s.sqlstate ? `${s.sqlstate} ${s.condition ?? ''}`.trim() : s.errors.length ? `(${s.errors.join(', ')} retried)` : ''
    table.push([s.name, s.pid, outcomeColor(outcomeText(s)), state, `${fmtMs(s.waitedMs)}`, `${fmtMs(s.ms)}`])
  }
  return table.toString()
}

export function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`
}

export function invariantLine(t: TrialResult): string {
  const inv = t.invariant
  const state = inv.held === null ? verdictColor('unknown') : verdictColor(inv.held ? 'HELD' : 'VIOLATED')
  return `invariant  ${inv.description}: observed ${inv.observed}  ${state}${inv.error ? `  (${inv.error})` : ''}`
}

export function verdictLine(s: Summary, why?: string): string {
  const m = verdictColor(s.matched ? 'MATCH' : 'DEVIATION')
  return `verdict    ${verdictColor(s.verdict)}${why ? ` (${why})` : ''}   expected ${s.expected.join(' | ')}  ${m}`
}

/** For --trials: how often each verdict and each outcome happened. */
export function trialsTable(trials: readonly TrialResult[], s: Summary): string {
  const outcomes = new Map<string, number>()
  for (const t of trials) {
    for (const r of t.sessions) {
      const key = r.outcome === 'failed' ? `failed ${r.sqlstate ?? ''} ${r.condition ?? ''}`.trim() : r.outcome === 'rejected' ? `rejected: ${r.reason}` : r.outcome
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
    }
  }
  const table = plainTable(['outcome', 'sessions', 'per trial'])
  for (const [k, v] of [...outcomes].sort((a, b) => b[1] - a[1])) table.push([outcomeColor(k), v, (v / trials.length).toFixed(2)])
  const verdicts = Object.entries(s.tally)
    .map(([v, k]) => `${verdictColor(v)} ${k}`)
    .join(', ')
  return `${table.toString()}\nverdicts   ${verdicts}\nviolated in ${s.violations}/${s.trials} trials`
}
