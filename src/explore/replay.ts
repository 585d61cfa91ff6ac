// The line that runs an interleaving again: `race run <scenario> ... --schedule "<line>"`, quoted for a POSIX shell,
// on the database the exploration ran on.
import { maskUrl } from '../db/target.js'
import type { Plan } from '../plan.js'
import { defaultParams, type Scenario } from '../scenario.js'

const shellQuote = (x: string) => (/^[\w./:@%+=,-]+$/.test(x) ? x : `'${x.replace(/'/g, `'\\''`)}'`)

/**
 * The connection options a replay line needs to run on the database this exploration ran on: an explicit
 * --database-url as given (a password in it masked, with a note: a printed line never shows it); nothing when
 * DATABASE_URL, the PG* variables or the embedded server chose it (they choose the same again where it is pasted).
 */
export function replayTarget(databaseUrl: string | undefined): { args: string[]; note?: string } {
  if (databaseUrl !== undefined) {
    const masked = maskUrl(databaseUrl.trim())
    const args = ['--database-url', shellQuote(masked)]
    return masked === databaseUrl.trim() ? { args } : { args, note: "the password in --database-url is printed as ***: put yours back in its place (or set DATABASE_URL and write --database-url \"$DATABASE_URL\")" }
  }
  // DATABASE_URL, PG* variables, the embedded server: the environment the line is pasted into chooses the same again.
  return { args: [] }
}

/** `race run <scenario> [--n N] [its params] [--database-url ...] --schedule "<line>"`, quoted for a POSIX shell. */
export function replayCommand(name: string, s: Scenario, p: Plan, line: string, target: readonly string[] = []): string {
  const q = shellQuote
  const args = ['race', 'run', q(name)]
  if (p.variant.n !== s.sessionCount.default) args.push('--n', String(p.variant.n))
  const defaults = defaultParams(s, {})
  for (const [k, spec] of Object.entries(s.params)) {
    const v = p.variant.params[k]
    if (v === defaults[k]) continue
    const flag = spec.flag.split(' ')[0]
    if (spec.kind === 'boolean') args.push(v ? flag.replace(/^--no-/, '--') : flag.startsWith('--no-') ? flag : `--no-${flag.slice(2)}`)
    else args.push(flag, q(spec.kind === 'duration' ? `${v}ms` : String(v)))
  }
  args.push(...target)
  args.push('--schedule', `"${line}"`)
  return args.join(' ')
}
