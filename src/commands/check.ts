// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved exactly as documented: the CI smoke check.
import type { Command } from 'commander'
import { describeDoc, exitCode, summarize, worstExit } from '../judge/index.js'
import { assertSound, documentedFor, plan } from '../plan.js'
import { defaultParams, type CheckCase, type Params, type Pool, type Scenario } from '../scenario.js'
import { UsageError } from '../errors.js'
import { findScenario, scenarios } from '../registry.js'
import { c, verdictColor } from '../report/color.js'
import { plainTable } from '../report/table.js'
import { addTargetOptions, parseBounds, runOnce, withLab, type TargetOptions } from './common.js'
import { addPoolerOptions, parsePool, requirePooler, sizePool, type PoolerOptions } from './pooler.js'

export interface Case {
  scenario: Scenario
  label: string
  n: number
  params: Params
  /** Through this pool (race check --pooler). */
  pool?: Pool
}

export function registerCheck(program: Command, exit: (code: number) => void): Command {
  const cmd = program
    .command('check')
    .description('every scenario in lockstep against one database: exit 0 only if each behaves exactly as documented')
    .argument('[scenarios...]', 'scenario ids (default: all)')
  addTargetOptions(cmd, { keep: false })
  addPoolerOptions(cmd, { config: false })
  cmd.action(async (ids: string[], o: TargetOptions & PoolerOptions, self: Command) => exit(await checkCommand(ids, o, self)))
  cmd.addHelpText(
    'after',
    `
Each case compares the whole documented outcome: the verdict, how every session ended (committed, rejected
with its reason, or failed with which SQLSTATE), and the isolation level each session really ran at.

Examples:
  $ race check
  $ race check --database-url postgres://app@db:5432/app --json
  $ race check advisory unique-index
  $ race check --pooler pgbouncer          the scenarios documented through a pooler, each through a PgBouncer of its own`,
  )
  return cmd
}

/**
 * The cases of `race check`: each scenario's defaults and its `checks`. Through a pooler (`through`): only the
 * scenarios documented through one, each case through a pool of the scenario's size in transaction mode unless
 * the case names its own pool, and only the cases with a documented outcome there.
 */
export async function checkCases(ids: string[], through?: Pool): Promise<Case[]> {
  const chosen = ids.length ? await Promise.all(ids.map(findScenario)) : await scenarios()
  const cases: Case[] = []
  for (const s of chosen) {
    if (through && !s.pooled) {
      if (ids.length) throw new UsageError(`${s.id} documents no outcome through a pooler (race check --pooler runs ${(await scenarios()).filter((x) => x.pooled).map((x) => x.id).join(', ')})`)
      continue
    }
    const all: CheckCase[] = [{ label: 'default' }, ...(s.checks ?? [])]
    for (const k of all) {
      const n = k.n ?? s.sessionCount.default
      const params = defaultParams(s, k.params)
      if (!through) {
        if (!k.pool) cases.push({ scenario: s, label: k.label, n, params })
        continue
      }
      // A pooler the user runs keeps its own mode and size: cases that configure one are race's own pooler's.
      if (through.kind === 'external' && k.pool) continue
      const asked: Pool = { ...through, mode: k.pool?.mode ?? through.mode, resetAlways: k.pool?.resetAlways ?? through.resetAlways, size: k.pool?.size ?? null }
      const pool = sizePool({ ...asked, size: asked.size ?? 0 }, s, plan(s, { params, n, engine: 'postgres', pool: asked }).sessions.length)
      if (!documentedFor(s, { params, n, engine: 'postgres', pool, schedule: 'lockstep', windowMs: 0 }).length) continue
      cases.push({ scenario: s, label: k.label, n, params, pool })
    }
  }
  return cases
}

export async function checkCommand(ids: string[], o: TargetOptions & PoolerOptions, cmd?: Command): Promise<number> {
  const through = cmd ? parsePool(o, cmd) : undefined
  requirePooler(through)
  const cases = await checkCases(ids, through)
  for (const k of cases) assertSound(k.scenario, k.params, k.n, 'postgres', k.pool)
  const bounds = parseBounds(o)
  return withLab(o.databaseUrl, bounds, async (lab, target, via) => {
    const rows = []
    for (const k of cases) {
      if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${k.label})...`)
      const { trial, docs, ms } = await runOnce(lab, bounds, k.scenario, k.params, k.n, k.pool, via)
      rows.push({ k, t: trial, docs, ms, summary: summarize([trial], docs) })
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const code = worstExit(rows.map((r) => exitCode(r.summary)))
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
        matched: code === 0,
        exitCode: code,
      }
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
      return code
    }
    // Narrow enough for a terminal or a CI log: outcomes by kind (and SQLSTATE); what deviates is listed below.
    const table = plainTable(['scenario', 'case', 'sessions', 'outcomes', 'invariant', 'verdict', ''], [null, 22, null, 30, 30, null, null])
    for (const { k, t, summary } of rows) {
      const outcomes = tally(t.sessions.map((x) => x.outcome + (x.sqlstate ? ` ${x.sqlstate}` : '')))
      table.push([
        c.bold(k.scenario.id),
        k.pool ? `${k.label} · pool ${k.pool.size ?? '?'}` : k.label,
        t.sessions.length,
        outcomes,
        t.invariant.held === null ? verdictColor('unknown') : `${t.invariant.observed} ${t.invariant.held ? c.green('HELD') : c.red('VIOLATED')}`,
        verdictColor(t.verdict),
        verdictColor(summary.matched ? 'MATCH' : 'DEVIATION'),
      ])
    }
    const bad = rows.filter((r) => !r.summary.matched)
    const how = through?.kind === 'pgbouncer' ? `  ·  each case through a PgBouncer of its own (transaction mode unless the case says otherwise)` : through ? '  ·  through the pooler you run (--pooled)' : ''
    const lines = [`${c.bold('race check')}  ·  PostgreSQL ${lab.server.version} (${target.label})  ·  lockstep${how}`, table.toString()]
    for (const r of bad) {
      lines.push(c.red(`${r.k.scenario.id} (${r.k.label}): documented ${r.docs.map(describeDoc).join(' | ')}`))
      for (const d of r.summary.deviations.length ? r.summary.deviations : [r.t.why]) lines.push(c.red(`  ${d}`))
    }
    lines.push(bad.length ? c.red(`${bad.length} of ${rows.length} did not behave as documented`) : c.green(`all ${rows.length} behaved as documented`))
    process.stdout.write(lines.join('\n') + '\n')
    return code
  }, { pooled: through?.kind === 'external' })
}

function tally(list: string[]): string {
  const m = new Map<string, number>()
  for (const x of list) m.set(x, (m.get(x) ?? 0) + 1)
  return [...m].map(([k, v]) => `${v} ${k}`).join(', ')
}
