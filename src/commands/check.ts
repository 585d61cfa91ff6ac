// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved exactly as documented: the CI smoke check.
import { cliWords } from './words.js'
import type { RunContext } from '../lifecycle.js'
import type { Command } from 'commander'
import { describeDoc, exitCode, summarize, worstExit, type Summary } from '../judge/index.js'
import type { Driver } from '../db/driver.js'
import { resolveTarget } from '../db/target.js'
import { UsageError } from '../errors.js'
import { assertSound, documentedFor, ownServerRefusal, plan, tooOldFor } from '../plan.js'
import { defaultParams, type CheckCase, type Documented, type Engine, type Params, type Pool, type Scenario } from '../scenario.js'
import { findScenario, scenarios } from '../registry.js'
import { c, verdictColor } from '../report/color.js'
import { fitTable, type Col } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import { annotationsOf, checkWritable, ciCase, githubWanted, printAnnotations, writeJunit } from '../report/ci.js'
import { addCiOptions, addTargetOptions, eachPg, type CiOptions, type TargetOptions } from './common.js'
import { ownSettings } from '../report/run.js'
import { runOnce, type Trial } from '../run/judge.js'
import { assertRunsOn, engineFor, withLab } from '../run/lab.js'
import { parseBounds, sizePool } from '../run/params.js'
import { requirePooler } from '../run/pooler.js'
import { expectsOverride, specFailure } from '../isolation/common.js'
import { addPoolerOptions, parsePool, type PoolerOptions } from './pool-options.js'

export interface Case {
  scenario: Scenario
  label: string
  n: number
  params: Params
  /** Through this pool (race check --pooler). */
  pool?: Pool
}

export function registerCheck(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('check')
    .description('every scenario in lockstep against one database: exit 0 only if each behaves exactly as documented')
    .argument('[scenarios...]', 'scenario ids (default: all), .spec files or .mjs modules')
  addTargetOptions(cmd, ctx, { keep: false, pg: true })
  addCiOptions(cmd, 'case')
  addPoolerOptions(cmd, { config: false })
  cmd.action(async (ids: string[], o: TargetOptions & CiOptions & PoolerOptions, self: Command) => exit(await eachPg(ctx, o, () => checkCommand(ctx, ids, o, self))))
  cmd.addHelpText(
    'after',
    `
Each case compares the whole documented outcome: the verdict, how every session
ended (committed, rejected with its reason, or failed with which SQLSTATE), and
the isolation level each session really ran at.

Examples:
  $ race check
  $ race check --database-url postgres://app@db:5432/app --json
  $ race check --junit race-junit.xml      (CI: one testcase per case)
  $ race check advisory unique-index
  $ race check --pooler pgbouncer          (each case through a PgBouncer of its own)`,
  )
  return cmd
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
function caseName(k: Case): string {
  return k.pool ? `${k.label} · pool ${k.pool.size ?? '?'}` : k.label
}

export async function checkCommand(ctx: RunContext, ids: string[], o: TargetOptions & CiOptions & PoolerOptions, cmd?: Command): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  const through = cmd ? parsePool(o, cmd, engine) : undefined
  requirePooler(through)
  const cases = await checkCases(ids, engine, through)
  for (const k of cases) assertSound(k.scenario, k.params, k.n, engine, k.pool)
  const bounds = parseBounds(o)
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  // A scenario with a server of its own (lock-limit) runs on an embedded server race starts for it; on a server
  // the user gave it is left out (and asking for it by name is refused, exit 2).
  let own = cases.filter((k) => k.scenario.ownServer)
  let skipped: Case[] = []
  if (own.length && resolveTarget(o.databaseUrl).kind !== 'embedded') {
    const named = own.find((k) => ids.includes(k.scenario.id))
    if (named) throw new UsageError(ownServerRefusal(named.scenario))
    skipped = own
    own = []
  }
  const shared = cases.filter((k) => !k.scenario.ownServer)
  return withLab(ctx, o.databaseUrl, bounds, async (lab, target, via) => {
    const rows: { k: Case; t: Trial; docs: Documented[]; ms: number; summary: Summary }[] = []
    // Cases whose sessions set a parameter this role may not set (deadlock_timeout needs a superuser): each is
    // skipped with the reason, and the others run, instead of the first one's connection refusal ending them all.
    const refused = new Map<Case, string>()
    const unsettable = await unsettableParameters(lab, [...new Set(shared.flatMap((k) => connectionParameters(k, engine)))])
    for (const k of shared) {
      const names = connectionParameters(k, engine).filter((x) => unsettable.has(x))
      if (names.length) refused.set(k, unsettableReason(names))
    }
    const one = async (l: Driver, k: Case) => {
      if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${caseName(k)})...`)
      const { trial, docs, ms } = await runOnce(ctx, l, bounds, k.scenario, k.params, k.n, k.pool, via, cliWords).catch((e) => {
        throw specFailure(k.scenario, e)
      })
      rows.push({ k, t: trial, docs, ms, summary: summarize([trial], docs, expectsOverride(k.scenario)) })
    }
    // A scenario that needs a newer PostgreSQL than this one is left out (asked for by name, it is refused).
    const old = shared.filter((k) => tooOldFor(k.scenario, lab.server, lab.engine))
    const named = old.find((k) => ids.includes(k.scenario.id))
    if (named) throw new UsageError(tooOldFor(named.scenario, lab.server, lab.engine)!)
    for (const k of shared) if (!old.includes(k) && !refused.has(k)) await one(lab, k)
    for (const s of [...new Set(own.map((k) => k.scenario))]) {
      await withLab(ctx, undefined, bounds, async (ownLab) => {
        for (const k of own.filter((x) => x.scenario === s)) await one(ownLab, k)
      }, s)
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    // A skipped case is not a pass: with nothing run at all, nothing was checked (exit 3).
    const code = rows.length || !refused.size ? worstExit(rows.map((r) => exitCode(r.summary))) : 3
    const ci = rows.map(({ k, t, summary, ms }) => ({ ...ciCase(`race.check.${k.scenario.id}`, caseName(k), ms, t, summary, exitCode(summary)), ...fileOf(k.scenario) }))
    // A case left out on this server is in the file, skipped with the reason, not missing.
    for (const k of skipped) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: ownServerRefusal(k.scenario) })
    for (const k of old) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: tooOldFor(k.scenario, lab.server, lab.engine)! })
    for (const [k, why] of refused) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: why })
    // The suite's time is the whole run's (since race started: connecting, servers of their own, every case).
    if (junit) writeJunit(junit, 'race check', ci, { server: `PostgreSQL ${lab.server.version}`, target: target.label, schedule: 'lockstep' }, Math.round(performance.now()))
    const notes = githubWanted(o.github) ? annotationsOf((k) => `race check: ${k.classname.slice('race.check.'.length)} (${k.name})`, ci) : []
    if (o.json) {
      const doc = {
        server: { version: lab.server.version },
        target: target.label,
        schedule: 'lockstep',
        results: rows.map(({ k, t, summary, docs, ms }) => ({
          scenario: k.scenario.id,
          case: k.label,
          ...(k.pool ? { pool: k.pool } : {}),
          sessions: t.sessions,
          params: k.params,
          invariant: t.invariant,
          verdict: t.verdict,
          why: t.why,
          documented: docs,
          expected: summary.expected,
          matched: summary.matched,
          deviations: summary.deviations,
          ms,
        })),
        skipped: [
          ...skipped.map((k) => ({ scenario: k.scenario.id, case: k.label, why: ownServerRefusal(k.scenario) })),
          ...old.map((k) => ({ scenario: k.scenario.id, case: k.label, why: tooOldFor(k.scenario, lab.server, lab.engine)! })),
          ...[...refused].map(([k, why]) => ({ scenario: k.scenario.id, case: k.label, why })),
        ],
        matched: code === 0,
        exitCode: code,
      }
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
      printAnnotations(notes, true)
      return code
    }
    // Fits the terminal or a CI log (80 columns when piped): the case and how its sessions ended stay whole; the
    // invariant's observed value is what wraps first. What deviates is listed below the table.
    const w = columns()
    const body = rows.map(({ k, t, summary }) => [
      c.bold(k.scenario.id) + (caseName(k) === 'default' ? '' : c.dim(` · ${caseName(k)}`)),
      tally(t.sessions.map((x) => x.outcome + (x.sqlstate ? ` ${x.sqlstate}` : ''))) +
        `\n${t.invariant.held === null ? verdictColor('unknown') : t.invariant.held ? c.green('HELD') : c.red('VIOLATED')} ${c.dim(t.invariant.observed)}`,
      `${verdictColor(t.verdict)} ${verdictColor(summary.matched ? 'MATCH' : 'DEVIATION')}`,
    ])
    // How the sessions ended wraps; the invariant's observed value under it is what matters least here (race run
    // shows it): it is cut at the column's edge, never its HELD or VIOLATED.
    const cols: Col[] = [{ min: 16, shrink: 2 }, { min: 24, shrink: 2, overflow: (line) => (line === 0 ? 'wrap' : 'cut') }, { shrink: 0 }]
    const table = fitTable(['case', 'outcomes / invariant', 'verdict'], body, cols, w)
    const bad = rows.filter((r) => !r.summary.matched)
    const how = through?.kind === 'pgbouncer' ? 'each case through a PgBouncer of its own' : through ? 'through the pooler you run (--pooled)' : ''
    const lines = [...joinFit([c.bold('race check'), `${lab.server.product ?? 'PostgreSQL'} ${lab.server.version} (${target.label})`, 'lockstep', how], '  ·  ', w, 2), table]
    for (const r of bad) {
      // What it was held to: the documented outcomes, the file's --expect, or (never an empty "documented") neither.
      const by = expectsOverride(r.k.scenario)
      const said = by ? `expected ${by} (the file's expect)` : r.docs.length ? `documented ${r.docs.map(describeDoc).join(' | ')}` : 'not documented (give it an expect, or run it with --expect held|violated)'
      lines.push(...hang(c.red(`${r.k.scenario.id} (${r.k.label}): ${said}`), w, 2))
      for (const d of r.summary.deviations.length ? r.summary.deviations : [r.t.why]) lines.push(...hang(c.red(`  ${d}`), w, 4))
    }
    for (const s of [...new Set(own.map((k) => k.scenario))]) lines.push(...hang(c.dim(`${s.id} ran on an embedded server of its own, started with ${ownSettings(s)} (it ${s.ownServer!.why})`), w, 2))
    for (const s of [...new Set(skipped.map((k) => k.scenario))]) {
      lines.push(...hang(c.dim(`not run here: ${s.id} (it ${s.ownServer!.why}; it runs only on race's own embedded server: race check without --database-url runs it)`), w, 2))
    }
    for (const s of [...new Set(old.map((k) => k.scenario))]) lines.push(...hang(c.dim(`not run here: ${tooOldFor(s, lab.server, lab.engine)}`), w, 2))
    for (const [k, why] of refused) lines.push(...hang(c.yellow(`skipped: ${k.scenario.id} (${caseName(k)}): ${why}`), w, 2))
    const skippedNote = refused.size ? c.yellow(`; ${refused.size} skipped (not checked)`) : ''
    lines.push(
      !rows.length && refused.size
        ? c.red(`nothing could be checked: all ${refused.size} skipped`)
        : (bad.length ? c.red(`${bad.length} of ${rows.length} did not behave as documented`) : c.green(`all ${rows.length} behaved as documented`)) + skippedNote,
    )
    process.stdout.write(lines.join('\n') + '\n')
    printAnnotations(notes, false)
    return code
  }, undefined, { pooled: through?.kind === 'external' })
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

function tally(list: string[]): string {
  const m = new Map<string, number>()
  for (const x of list) m.set(x, (m.get(x) ?? 0) + 1)
  return [...m].map(([k, v]) => `${v} ${k}`).join(', ')
}

/** A user's own scenario file (spec or .mjs), for the annotations' file=. */
function fileOf(s: Scenario): { file?: string } {
  return s.source.article === 'file' ? { file: s.source.section } : {}
}
