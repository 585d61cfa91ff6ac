// The isolation levels, declared once: their order, which ones each engine tells apart, their short names, the one
// parser of a level's name and the one refusal of READ UNCOMMITTED on PostgreSQL. Every command (run, explore,
// bench, matrix) and the scenarios read them from here. On the bottom floor: it imports only errors.ts.
import { UsageError } from './errors.js'

/** The levels PostgreSQL tells apart, weakest first (the public API's LEVELS). */
export const LEVELS = ['read committed', 'repeatable read', 'serializable'] as const
export type Level = 'read uncommitted' | (typeof LEVELS)[number]

/** Every level, weakest first: the order in which "the weakest level that held" is read. */
export const LEVEL_ORDER: readonly Level[] = ['read uncommitted', ...LEVELS]

/** The levels race runs on each engine: PostgreSQL runs READ UNCOMMITTED as READ COMMITTED, InnoDB does not (it reads dirty). */
const LEVELS_ON = { postgres: LEVELS, mysql: LEVEL_ORDER } as const
export type LevelEngine = keyof typeof LEVELS_ON

export function levelsOn(engine: LevelEngine): readonly Level[] {
  return LEVELS_ON[engine]
}

/** The short names of the levels, the same for every command: --isolation rr means the same everywhere. */
export const LEVEL_ALIASES: Readonly<Record<string, Level>> = { ru: 'read uncommitted', rc: 'read committed', rr: 'repeatable read', s: 'serializable', ser: 'serializable' }

/** A choice as the user may spell it: any case, words joined by spaces, dashes or underscores (read-committed, READ_COMMITTED). */
export function normChoice(x: string): string {
  return x.trim().toLowerCase().replace(/[\s_-]+/g, ' ')
}

/** The one parser of a level's name: a level in any spelling, or its short name; undefined for anything else. */
export function levelOf(raw: string): Level | undefined {
  const typed = normChoice(raw)
  const level = LEVEL_ALIASES[typed] ?? typed
  return (LEVEL_ORDER as readonly string[]).includes(level) ? (level as Level) : undefined
}

/** Is this --isolation text a request for several levels (all, or a comma list) rather than one? */
export function isLevelList(raw: unknown): raw is string {
  return typeof raw === 'string' && (raw.trim().toLowerCase() === 'all' || raw.includes(','))
}

/** The one refusal of READ UNCOMMITTED where race runs PostgreSQL's levels (`item` as the user typed it). */
export function readUncommittedOnPostgres(flag: string, item: string): UsageError {
  return new UsageError(`${flag} '${item}': PostgreSQL runs READ UNCOMMITTED as READ COMMITTED (there is nothing to tell apart): leave it out, or use rc`)
}
