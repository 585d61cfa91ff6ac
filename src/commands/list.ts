// race list: every scenario with one line.
// It reads the scenarios' summaries (the index), never their modules.
import type { Command } from 'commander'
import { engineOf, resolveTarget } from '../db/target.js'
import { ARTICLES, summaries, sourceText, type ScenarioSummary } from '../registry.js'
import type { RunContext } from '../lifecycle.js'
import { plain, type Style } from '../report/color.js'
import { fitTable, plainTable } from '../report/table.js'
import { columns, hang, width } from '../report/width.js'

/** The section alone (the article is the heading above): §4.1, or the isolation article's heading. */
function sectionText(s: { article: string; section: string }): string {
  return s.article === 'advisory-locks' ? `§${s.section}` : s.section
}

export function registerList(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  return program
    .command('list')
    .description('every scenario, one line each')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .option('--database-url <url>', "for this URL's engine: a mysql:// URL lists what runs on MySQL/MariaDB and why the rest cannot (nothing connects)")
    .action(async (o: { json?: boolean; databaseUrl?: string }) => exit(await listCommand(ctx.style ?? plain, o)))
    .addHelpText('after', "\nExamples:\n  $ race list\n  $ race list --json | jq -r '.[].id'\n  $ race list --database-url mysql://root@127.0.0.1:3306/test")
}

export async function listCommand(c: Style, o: { json?: boolean; databaseUrl?: string }): Promise<number> {
  const engine = engineOf(resolveTarget(o.databaseUrl))
  if (engine === 'mysql') return listFor(c, await summaries(), o)
  // PostgreSQL: the scenarios that run there (those for InnoDB only are listed with a mysql:// URL).
  const all = (await summaries()).filter((s) => s.runsOn.includes('postgres'))
  if (o.json) {
    const rows = all.map((s) => ({ id: s.id, title: s.title, source: sourceText(s.source) }))
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return 0
  }
  // One heading row per article (its English title), the section beside each scenario; when the three columns
  // do not fit, the section goes under the title, so nothing is cut.
  const w = columns()
  const wide = 30 + Math.max(...all.map((s) => width(s.title))) + Math.max(...all.map((s) => width(sectionText(s.source)))) <= w
  const rows: Parameters<typeof fitTable>[2][number][] = []
  let article = ''
  for (const s of all) {
    if (s.source.article !== article) {
      article = s.source.article
      rows.push([{ content: c.bold(`${article} article: `) + c.dim(ARTICLES[s.source.article as keyof typeof ARTICLES] ?? ''), colSpan: wide ? 3 : 2 }])
    }
    const sec = c.dim(sectionText(s.source))
    rows.push(wide ? [c.bold(s.id), s.title, sec] : [c.bold(s.id), s.source.article === 'advisory-locks' ? `${sec} ${s.title}` : `${s.title}\n${sec}`])
  }
  const head = wide ? ['scenario', 'what it shows', 'section'] : ['scenario', 'what it shows (section)']
  process.stdout.write(fitTable(c, head, rows, [{ shrink: 0 }, { min: 24 }, { shrink: 2, min: 12 }], w) + '\n')
  process.stdout.write(hang(c.dim('race show <scenario> tells its story; race run <scenario> runs it.'), w, 2).join('\n') + '\n')
  return 0
}

/** On MySQL/MariaDB: what runs there, then what cannot, each with its one-line reason. */
function listFor(c: Style, all: readonly ScenarioSummary[], o: { json?: boolean }): number {
  const rows = all.map((s) => ({ id: s.id, title: s.title, source: sourceText(s.source), available: !s.unavailable.mysql, why: s.unavailable.mysql ?? null }))
  if (o.json) {
    process.stdout.write(JSON.stringify(rows, null, 2) + '\n')
    return 0
  }
  const t = plainTable(c, ['scenario', 'what it shows', 'from'])
  for (const r of rows.filter((x) => x.available)) t.push([c.bold(r.id), r.title, c.dim(r.source)])
  const gone = plainTable(c, ['not on InnoDB', 'why'], [null, 90])
  for (const r of rows.filter((x) => !x.available)) gone.push([c.dim(r.id), r.why ?? ''])
  process.stdout.write(`${c.bold('on MySQL/MariaDB (InnoDB)')}\n${t.toString()}\n\n${gone.toString()}\n` + c.dim('race show <scenario> --database-url mysql://... shows its InnoDB form.') + '\n')
  return 0
}
