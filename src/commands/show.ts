// race show <scenario>: the story, the schema, the steps as a spec, the race point and the expectation.
import type { Step } from '../scenario.js'
import { c } from '../report/color.js'
import { describeParams, findScenario } from './common.js'

function stepSql(step: Step): string {
  return typeof step === 'string' ? step : step.sql
}

export function showCommand(id: string, o: { json?: boolean }): number {
  const s = findScenario(id)
  const params = Object.fromEntries(Object.entries(s.params).map(([k, p]) => [k, p.default]))
  const sessions = Object.entries(s.sessions(params, s.defaultN))
  const replicated = sessions.every(([, x]) => x === sessions[0][1])
  const shown = replicated ? [sessions[0]] : sessions
  const lockstep = s.lockstep?.(params, s.defaultN)
  const expect = {
    lockstep: s.expect({ params, schedule: 'lockstep', n: s.defaultN, windowMs: 0 }),
    barrier: s.expect({ params, schedule: 'barrier', n: s.defaultN, windowMs: 0 }),
    barrierWithWindow: s.expect({ params, schedule: 'barrier', n: s.defaultN, windowMs: 100 }),
  }
  if (o.json) {
    const specs = sessions.map(([name, x]) => ({
      name,
      steps: Object.entries(x.steps).map(([step, st]) => ({ name: step, sql: stepSql(st) })),
      racePoint: x.racePoint,
      connection: x.connection ?? {},
      shares: x.shares ?? null,
      retries: x.retries,
    }))
    const out = {
      id: s.id,
      title: s.title,
      source: s.source,
      story: s.story,
      params: s.params,
      isolation: s.isolation(params),
      setup: s.setup,
      replicated,
      sessions: specs,
      lockstep: lockstep ?? null,
      invariant: s.invariant.description(params),
      expected: expect,
      checks: s.checks ?? [],
    }
    process.stdout.write(JSON.stringify(out, null, 2) + '\n')
    return 0
  }
  const lines: string[] = []
  lines.push(`${c.bold(s.id)}: ${s.title}`, c.dim(`from the ${s.source}`), '')
  for (const l of s.story) lines.push(`  ${l}`)
  lines.push('', c.bold('setup') + c.dim(' (in the run\'s own schema, before each trial)'))
  for (const stmt of s.setup) lines.push(indent(stmt.trim() + ';'))
  for (const [name, spec] of shown) {
    const conn = Object.entries(spec.connection ?? {})
    const title = replicated ? `session` + c.dim(` (replicated as s1..sN; default --n ${s.defaultN})`) : `session ${name}`
    lines.push('', c.bold(title))
    if (conn.length) lines.push(c.dim(`  connection: ${conn.map(([k, v]) => `${k}='${v}'`).join(', ')}`))
    if (spec.shares) lines.push(c.dim(`  connection: ${spec.shares}'s, borrowed from the pool after it (same backend)`))
    for (const [step, st] of Object.entries(spec.steps)) {
      const sql = stepSql(st).split('\n')
      lines.push(`  step ${c.cyan(step.padEnd(9))} { ${sql[0]}${sql.length > 1 ? '' : ' }'}`)
      for (let i = 1; i < sql.length; i++) lines.push(`${' '.repeat(17)}${sql[i]}${i === sql.length - 1 ? ' }' : ''}`)
      if (step === spec.racePoint) lines.push(c.dim(`  -- race point: --window sleeps here, between check and write`))
    }
    if (spec.retries !== undefined) lines.push(c.dim(`  on 40001: retry the whole transaction (--retries)`))
  }
  lines.push('', `${c.bold('isolation')}  ${s.isolation(params)}`)
  if (lockstep) {
    lines.push(`${c.bold('lockstep')}   permutation ${lockstep}`)
    const by = (s.defaultSchedule ?? 'barrier') === 'lockstep' ? 'race run uses it by default' : 'race run --schedule lockstep uses it'
    lines.push('', c.bold('interleaving') + c.dim(` (${by}; --schedule "t1.begin ..." runs another)`))
    lines.push(...drawPermutation(lockstep, sessions))
  }
  lines.push('', `${c.bold('invariant')}  ${s.invariant.description(params)}`)
  const p = describeParams(s, params)
  if (p) lines.push(`${c.bold('params')}     ${p}`)
  lines.push(
    `${c.bold('expected')}   lockstep: ${expect.lockstep.join(' | ')}; barrier: ${expect.barrier.join(' | ')}; barrier with --window: ${expect.barrierWithWindow.join(' | ')}`,
  )
  for (const k of s.checks ?? []) {
    const kp = { ...params, ...(k.params ?? {}) }
    lines.push(`           ${k.label}: lockstep: ${s.expect({ params: kp, schedule: 'lockstep', n: k.n ?? s.defaultN, windowMs: 0 }).join(' | ')}`)
  }
  process.stdout.write(lines.join('\n') + '\n')
  return 0
}

/** The permutation drawn as the articles draw it: one row per step, one column per session. */
export function drawPermutation(text: string, sessions: readonly [string, { steps: Record<string, Step> }][]): string[] {
  const names = sessions.map(([n]) => n)
  const width = names.length <= 2 ? 52 : 34
  const cut = (x: string) => (x.length > width - 2 ? x.slice(0, width - 3) + '…' : x)
  const out = ['  ' + names.map((n) => c.bold(n.toUpperCase().padEnd(width))).join('').trimEnd()]
  for (const tok of text.trim().split(/\s+/)) {
    const [session, step] = [tok.slice(0, tok.indexOf('.')), tok.slice(tok.indexOf('.') + 1)]
    const col = names.indexOf(session)
    const spec = sessions[col]?.[1].steps[step]
    const sql = spec === undefined ? '' : stepSql(spec).split('\n').find((l) => !l.startsWith('--')) ?? ''
    const cell = cut(`${step.padEnd(8)} ${sql}`)
    out.push('  ' + ' '.repeat(width * Math.max(0, col)) + c.cyan(cell.slice(0, step.length)) + cell.slice(step.length))
  }
  return out
}

function indent(sql: string): string {
  return sql
    .split('\n')
    .map((l) => '  ' + l)
    .join('\n')
}
