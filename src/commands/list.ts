// race list: every scenario with one line.
import type { Command } from 'commander'
import { unavailableOn } from '../plan.js'
import { scenarios, sourceText } from '../registry.js'
import { c } from '../report/color.js'
import { plainTable } from '../report/table.js'
import { engineFor } from './common.js'

export function registerList(program: Command, exit: (code: number) => void): Command {
  return program
    .command('list')
    .description('every scenario, one line each')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .option('--database-url <url>', "for this URL's engine: a mysql:// URL lists what runs on MySQL/MariaDB and why the rest cannot (nothing connects)")
    .action(async (o: { json?: boolean; databaseUrl?: string }) => exit(await listCommand(o)))
    .addHelpText('after', "\nExamples:\n  $ race list\n  $ race list --json | jq -r '.[].id'\n  $ race list --database-url mysql://root@127.0.0.1:3306/test")
}

export async function listCommand(o: { json?: boolean; databaseUrl?: string }): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  if (engine === 'mysql') return listFor(await scenarios(), o)
  // PostgreSQL: the scenarios that run there (those for InnoDB only are listed with a mysql:// URL).
  const all = (await scenarios()).filter((s) => s.documented.postgres)
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

/** On MySQL/MariaDB: what runs there, then what cannot, each with its one-line reason. */
function listFor(all: Awaited<ReturnType<typeof scenarios>>, o: { json?: boolean }): number {
  const rows = all.map((s) => ({ id: s.id, title: s.title, source: sourceText(s.source), available: !unavailableOn(s, 'mysql'), why: unavailableOn(s, 'mysql') ?? null }))
  if (o.json) {
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return 0
  }
  const t = plainTable(['scenario', 'what it shows', 'from'])
  for (const r of rows.filter((x) => x.available)) t.push([c.bold(r.id), r.title, c.dim(r.source)])
  const gone = plainTable(['not on InnoDB', 'why'], [null, 90])
  for (const r of rows.filter((x) => !x.available)) gone.push([c.dim(r.id), r.why ?? ''])
  process.stdout.write(`${c.bold('on MySQL/MariaDB (InnoDB)')}\n${t.toString()}\n\n${gone.toString()}\n` + c.dim('race show <scenario> --database-url mysql://... shows its InnoDB form.') + '\n')
  return 0
}
