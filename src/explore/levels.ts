// race explore --isolation all (or a list: rc,rr,ser): the same exploration once per isolation level, each level's
// every interleaving judged by the invariant, and the weakest level at which every interleaving held. Each level is
// an ordinary exploration (exploreOn) of the scenario with its `isolation` param set: a built-in of the
// isolation-levels family begins at that level, an application race's and a spec's sessions get it as their
// connection's default level (a transaction that names its own level keeps it, and is reported).
import type { RunContext } from '../lifecycle.js'
import type { Driver, ServerInfo } from '../db/driver.js'
import { UsageError } from '../errors.js'
import { plan } from '../plan.js'
import type { Bounds } from '../run/params.js'
import { parseChoice } from '../run/params.js'
import { isServerError } from '../db/sqlstate.js'
import { c } from '../report/color.js'
import { fitTable } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import type { Engine, Params, Scenario } from '../scenario.js'
import { LEVEL_ORDER, levelOf, levelsOn, readUncommittedOnPostgres, type Level } from '../levels.js'
import { exploreOn, type ExploreOptions, type ExploreResult } from './index.js'

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
 * The exploration once per level, on an open driver. `params`: the scenario's other params (each level sets
 * `isolation`); `o`: exploreOn's options, shared by every level.
 */
export async function exploreLevels(
  ctx: RunContext,
  lab: Driver,
  targetLabel: string,
  scenario: Scenario,
  levels: readonly Level[],
  params: Params,
  n: number,
  o: Parameters<typeof exploreOn>[5],
  bounds: Bounds,
  onLevel?: (level: Level) => void,
): Promise<LevelsResult> {
  const started = performance.now()
  const explored: ExploreResult[] = []
  const rows: LevelRow[] = []
  for (const level of levels) {
    onLevel?.(level)
    const p = plan(scenario, { params: { ...params, isolation: level }, n, engine: lab.engine })
    const r = await exploreOn(ctx, lab, targetLabel, scenario, p, o, bounds)
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

export type { ExploreOptions }

const LEVEL_WORD: Record<Level, string> = { 'read uncommitted': 'READ UNCOMMITTED', 'read committed': 'READ COMMITTED', 'repeatable read': 'REPEATABLE READ', serializable: 'SERIALIZABLE' }

/** How the held interleavings of a row held: "40001 ×30, 10 clean". */
export function heldText(r: LevelRow): string {
  const parts = Object.entries(r.prevented)
    .sort((a, b) => b[1] - a[1])
    .map(([code, k]) => `${k} prevented by ${code}`)
  if (r.serialized) parts.push(`${r.serialized} serialized (waited)`)
  if (r.clean) parts.push(`${r.clean} clean`)
  return parts.join(', ') || '-'
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

/** One line: the expectation not applied, and where it is. */
export function unappliedLine(e: Partial<Record<Level, 'held' | 'violated'>>): string {
  const values = [...new Set(Object.values(e))]
  const what = values.length === 1 ? `expect ${values[0]}` : `expect ${Object.entries(e).map(([l, v]) => `${v} at ${l}`).join(', ')}`
  return `${what} (the race's own) is not applied across levels: the exit code says only whether every level was decided; race explore --isolation <level> applies it`
}

/** The report race explore --isolation prints. */
export function renderLevels(r: LevelsResult, self: string): string {
  const w = columns()
  const lines = joinFit([c.bold(`race explore ${r.scenario}`), `${r.server.product ?? 'PostgreSQL'} ${r.server.version} (${r.target})`, `${r.n} session${r.n === 1 ? '' : 's'}`, 'per isolation level'], '  ·  ', w, 2)
  lines.push(...hang(`${c.dim('invariant')}  ${r.invariant}`, w, 11))
  const body = r.levels.map((x) => [
    c.bold(LEVEL_WORD[x.isolation]),
    `${x.interleavings}${x.complete || x.violating ? '' : ' (not all)'}`,
    x.violating ? c.red(String(x.violating)) : x.unknown ? c.yellow('0') : c.green('0'),
    `${heldText(x)}${x.unknown ? c.yellow(`, ${x.unknown} undecided`) : ''}${x.incomplete ? c.red(`, ${x.incomplete} failed (a session did not complete)`) : ''}`,
  ])
  lines.push(fitTable(['level', 'interleavings', 'violating', 'the others held'], body, [{ shrink: 0 }, { shrink: 0 }, { shrink: 0 }, {}], w))
  for (const x of r.levels) {
    if (x.ownLevel.length) lines.push(...hang(c.yellow(`at ${x.isolation}: ${x.ownLevel.join(', ')}: the code names its own level (race set ${x.isolation} as the connection's default; it was not overridden)`), w, 2))
  }
  lines.push(r.weakestSafe ? c.green(c.bold(`weakest level at which every interleaving held: ${r.weakestSafe}`)) : c.red(c.bold('weakest level at which every interleaving held: none of those run')))
  for (const x of r.levels) if (x.incomplete) lines.push(...hang(c.red(`not safe at ${x.isolation}: every session must complete, but in ${x.incomplete} interleaving${x.incomplete === 1 ? '' : 's'} one did not (${x.failure})`), w, 2))
  if (r.expectNotApplied) lines.push(...hang(c.dim(unappliedLine(r.expectNotApplied)), w, 2))
  const undecided = r.levels.filter((x) => x.violating === 0 && !x.complete)
  if (undecided.length) lines.push(...hang(c.yellow(`not known to hold at ${undecided.map((x) => x.isolation).join(', ')}: some interleavings there were not run or not decided (race explore --isolation <level> shows why)`), w, 2))
  if (r.fixes.length) {
    lines.push('')
    for (const f of r.fixes) {
      const row = r.levels.find((x) => x.isolation === f.level)!
      lines.push(...hang(`at ${f.level}, ${row.violating} of ${row.interleavings} violate: ${f.fixedAt ? `${f.fixedAt} held in every interleaving of this run` : 'no level run here held'}`, w, 2))
      if (row.replay) {
        // Copied into a shell as printed: a break falls inside the quoted schedule, or after a backslash.
        const cmd = row.replay.replace(/^race /, `${self} `)
        const at = cmd.lastIndexOf(' --schedule "')
        lines.push(`  the shortest violating interleaving (${row.shortestSwitches} switch${row.shortestSwitches === 1 ? '' : 'es'} between sessions):`)
        if (cmd.length + 4 <= w || at < 0) lines.push(...hang(`    ${cmd}`, w, 6))
        else lines.push(`    ${cmd.slice(0, at)} \\`, ...hang(`      ${cmd.slice(at + 1)}`, w, 8))
      }
    }
    lines.push(...hang('fixes the scenarios document (text only: race changes none of your code):', w, 2))
    for (const f of r.fixes[0].documented) lines.push(...hang(`  - ${f}`, w, 4))
  }
  const runs = r.levels.reduce((a, x) => a + x.runs, 0)
  lines.push(c.dim(`${runs} runs at ${r.levels.length} levels in ${(r.ms / 1000).toFixed(1)} s`))
  return lines.join('\n')
}
