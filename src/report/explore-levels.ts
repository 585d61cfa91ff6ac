// The report race explore --isolation all (or a list of levels) prints: one row per level, the weakest level at
// which every interleaving held, and the shortest violation of each level that did not hold.
import type { LevelRow, LevelsResult } from '../explore/levels.js'
import type { Level } from '../levels.js'
import type { Style } from './color.js'
import { fitTable } from './table.js'
import { columns, hang, joinFit } from './width.js'

const LEVEL_WORD: Record<Level, string> = { 'read uncommitted': 'READ UNCOMMITTED', 'read committed': 'READ COMMITTED', 'repeatable read': 'REPEATABLE READ', serializable: 'SERIALIZABLE' }

/** How the held interleavings of a row held: "40001 ×30, 10 clean". */
export function heldText(r: LevelRow): string {
  const parts = Object.entries(r.prevented)
    .sort((a, b) => b[1] - a[1])
    .map(([code, k]) => `${k} prevented by ${code}`)
  if (r.serialized) parts.push(`${r.serialized} serialized (waited)`)
  if (r.clean) parts.push(`${r.clean} clean`)
  return parts.join(', ') || '-'
}

/** One line: the expectation not applied, and where it is. */
export function unappliedLine(e: Partial<Record<Level, 'held' | 'violated'>>): string {
  const values = [...new Set(Object.values(e))]
  const what = values.length === 1 ? `expect ${values[0]}` : `expect ${Object.entries(e).map(([l, v]) => `${v} at ${l}`).join(', ')}`
  return `${what} (the race's own) is not applied across levels: the exit code says only whether every level was decided; race explore --isolation <level> applies it`
}

/** The report race explore --isolation prints. */
export function renderLevels(c: Style, r: LevelsResult, self: string): string {
  const w = columns()
  const lines = joinFit([c.bold(`race explore ${r.scenario}`), `${r.server.product ?? 'PostgreSQL'} ${r.server.version} (${r.target})`, `${r.n} session${r.n === 1 ? '' : 's'}`, 'per isolation level'], '  ·  ', w, 2)
  lines.push(...hang(`${c.dim('invariant')}  ${r.invariant}`, w, 11))
  const body = r.levels.map((x) => [
    c.bold(LEVEL_WORD[x.isolation]),
    `${x.interleavings}${x.complete || x.violating ? '' : ' (not all)'}`,
    x.violating ? c.red(String(x.violating)) : x.unknown ? c.yellow('0') : c.green('0'),
    `${heldText(x)}${x.unknown ? c.yellow(`, ${x.unknown} undecided`) : ''}${x.incomplete ? c.red(`, ${x.incomplete} failed (a session did not complete)`) : ''}`,
  ])
  lines.push(fitTable(c, ['level', 'interleavings', 'violating', 'the others held'], body, [{ shrink: 0 }, { shrink: 0 }, { shrink: 0 }, {}], w))
  for (const x of r.levels) {
    if (x.ownLevel.length) lines.push(...hang(c.yellow(`at ${x.isolation}: ${x.ownLevel.join(', ')}: the code names its own level (race set ${x.isolation} as the connection's default; it was not overridden)`), w, 2))
  }
  lines.push(r.weakestSafe ? c.green(c.bold(`weakest level at which every interleaving held: ${r.weakestSafe}`)) : c.red(c.bold('weakest level at which every interleaving held: none of those run')))
  for (const x of r.levels) if (x.incomplete) lines.push(...hang(c.red(`not safe at ${x.isolation}: every session must complete, but in ${x.incomplete} interleaving${x.incomplete === 1 ? '' : 's'} one did not (${x.failure})`), w, 2))
  if (r.expectNotApplied) lines.push(...hang(c.dim(unappliedLine(r.expectNotApplied)), w, 2))
  const undecided = r.levels.filter((x) => x.violating === 0 && !x.complete)
  if (undecided.length) lines.push(...hang(c.yellow(`not known to hold at ${undecided.map((x) => x.isolation).join(', ')}: some interleavings there were not run or not decided (race explore --isolation <level> shows why)`), w, 2))
  if (r.fixes.length) {
    lines.push('')
    for (const f of r.fixes) {
      const row = r.levels.find((x) => x.isolation === f.level)!
      lines.push(...hang(`at ${f.level}, ${row.violating} of ${row.interleavings} violate: ${f.fixedAt ? `${f.fixedAt} held in every interleaving of this run` : 'no level run here held'}`, w, 2))
      if (row.replay) {
        // Copied into a shell as printed: a break falls inside the quoted schedule, or after a backslash.
        const cmd = row.replay.replace(/^race /, `${self} `)
        const at = cmd.lastIndexOf(' --schedule "')
        lines.push(`  the shortest violating interleaving (${row.shortestSwitches} switch${row.shortestSwitches === 1 ? '' : 'es'} between sessions):`)
        if (cmd.length + 4 <= w || at < 0) lines.push(...hang(`    ${cmd}`, w, 6))
        else lines.push(`    ${cmd.slice(0, at)} \\`, ...hang(`      ${cmd.slice(at + 1)}`, w, 8))
      }
    }
    lines.push(...hang('fixes the scenarios document (text only: race changes none of your code):', w, 2))
    for (const f of r.fixes[0].documented) lines.push(...hang(`  - ${f}`, w, 4))
  }
  const runs = r.levels.reduce((a, x) => a + x.runs, 0)
  lines.push(c.dim(`${runs} runs at ${r.levels.length} levels in ${(r.ms / 1000).toFixed(1)} s`))
  return lines.join('\n')
}
