// What race run --step shows before each step: the timeline so far, where every session stands, and the next
// step's session and SQL (with the application's decision beside it), fitted to the terminal's width and height.
// Pure: the presenter (commands/step.ts) reads keys and draws these frames.
import type { SessionState, StepPause } from '../engine/types.js'
import type { Plan } from '../plan.js'
import { outcomeColor, type Style } from './color.js'
import { timeline } from './timeline.js'
import { fitLines, hang, truncate } from './width.js'

export interface FrameOptions {
  /** The header lines (the command, the server, the schedule). */
  head: string[]
  plan: Plan
  pause: StepPause
  width: number
  height: number
  /** The bottom line (what the keys do, or that the step is running). */
  status: string
  /** The run's style (RunContext.style). */
  style: Style
}

function stateText(c: Style, s: SessionState): string {
  switch (s.state) {
    case 'waiting':
      return c.yellow(`waiting in ${s.step} for ${s.waitingFor.length ? s.waitingFor.join(', ') : 'another session'}`)
    case 'running':
      return c.cyan(`running ${s.step}`)
    case 'done':
      return `done: ${outcomeColor(c, s.outcome ?? '')}${s.step ? c.dim(` (in ${s.step})`) : ''}`
    case 'idle in transaction':
      return c.bold('idle in transaction')
    default:
      return c.dim(s.state)
  }
}

/** The next step's SQL, whole and wrapped, and its application code. */
function nextStep(c: Style, plan: Plan, pause: StepPause, w: number): string[] {
  const def = plan.sessions.find((x) => x.name === pause.session)?.steps.find((x) => x.name === pause.step)?.def
  const out = [c.bold(`next  step ${pause.done + 1} of ${pause.done + pause.left}: ${c.cyan(`${pause.session} ${pause.step}`)}`)]
  for (const line of (def?.sql ?? '').trim().split('\n')) out.push(...hang(`      ${line}`, w, 8))
  if (def?.rejectIf) out.push(...hang(c.yellow(`      application, before it: ${String(def.rejectIf).replace(/\s+/g, ' ')}`), w, 8))
  if (def?.retryIf) out.push(...hang(c.yellow(`      application, after it: ${String(def.retryIf).replace(/\s+/g, ' ')}`), w, 8))
  return out
}

/** One frame: header, timeline so far (its latest rows, as many as fit), sessions, the next step, the keys. */
export function stepFrame(o: FrameOptions): string {
  const { plan, pause, width: w, style: c } = o
  const nameW = Math.max(...pause.sessions.map((s) => s.name.length))
  const pidW = Math.max(...pause.sessions.map((s) => String(s.pid).length))
  const sessions = [c.bold('sessions')]
  for (const s of pause.sessions) sessions.push(...hang(`  ${s.name.padEnd(nameW)}  ${c.dim(`pid ${String(s.pid).padEnd(pidW)}`)}  ${stateText(c, s)}`, w, nameW + pidW + 10))
  const next = nextStep(c, plan, pause, w)
  const tail = ['', ...sessions, '', ...next, '', ...hang(o.status, w, 2)]
  const head = [...fitLines(o.head, w), '']
  const room = Math.max(3, o.height - head.length - tail.length - 1)
  let drawn = pause.events.length
    ? timeline(c, { sessions: plan.sessions, events: pause.events }, { all: true, width: w }).split('\n')
    : [c.dim('(nothing has run yet)')]
  if (drawn.length > room) {
    // The column header, a note, and the latest rows.
    const keep = Math.max(1, room - 3)
    drawn = [...drawn.slice(0, 2), c.dim(`… ${drawn.length - 2 - keep} earlier row(s)`), ...drawn.slice(-keep)]
  }
  return [...head, ...drawn, ...tail].map((l) => truncate(l, w)).join('\n')
}

/** The scenario's story (key b), with what is checked at the end. */
export function storyFrame(c: Style, plan: Plan, head: string[], w: number, status: string): string {
  const s = plan.scenario
  const inv = typeof s.invariant.description === 'function' ? s.invariant.description(plan.variant.params) : s.invariant.description
  const lines = [...head, '', c.bold(`${s.id}: ${s.title}`), '', ...s.story.map((l) => `  ${l}`), '', `${c.bold('invariant')}  ${inv}`, '', status]
  return fitLines(lines, w).join('\n')
}
