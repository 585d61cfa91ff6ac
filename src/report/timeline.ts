// The interleaving drawn the way the articles draw it: one row per event, one column per session.
import type { TimelineEvent, TrialFacts } from '../engine/types.js'
import { c } from './color.js'

const WIDTH = 34

function cell(e: TimelineEvent): string {
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
      return c.yellow(`${e.step} → 409 ${e.detail ?? ''}`)
    case 'retry':
      return c.yellow(`retry: ${e.detail ?? ''}`)
    default:
      return c.red(`${e.step} → ${e.kind} ${e.detail ?? ''}`.trim())
  }
}

/** Drops a 'run' event when the very next event is that step's own result, so a fast step takes one row. */
function compact(events: readonly TimelineEvent[]): TimelineEvent[] {
  return events.filter((e, i) => {
    const next = events[i + 1]
    return !(e.kind === 'run' && next && next.session === e.session && next.step === e.step && next.kind !== 'wait')
  })
}

function visibleWidth(s: string): number {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u001b\[[0-9;]*m/g, '').length
}

function pad(s: string, w: number): string {
  const len = visibleWidth(s)
  if (len > w) {
    // eslint-disable-next-line no-control-regex
    const plain = s.replace(/\u001b\[[0-9;]*m/g, '')
    return plain.slice(0, w - 1) + '…'
  }
  return s + ' '.repeat(w - len)
}

/** One column per session; for many sessions the columns narrow (and wrap into blocks past 8). */
export function timeline(t: TrialFacts): string {
  const names = t.sessions.map((s) => s.name)
  const events = compact(t.events)
  const blocks: string[][] = []
  for (let i = 0; i < names.length; i += 8) blocks.push(names.slice(i, i + 8))
  const width = names.length <= 3 ? WIDTH : names.length <= 5 ? 24 : 18
  const out: string[] = []
  for (const block of blocks) {
    out.push(c.bold(pad('ms', 8) + block.map((n) => pad(n, width)).join(' ')))
    for (const e of events) {
      const col = block.indexOf(e.session)
      if (col < 0) continue
      // Through a pooler: the backend that ran the step, when race knows it.
      const text = e.backend !== undefined ? `${c.dim(String(e.backend))} ${cell(e)}` : cell(e)
      const cols = block.map((_, i) => (i === col ? pad(text, width) : ' '.repeat(width)))
      out.push(pad(e.t.toFixed(1), 8) + cols.join(' ').trimEnd())
    }
    out.push('')
  }
  return out.join('\n').trimEnd()
}
