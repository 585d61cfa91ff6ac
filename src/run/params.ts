// The run service's parsing of what a run is given: bounds on every wait, and a scenario param's value. Each names
// the option as the caller spelled it (a flag, or run()'s option).
import { resolveTarget } from '../db/target.js'
import { UsageError } from '../errors.js'
import { LEVEL_ALIASES, normChoice } from '../levels.js'
import { parseDuration, parseWhole } from '../parse.js'
import type { Engine, ParamSpec, ParamValue, Params, Pool, Scenario } from '../scenario.js'

/** The options of a run, by their API names (the flags are their kebab-case forms). */
export type RunOption = 'n' | 'schedule' | 'window' | 'trials' | 'expect' | 'user' | 'hold' | 'connectTimeout' | 'stepTimeout' | 'runTimeout' | 'pg' | 'databaseUrl' | ExploreOption

/** What race explore and explore() take besides (explore/request.ts). */
export type ExploreOption = 'max' | 'sample' | 'acceptSample' | 'seed' | 'shrink' | 'exhaustive' | 'reduce' | 'depth' | 'preemptions' | 'shard' | 'jobs'

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

export function parseChoice(flag: string, raw: string, choices: readonly string[]): string {
  // Spelled as the user likes (for-update, for_update, "for update"), or a level's short name (rr).
  const norm = normChoice
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

/** The API's pg (run(), explore()): a major version from 13 to 18, for race's embedded server; undefined: 18. */
export function embeddedVersion(pg: unknown, databaseUrl: string | undefined): number | undefined {
  if (pg === undefined) return undefined
  if (typeof pg !== 'number' || !Number.isInteger(pg) || pg < 13 || pg > 18) throw new UsageError(`pg is a PostgreSQL major version from 13 to 18, got ${JSON.stringify(pg)}`)
  pgConflict(databaseUrl, NAMES)
  return pg === 18 ? undefined : pg
}

/**
 * The scenario's params from run()'s `params`, by key or flag name, each checked as `race run` checks its flag
 * (parseParam); defaults for the rest; an unknown name is bad input. A duration may also be milliseconds.
 */
export function paramsOf(s: Scenario, given: Record<string, unknown>, engine: Engine, caller = 'run()'): Params {
  if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new UsageError(`${caller}: params is an object such as { maxPending: 3 }`)
  const params: Params = Object.fromEntries(Object.entries(s.params).map(([k, p]) => [k, p.default]))
  const flagOf = (k: string) => s.params[k].flag.split(' ')[0].replace(/^--(no-)?/, '')
  for (const [name, raw] of Object.entries(given)) {
    const key = Object.keys(s.params).find((k) => k === name || flagOf(k) === name.replace(/^--(no-)?/, ''))
    if (!key) {
      const names = Object.keys(s.params)
      throw new UsageError(`params.${name} is not a param of ${s.id}: ${names.length ? `it takes ${names.join(', ')}` : 'it takes none'} (race show ${s.id})`)
    }
    const p = s.params[key]
    const what = `params.${name}`
    if (p.kind === 'boolean' && typeof raw !== 'boolean') throw new UsageError(`${what} is true or false, got ${JSON.stringify(raw)}`)
    params[key] = p.kind === 'duration' && typeof raw === 'number' ? duration(what, raw) : parseParam(p, what, raw, engine)
  }
  return params
}

/** A duration as given: text ('300ms'), or milliseconds (run()). */
export function duration(name: string, v: string | number, allowZero = false): number {
  if (typeof v === 'number') {
    if (!Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) throw new UsageError(`${name} takes milliseconds or a duration like '300ms', got ${v}`)
    return v
  }
  return parseDuration(name, v, { allowZero })
}
