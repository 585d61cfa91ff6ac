// Does `race explore --isolation <levels>` agree with `race matrix` on the built-in scenarios? For one server (the
// embedded default, `--pg V`, or `--database-url URL`): race matrix's one lockstep interleaving per scenario and
// level, then every interleaving of the same scenario at the same levels (race explore). They agree when every cell
// the matrix shows as an anomaly has violating interleavings in explore, and every level explore shows held in all
// its interleavings is not an anomaly in the matrix. Cells where explore finds violating orders the matrix's single
// interleaving does not run are listed apart: explore covers more, which is not a disagreement.
//
// Usage: node dist/scripts/levels-vs-matrix.js [--pg V | --database-url URL]; exit 1 when they disagree.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')
const target = process.argv.slice(2)

function race(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args, ...target, '--json', '--no-color'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

interface MatrixJson {
  server: { version: string }
  levels: string[]
  rows: { scenario: string; cells: Record<string, { happened: string } | undefined> }[]
}
interface LevelsJson {
  levels: { isolation: string; interleavings: number; violating: number; unknown: number; complete: boolean }[]
}

const m = await race(['matrix'])
const matrix = JSON.parse(m.stdout) as MatrixJson
let disagree = 0
let more = 0
let cells = 0
console.log(`race explore --isolation beside race matrix, PostgreSQL/MySQL ${matrix.server.version} ${target.join(' ') || '(embedded)'}`)
for (const row of matrix.rows) {
  const levels = matrix.levels.filter((l) => row.cells[l])
  const e = await race(['explore', row.scenario, '--isolation', levels.map((l) => l.replace(/ /g, '-')).join(',')])
  if (!e.stdout.trim().startsWith('{')) {
    console.log(`${row.scenario}: explore did not answer (exit ${e.code}): ${e.stderr.trim().split('\n')[0]}`)
    disagree++
    continue
  }
  const ex = JSON.parse(e.stdout) as LevelsJson
  console.log(`${row.scenario.padEnd(28)} ${levels.map((l) => { const x = ex.levels.find((y) => y.isolation === l); return `${l}: matrix ${row.cells[l]!.happened}, explore ${x ? `${x.violating}/${x.interleavings}` : '-'}` }).join('; ')}`)
  for (const level of levels) {
    cells++
    const cell = row.cells[level]!
    const x = ex.levels.find((l) => l.isolation === level)
    const anomaly = cell.happened === 'anomaly'
    const held = x !== undefined && x.complete && x.unknown === 0 && x.violating === 0
    const shown = `${row.scenario} at ${level}: matrix ${cell.happened}, explore ${x ? `${x.violating} of ${x.interleavings} violating${x.unknown ? `, ${x.unknown} undecided` : ''}` : 'no row'}`
    if (!x || (anomaly && x.violating === 0) || (held && anomaly)) {
      disagree++
      console.log(`DISAGREE  ${shown}`)
    } else if (!anomaly && x.violating > 0) {
      more++
      console.log(`more      ${shown} (orders the matrix's one interleaving does not run)`)
    }
  }
}
console.log(`${cells} cells: ${disagree} disagree, ${more} where explore finds violating orders beyond the matrix's interleaving`)
process.exit(disagree ? 1 : 0)
