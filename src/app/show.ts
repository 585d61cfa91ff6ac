// race show for an application race: what runs (the function's own source, as the module wrote the call), how
// its steps are labelled, where the barrier stands, the setup, the invariant and the expectation.
import type { Plan } from '../plan.js'
import { applicationOf, type Scenario } from '../scenario.js'
import { invariantSqlOf } from './scenario.js'

export function appShowJson(s: Scenario, p: Plan, n: number) {
  const race = applicationOf(s)!.race
  return {
    id: s.id,
    title: s.title,
    source: s.source.section,
    kind: 'application race',
    driver: race.driver,
    n,
    sessions: p.sessions.map((x) => x.name),
    session: String(race.session),
    steps: stepRule(race.barrier),
    barrier: barrierText(race.barrier),
    setup: p.setup,
    invariant: { description: typeof s.invariant.description === 'string' ? s.invariant.description : '', sql: invariantSqlOf(race) },
    expect: race.expect,
    connection: race.connection ?? {},
  }
}

function stepRule(barrier: number | string | undefined): string {
  return `every query a session's function sends is a step, labelled by its session and its number: s1.q1, s1.q2, ...; a point the code marks with ctx.point(name) is the step s1.<name>${typeof barrier === 'string' ? ` (the barrier stands at ${barrier})` : ''}`
}

function barrierText(barrier: number | string | undefined): string {
  const b = barrier ?? 2
  return typeof b === 'number' ? `before each session's query ${b} (q${b})${b === 2 ? ': after its first query, usually its BEGIN' : ''}` : `at the point '${b}' (ctx.point('${b}'))`
}

export function appShowLines(s: Scenario, p: Plan, n: number, style: { bold: (x: string) => string; dim: (x: string) => string }): string[] {
  const race = applicationOf(s)!.race
  const lines = [`${style.bold(s.id)}: ${s.title}`, style.dim(`an application race, from ${s.source.section}`), '']
  for (const l of s.story) lines.push(`  ${l}`)
  if (s.story.length) lines.push('')
  lines.push(style.bold('setup') + style.dim(" (in the run's own schema, before each trial)"))
  for (const stmt of p.setup) lines.push(`  ${stmt.trim().replace(/;?$/, ';')}`)
  if (!p.setup.length) lines.push(style.dim('  (none)'))
  lines.push('', `${style.bold('sessions')} ${p.sessions.map((x) => x.name).join(' ')} ${style.dim(`(${n}), each on its own ${race.driver === 'pg' ? 'node-postgres Client' : race.driver === 'mariadb' ? 'mariadb Connection' : race.driver === 'mysql2' ? 'mysql2 Connection' : 'postgres.js sql'}, ${race.driver === 'mariadb' || race.driver === 'mysql2' ? "the run's own database" : "search_path the run's schema"}, running:`)}`)
  if (race.open) {
    lines.push(style.dim('  first, once per connection (its queries are not steps; what it returns is the first argument):'))
    lines.push(`  open: ${String(race.open).replace(/\s+/g, ' ').trim()}`)
    lines.push(style.dim('  then, in every trial:'))
  }
  lines.push(`  ${String(race.session).replace(/\s+/g, ' ').trim()}`)
  if (race.connection && Object.keys(race.connection).length) lines.push(style.dim(`  connection: ${Object.entries(race.connection).map(([k, v]) => `${k}=${v}`).join(' ')}`))
  lines.push('', `${style.bold('steps')}    ${stepRule(race.barrier)}.`)
  lines.push(`${style.bold('barrier')}  ${barrierText(race.barrier)}; lockstep releases query k of every session before k+1; a permutation names labels ("s1.q1 s2.q1 s1.q2 ..."); race run prints the order that ran.`)
  lines.push('', `${style.bold('invariant')} ${race.invariant === undefined ? style.dim('none: race run and race explore judge it with --oracle serial (every outcome against the serial orders of its sessions)') : invariantSqlOf(race)}`)
  lines.push(`${style.bold('expect')}   the invariant ${race.expect} ${style.dim("(the module's expect; who ends how is not documented)")}`)
  return lines
}
