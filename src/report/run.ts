// race run's report (and run()'s text): what ran where, the sessions, the invariant and the verdict, drawn in the
// style of the run's context (RunContext.style), passed in.
import { formatDuration } from '../parse.js'
import { DEFAULT_LEVEL, type Params, type Scenario, type Schedule } from '../scenario.js'
import type { Style } from './color.js'
import type { RunView } from '../run/view.js'
import { columns, hang, joinFit } from './width.js'

/** "max_locks_per_transaction=10 max_connections=20": the settings of a scenario's own server. */
export function ownSettings(s: Scenario): string {
  return Object.entries(s.ownServer?.settings ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')
}

export function describeParams(s: Scenario, params: Params): string {
  return Object.entries(s.params)
    // A session-level --isolation left to the connections' own default says nothing the isolation line does not.
    .filter(([k]) => params[k] !== DEFAULT_LEVEL)
    .map(([k, p]) => {
      const flag = p.flag.split(' ')[0].replace(/^--(no-)?/, '')
      const v = params[k]
      return p.kind === 'duration' ? `${flag}=${formatDuration(Number(v))}` : `${flag}=${v}`
    })
    .join(' ')
}

/** The first line of a run's report: what ran where, how many sessions, which schedule. */
/** `server`: the product and version, e.g. "PostgreSQL 18.4" or "MariaDB 10.11.19". */
/**
 * A barrier run's order is the order its queries were sent; two were on the server at once, which no --schedule
 * runs (a permutation lets one step go at a time): labelled `sent`, not `order`, and says so.
 */
export function sentLines(c: Style, order: readonly string[], [first, second]: readonly [string, string], w: number): string[] {
  return [
    ...hang(`${c.dim('sent')}       ${order.join(' ')}`, w, 11),
    ...hang(`${' '.repeat(11)}${c.dim(`(the order the queries were sent, not a replay line: ${second} was sent while ${first} was on the server, and --schedule runs one step at a time, so this line pasted there runs another interleaving; race explore prints lines that replay)`)}`, w, 11),
  ]
}

export function headParts(c: Style, id: string, server: string, target: string, n: number, schedule: Schedule, windowMs: number): string[] {
  return [c.bold(`race run ${id}`), `${server} (${target})`, `${n} session${n === 1 ? '' : 's'}`, `${schedule}${windowMs ? ` window ${formatDuration(windowMs)}` : ''}`]
}

export function render(
  c: Style,
  r: RunView,
  drawn: 'race' | 'all' | undefined,
  kept: boolean,
  { backendLines, deviationLines, invariantLine, isolationLine, sessionsTable, trialsTable, verdictLine }: typeof import('../report/table.js'),
  timeline?: typeof import('../report/timeline.js').timeline,
): string {
  const w = columns()
  const { scenario, summary, representative: t } = r
  const lines = joinFit(headParts(c, scenario.id, `${r.server.product ?? 'PostgreSQL'} ${r.server.version}`, r.target, t.sessions.length, r.schedule, r.windowMs), '  ·  ', w, 2)
  const ps = describeParams(scenario, r.params)
  if (ps) lines.push(...hang(c.dim(ps + (r.holdMs ? ` (lock timeouts extended by --hold ${formatDuration(r.holdMs)})` : '')), w, 2))
  if (scenario.ownServer) lines.push(...hang(c.dim(`a server of its own, started with ${ownSettings(scenario)} (it ${scenario.ownServer.why})`), w, 2))
  if (r.pooled) lines.push(...hang(`${c.dim('pooler')}     ${r.pooled}; each session is a client of it, the control connection goes direct`, w, 11))
  // A session-level --isolation (application races, specs): the level race set on each connection.
  const asked = r.scenario.params.isolation?.default === DEFAULT_LEVEL && r.params.isolation !== DEFAULT_LEVEL ? String(r.params.isolation) : undefined
  lines.push(isolationLine(c, t, r.plan.isolation, w, asked))
  lines.push('')
  if (drawn && timeline) lines.push(timeline(c, t, { all: drawn === 'all', width: w }), '')
  if (summary.trials > 1) lines.push(trialsTable(c, r.trials, summary, w), '', c.dim(`one ${t.comparison.matched ? t.verdict : 'deviating'} trial:`))
  lines.push(sessionsTable(c, t, w), ...backendLines(c, t, w))
  // An application race: the order its queries ran in, as a permutation that --schedule replays.
  if (t.order?.length && t.overlap) lines.push(...sentLines(c, t.order, t.overlap, w))
  else if (t.order?.length) lines.push(...hang(`${c.dim('order')}      ${t.order.join(' ')}`, w, 11))
  lines.push(invariantLine(c, t, w), verdictLine(c, summary, summary.trials === 1 ? t.why : undefined, w), ...deviationLines(c, summary, w))
  if (kept) lines.push(...hang(c.dim(`schema ${r.schema} kept (--keep): drop schema "${r.schema}" cascade`), w, 2))
  return lines.join('\n')
}
