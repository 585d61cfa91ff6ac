// race matrix [ids...]: every anomaly scenario at READ COMMITTED, REPEATABLE READ and SERIALIZABLE with its
// default interleaving, one grid: what happened next to what PostgreSQL documents. Exit 1 on any deviation.
import { DOCUMENTED, LEVELS, MATRIX_IDS, type Documented } from '../../scenarios/index.js'
import type { TrialResult } from '../engine/types.js'
import { isPrevention } from '../db/sqlstate.js'
import { UsageError } from '../errors.js'
import { c } from '../report/color.js'
import { plainTable } from '../report/table.js'
import { defaultParams } from '../scenario.js'
import { findScenario, parseBounds, runOnce, withLab } from './common.js'

export interface Cell {
  /** What happened: anomaly, prevented 40001, serialized, clean, unknown. */
  happened: string
  verdict: TrialResult['verdict']
  sqlstate?: string
  /** What PostgreSQL documents, in the same words. */
  documented: string
  deviation: boolean
}

const words = (verdict: string, sqlstate?: string) => (verdict === 'prevented' && sqlstate ? `prevented ${sqlstate}` : verdict)

/** Pure: one trial against what is documented. A prevention by another SQLSTATE than documented is a deviation too. */
export function cellOf(t: Pick<TrialResult, 'verdict' | 'sessions'>, doc: Pick<Documented, 'verdict' | 'sqlstate'>): Cell {
  const sqlstate = t.verdict === 'prevented' ? t.sessions.flatMap((s) => s.errors).find(isPrevention) : undefined
  const deviation = t.verdict === 'unknown' || t.verdict !== doc.verdict || (doc.sqlstate !== undefined && sqlstate !== doc.sqlstate)
  return { happened: words(t.verdict, sqlstate), verdict: t.verdict, sqlstate, documented: words(doc.verdict, doc.sqlstate), deviation }
}

export function matrixIds(ids: string[]): string[] {
  for (const id of ids) {
    findScenario(id)
    if (!DOCUMENTED[id]) throw new UsageError(`${id} is not an anomaly of the matrix; its rows are ${MATRIX_IDS.join(', ')}`)
  }
  return ids.length ? ids : MATRIX_IDS
}

export async function matrixCommand(ids: string[], o: Record<string, any>): Promise<number> {
  const rowsIds = matrixIds(ids)
  const bounds = parseBounds(o)
  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const rows: { id: string; title: string; cells: { level: string; cell: Cell; t: TrialResult; doc: Documented }[] }[] = []
    let done = 0
    for (const id of rowsIds) {
      const scenario = findScenario(id)
      const cells = []
      for (const level of LEVELS) {
        if (!o.json && process.stderr.isTTY) process.stderr.write(`\r\x1b[2Kmatrix ${++done}/${rowsIds.length * LEVELS.length}: ${id} at ${level}...`)
        const params = defaultParams(scenario, { isolation: level })
        const t = await runOnce(lab, bounds, scenario, params, scenario.defaultN)
        const doc = DOCUMENTED[id][level]
        cells.push({ level, cell: cellOf(t, doc), t, doc })
      }
      rows.push({ id, title: scenario.title, cells })
    }
    if (!o.json && process.stderr.isTTY) process.stderr.write('\r\x1b[2K')
    const all = rows.flatMap((r) => r.cells)
    const deviations = all.filter((x) => x.cell.deviation).length
    const code = all.some((x) => x.cell.verdict === 'unknown') ? 3 : deviations ? 1 : 0
    if (o.json) {
      const doc = {
        server: { version: lab.server.version },
        target: target.label,
        schedule: 'lockstep',
        levels: LEVELS,
        rows: rows.map((r) => ({
          scenario: r.id,
          title: r.title,
          cells: Object.fromEntries(
            r.cells.map(({ level, cell, t, doc }) => [
              level,
              {
                happened: cell.happened,
                verdict: cell.verdict,
                sqlstate: cell.sqlstate ?? null,
                documented: { verdict: doc.verdict, sqlstate: doc.sqlstate ?? null, why: doc.why },
                deviation: cell.deviation,
                invariant: t.invariant,
                why: t.why,
              },
            ]),
          ),
        })),
        cells: all.length,
        deviations,
        exitCode: code,
      }
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
      return code
    }
    process.stdout.write(render(rows, `PostgreSQL ${lab.server.version} (${target.label})`) + '\n')
    return code
  })
}

function render(rows: { id: string; cells: { cell: Cell }[] }[], where: string): string {
  const table = plainTable(['anomaly', ...LEVELS.map((l) => l.toUpperCase())])
  for (const r of rows) table.push([c.bold(r.id), ...r.cells.map(({ cell }) => cellText(cell))])
  const cells = rows.flatMap((r) => r.cells)
  const bad = cells.filter((x) => x.cell.deviation).length
  return [
    `${c.bold('race matrix')}  ·  ${where}  ·  each anomaly's default interleaving (lockstep)`,
    table.toString(),
    c.dim('each cell: what happened / what PostgreSQL documents (manual, "Transaction Isolation")'),
    bad ? c.red.bold(`${bad} of ${cells.length} cells deviate from the documentation`) : c.green(`all ${cells.length} cells as documented`),
  ].join('\n')
}

export function cellText(cell: Cell): string {
  const happened = cell.verdict === 'anomaly' ? c.red(cell.happened) : cell.verdict === 'unknown' ? c.yellow(cell.happened) : c.green(cell.happened)
  return cell.deviation ? `${happened}\n${c.red.bold(`DEVIATION: doc ${cell.documented}`)}` : `${happened}\n${c.dim(`doc ${cell.documented}`)}`
}
