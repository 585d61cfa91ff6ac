// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved as documented: the CI smoke check.
import { scenarios } from '../../scenarios/index.js'
import { exitCode, summarize } from '../judge/index.js'
import { c, verdictColor } from '../report/color.js'
import { plainTable } from '../report/table.js'
import type { Params, Scenario } from '../scenario.js'
import { findScenario, parseBounds, runOnce, withLab } from './common.js'

interface Case {
  scenario: Scenario
  label: string
  n: number
  params: Params
}

export function checkCases(ids: string[]): Case[] {
  const chosen = ids.length ? ids.map(findScenario) : [...scenarios]
  const cases: Case[] = []
  for (const s of chosen) {
    const defaults = Object.fromEntries(Object.entries(s.params).map(([k, p]) => [k, p.default])) as Params
    cases.push({ scenario: s, label: 'default', n: s.defaultN, params: defaults })
    for (const k of s.checks ?? []) cases.push({ scenario: s, label: k.label, n: k.n ?? s.defaultN, params: { ...defaults, ...(k.params ?? {}) } })
  }
  return cases
}

export async function checkCommand(ids: string[], o: Record<string, any>): Promise<number> {
  const cases = checkCases(ids)
  const bounds = parseBounds(o)
  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const rows = []
    for (const k of cases) {
      if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${k.label})...`)
      const t = await runOnce(lab, bounds, k.scenario, k.params, k.n)
      const expected = k.scenario.expect({ params: k.params, schedule: 'lockstep', n: k.n, windowMs: 0 })
      rows.push({ k, t, summary: summarize([t], expected) })
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const codes = rows.map((r) => exitCode(r.summary))
    const code = codes.includes(3) ? 3 : codes.includes(1) ? 1 : 0
    if (o.json) {
      const doc = {
        server: { version: lab.server.version },
        target: target.label,
        schedule: 'lockstep',
        results: rows.map(({ k, t, summary }) => ({
          scenario: k.scenario.id,
          case: k.label,
          n: k.n,
          params: k.params,
          sessions: t.sessions,
          invariant: t.invariant,
          verdict: summary.verdict,
          why: t.why,
          expected: summary.expected,
          matched: summary.matched,
        })),
        matched: code === 0,
        exitCode: code,
      }
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
      return code
    }
    // Narrow enough for a terminal or a CI log: outcomes by kind (and SQLSTATE); race run <id> tells the rest.
    const table = plainTable(['scenario', 'case', 'n', 'outcomes', 'invariant', 'verdict', 'expected', ''], [null, 22, null, 28, 30, null, 14, null])
    for (const { k, t, summary } of rows) {
      const outcomes = tallyOutcomes(t.sessions.map((x) => x.outcome + (x.sqlstate ? ` ${x.sqlstate}` : '')))
      table.push([
        c.bold(k.scenario.id),
        k.label,
        k.n,
        outcomes,
        t.invariant.held === null ? verdictColor('unknown') : `${t.invariant.observed} ${t.invariant.held ? c.green('HELD') : c.red('VIOLATED')}`,
        verdictColor(summary.verdict),
        summary.expected.join(' | '),
        verdictColor(summary.matched ? 'MATCH' : 'DEVIATION'),
      ])
    }
    const bad = rows.filter((r) => !r.summary.matched).length
    process.stdout.write(
      `${c.bold('race check')}  ·  PostgreSQL ${lab.server.version} (${target.label})  ·  lockstep\n${table.toString()}\n` +
        (bad ? c.red(`${bad} of ${rows.length} did not behave as documented`) : c.green(`all ${rows.length} behaved as documented`)) +
        '\n',
    )
    return code
  })
}

function tallyOutcomes(list: string[]): string {
  const m = new Map<string, number>()
  for (const x of list) m.set(x, (m.get(x) ?? 0) + 1)
  return [...m].map(([k, v]) => `${v} ${k}`).join(', ')
}
