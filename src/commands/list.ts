// race list: every scenario with one line.
import type { Command } from 'commander'
import { ARTICLES, scenarios, sourceText } from '../registry.js'
import { c } from '../report/color.js'
import { fitTable } from '../report/table.js'
import { columns, hang, width } from '../report/width.js'

/** The section alone (the article is the heading above): §4.1, or the isolation article's heading. */
function sectionText(s: { article: string; section: string }): string {
  return s.article === 'advisory-locks' ? `§${s.section}` : s.section
}

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
  // One heading row per article (its English title), the section beside each scenario; when the three columns
  // do not fit, the section goes under the title, so nothing is cut.
  const w = columns()
  const wide = 30 + Math.max(...all.map((s) => width(s.title))) + Math.max(...all.map((s) => width(sectionText(s.source)))) <= w
  const rows: Parameters<typeof fitTable>[1][number][] = []
  let article = ''
  for (const s of all) {
    if (s.source.article !== article) {
      article = s.source.article
      rows.push([{ content: c.bold(`${article} article: `) + c.dim(ARTICLES[s.source.article]), colSpan: wide ? 3 : 2 }])
    }
    const sec = c.dim(sectionText(s.source))
    rows.push(wide ? [c.bold(s.id), s.title, sec] : [c.bold(s.id), s.source.article === 'advisory-locks' ? `${sec} ${s.title}` : `${s.title}\n${sec}`])
  }
  const head = wide ? ['scenario', 'what it shows', 'section'] : ['scenario', 'what it shows (section)']
  process.stdout.write(fitTable(head, rows, [{ shrink: 0 }, { min: 24 }, { shrink: 2, min: 12 }], w) + '\n')
  process.stdout.write(hang(c.dim('race show <scenario> tells its story; race run <scenario> runs it.'), w, 2).join('\n') + '\n')
  return 0
}
