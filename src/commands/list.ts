// race list: every scenario with one line.
import type { Command } from 'commander'
import { scenarios, sourceText } from '../registry.js'
import { c } from '../report/color.js'
import { plainTable } from '../report/table.js'

export function registerList(program: Command, exit: (code: number) => void): Command {
  return program
    .command('list')
    .description('every scenario, one line each')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .action(async (o: { json?: boolean }) => exit(await listCommand(o)))
    .addHelpText('after', "\nExamples:\n  $ race list\n  $ race list --json | jq -r '.[].id'")
}

export async function listCommand(o: { json?: boolean }): Promise<number> {
  const all = await scenarios()
  if (o.json) {
    const rows = all.map((s) => ({ id: s.id, title: s.title, source: sourceText(s.source) }))
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return 0
  }
  const t = plainTable(['scenario', 'what it shows', 'from'])
  for (const s of all) t.push([c.bold(s.id), s.title, c.dim(sourceText(s.source))])
  process.stdout.write(t.toString() + '\n' + c.dim('race show <scenario> tells its story; race run <scenario> runs it.') + '\n')
  return 0
}
