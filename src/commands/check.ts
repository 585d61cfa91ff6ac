// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved exactly as documented: the CI smoke check.
import type { Command } from 'commander'
import { describeDoc, exitCode, summarize, worstExit } from '../judge/index.js'
import { assertSound } from '../plan.js'
import { defaultParams, type Params, type Scenario } from '../scenario.js'
import { findScenario, scenarios } from '../registry.js'
import { c, verdictColor } from '../report/color.js'
import { fitTable, type Col } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import { annotationsOf, checkWritable, ciCase, githubWanted, printAnnotations, writeJunit } from '../report/ci.js'
import { addCiOptions, addTargetOptions, parseBounds, runOnce, withLab, type CiOptions, type TargetOptions } from './common.js'

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
    .argument('[scenarios...]', 'scenario ids (default: all)')
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

export async function checkCases(ids: string[]): Promise<Case[]> {
  const chosen = ids.length ? await Promise.all(ids.map(findScenario)) : await scenarios()
  const cases: Case[] = []
  for (const s of chosen) {
    cases.push({ scenario: s, label: 'default', n: s.sessionCount.default, params: defaultParams(s) })
    for (const k of s.checks ?? []) cases.push({ scenario: s, label: k.label, n: k.n ?? s.sessionCount.default, params: defaultParams(s, k.params) })
  }
  return cases
}

export async function checkCommand(ids: string[], o: TargetOptions & CiOptions): Promise<number> {
  const cases = await checkCases(ids)
  for (const k of cases) assertSound(k.scenario, k.params, k.n)
  const bounds = parseBounds(o)
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const rows = []
    for (const k of cases) {
      if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${k.label})...`)
      const { trial, docs, ms } = await runOnce(lab, bounds, k.scenario, k.params, k.n)
      rows.push({ k, t: trial, docs, ms, summary: summarize([trial], docs) })
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
    const lines = [...joinFit([c.bold('race check'), `PostgreSQL ${lab.server.version} (${target.label})`, 'lockstep'], '  ·  ', w, 2), table]
    for (const r of bad) {
      lines.push(...hang(c.red(`${r.k.scenario.id} (${r.k.label}): documented ${r.docs.map(describeDoc).join(' | ')}`), w, 2))
      for (const d of r.summary.deviations.length ? r.summary.deviations : [r.t.why]) lines.push(...hang(c.red(`  ${d}`), w, 4))
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
