// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved exactly as documented: the CI smoke check.
import type { Command } from 'commander'
import { describeDoc, exitCode, summarize, worstExit, type Summary } from '../judge/index.js'
import type { Driver } from '../db/driver.js'
import { resolveTarget } from '../db/target.js'
import { UsageError } from '../errors.js'
import { assertSound, ownServerRefusal } from '../plan.js'
import { defaultParams, type Documented, type Engine, type Params, type Scenario } from '../scenario.js'
import { findScenario, scenarios } from '../registry.js'
import { c, verdictColor } from '../report/color.js'
import { fitTable, type Col } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import { annotationsOf, checkWritable, ciCase, githubWanted, printAnnotations, writeJunit } from '../report/ci.js'
import { addCiOptions, addTargetOptions, assertRunsOn, engineFor, ownSettings, parseBounds, runOnce, withLab, type CiOptions, type TargetOptions, type Trial } from './common.js'
import { expectsOverride, specFailure } from '../spec/scenario.js'

export interface Case {
  scenario: Scenario
  label: string
  n: number
  params: Params
}

export function registerCheck(program: Command, exit: (code: number) => void): Command {
  const cmd = program
    .command('check')
    .description('every scenario in lockstep against one database: exit 0 only if each behaves exactly as documented')
    .argument('[scenarios...]', 'scenario ids (default: all), .spec files or .mjs modules')
  addTargetOptions(cmd, { keep: false })
  addCiOptions(cmd, 'case')
  cmd.action(async (ids: string[], o: TargetOptions & CiOptions) => exit(await checkCommand(ids, o)))
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
  $ race check advisory unique-index`,
  )
  return cmd
}

/**
 * The cases race check runs on an engine: every scenario documented there (one named but not available there is
 * bad input), its defaults and its check cases for that engine.
 */
export async function checkCases(ids: string[], engine: Engine = 'postgres'): Promise<Case[]> {
  const chosen = ids.length ? await Promise.all(ids.map(findScenario)) : (await scenarios()).filter((s) => s.documented[engine])
  for (const s of chosen) assertRunsOn(s, engine)
  const cases: Case[] = []
  for (const s of chosen) {
    cases.push({ scenario: s, label: 'default', n: s.sessionCount.default, params: defaultParams(s) })
    for (const k of s.checks ?? []) {
      if (k.engines && !k.engines.includes(engine)) continue
      cases.push({ scenario: s, label: k.label, n: k.n ?? s.sessionCount.default, params: defaultParams(s, k.params) })
    }
  }
  return cases
}

export async function checkCommand(ids: string[], o: TargetOptions & CiOptions): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  const cases = await checkCases(ids, engine)
  for (const k of cases) assertSound(k.scenario, k.params, k.n, engine)
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
  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const rows: { k: Case; t: Trial; docs: Documented[]; ms: number; summary: Summary }[] = []
    const one = async (l: Driver, k: Case) => {
      if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${k.label})...`)
      const { trial, docs, ms } = await runOnce(l, bounds, k.scenario, k.params, k.n).catch((e) => {
        throw specFailure(k.scenario, e)
      })
      rows.push({ k, t: trial, docs, ms, summary: summarize([trial], docs, expectsOverride(k.scenario)) })
    }
    for (const k of shared) await one(lab, k)
    for (const s of [...new Set(own.map((k) => k.scenario))]) {
      await withLab(undefined, bounds, async (ownLab) => {
        for (const k of own.filter((x) => x.scenario === s)) await one(ownLab, k)
      }, s)
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const code = worstExit(rows.map((r) => exitCode(r.summary)))
    const ci = rows.map(({ k, t, summary, ms }) => ciCase(`race.check.${k.scenario.id}`, k.label, ms, t, summary, exitCode(summary)))
    if (junit) writeJunit(junit, 'race check', ci, { server: `PostgreSQL ${lab.server.version}`, target: target.label, schedule: 'lockstep' })
    const notes = githubWanted(o.github) ? annotationsOf((k) => `race check: ${k.classname.slice('race.check.'.length)} (${k.name})`, ci) : []
    if (o.json) {
      const doc = {
        server: { version: lab.server.version },
        target: target.label,
        schedule: 'lockstep',
        results: rows.map(({ k, t, summary, docs, ms }) => ({
          scenario: k.scenario.id,
          case: k.label,
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
        skipped: skipped.map((k) => ({ scenario: k.scenario.id, case: k.label, why: ownServerRefusal(k.scenario) })),
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
      c.bold(k.scenario.id) + (k.label === 'default' ? '' : c.dim(` · ${k.label}`)),
      tally(t.sessions.map((x) => x.outcome + (x.sqlstate ? ` ${x.sqlstate}` : ''))) +
        `\n${t.invariant.held === null ? verdictColor('unknown') : t.invariant.held ? c.green('HELD') : c.red('VIOLATED')} ${c.dim(t.invariant.observed)}`,
      `${verdictColor(t.verdict)} ${verdictColor(summary.matched ? 'MATCH' : 'DEVIATION')}`,
    ])
    // How the sessions ended wraps; the invariant's observed value under it is what matters least here (race run
    // shows it): it is cut at the column's edge, never its HELD or VIOLATED.
    const cols: Col[] = [{ min: 16, shrink: 2 }, { min: 24, shrink: 2, overflow: (line) => (line === 0 ? 'wrap' : 'cut') }, { shrink: 0 }]
    const table = fitTable(['case', 'outcomes / invariant', 'verdict'], body, cols, w)
    const bad = rows.filter((r) => !r.summary.matched)
    const lines = [...joinFit([c.bold('race check'), `${lab.server.product ?? 'PostgreSQL'} ${lab.server.version} (${target.label})`, 'lockstep'], '  ·  ', w, 2), table]
    for (const r of bad) {
      lines.push(...hang(c.red(`${r.k.scenario.id} (${r.k.label}): documented ${r.docs.map(describeDoc).join(' | ')}`), w, 2))
      for (const d of r.summary.deviations.length ? r.summary.deviations : [r.t.why]) lines.push(...hang(c.red(`  ${d}`), w, 4))
    }
    for (const s of [...new Set(own.map((k) => k.scenario))]) lines.push(...hang(c.dim(`${s.id} ran on an embedded server of its own, started with ${ownSettings(s)} (it ${s.ownServer!.why})`), w, 2))
    for (const s of [...new Set(skipped.map((k) => k.scenario))]) {
      lines.push(...hang(c.dim(`not run here: ${s.id} (it ${s.ownServer!.why}; it runs only on race's own embedded server: race check without --database-url runs it)`), w, 2))
    }
    lines.push(bad.length ? c.red(`${bad.length} of ${rows.length} did not behave as documented`) : c.green(`all ${rows.length} behaved as documented`))
    process.stdout.write(lines.join('\n') + '\n')
    printAnnotations(notes, false)
    return code
  })
}

function tally(list: string[]): string {
  const m = new Map<string, number>()
  for (const x of list) m.set(x, (m.get(x) ?? 0) + 1)
  return [...m].map(([k, v]) => `${v} ${k}`).join(', ')
}
