// race explore --isolation all (or a list: rc,rr,ser): the same exploration once per isolation level, each level's
// every interleaving judged by the invariant, and the weakest level at which every interleaving held. Each level is
// an ordinary exploration (search.ts) of the scenario with its `isolation` param set: a built-in of the
// isolation-levels family begins at that level, an application race's and a spec's sessions get it as their
// connection's default level (a transaction that names its own level keeps it, and is reported).
import type { Driver, ServerInfo } from '../db/driver.js'
import { UsageError } from '../errors.js'
import { plan, type Plan } from '../plan.js'
import { parseChoice } from '../run/params.js'
import { isServerError } from '../db/sqlstate.js'
import type { Engine, Params, Scenario } from '../scenario.js'
import { LEVEL_ORDER, levelOf, levelsOn, readUncommittedOnPostgres, type Level } from '../levels.js'
import type { ExploreResult } from './result.js'

/**
 * The levels asked for: `all`, or a list of levels or their short names (rc,rr,ser; ru on InnoDB), weakest first,
 * each once. `flag` names the option in errors; the scenario must take --isolation.
 */
export function parseLevels(raw: string, s: Scenario, engine: Engine, flag = '--isolation'): Level[] {
  const spec = s.params.isolation
  if (!spec || spec.kind !== 'choice') {
    throw new UsageError(`${s.id} sets its sessions' isolation levels itself (it has no ${flag}): explore it per level with a scenario of the isolation family, a .spec file or an application race`)
  }
  const choices = (spec.choicesOn?.[engine] ?? spec.choices ?? []).filter((x): x is Level => (LEVEL_ORDER as readonly string[]).includes(x))
  const text = raw.trim().toLowerCase()
  if (text === 'all') {
    const out = levelsOn(engine).filter((l) => choices.includes(l))
    if (out.length < 2) throw new UsageError(`${s.id} runs at ${out.join(', ') || 'no level'} only: ${flag} all needs two levels or more`)
    return out
  }
  const parts = text.split(',').map((x) => x.trim())
  if (parts.some((x) => !x)) throw new UsageError(`${flag} '${raw}' has an empty item: give levels separated by commas, e.g. rc,rr,ser (or all)`)
  const picked = new Set<Level>()
  for (const x of parts) {
    const named = levelOf(x)
    if (engine === 'postgres' && named === 'read uncommitted') throw readUncommittedOnPostgres(flag, x)
    // Not a level this scenario runs at: parseChoice's words for a bad choice.
    const level = named && choices.includes(named) ? named : (parseChoice(flag, x, choices) as Level)
    // Each level is explored once: a repeat (rc,rc; rc,read-committed) is a mistake in the list, not a second run.
    if (picked.has(level)) throw new UsageError(`${flag} '${raw}' names ${level} twice: give each level once, e.g. rc,rr,ser (or all)`)
    picked.add(level)
  }
  return LEVEL_ORDER.filter((l) => picked.has(l))
}

/** One level's exploration, as a row. */
export interface LevelRow {
  isolation: Level
  /** Different interleavings run, and how many violated the invariant or could not be decided. */
  interleavings: number
  violating: number
  unknown: number
  /** Held interleavings in which the server raised a SQLSTATE (a retry loop's recovered ones too), by SQLSTATE. */
  prevented: Record<string, number>
  /** Held interleavings with no error in which a session waited for another's lock. */
  serialized: number
  /** Held interleavings with no error and no wait. */
  clean: number
  /**
   * Every interleaving was run and decided (not a sample, not cut at --max, no run went otherwise than chosen, every
   * --inject fault injected somewhere).
   */
  complete: boolean
  /**
   * Every session must complete (mustComplete): the interleavings in which one did not, and the first such session's
   * end. A level with any is not safe, whatever the invariant said.
   */
  incomplete?: number
  failure?: string
  /** --inject: a line for each fault injected in no run at this level (the level is then not known to be safe). */
  notFired?: string[]
  /** Sessions whose transaction ran at another level than the one asked (their own code named it): "s1 serializable". */
  ownLevel: string[]
  /** The shortest violating interleaving's replay at this level (race run ... --isolation ... --schedule "..."). */
  replay: string | null
  shortest: string | null
  shortestSwitches: number | null
  runs: number
  ms: number
}

export interface Fix {
  /** The violated level, and the lowest level asked that held in every interleaving in this run (null: none). */
  level: Level
  fixedAt: Level | null
  /** What the scenario files show, as text: never applied. */
  documented: string[]
}

export interface LevelsResult {
  scenario: string
  n: number
  params: Params
  server: ServerInfo
  target: string
  invariant: string
  levels: LevelRow[]
  /** The weakest level asked at which every interleaving ran and held; null: none. */
  weakestSafe: Level | null
  fixes: Fix[]
  /** 0: every level decided; 3: some level could not be (an undecided interleaving, a sample, a search cut short). */
  exitCode: 0 | 3
  /**
   * What the race itself expects at each level (a spec's expect line, a module's expect, a built-in's documentation),
   * which this result does not apply: its exit code says only whether every level was decided. Absent: none.
   */
  expectNotApplied?: Partial<Record<Level, 'held' | 'violated'>>
  ms: number
  /** Each level's whole exploration (--json with --all). */
  explorations: ExploreResult[]
}

/**
 * The fixes the built-in scenarios document, for a violation that a stronger level prevented or that none did.
 * Text only: race never changes the code under test.
 */
export function documentedFixes(engine: Engine): string[] {
  const lock = engine === 'mysql' ? 'GET_LOCK on the decision\'s key, released after COMMIT' : 'pg_advisory_xact_lock on the decision\'s key, before the read'
  return [
    'lock the rows the decision reads: SELECT ... FOR UPDATE, so a second writer waits for the first to commit (race show lost-update-for-update, for-update)',
    `serialize the decision with an advisory lock: ${lock} (race show advisory)`,
    'let a constraint decide: a unique (partial) index the second insert violates, its 23505 declared as the prevention (race show unique-index)',
    'run at SERIALIZABLE (or the level that held above) and retry the whole transaction on 40001 and 40P01, re-reading everything inside the retry (race show serializable-retry)',
  ]
}

/** Pure: one level's exploration as a row. */
export function rowOf(level: Level, r: ExploreResult): LevelRow {
  const prevented: Record<string, number> = {}
  let serialized = 0
  let clean = 0
  const own = new Set<string>()
  let incomplete = 0
  for (const it of r.every) {
    for (const [name, ran] of Object.entries(it.levels ?? {})) if (ran && ran !== '?' && ran !== level) own.add(`${name} ${ran}`)
    if (it.failure) {
      incomplete++
      continue
    }
    if (it.held !== true || it.verdict === 'unknown') continue
    const codes = (it.raised ?? []).filter((x) => isServerError(x))
    for (const code of codes) prevented[code] = (prevented[code] ?? 0) + 1
    if (codes.length) continue
    if (it.waited.length) serialized++
    else clean++
  }
  return {
    isolation: level,
    interleavings: r.interleavings,
    violating: r.violating,
    unknown: r.unknown,
    prevented,
    serialized,
    clean,
    complete: r.mode === 'all' && r.complete && r.diverged === 0 && r.unknown === 0 && !r.notFired?.length,
    ...(r.notFired?.length ? { notFired: r.notFired } : {}),
    ...(incomplete ? { incomplete, failure: r.every.find((x) => x.failure)!.failure } : {}),
    ownLevel: [...own].sort(),
    replay: r.replay,
    shortest: r.shortest?.line ?? null,
    shortestSwitches: r.shortest?.switches ?? null,
    runs: r.runs,
    ms: r.ms,
  }
}

/** Pure: the weakest level at which every interleaving ran and held. */
export function weakestSafe(rows: readonly LevelRow[]): Level | null {
  const safe = rows.filter((r) => r.violating === 0 && !r.incomplete && r.complete).map((r) => r.isolation)
  return LEVEL_ORDER.find((l) => safe.includes(l)) ?? null
}

/** Pure: for each violated level, the lowest stronger level that held in this run, and the documented fixes. */
export function fixesOf(rows: readonly LevelRow[], engine: Engine): Fix[] {
  const rank = (l: Level) => LEVEL_ORDER.indexOf(l)
  return rows
    .filter((r) => r.violating > 0)
    .map((r) => ({
      level: r.isolation,
      fixedAt: rows.filter((x) => rank(x.isolation) > rank(r.isolation) && x.violating === 0 && !x.incomplete && x.complete).map((x) => x.isolation)[0] ?? null,
      documented: documentedFixes(engine),
    }))
}

/** Pure: the whole result from the rows. */
export function levelsOutcome(rows: readonly LevelRow[], engine: Engine): Pick<LevelsResult, 'weakestSafe' | 'fixes' | 'exitCode'> {
  // A level that held without every interleaving run and decided is not known to be safe: unknown is never a pass.
  const undecided = rows.some((r) => r.violating === 0 && !r.complete)
  return { weakestSafe: weakestSafe(rows), fixes: fixesOf(rows, engine), exitCode: undecided ? 3 : 0 }
}

/**
 * The exploration once per level, on an open driver: `params`, the scenario's other params (each level sets
 * `isolation`); `search`, one exploration of a plan (explore/execute.ts).
 */
export async function exploreLevels(
  lab: Driver,
  targetLabel: string,
  scenario: Scenario,
  levels: readonly Level[],
  params: Params,
  n: number,
  search: (p: Plan) => Promise<ExploreResult>,
  onLevel?: (level: Level) => void,
): Promise<LevelsResult> {
  const started = performance.now()
  const explored: ExploreResult[] = []
  const rows: LevelRow[] = []
  for (const level of levels) {
    onLevel?.(level)
    const p = plan(scenario, { params: { ...params, isolation: level }, n, engine: lab.engine })
    const r = await search(p)
    explored.push(r)
    rows.push(rowOf(level, r))
  }
  const first = explored[0]
  return {
    scenario: scenario.id,
    n,
    params: { ...params, isolation: levels.join(',') },
    server: first.server,
    target: targetLabel,
    invariant: first.invariant,
    levels: rows,
    ...levelsOutcome(rows, lab.engine),
    ...unappliedExpect(levels, explored),
    ms: Math.round(performance.now() - started),
    explorations: explored,
  }
}

/** Pure: the expectations the explorations were made with, per level, which --isolation all does not apply. */
export function unappliedExpect(levels: readonly Level[], explored: readonly Pick<ExploreResult, 'expected'>[]): Pick<LevelsResult, 'expectNotApplied'> {
  const got: Partial<Record<Level, 'held' | 'violated'>> = {}
  levels.forEach((level, i) => {
    const e = explored[i]?.expected
    if (e === 'held' || e === 'violated') got[level] = e
  })
  return Object.keys(got).length ? { expectNotApplied: got } : {}
}
