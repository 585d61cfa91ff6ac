// race matrix [ids...]: every scenario that documents its outcome per isolation level (the anomalies), at
// READ COMMITTED, REPEATABLE READ and SERIALIZABLE with its own interleaving, one grid: what happened next to
// what is documented, compared in full (verdict, who ended how, which SQLSTATE). Exit 1 on any deviation.
import { cliWords } from './words.js'
import type { RunContext } from '../lifecycle.js'
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { exitCode, summarize, worstExit } from '../judge/index.js'
import { isMatrixRow } from '../plan.js'
import { findScenario, scenarios } from '../registry.js'
import { plain, type Style } from '../report/color.js'
import { fitTable } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import { isServerError } from '../db/sqlstate.js'
import { defaultParams, type Documented, type Engine, type Scenario, type Verdict } from '../scenario.js'
import { levelsOn, type Level } from '../levels.js'
import { annotationsOf, checkWritable, ciCase, githubWanted, printAnnotations, writeJunit } from '../report/ci.js'
import { addCiOptions, addTargetOptions, endVersion, type CiOptions, type TargetOptions } from './common.js'
import { runOnce, type Trial } from '../run/judge.js'
import { engineFor, withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'

export interface Cell {
  /** What happened: anomaly, prevented 40001, serialized, clean, unknown. */
  happened: string
  verdict: Verdict
  /** What is documented, in the same words. */
  documented: string
  deviation: boolean
  /** What differs, when it deviates. */
  deviations: string[]
}

export function registerMatrix(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('matrix')
    .description('every isolation anomaly at READ COMMITTED, REPEATABLE READ and SERIALIZABLE: one grid, what happened next to what PostgreSQL documents; exit 1 on any deviation')
    .argument('[anomalies...]', 'rows to run (default: every scenario that documents each level)')
  addTargetOptions(cmd, ctx, { keep: false, pg: true })
  addCiOptions(cmd, 'cell')
  cmd.action(async (ids: string[], o: TargetOptions & CiOptions) => exit(await matrixCommand(ctx, ids, o)))
  cmd.addHelpText(
    'after',
    `
Each anomaly runs with its default interleaving (race show <anomaly> prints it)
at each level. A cell reads: anomaly (the invariant was violated), prevented
<SQLSTATE> (the server raised it and the invariant held), serialized (held
because a session waited), clean (held, nobody waited or failed). A cell
deviates when the verdict, any session's ending, or a SQLSTATE differs from the
documentation.

Examples:
  $ race matrix
  $ race matrix write-skew lost-update
  $ race matrix --database-url $DATABASE_URL --json   CI: exit 1 on a deviation
  $ race matrix --junit race-matrix.xml                one testcase per cell
  $ race matrix --pg 13-18     one grid per PostgreSQL version, then the cells
                               that happened differently between versions`,
  )
  return cmd
}

/** The SQLSTATEs a trial's failed sessions ended with, or a documented outcome names. */
const failedWith = (labels: string[]) => [...new Set(labels.filter((l) => isServerError(l)))].sort()
const words = (verdict: string, states: string[]) => (verdict === 'prevented' && states.length ? `prevented ${states.join(' ')}` : verdict)

/** Pure: one judged trial as a cell, next to its documented outcome. */
export function cellOf(t: Pick<Trial, 'verdict' | 'sessions' | 'comparison'>, docs: readonly Documented[]): Cell {
  const happened = words(t.verdict, failedWith(t.sessions.flatMap((s) => s.errors)))
  const documented = [...new Set(docs.map((d) => words(d.verdict, failedWith(Object.entries(d.who).flatMap(([k, v]) => (typeof v === 'string' ? [v] : [k]))))))].join(' | ')
  return { happened, verdict: t.verdict, documented, deviation: !t.comparison.matched, deviations: t.comparison.deviations }
}

export async function matrixRows(ids: string[], engine: Engine = 'postgres'): Promise<Scenario[]> {
  const all = (await scenarios()).filter((s) => isMatrixRow(s, engine))
  for (const id of ids) {
    await findScenario(id)
    if (!all.some((s) => s.id === id)) throw new UsageError(`${id} is not an anomaly of the matrix; its rows are ${all.map((s) => s.id).join(', ')}`)
  }
  return ids.length ? all.filter((s) => ids.includes(s.id)) : all
}

type Row = { scenario: Scenario; cells: { level: Level; cell: Cell; t: Trial; docs: Documented[]; ms: number }[] }

/** One version's grid: its rows, where it ran, its exit code and its CI cases. */
interface Grid {
  pg?: number
  rows: Row[]
  server: { version: string; product?: string }
  target: string
  code: 0 | 1 | 3
  ci: ReturnType<typeof ciCase>[]
}

async function runGrid(ctx: RunContext, rowsOf: Scenario[], levels: readonly Level[], o: TargetOptions & CiOptions, pg: number | undefined): Promise<Grid> {
  const bounds = parseBounds(o)
  return withLab(ctx, o.databaseUrl, bounds, async (lab, target) => {
    const rows: Row[] = []
    let done = 0
    const on = pg === undefined ? '' : ` on PostgreSQL ${pg}`
    for (const scenario of rowsOf) {
      const cells = []
      for (const level of levels) {
        if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kmatrix${on} ${++done}/${rowsOf.length * levels.length}: ${scenario.id} at ${level}...`)
        const { trial, docs, ms } = await runOnce(ctx, lab, bounds, scenario, defaultParams(scenario, { isolation: level }), scenario.sessionCount.default, undefined, undefined, cliWords)
        cells.push({ level, cell: cellOf(trial, docs), t: trial, docs, ms })
      }
      rows.push({ scenario, cells })
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const all = rows.flatMap((r) => r.cells)
    const code = worstExit(all.map((x) => exitCode(summarize([x.t], x.docs))))
    const ci = rows.flatMap((r) =>
      r.cells.map(({ level, t, docs, ms }) => {
        const s = summarize([t], docs)
        return ciCase(`race.matrix.${r.scenario.id}`, pg === undefined ? level : `${level} (PostgreSQL ${pg})`, ms, t, s, exitCode(s))
      }),
    )
    return { pg, rows, server: { version: lab.server.version, product: lab.server.product }, target: target.label, code, ci }
  })
}

function gridDoc(g: Grid, levels: readonly Level[]) {
  const all = g.rows.flatMap((r) => r.cells)
  return {
    server: { version: g.server.version },
    target: g.target,
    schedule: 'lockstep',
    levels,
    rows: g.rows.map((r) => ({
      scenario: r.scenario.id,
      title: r.scenario.title,
      cells: Object.fromEntries(
        r.cells.map(({ level, cell, t, docs, ms }) => [
          level,
          {
            happened: cell.happened,
            verdict: cell.verdict,
            documented: docs,
            deviation: cell.deviation,
            deviations: cell.deviations,
            sessions: t.sessions,
            invariant: t.invariant,
            why: t.why,
            ms,
          },
        ]),
      ),
    })),
    cells: all.length,
    deviations: all.filter((x) => x.cell.deviation).length,
    exitCode: g.code,
  }
}

/** A cell whose outcome is not the same on every version: what happened on each. */
export interface VersionDifference {
  scenario: string
  level: Level
  /** Major version -> what happened there (the cell's words: anomaly, prevented 40001, serialized, clean...). */
  happened: Record<string, string>
}

/** Pure: the cells (anomaly, level) whose outcome differs between the versions' grids. */
export function versionDifferences(grids: readonly { pg?: number; rows: readonly { scenario: Pick<Scenario, 'id'>; cells: readonly { level: Level; cell: Pick<Cell, 'happened'> }[] }[] }[]): VersionDifference[] {
  const out: VersionDifference[] = []
  const first = grids[0]
  if (!first) return out
  for (const row of first.rows) {
    for (const { level } of row.cells) {
      const happened: Record<string, string> = {}
      for (const g of grids) {
        const c = g.rows.find((r) => r.scenario.id === row.scenario.id)?.cells.find((x) => x.level === level)
        happened[String(g.pg)] = c?.cell.happened ?? 'not run'
      }
      if (new Set(Object.values(happened)).size > 1) out.push({ scenario: row.scenario.id, level, happened })
    }
  }
  return out
}

/** "13-15 anomaly; 16-18 prevented 40001": consecutive versions with the same outcome, grouped. */
function differenceText(d: VersionDifference): string {
  const groups: { from: string; to: string; what: string }[] = []
  for (const [v, what] of Object.entries(d.happened).sort((a, b) => Number(a[0]) - Number(b[0]))) {
    const last = groups[groups.length - 1]
    if (last && last.what === what) last.to = v
    else groups.push({ from: v, to: v, what })
  }
  return groups.map((g) => `${g.from === g.to ? g.from : `${g.from}-${g.to}`}: ${g.what}`).join('; ')
}

export async function matrixCommand(ctx: RunContext, ids: string[], o: TargetOptions & CiOptions): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  const rowsOf = await matrixRows(ids, engine)
  const levels = levelsOn(engine)
  parseBounds(o) // bad input before any server starts
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  const versions = ctx.embedded.pgList
  const grids: Grid[] = []
  const codes: number[] = []
  if (!versions || versions.length < 2) {
    ctx.embedded.pg = versions?.[0]
    grids.push(await runGrid(ctx, rowsOf, levels, o, versions?.[0]))
  } else {
    // One grid per version, printed as it is done, each on its own server, stopped before the next starts.
    for (const v of versions) {
      ctx.embedded.pg = v
      grids.push(await runGrid(ctx, rowsOf, levels, o, v))
      codes.push(await endVersion(ctx))
      if (!o.json) process.stdout.write(render(ctx.style ?? plain, grids[grids.length - 1], levels, engine) + '\n\n')
    }
  }
  const code = worstExit([...codes, ...grids.map((g) => g.code)])
  const ci = grids.flatMap((g) => g.ci)
  const g0 = grids[0]
  if (junit) writeJunit(junit, 'race matrix', ci, { server: grids.map((g) => `PostgreSQL ${g.server.version}`).join(', '), target: g0.target, schedule: 'lockstep' }, Math.round(performance.now()))
  const notes = githubWanted(o.github) ? annotationsOf((k) => `race matrix: ${k.classname.slice('race.matrix.'.length)} at ${k.name}`, ci) : []
  const differences = grids.length > 1 ? versionDifferences(grids) : []
  if (o.json) {
    const doc = grids.length > 1
      ? { versions: grids.map((g) => ({ pg: g.pg, ...gridDoc(g, levels) })), differences, exitCode: code }
      : gridDoc(g0, levels)
    process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
    printAnnotations(notes, true)
    return code
  }
  if (grids.length > 1) process.stdout.write(betweenVersions(ctx.style ?? plain, grids, differences).join('\n') + '\n')
  else process.stdout.write(render(ctx.style ?? plain, g0, levels, engine) + '\n')
  printAnnotations(notes, false)
  return code
}

/** After one grid per version: the cells whose outcome differs between the versions, and the deviations in all. */
function betweenVersions(c: Style, grids: readonly Grid[], differences: readonly VersionDifference[]): string[] {
  const w = columns()
  const names = grids.map((g) => g.pg).join(', ')
  const out = [c.bold(`race matrix on PostgreSQL ${names}`)]
  if (!differences.length) out.push(...hang(`every cell happened the same on each version`, w, 2))
  else {
    out.push(...hang(`${differences.length} cell${differences.length === 1 ? '' : 's'} happened differently between versions:`, w, 2))
    for (const d of differences) out.push(...hang(c.yellow(`  ${d.scenario} at ${d.level.toUpperCase()}: ${differenceText(d)}`), w, 4))
  }
  const bad = grids.filter((g) => g.rows.some((r) => r.cells.some((x) => x.cell.deviation)))
  out.push(
    bad.length
      ? c.red.bold(`deviations from the documentation on PostgreSQL ${bad.map((g) => g.pg).join(', ')} (see each grid above)`)
      : c.green(`every cell as documented on every version`),
  )
  return out
}

function render(c: Style, g: Grid, levels: readonly Level[], engine: Engine): string {
  const rows = g.rows
  const where = `${g.server.product ?? 'PostgreSQL'} ${g.server.version} (${g.target})`
  const w = columns()
  const body = rows.map((r) => [c.bold(r.scenario.id), ...r.cells.map(({ cell }) => cellText(c, cell))])
  const table = fitTable(c, ['anomaly', ...levels.map((l) => l.toUpperCase())], body, [{ shrink: 0 }, ...levels.map(() => ({ min: 12 }))], w)
  const cells = rows.flatMap((r) => r.cells.map((x) => ({ ...x, id: r.scenario.id })))
  const bad = cells.filter((x) => x.cell.deviation)
  const source =
    engine === 'mysql'
      ? 'each cell: what happened / what InnoDB documents (MySQL manual "Transaction Isolation Levels", "Locking Reads"; MariaDB KB)'
      : 'each cell: what happened / what PostgreSQL documents (manual, "Transaction Isolation")'
  return [
    ...joinFit([c.bold('race matrix'), where, "each anomaly's default interleaving (lockstep)"], '  ·  ', w, 2),
    table,
    ...hang(c.dim(source), w, 2),
    ...bad.flatMap((x) => [c.red(`${x.id} at ${x.level}:`), ...x.cell.deviations.flatMap((d) => hang(c.red(`  ${d}`), w, 4))]),
    bad.length ? c.red.bold(`${bad.length} of ${cells.length} cells deviate from the documentation`) : c.green(`all ${cells.length} cells as documented`),
  ].join('\n')
}

export function cellText(c: Style, cell: Cell): string {
  const happened = cell.verdict === 'anomaly' ? c.red(cell.happened) : cell.verdict === 'unknown' ? c.yellow(cell.happened) : c.green(cell.happened)
  return cell.deviation ? `${happened}\n${c.red.bold(`DEVIATION: doc ${cell.documented}`)}` : `${happened}\n${c.dim(`doc ${cell.documented}`)}`
}
