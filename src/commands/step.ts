// race run --step: a presenter mode for a room. Before each step of the deterministic interleaving, the screen
// shows the timeline so far, where every session stands and the next step's SQL; Enter (or space) runs it, b shows
// the story, q stops (cleanup as on Ctrl-C). Needs a terminal on stdin and stdout.
import type { StepPause, TimelineEvent } from '../engine/types.js'
import { Interrupted, UsageError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import type { Plan } from '../plan.js'
import { plain, type Style } from '../report/color.js'
import { stepFrame, storyFrame } from '../report/step.js'
import { columns } from '../report/width.js'

/** --step reads keys: without a terminal it is refused before anything connects. */
export function requireTerminal(): void {
  if (!process.stdin.isTTY || !process.stdout.isTTY) {
    throw new UsageError('--step waits for a key before each step, so it needs a terminal (stdin and stdout); leave it out to run the race at once')
  }
}

const keys = (c: Style) => `${c.bold('Enter')} or ${c.bold('space')}: run it  ·  ${c.bold('b')}: the story  ·  ${c.bold('q')}: stop`

export interface Stepper {
  beforeStep(pause: StepPause): Promise<void>
  onEvent(e: TimelineEvent): void
  /** Gives the terminal back (also done by cleanup on any exit). */
  close(): void
}

export function stepper(ctx: RunContext, plan: Plan, head: string[]): Stepper {
  const stdin = process.stdin
  const out = process.stdout
  let pause: StepPause | undefined
  let go: (() => void) | undefined
  let story = false
  const c = ctx.style ?? plain
  let status = keys(c)
  let closed = false

  const draw = () => {
    if (closed) return
    const w = columns()
    const h = out.rows || 24
    const frame = story ? storyFrame(c, plan, head, w, `${c.bold('b')}, ${c.bold('Enter')} or ${c.bold('space')}: back  ·  ${c.bold('q')}: stop`) : pause ? stepFrame({ head, plan, pause, width: w, height: h, status, style: c }) : ''
    if (frame) out.write('\x1b[2J\x1b[H' + frame + '\n')
  }
  const onKey = (key: string) => {
    if (key === '\u0003') {
      // Raw mode turns Ctrl-C into a key: pass it on as the signal it is.
      close()
      process.kill(process.pid, 'SIGINT')
      return
    }
    if (key === 'q' || key === 'Q') {
      const at = pause ? ` before step ${pause.done + 1} (${pause.session} ${pause.step})` : ''
      close()
      ctx.abort(Object.assign(new Interrupted('SIGINT'), { message: `q pressed${at}` }))
      return
    }
    if (!pause || !go) return
    if (key === 'b' || key === 'B') {
      story = !story
      draw()
      return
    }
    if (key === '\r' || key === '\n' || key === ' ') {
      if (story) {
        story = false
        draw()
        return
      }
      status = c.dim(`running ${pause.session} ${pause.step}…`)
      draw()
      const resolve = go
      go = undefined
      pause = undefined
      resolve()
    }
  }
  const onData = (chunk: string) => {
    for (const key of chunk.replace(/\r\n/g, '\r')) onKey(key)
  }
  const close = () => {
    if (closed) return
    closed = true
    stdin.off('data', onData)
    if (stdin.isTTY) stdin.setRawMode(false)
    stdin.pause()
  }
  stdin.setRawMode(true)
  stdin.setEncoding('utf8')
  stdin.on('data', onData)
  stdin.resume()
  ctx.onCleanup('the terminal (--step)', async () => close())
  out.on('resize', draw)

  return {
    beforeStep: (p) =>
      new Promise<void>((resolve) => {
        pause = p
        status = keys(c)
        go = resolve
        draw()
      }),
    onEvent: () => {
      // While it waits for a key, a waiting session may end by itself (deadlock detection, lock_timeout).
      const p = pause
      if (!p || !go) return
      void p.refresh().then(
        (sessions) => {
          if (pause === p) {
            p.sessions = sessions
            draw()
          }
        },
        () => {},
      )
    },
    close: () => {
      out.off('resize', draw)
      close()
    },
  }
}
