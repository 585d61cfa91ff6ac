// The results table (one row per session), the invariant, the verdict against the documented outcome.
import Table from 'cli-table3'
import type { Summary } from '../judge/index.js'
import type { SessionReport, TrialFacts } from '../engine/types.js'
import type { Level, Verdict } from '../scenario.js'
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
  if (s.outcome === 'failed') return `failed in ${s.step}${s.sqlstate ? '' : `: ${s.reason ?? ''}`}`
  if (s.outcome === 'lost') return `lost in ${s.step}`
  if (s.outcome === 'timeout') return `timeout in ${s.step}`
  return s.retries ? `committed after ${s.retries} retr${s.retries === 1 ? 'y' : 'ies'}` : 'committed'
}

export function sessionsTable(t: TrialFacts): string {
  // Through a pooler a session is a client with no backend of its own: the column lists the backends it ran on.
  const pooled = t.sessions.some((s) => s.steps)
  const table = plainTable(['session', pooled ? 'backends' : 'pid', 'outcome', 'sqlstate', 'waited', 'total'])
  for (const s of t.sessions) {
    const state = s.sqlstate ? `${s.sqlstate} ${s.condition ?? ''}`.trim() : s.errors.length ? `(${s.errors.join(', ')} retried)` : ''
    table.push([s.name, s.steps ? backendsOf(s).join(', ') || '?' : s.pid, outcomeColor(outcomeText(s)), state, `${fmtMs(s.waitedMs)}`, `${fmtMs(s.ms)}`])
  }
  return table.toString()
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
export function backendLines(t: TrialFacts): string[] {
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
    lines.push(`${lines.length ? ' '.repeat(11) : c.dim('backends') + '   '}${s.name.padEnd(width)}  ${parts.join(' · ')}`)
  }
  return lines
}

export function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`
}

/**
 * The levels the sessions really ran at (SHOW transaction_isolation, read in each session), and a warning
 * when the server gave a session another level than the scenario is documented for.
 */
export function isolationLine(t: TrialFacts, documented: Record<string, Level | null>): string {
  const seen = new Map<string, string[]>()
  for (const s of t.sessions) seen.set(s.isolation ?? '?', [...(seen.get(s.isolation ?? '?') ?? []), s.name])
  const ran = seen.size === 1 ? [...seen.keys()][0] : [...seen].map(([l, who]) => `${who.join(', ')}: ${l}`).join('; ')
  const off = t.sessions.filter((s) => documented[s.name] && s.isolation && s.isolation !== documented[s.name])
  const note = off.length ? c.red(`  documented for ${[...new Set(off.map((s) => documented[s.name]))].join(', ')}: the server overrode it`) : ''
  return `${c.dim('isolation')}  ${ran} ${c.dim('(read from each session)')}${note}`
}

export function invariantLine(t: TrialFacts): string {
  const inv = t.invariant
  const state = inv.held === null ? verdictColor('unknown') : verdictColor(inv.held ? 'HELD' : 'VIOLATED')
  return `invariant  ${inv.description}: observed ${inv.observed}  ${state}${inv.error ? `  (${inv.error})` : ''}`
}

export function verdictLine(s: Summary, why?: string): string {
  const m = verdictColor(s.matched ? 'MATCH' : 'DEVIATION')
  return `verdict    ${verdictColor(s.verdict)}${why ? ` (${why})` : ''}\nexpected   ${s.expected.join('; or ')}  ${m}`
}

/** What differs from the documentation, one line each (nothing when it matched). */
export function deviationLines(s: Summary): string[] {
  if (s.matched || !s.deviations.length) return []
  const which = s.trials > 1 ? ` (${s.deviating} of ${s.trials} trials deviate; the first:)` : ''
  return [c.red(`deviation${which}`), ...s.deviations.map((d) => c.red(`  ${d}`))]
}

/** For --trials: how often each verdict and each outcome happened. */
export function trialsTable(trials: readonly (TrialFacts & { verdict: Verdict })[], s: Summary): string {
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
