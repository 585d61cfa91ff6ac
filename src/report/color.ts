// The only place colours are decided: a TTY gets them; NO_COLOR, --no-color, FORCE_COLOR=0 and pipes do not.
import { Chalk, type ChalkInstance } from 'chalk'

export let c: ChalkInstance = new Chalk({ level: 0 })

export function setColor(enabled: boolean, stream: NodeJS.WriteStream = process.stdout): void {
  const env = process.env
  const off = !enabled || (env.NO_COLOR !== undefined && env.NO_COLOR !== '') || env.FORCE_COLOR === '0' || env.TERM === 'dumb'
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
  c = new Chalk({ level: off ? 0 : forced || stream.isTTY ? 1 : 0 })
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
