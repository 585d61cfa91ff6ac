// The run service's parsing of what a run is given: bounds on every wait, and a scenario param's value. Each names
// the option as the caller spelled it (a flag, or run()'s option).
import { resolveTarget } from '../db/target.js'
import { UsageError } from '../errors.js'
import { parseDuration, parseWhole } from '../parse.js'
import type { Engine, ParamSpec, ParamValue, Pool, Scenario } from '../scenario.js'

/** The options of a run, by their API names (the flags are their kebab-case forms). */
export type RunOption = 'n' | 'schedule' | 'window' | 'trials' | 'expect' | 'user' | 'hold' | 'connectTimeout' | 'stepTimeout' | 'runTimeout' | 'pg' | 'databaseUrl'

/** How the caller spells an option in an error. */
export type Spelling = (option: RunOption) => string

/** The CLI's: --n, --connect-timeout. */
export const FLAGS: Spelling = (o) => `--${o.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`)}`

/** run()'s: n, connectTimeout. */
export const NAMES: Spelling = (o) => o

export interface Bounds {
  connectTimeoutMs: number
  stepTimeoutMs: number
  runTimeoutMs: number
}

/** The bounds as given: durations ('5s'); stepTimeout defaults to 10s. */
export function parseBounds(o: { connectTimeout: string; runTimeout: string; stepTimeout?: string }, spell: Spelling = FLAGS): Bounds {
  return {
    connectTimeoutMs: parseDuration(spell('connectTimeout'), o.connectTimeout),
    stepTimeoutMs: parseDuration(spell('stepTimeout'), o.stepTimeout ?? '10s'),
    runTimeoutMs: parseDuration(spell('runTimeout'), o.runTimeout),
  }
}

/** One param's value as given (a flag's text, or run()'s value), checked as its kind says; `flag` names it in errors. */
export function parseParam(p: ParamSpec, flag: string, raw: unknown, engine: Engine = 'postgres'): ParamValue {
  if (p.kind === 'boolean') return Boolean(raw)
  if (p.kind === 'whole') return parseWhole(flag, String(raw), p.min ?? 0, p.max ?? 1_000_000)
  if (p.kind === 'choice') return parseChoice(flag, String(raw), p.choicesOn?.[engine] ?? p.choices ?? [])
  return parseDuration(flag, String(raw))
}

/** The short names of isolation levels race bench takes too: --isolation rr means the same everywhere. */
const LEVEL_ALIASES: Record<string, string> = { ru: 'read uncommitted', rc: 'read committed', rr: 'repeatable read', s: 'serializable', ser: 'serializable' }

export function parseChoice(flag: string, raw: string, choices: readonly string[]): string {
  // Spelled as the user likes (for-update, for_update, "for update"), or a level's short name (rr).
  const norm = (x: string) => x.trim().toLowerCase().replace(/[\s_-]+/g, ' ')
  const typed = norm(raw)
  const alias = LEVEL_ALIASES[typed]
  const v = alias && choices.includes(alias) ? alias : typed
  const hit = choices.find((x) => norm(x) === v)
  if (hit) return hit
  const short = Object.entries(LEVEL_ALIASES).filter(([k, l]) => choices.includes(l) && k !== 's').map(([k]) => k)
  throw new UsageError(`${flag} takes one of ${choices.map((x) => `"${x}"`).join(', ')}${short.length ? ` (or ${short.join(', ')})` : ''}, got '${raw}'`)
}

/** The pool size: given, else what the scenario documents, else one server connection per session. */
export function sizePool(pool: Pool, s: Pick<Scenario, 'pooled'> | undefined, sessions: number): Pool {
  if (pool.kind !== 'pgbouncer' || pool.size) return pool
  return { ...pool, size: s?.pooled?.size ?? sessions }
}

/** --pg / pg selects race's own embedded server: it cannot go with a server the user gives. */
export function pgConflict(databaseUrl: string | undefined, spell: Spelling): void {
  if (resolveTarget(databaseUrl).kind !== 'embedded')
    throw new UsageError(`${spell('pg')} selects race's own embedded PostgreSQL; it cannot go with ${spell('databaseUrl')} (or DATABASE_URL / PG* variables): leave out one of them`)
}
