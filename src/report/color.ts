// The only place colours are decided: a TTY gets them; NO_COLOR, --no-color, FORCE_COLOR=0 and pipes do not.
// Every colour is chalk's (level 1: the 16-colour codes every terminal and CI log shows); race only decides
// whether there is colour, from its own flags and the stream, not from chalk's reading of process.argv.
import { Chalk, type ChalkInstance } from 'chalk'

/** A style, called on text, and every style to add to it (chalk's). */
export type Style = ChalkInstance

export let c: Style = new Chalk({ level: 0 })

/** How the styles look: 'presenter' (race run --theme presenter) is for a projector: bold where dim would wash out. */
export const THEMES = ['default', 'presenter'] as const
export type Theme = (typeof THEMES)[number]

/** The style of a run's reports: colour on a TTY unless turned off (--no-color, NO_COLOR, FORCE_COLOR=0, TERM=dumb). */
export function styleFor(enabled: boolean, stream: { isTTY?: boolean } = process.stdout, theme: Theme = 'default'): Style {
  const env = process.env
  const off = !enabled || (env.NO_COLOR !== undefined && env.NO_COLOR !== '') || env.FORCE_COLOR === '0' || env.TERM === 'dumb'
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
  const next = new Chalk({ level: !off && (forced || Boolean(stream.isTTY)) ? 1 : 0 })
  // chalk's styles are getters on its prototype: an own property on this instance makes dim draw bold.
  if (theme === 'presenter') Object.defineProperty(next, 'dim', { get: () => next.bold })
  return next
}

export function setColor(enabled: boolean, stream: { isTTY?: boolean } = process.stdout, theme: Theme = 'default'): void {
  setStyle(styleFor(enabled, stream, theme))
}

/** The CLI's: its command's style is what every report of this process draws with (c). */
export function setStyle(style: Style): void {
  c = style
}

/**
 * Draws a report in a run's own style (the API's: no colours), whatever the process's is: `fn` is synchronous, so
 * no other run's report can be drawn while `c` is this one's.
 */
export function withStyle<T>(style: Style, fn: () => T): T {
  const was = c
  c = style
  try {
    return fn()
  } finally {
    c = was
  }
}
export function verdictColor(v: string): string {
  switch (v) {
    case 'anomaly':
    case 'VIOLATED':
    case 'DEVIATION':
      return c.red.bold(v)
    case 'unknown':
      return c.yellow.bold(v)
    case 'HELD':
    case 'MATCH':
      return c.green.bold(v)
    default:
      return c.cyan(v)
  }
}

export function outcomeColor(o: string): string {
  if (o.startsWith('committed')) return c.green(o)
  if (o.startsWith('rejected')) return c.yellow(o)
  return c.red(o)
}
