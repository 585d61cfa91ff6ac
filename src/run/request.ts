// One race as asked for, before it is checked: what `race run`'s flags and the API's run() options both map to,
// and the one place it is checked. Errors name each option as the caller spelled it: FLAGS for the CLI (--n,
// --window), NAMES for run() (n, window).
import { UsageError } from '../errors.js'
import type { ExpectOverride } from '../judge/index.js'
import { parseDuration, parseWhole, formatDuration } from '../parse.js'
import { sessionCount } from '../plan.js'
import type { Engine, Params, Pool, Scenario } from '../scenario.js'
import { expectsOverride } from '../specfile/common.js'
import type { RunInput } from './execute.js'
import { extendForHold } from './execute.js'
import { duration, FLAGS, parseBounds, type Spelling } from './params.js'

/** A race as asked for: values as given (flags' text, or run()'s values), the scenario found and its params read. */
export interface RunRequest {
  scenario: Scenario
  /** The engine the target speaks (engineFor), which the params were read for. */
  engine: Engine
  /** The scenario's params as given, defaults for the rest (each front end reads its own form: flags or names). */
  params: Params
  databaseUrl?: string
  n?: string | number
  schedule?: string
  /** A duration ('300ms'), or milliseconds. */
  window?: string | number
  trials?: string | number
  expect?: string
  user?: string
  /** The CLI's --hold. */
  hold?: string
  keep?: boolean
  freshConnections?: boolean
  /** The pooler the sessions go through (the CLI's --pooler/--pooled, parsed), if any. */
  pool?: Pool
  /** Durations ('5s'), or milliseconds. */
  connectTimeout: string | number
  stepTimeout: string | number
  runTimeout: string | number
}

/** A checked run: what executeRun takes, without what a front end adds (a presenter, progress). */
export type CheckedRun = Omit<RunInput, 'onHold' | 'presenter' | 'onTrial'>

/** The one check of a run's input: every option parsed, and the combinations refused, each named as `spell` says. */
export function validateRun(r: RunRequest, spell: Spelling): CheckedRun {
  const { scenario } = r
  const n = sessionsOf(scenario, r.n, spell)
  const windowMs = r.window === undefined ? 0 : duration(spell('window'), r.window, true)
  const trials = r.trials === undefined ? 1 : parseWhole(spell('trials'), String(r.trials), 1, 100_000)
  const override = parseExpect(r.expect, spell) ?? expectsOverride(scenario)
  const asText = (v: string | number) => (typeof v === 'number' ? `${v}ms` : v)
  const bounds = parseBounds({ connectTimeout: asText(r.connectTimeout), stepTimeout: asText(r.stepTimeout), runTimeout: asText(r.runTimeout) }, spell)
  const user = r.user === undefined ? undefined : parseUuid(r.user, spell)
  const holdMs = r.hold === undefined ? 0 : parseDuration(spell('hold'), r.hold)
  if (holdMs > 10 * 60_000) throw new UsageError(`${spell('hold')} must be at most 10m, got '${r.hold}'`)
  if (holdMs && holdMs + 10_000 > bounds.runTimeoutMs) {
    throw new UsageError(
      `${spell('hold')} ${r.hold} does not fit in ${spell('runTimeout')} ${r.runTimeout}: give ${spell('runTimeout')} ${formatDuration(holdMs + 60_000)} or a shorter ${spell('hold')}`,
    )
  }
  if (holdMs && trials > 1) throw new UsageError(`${spell('hold')} holds one race: leave out ${spell('trials')}`)
  return {
    scenario,
    engine: r.engine,
    params: extendForHold(scenario, r.params, holdMs),
    given: r.params,
    n,
    windowMs,
    trials,
    override,
    bounds,
    user,
    holdMs,
    ...(r.pool ? { pool: r.pool } : {}),
    scheduleText: r.schedule,
    keep: Boolean(r.keep),
    freshConnections: Boolean(r.freshConnections),
    databaseUrl: r.databaseUrl,
  }
}

/**
 * The sessions asked for (n) within the scenario's count (race run, race explore, run()); not given: `otherwise`,
 * by default the scenario's own default.
 */
export function sessionsOf(s: Scenario, n: string | number | undefined, spell: Spelling, otherwise?: number): number {
  const count = sessionCount(s)
  if (n !== undefined && count.min === count.max && String(n).trim() !== String(count.min)) {
    throw new UsageError(`${s.id} has exactly ${count.min} sessions; leave out ${spell('n')}`)
  }
  return n === undefined ? (otherwise ?? count.default) : parseWhole(spell('n'), String(n), count.min, count.max)
}


export function parseUuid(raw: string, spell: Spelling = FLAGS): string {
  const v = String(raw).trim().toLowerCase()
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(v)) return v
  throw new UsageError(`${spell('user')} takes a uuid like 5f0c6d7e-2a1b-4c3d-8e9f-0a1b2c3d4e5f, got '${raw}'`)
}

export function parseExpect(raw: string | undefined, spell: Spelling = FLAGS): ExpectOverride {
  if (raw === undefined) return undefined
  if (raw === 'held' || raw === 'violated') return raw
  throw new UsageError(`${spell('expect')} takes held or violated, got '${raw}'`)
}

