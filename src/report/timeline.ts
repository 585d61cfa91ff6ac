// The interleaving drawn the way the articles draw it: one row per event, one column per session, fitted to the
// screen. A cell that does not fit its column wraps inside it (in its colour); when the sessions do not fit side
// by side, one row per event names its session instead. Set-up steps (the engine marks them from what the server
// answered: BEGIN, SET, SHOW, set_config) are left out unless asked for.
import type { TimelineEvent } from '../engine/types.js'
import type { Style } from './color.js'
import { columns, hang, pad, wrap, width } from './width.js'

/** The narrowest a session's column may be before the timeline switches to one row per event. */
const MIN_COLUMN = 12
/** The widest a session's column gets on a wide screen. */
const MAX_COLUMN = 44

export interface TimelineOptions {
  /** Also the set-up steps (`--timeline all`). */
  all?: boolean
  width?: number
}

/** An event's text; through a pooler, led by the backend that ran the step, when race knows it. */
function cell(c: Style, e: TimelineEvent): string {
  return e.backend !== undefined ? `${c.dim(String(e.backend))} ${what(c, e)}` : what(c, e)
}

function what(c: Style, e: TimelineEvent): string {
  switch (e.kind) {
    case 'run':
      return e.step
    case 'wait':
      return c.yellow(`${e.step} … waiting`)
    case 'woke':
      return c.cyan(`${e.step} woke`)
    case 'ok':
      return `${e.step} → ${e.detail ?? 'ok'}`
    case 'reject':
      return c.yellow(`${e.step} → 409 ${e.detail ?? ''}`.trim())
    case 'retry':
      return c.yellow(`retry: ${e.detail ?? ''}`.trim())
    default:
      return c.red(`${e.step} → ${e.kind} ${e.detail ?? ''}`.trim())
  }
}

/**
 * The events worth a row: a 'run' event is dropped when the very next event is that step's own result (a fast
 * step takes one row), and, unless `all`, a set-up step that simply succeeded is dropped with its 'run' event.
 * A set-up step that waited or failed is kept: that is part of the race.
 */
export function visibleEvents(events: readonly TimelineEvent[], all = false): TimelineEvent[] {
  const hidden = new Set<number>()
  if (!all) {
    events.forEach((e, i) => {
      if (e.kind !== 'ok' || !e.setup) return
      hidden.add(i)
      for (let j = i - 1; j >= 0; j--) {
        const p = events[j]
        if (p.session !== e.session) continue
        if (p.step === e.step && p.kind === 'run') hidden.add(j)
        break
      }
    })
  }
  return events.filter((e, i) => {
    if (hidden.has(i)) return false
    const next = events[i + 1]
    return !(e.kind === 'run' && next && next.session === e.session && next.step === e.step && next.kind !== 'wait')
  })
}

/** How many events `visibleEvents` leaves out as set-up (for the note under a timeline). */
export function hiddenSetup(events: readonly TimelineEvent[]): number {
  return events.filter((e) => e.kind === 'ok' && e.setup).length
}

/**
 * The timeline of a trial (or of the events so far, in --step). Columns when every session gets at least 12
 * columns; else one row per event with the session's name in front.
 */
export function timeline(c: Style, t: { sessions: readonly { name: string }[]; events: readonly TimelineEvent[] }, o: TimelineOptions = {}): string {
  const w = o.width ?? columns()
  const names = t.sessions.map((s) => s.name)
  const events = visibleEvents(t.events, o.all)
  const ms = (e: TimelineEvent) => e.t.toFixed(1)
  const msW = Math.max(4, ...events.map((e) => ms(e).length)) + 2
  const colW = Math.min(MAX_COLUMN, Math.floor((w - msW - (names.length - 1)) / Math.max(1, names.length)))
  const out: string[] = []
  if (colW >= MIN_COLUMN) {
    const head = pad('ms', msW) + names.map((n) => pad(n, colW)).join(' ')
    out.push(c.bold(head.trimEnd()), c.dim('─'.repeat(Math.min(w, width(head.trimEnd())))))
    for (const e of events) {
      const col = names.indexOf(e.session)
      if (col < 0) continue
      wrap(cell(c, e), colW).forEach((line, k) => {
        const lead = pad(k ? '' : ms(e), msW) + ' '.repeat((colW + 1) * col)
        out.push((lead + line).trimEnd())
      })
    }
  } else {
    const nameW = Math.max(7, ...names.map((n) => n.length)) + 2
    const textW = Math.max(10, w - msW - nameW)
    out.push(c.bold(pad('ms', msW) + 'session'), c.dim('─'.repeat(Math.min(w, msW + nameW + 12))))
    for (const e of events) {
      wrap(cell(c, e), textW).forEach((line, k) => out.push((pad(k ? '' : ms(e), msW) + pad(k ? '' : e.session, nameW) + line).trimEnd()))
    }
  }
  const hidden = o.all ? 0 : hiddenSetup(t.events)
  if (hidden) out.push(...hang(c.dim(`(${hidden} set-up step${hidden === 1 ? '' : 's'} not shown: --timeline all shows them)`), w, 1))
  return out.join('\n')
}
