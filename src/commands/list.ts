// race list: every scenario with one line.
import { scenarios } from '../../scenarios/index.js'
import { c } from '../report/color.js'
import { plainTable } from '../report/table.js'

export function listCommand(o: { json?: boolean }): number {
  if (o.json) {
    const rows = scenarios.map((s) => ({ id: s.id, title: s.title, source: s.source }))
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return 0
  }
  const t = plainTable(['scenario', 'what it shows', 'from'])
  for (const s of scenarios) t.push([c.bold(s.id), s.title, c.dim(s.source)])
  process.stdout.write(t.toString() + '\n' + c.dim('race show <scenario> tells its story; race run <scenario> runs it.') + '\n')
  return 0
}
