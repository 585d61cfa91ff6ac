// race check's service: the cases (every scenario documented on the engine, its defaults and its check cases), which
// of them run here, each run once in lockstep (judge.ts runOnce) and judged against its documentation. Nothing is
// printed here (report/check.ts prints).
import type { Driver } from '../db/driver.js'
import type { Target } from '../db/target.js'
import { resolveTarget } from '../db/target.js'
import type { Words } from '../engine/refusals.js'
import { UsageError } from '../errors.js'
import { exitCode, summarize, worstExit, type Summary } from '../judge/index.js'
import type { RunContext } from '../lifecycle.js'
import { assertSound, documentedFor, ownServerRefusal, plan, tooOldFor } from '../plan.js'
import { findScenario, scenarios } from '../registry.js'
import { defaultParams, type CheckCase, type Documented, type Engine, type Params, type Pool, type Scenario } from '../scenario.js'
import { expectsOverride, specFailure } from '../specfile/common.js'
import { runOnce, type Trial } from './judge.js'
import { assertRunsOn, withLab } from './lab.js'
import { sizePool, type Bounds } from './params.js'

export interface Case {
  scenario: Scenario
  label: string
  n: number
  params: Params
  /** Through this pool (race check --pooler). */
  pool?: Pool
}

/**
 * The cases race check runs on an engine: every scenario documented there (one named but not available there is
 * bad input), its defaults and its check cases for that engine. Through a pooler (`through`, PostgreSQL only):
 * only the scenarios documented through one, each case through a pool of the scenario's size in transaction mode
 * unless the case names its own pool, and only the cases with a documented outcome there; without one, the
 * cases that configure a pool are left out.
 */
export async function checkCases(ids: string[], engine: Engine = 'postgres', through?: Pool): Promise<Case[]> {
  const chosen = ids.length ? await Promise.all(ids.map(findScenario)) : (await scenarios()).filter((s) => s.documented[engine])
  for (const s of chosen) assertRunsOn(s, engine)
  const cases: Case[] = []
  for (const s of chosen) {
    if (through && !s.pooled) {
      if (ids.length) throw new UsageError(`${s.id} documents no outcome through a pooler (race check --pooler runs ${(await scenarios()).filter((x) => x.pooled).map((x) => x.id).join(', ')})`)
      continue
    }
    const all: CheckCase[] = [{ label: 'default' }, ...(s.checks ?? [])]
    for (const k of all) {
      if (k.engines && !k.engines.includes(engine)) continue
      const n = k.n ?? s.sessionCount.default
      const params = defaultParams(s, k.params)
      if (!through) {
        if (!k.pool) cases.push({ scenario: s, label: k.label, n, params })
        continue
      }
      // A pooler the user runs keeps its own mode and size: cases that configure one are race's own pooler's.
      if (through.kind === 'external' && k.pool) continue
      const asked: Pool = { ...through, mode: k.pool?.mode ?? through.mode, resetAlways: k.pool?.resetAlways ?? through.resetAlways, size: k.pool?.size ?? null }
      const pool = sizePool({ ...asked, size: asked.size ?? 0 }, s, plan(s, { params, n, engine, pool: asked }).sessions.length)
      if (!documentedFor(s, { params, n, engine, pool, schedule: 'lockstep', windowMs: 0 }).length) continue
      cases.push({ scenario: s, label: k.label, n, params, pool })
    }
  }
  return cases
}

/** A case's name in reports: its label, and through a pooler the pool's size. */
export function caseName(k: Case): string {
  return k.pool ? `${k.label} · pool ${k.pool.size ?? '?'}` : k.label
}

/** race check as asked for: the scenario ids named (none: all), the engine, the pooler the cases go through. */
export interface CheckRequest {
  ids: string[]
  engine: Engine
  through?: Pool
  databaseUrl?: string
}

/**
 * The cases of a request, checked, split by where they run: `shared` on the target; `own` on an embedded server race
 * starts for the scenario (Scenario.ownServer); `skipped`, such scenarios on a server the user gave (asking for one
 * by name there is refused, exit 2).
 */
export interface CheckCases {
  shared: Case[]
  own: Case[]
  skipped: Case[]
}

/** The cases, each sound (assertSound); `bounds` is read in between, as the options' errors come in that order. */
export async function casesFor(r: CheckRequest): Promise<Case[]> {
  const cases = await checkCases(r.ids, r.engine, r.through)
  for (const k of cases) assertSound(k.scenario, k.params, k.n, r.engine, k.pool)
  return cases
}

/** Which cases run where (CheckCases). */
export function placeCases(r: CheckRequest, cases: Case[]): CheckCases {
  // A scenario with a server of its own (lock-limit) runs on an embedded server race starts for it; on a server
  // the user gave it is left out (and asking for it by name is refused, exit 2).
  let own = cases.filter((k) => k.scenario.ownServer)
  let skipped: Case[] = []
  if (own.length && resolveTarget(r.databaseUrl).kind !== 'embedded') {
    const named = own.find((k) => r.ids.includes(k.scenario.id))
    if (named) throw new UsageError(ownServerRefusal(named.scenario))
    skipped = own
    own = []
  }
  return { shared: cases.filter((k) => !k.scenario.ownServer), own, skipped }
}

/** A case run and judged. */
export interface CheckRow {
  k: Case
  t: Trial
  docs: Documented[]
  ms: number
  summary: Summary
}

/** What race check found: the rows run, the cases left out and why, and the exit code. */
export interface CheckResult extends CheckCases {
  rows: CheckRow[]
  /** Cases that need a newer PostgreSQL than the target's. */
  old: Case[]
  /** Cases whose sessions set a parameter this role may not set, with the reason. */
  refused: Map<Case, string>
  code: number
}

/**
 * Runs the placed cases on the open target (`lab`; `via`: the user's pooler, --pooled), the own-server ones each on a
 * server of its own; `onCase` is called as each starts. A case asked for by name that this server is too old for is
 * refused (exit 2).
 */
export async function runChecks(
  ctx: RunContext,
  lab: Driver,
  via: Target | undefined,
  r: CheckRequest,
  placed: CheckCases,
  o: { bounds: Bounds; word?: Words; onCase?: (k: Case) => void },
): Promise<CheckResult> {
  const { shared, own } = placed
  const rows: CheckRow[] = []
  // Cases whose sessions set a parameter this role may not set (deadlock_timeout needs a superuser): each is
  // skipped with the reason, and the others run, instead of the first one's connection refusal ending them all.
  const refused = new Map<Case, string>()
  const unsettable = await unsettableParameters(lab, [...new Set(shared.flatMap((k) => connectionParameters(k, r.engine)))])
  for (const k of shared) {
    const names = connectionParameters(k, r.engine).filter((x) => unsettable.has(x))
    if (names.length) refused.set(k, unsettableReason(names))
  }
  const one = async (l: Driver, k: Case) => {
    o.onCase?.(k)
    const { trial, docs, ms } = await runOnce(ctx, l, o.bounds, k.scenario, k.params, k.n, k.pool, via, o.word).catch((e) => {
      throw specFailure(k.scenario, e)
    })
    rows.push({ k, t: trial, docs, ms, summary: summarize([trial], docs, expectsOverride(k.scenario)) })
  }
  // A scenario that needs a newer PostgreSQL than this one is left out (asked for by name, it is refused).
  const old = shared.filter((k) => tooOldFor(k.scenario, lab.server, lab.engine))
  const named = old.find((k) => r.ids.includes(k.scenario.id))
  if (named) throw new UsageError(tooOldFor(named.scenario, lab.server, lab.engine)!)
  for (const k of shared) if (!old.includes(k) && !refused.has(k)) await one(lab, k)
  for (const s of [...new Set(own.map((k) => k.scenario))]) {
    await withLab(ctx, undefined, o.bounds, async (ownLab) => {
      for (const k of own.filter((x) => x.scenario === s)) await one(ownLab, k)
    }, s)
  }
  // A skipped case is not a pass: with nothing run at all, nothing was checked (exit 3).
  const code = rows.length || !refused.size ? worstExit(rows.map((x) => exitCode(x.summary))) : 3
  return { ...placed, rows, old, refused, code }
}

/** The startup parameters a case's sessions set (PostgreSQL; MySQL sessions set none this way). */
function connectionParameters(k: Case, engine: Engine): string[] {
  if (engine !== 'postgres') return []
  const p = plan(k.scenario, { params: k.params, n: k.n, engine, ...(k.pool ? { pool: k.pool } : {}) })
  return [...new Set(p.sessions.flatMap((x) => Object.keys(x.spec.connection ?? {})))]
}

/**
 * Of these parameters, those the server says this role may not set at connect: a superuser-only parameter
 * (pg_settings.context superuser or superuser-backend) for a role that is not a superuser, unless on
 * PostgreSQL 15+ it was granted SET on that parameter (has_parameter_privilege).
 */
async function unsettableParameters(lab: Driver, names: string[]): Promise<Set<string>> {
  if (!names.length || lab.engine !== 'postgres') return new Set()
  const granted = lab.server.versionNum >= 150000 ? `(s.context = 'superuser' and has_parameter_privilege(s.name, 'SET'))` : 'false'
  const rows = await lab.query(
    `select s.name from pg_settings s
      where s.name = any($1::text[]) and s.context in ('superuser', 'superuser-backend')
        and not (select rolsuper from pg_roles where rolname = current_user) and not ${granted}`,
    [names],
  )
  return new Set(rows.map((r) => String(r.name)))
}

function unsettableReason(names: string[]): string {
  const list = names.join(', ')
  return `its sessions set ${list}, which only a superuser may set (this role is not one): run race check as a superuser${names.length === 1 ? `, or on PostgreSQL 15+ GRANT SET ON PARAMETER ${list} TO this role` : ''}`
}
