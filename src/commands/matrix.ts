// race matrix [ids...]: every scenario that documents its outcome per isolation level (the anomalies), at
// READ COMMITTED, REPEATABLE READ and SERIALIZABLE with its own interleaving, one grid: what happened next to
// what is documented, compared in full (verdict, who ended how, which SQLSTATE). Exit 1 on any deviation.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { exitCode, summarize, worstExit } from '../judge/index.js'
import { isMatrixRow } from '../plan.js'
import { findScenario, scenarios } from '../registry.js'
import { c } from '../report/color.js'
import { fitTable } from '../report/table.js'
import { columns, hang, joinFit } from '../report/width.js'
import { isServerError } from '../db/sqlstate.js'
import { LEVELS, defaultParams, type Documented, type Engine, type Level, type Scenario, type Verdict } from '../scenario.js'
import { annotationsOf, checkWritable, ciCase, githubWanted, printAnnotations, writeJunit } from '../report/ci.js'
import { addCiOptions, addTargetOptions, engineFor, parseBounds, runOnce, withLab, type CiOptions, type TargetOptions, type Trial } from './common.js'

/** The columns of the grid: PostgreSQL runs READ UNCOMMITTED as READ COMMITTED, InnoDB does not (it reads dirty). */
export function matrixLevels(engine: Engine): readonly Level[] {
  return engine === 'mysql' ? ['read uncommitted', ...LEVELS] : LEVELS
}

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

export function registerMatrix(program: Command, exit: (code: number) => void): Command {
  const cmd = program
    .command('matrix')
    .description('every isolation anomaly at READ COMMITTED, REPEATABLE READ and SERIALIZABLE: one grid, what happened next to what PostgreSQL documents; exit 1 on any deviation')
    .argument('[anomalies...]', 'rows to run (default: every scenario that documents each level)')
  addTargetOptions(cmd, { keep: false })
  addCiOptions(cmd, 'cell')
  cmd.action(async (ids: string[], o: TargetOptions & CiOptions) => exit(await matrixCommand(ids, o)))
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
  $ race matrix --junit race-matrix.xml                one testcase per cell`,
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

export async function matrixCommand(ids: string[], o: TargetOptions & CiOptions): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  const rowsOf = await matrixRows(ids, engine)
  const levels = matrixLevels(engine)
  const bounds = parseBounds(o)
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const rows: { scenario: Scenario; cells: { level: Level; cell: Cell; t: Trial; docs: Documented[]; ms: number }[] }[] = []
    let done = 0
    for (const scenario of rowsOf) {
      const cells = []
      for (const level of levels) {
        if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kmatrix ${++done}/${rowsOf.length * levels.length}: ${scenario.id} at ${level}...`)
        const { trial, docs, ms } = await runOnce(lab, bounds, scenario, defaultParams(scenario, { isolation: level }), scenario.sessionCount.default)
        cells.push({ level, cell: cellOf(trial, docs), t: trial, docs, ms })
      }
      rows.push({ scenario, cells })
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const all = rows.flatMap((r) => r.cells)
    const deviations = all.filter((x) => x.cell.deviation).length
    const code = worstExit(all.map((x) => exitCode(summarize([x.t], x.docs))))
    const ci = rows.flatMap((r) =>
      r.cells.map(({ level, t, docs, ms }) => {
        const s = summarize([t], docs)
        return ciCase(`race.matrix.${r.scenario.id}`, level, ms, t, s, exitCode(s))
      }),
    )
    if (junit) writeJunit(junit, 'race matrix', ci, { server: `PostgreSQL ${lab.server.version}`, target: target.label, schedule: 'lockstep' }, Math.round(performance.now()))
    const notes = githubWanted(o.github) ? annotationsOf((k) => `race matrix: ${k.classname.slice('race.matrix.'.length)} at ${k.name}`, ci) : []
    if (o.json) {
      const doc = {
        server: { version: lab.server.version },
        target: target.label,
        schedule: 'lockstep',
        levels,
        rows: rows.map((r) => ({
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
        deviations,
        exitCode: code,
      }
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
      printAnnotations(notes, true)
      return code
    }
    process.stdout.write(render(rows, `${lab.server.product ?? 'PostgreSQL'} ${lab.server.version} (${target.label})`, levels, engine) + '\n')
    printAnnotations(notes, false)
    return code
  })
}

function render(rows: { scenario: Scenario; cells: { level: Level; cell: Cell }[] }[], where: string, levels: readonly Level[], engine: Engine): string {
  const w = columns()
  const body = rows.map((r) => [c.bold(r.scenario.id), ...r.cells.map(({ cell }) => cellText(cell))])
  const table = fitTable(['anomaly', ...levels.map((l) => l.toUpperCase())], body, [{ shrink: 0 }, ...levels.map(() => ({ min: 12 }))], w)
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

export function cellText(cell: Cell): string {
  const happened = cell.verdict === 'anomaly' ? c.red(cell.happened) : cell.verdict === 'unknown' ? c.yellow(cell.happened) : c.green(cell.happened)
  return cell.deviation ? `${happened}\n${c.red.bold(`DEVIATION: doc ${cell.documented}`)}` : `${happened}\n${c.dim(`doc ${cell.documented}`)}`
}
