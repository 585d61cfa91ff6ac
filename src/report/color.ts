// The only place colours are decided: a TTY gets them; NO_COLOR, --no-color, FORCE_COLOR=0 and pipes do not.
// Every colour is chalk's (level 1: the 16-colour codes every terminal and CI log shows); race only decides
// whether there is colour, from its own flags and the stream, not from chalk's reading of process.argv.
// Without colour (a pipe, CI, --no-color) chalk is not loaded at all: `plain` draws what chalk's level 0 draws, the
// text unchanged; the CLI loads chalk (loadChalk) only when the command's output will be coloured.
// A style belongs to one run (RunContext.style) and is passed to every function that draws: there is no colour
// state of the process, so two runs in one process (the API's) never draw in each other's style.
import type { ChalkInstance } from 'chalk'

/** A style, called on text, and every style to add to it (chalk's). */
export type Style = ChalkInstance

/**
 * No colour: called on text it gives the text (several pieces joined by a space, as chalk does), and every style
 * added to it (c.red.bold) is itself. What chalk at level 0 gives, without loading chalk.
 */
export const plain: Style = new Proxy((...text: unknown[]) => (text.length === 1 ? String(text[0]) : text.join(' ')), {
  get: (target, key) => (key === 'level' ? 0 : typeof key === 'string' && key !== 'then' ? plain : Reflect.get(target, key)),
}) as unknown as Style

/** chalk's constructor, once loadChalk has run. */
let Chalk: typeof import('chalk').Chalk | undefined

/** Loads chalk, for styleFor to give colours: call it before styleFor when colour may be on. */
export async function loadChalk(): Promise<void> {
  Chalk ??= (await import('chalk')).Chalk
}

/** Whether a run's reports get colour: the flag, then NO_COLOR, FORCE_COLOR and TERM, then whether the stream is a TTY. */
export function colorWanted(enabled: boolean, stream: { isTTY?: boolean } = process.stdout): boolean {
  const env = process.env
  const off = !enabled || (env.NO_COLOR !== undefined && env.NO_COLOR !== '') || env.FORCE_COLOR === '0' || env.TERM === 'dumb'
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
  return !off && (forced || Boolean(stream.isTTY))
}

/** How the styles look: 'presenter' (race run --theme presenter) is for a projector: bold where dim would wash out. */
export const THEMES = ['default', 'presenter'] as const
export type Theme = (typeof THEMES)[number]

/** The style of a run's reports: colour on a TTY unless turned off (--no-color, NO_COLOR, FORCE_COLOR=0, TERM=dumb). */
export function styleFor(enabled: boolean, stream: { isTTY?: boolean } = process.stdout, theme: Theme = 'default'): Style {
  if (!colorWanted(enabled, stream)) return plain
  if (!Chalk) throw new Error('styleFor: colour needs loadChalk() first')
  const next = new Chalk({ level: 1 })
  // chalk's styles are getters on its prototype: an own property on this instance makes dim draw bold.
  if (theme === 'presenter') Object.defineProperty(next, 'dim', { get: () => next.bold })
  return next
}

/** A verdict's word, in the run's style. */
export function verdictColor(c: Style, v: string): string {
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

/** A session's outcome, in the run's style. */
export function outcomeColor(c: Style, o: string): string {
  if (o.startsWith('committed')) return c.green(o)
  if (o.startsWith('rejected')) return c.yellow(o)
  return c.red(o)
}
