// A scenario resolved for one variant: its sessions and steps (with the --window sleep), the order a schedule
// runs them in, the isolation level each session is documented at, and the documented outcomes. Pure.
import { bindNames } from './binds.js'
import { UsageError } from './errors.js'
import { lockstepOrder, parsePermutation, serialOrder, type Entry } from './permutation.js'
import type { DocCtx, DocEntry, Documented, Engine, Params, Pool, Scenario, Schedule, SessionSpec, Step, StepDef, Variant } from './scenario.js'
import type { Level } from './levels.js'

export interface PlannedStep {
  name: string
  def: StepDef
  /** The --window sleep race inserts after the race point (not part of the scenario). */
  window?: boolean
}

export interface PlannedSession {
  name: string
  spec: SessionSpec
  steps: PlannedStep[]
}

export interface Plan {
  scenario: Scenario
  variant: Variant
  windowMs: number
  setup: readonly string[]
  sessions: PlannedSession[]
  /** The scenario's own interleaving, if it has one. */
  permutation?: string
  /** The level each session is documented at (null: the scenario assumes none). */
  isolation: Record<string, Level | null>
  /** The invariant's SQL on this variant's engine. */
  invariantSql: string
}

export const BUILTIN_BINDS: Record<string, string> = {
  user: 'the user this trial acts for (a fresh uuid per trial)',
  session: "this session's name",
  index: "this session's 0-based position",
  n: 'the number of sessions (--n)',
  attempt: 'which try of the transaction this is (1, then 2 after a retry)',
}

export function asDef(step: Step): StepDef {
  return typeof step === 'string' ? { sql: step } : step
}

/** The --window sleep in the engine's own words: pg_sleep on PostgreSQL, SLEEP on MySQL/MariaDB (seconds). */
export function windowSql(engine: Engine, windowMs: number): string {
  return `select ${engine === 'mysql' ? 'sleep' : 'pg_sleep'}(${windowMs / 1000})`
}

/** A session's steps in order; with --window, the engine's sleep as a step named 'window' right after the race point. */
export function stepsOf(spec: SessionSpec, windowMs: number, engine: Engine = 'postgres'): PlannedStep[] {
  const steps: PlannedStep[] = Object.entries(spec.steps).map(([name, step]) => ({ name, def: asDef(step) }))
  if (windowMs > 0 && spec.racePoint) {
    const at = steps.findIndex((s) => s.name === spec.racePoint)
    steps.splice(at + 1, 0, { name: 'window', def: { sql: windowSql(engine, windowMs) }, window: true })
  }
  return steps
}

export function plan(scenario: Scenario, variant: Variant, windowMs = 0): Plan {
  const sessions = Object.entries(scenario.sessions(variant)).map(([name, spec]) => ({ name, spec, steps: stepsOf(spec, windowMs, variant.engine) }))
  const setup = typeof scenario.setup === 'function' ? scenario.setup(variant) : scenario.setup
  const permutation = typeof scenario.permutation === 'function' ? scenario.permutation(variant) : scenario.permutation
  const iso = typeof scenario.isolation === 'function' ? scenario.isolation(variant) : scenario.isolation
  const isolation = Object.fromEntries(sessions.map((s) => [s.name, typeof iso === 'string' ? iso : (iso[s.name] ?? null)]))
  return { scenario, variant, windowMs, setup, sessions, permutation, isolation, invariantSql: invariantSql(scenario, variant) }
}

/** The invariant's SQL for a variant (its engine's, when the scenario gives one per engine). */
export function invariantSql(scenario: Scenario, variant: Variant): string {
  const sql = scenario.invariant.sql
  return typeof sql === 'function' ? sql(variant) : sql
}

/** Why a scenario does not run on an engine: its own one-line reason, or that nothing is documented there. */
/** Why the scenario cannot run on this PostgreSQL (older than its postgresSince), or undefined. */
export function tooOldFor(scenario: Pick<Scenario, 'id' | 'postgresSince'>, server: { versionNum: number; version: string }, engine: Variant['engine']): string | undefined {
  const since = scenario.postgresSince
  if (engine !== 'postgres' || !since || server.versionNum >= since.major * 10000) return undefined
  return `${scenario.id} needs PostgreSQL ${since.major} or later (it uses ${since.why}); this server is PostgreSQL ${server.version}`
}

export function unavailableOn(scenario: Scenario, engine: Variant['engine']): string | undefined {
  if (scenario.documented[engine]) return undefined
  const why = scenario.unavailable?.[engine]
  return why ?? `documents nothing for ${engine === 'mysql' ? 'MySQL/MariaDB (InnoDB)' : engine}`
}

/** The step order of a non-barrier schedule; bad permutations are refused (UsageError) before any connection opens. */
export function orderFor(p: Plan, schedule: Exclude<Schedule, 'barrier'>, permutation?: string): Entry[] {
  const named = p.sessions.map((s) => ({ name: s.name, steps: s.steps }))
  if (schedule === 'serial') return serialOrder(named)
  if (schedule === 'permutation') return parsePermutation(permutation ?? '', named)
  return p.permutation ? parsePermutation(p.permutation, named) : lockstepOrder(named)
}

function resolve(entry: DocEntry | undefined, ctx: DocCtx): Documented[] {
  if (entry === undefined) return []
  const v = typeof entry === 'function' ? entry(ctx) : entry
  return Array.isArray(v) ? [...(v as readonly Documented[])] : [v as Documented]
}

/**
 * The outcomes the scenario documents for this variant and schedule; [] when nothing is documented (an
 * explicit permutation). Several: any of them may legitimately happen.
 */
export function documentedFor(scenario: Scenario, ctx: DocCtx): Documented[] {
  const doc = scenario.documented[ctx.engine]
  if (!doc) throw new UsageError(`${scenario.id} does not run on ${ctx.engine}${scenario.unavailable?.[ctx.engine] ? `: ${scenario.unavailable[ctx.engine]}` : ''}`)
  if (ctx.pool && !pooledDocumented(scenario, ctx.pool)) return []
  const lockstep = () => {
    if (!doc.levels) return resolve(doc.lockstep, ctx)
    const level = String(ctx.params.isolation) as Level
    const entry = doc.levels[level]
    if (entry === undefined) throw new UsageError(`${scenario.id} documents no outcome at ${level}`)
    return resolve(entry, ctx)
  }
  switch (ctx.schedule) {
    case 'permutation':
      return []
    case 'serial':
      return resolve(doc.serial, ctx)
    case 'lockstep':
      return lockstep()
    default:
      // --window sleeps at a race point; where no session has one, the run is a plain barrier.
      if (ctx.windowMs > 0 && Object.values(scenario.sessions(ctx)).some((x) => x.racePoint)) return doc.window ? resolve(doc.window, ctx) : lockstep()
      if (doc.barrier) return resolve(doc.barrier, ctx)
      return dedupe([...lockstep(), ...resolve(doc.serial, ctx)])
  }
}

function dedupe(docs: Documented[]): Documented[] {
  const seen = new Set<string>()
  return docs.filter((d) => {
    const k = JSON.stringify([d.verdict, d.who])
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
}

/** Does the scenario document runs through this pool (its `pooled` declaration and mode)? */
export function pooledDocumented(s: Scenario, pool: Pool): boolean {
  return Boolean(s.pooled) && (s.pooled!.modes ?? ['transaction']).includes(pool.mode)
}

/** The scenarios whose documentation is a per-level table for this engine: the rows of `race matrix`. */
export function isMatrixRow(s: Scenario, engine: Variant['engine'] = 'postgres'): boolean {
  return Boolean(s.documented[engine]?.levels)
}

export function sessionCount(s: Scenario): { default: number; min: number; max: number } {
  return { default: s.sessionCount.default, min: s.sessionCount.min ?? 1, max: s.sessionCount.max ?? 10_000 }
}

/** Problems with a scenario's declaration, for a variant: empty when it is sound. Pure; used by tests and by the loader of user files. */
export function checkScenario(s: Scenario, params: Params, n: number, engine: Variant['engine'] = 'postgres', pool?: Pool): string[] {
  const problems: string[] = []
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(s.id)) problems.push(`id '${s.id}' is not kebab-case`)
  const doc = s.documented[engine]
  if (!doc) return [...problems, `documents nothing for ${engine}`]
  if (!doc.lockstep && !doc.levels && !s.expects) problems.push('documents neither a lockstep outcome nor a levels table')
  let p: Plan
  try {
    p = plan(s, { params, n, engine, ...(pool ? { pool } : {}) })
  } catch (e) {
    return [...problems, `its sessions cannot be built: ${(e as Error).message}`]
  }
  const names = p.sessions.map((x) => x.name)
  for (const sess of p.sessions) {
    if (!sess.steps.length) problems.push(`session ${sess.name} has no steps`)
    if (sess.spec.racePoint && !sess.steps.some((x) => x.name === sess.spec.racePoint)) problems.push(`session ${sess.name}: race point '${sess.spec.racePoint}' is not one of its steps`)
    if (sess.spec.shares && !names.slice(0, names.indexOf(sess.name)).includes(sess.spec.shares)) problems.push(`session ${sess.name} shares '${sess.spec.shares}', which is not an earlier session`)
    const known = new Set([...Object.keys(BUILTIN_BINDS), ...Object.keys(params), ...Object.keys(s.binds ?? {}), ...Object.keys(sess.spec.binds ?? {})])
    sess.steps.forEach((st, k) => {
      const wait = st.def.appWait
      if (wait && !(wait.param in params)) problems.push(`session ${sess.name} step ${st.name}: waits for param '${wait.param}', which the scenario does not declare`)
      if (wait && st.def.sql.trim()) problems.push(`session ${sess.name} step ${st.name}: an application wait has no SQL`)
      for (const b of bindNames(st.def.sql)) {
        const dot = b.indexOf('.')
        if (b.split('.').length > 2) problems.push(`session ${sess.name} step ${st.name}: :${b} names another session's step, which only the invariant may read`)
        else if (dot >= 0) {
          const from = b.slice(0, dot)
          if (!sess.steps.slice(0, k).some((x) => x.name === from)) problems.push(`session ${sess.name} step ${st.name}: :${b} names no earlier step of the session`)
        } else if (!known.has(b)) problems.push(`session ${sess.name} step ${st.name}: unknown bind :${b}`)
      }
    })
  }
  for (const b of bindNames(p.invariantSql)) {
    const parts = b.split('.')
    if (parts.length === 3) {
      const sess = p.sessions.find((x) => x.name === parts[0])
      if (!sess) problems.push(`invariant: :${b} names no session ${parts[0]}`)
      else if (!sess.steps.some((x) => x.name === parts[1])) problems.push(`invariant: :${b} names no step ${parts[1]} of session ${parts[0]}`)
    } else if (b.includes('.') || !(b in BUILTIN_BINDS || b in params || b in (s.binds ?? {}))) problems.push(`invariant: unknown bind :${b}`)
  }
  if (p.permutation) {
    try {
      orderFor(p, 'lockstep')
    } catch (e) {
      problems.push(`its permutation: ${(e as Error).message}`)
    }
  }
  // Every documented outcome names every session, or counts the ones it does not name.
  const schedules: [Schedule, number][] = [['lockstep', 0], ['serial', 0], ['barrier', 0], ['barrier', 100]]
  for (const [schedule, windowMs] of schedules) {
    let docs: Documented[]
    try {
      docs = documentedFor(s, { params, n, engine, schedule, windowMs, ...(pool ? { pool } : {}) })
    } catch (e) {
      problems.push(`${schedule}: ${(e as Error).message}`)
      continue
    }
    if (!docs.length && !pool && !s.expects) problems.push(`documents no outcome for ${schedule}${windowMs ? ' with --window' : ''}`)
    for (const d of docs) {
      const named = Object.entries(d.who).filter(([, v]) => typeof v === 'string').map(([k]) => k)
      const counted = Object.entries(d.who).filter(([, v]) => typeof v !== 'string')
      for (const k of named) if (!names.includes(k)) problems.push(`${schedule}: documents session '${k}', which this variant does not have`)
      for (const k of Object.keys(d.waited ?? {})) if (!names.includes(k)) problems.push(`${schedule}: documents a wait for session '${k}', which this variant does not have`)
      const rest = names.length - named.length
      const lo = counted.reduce((a, [, v]) => a + (typeof v === 'number' ? v : (v as readonly number[])[0]), 0)
      const hi = counted.reduce((a, [, v]) => a + (typeof v === 'number' ? v : (v as readonly number[])[1]), 0)
      if (rest < lo || rest > hi) problems.push(`${schedule}: documents ${named.length} session(s) by name and ${lo === hi ? lo : `${lo}-${hi}`} by count, but ${names.length} sessions run`)
    }
  }
  return problems
}

/** The one line that refuses a scenario with its own server (OwnServer) on a server the user gave. */
export function ownServerRefusal(s: Pick<Scenario, 'id' | 'ownServer'>): string {
  return `${s.id} ${s.ownServer?.why ?? 'needs a server of its own'}, so it runs only on race's own embedded server: leave out --database-url (and unset DATABASE_URL and PG*)`
}

/** Refuses (exit 2, one line) a scenario whose declaration is unsound for this variant, naming the first problem. */
export function assertSound(s: Scenario, params: Params, n: number, engine: Variant['engine'] = 'postgres', pool?: Pool): void {
  const problems = checkScenario(s, params, n, engine, pool)
  if (problems.length) throw new UsageError(`scenario ${s.id} is not sound: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`)
}
