// docs/options.md, the options of race run and race explore beside their API twins (run(), explore()), is generated
// from the one declaration of each option (src/run/options.ts, src/explore/options.ts), never written by hand.
// `npm run readme` rewrites it; `node dist/scripts/options-doc.js --check` exits 1 when the committed file differs;
// test/pure/options.test.ts checks the same.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { EXPLORE_OPTIONS } from '../src/explore/options.js'
import { optionsTable, RUN_OPTIONS } from '../src/run/options.js'
import { BENCH_OWN } from '../src/commands/bench.js'
import { SPEC_OWN } from '../src/commands/spec.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const OPTIONS_DOC = path.join(ROOT, 'docs', 'options.md')

export function optionsDoc(): string {
  return [
    '# Options of `race run` and `race explore`, and their API twins',
    '',
    '<!-- Generated from src/run/options.ts and src/explore/options.ts by scripts/options-doc.ts (npm run readme): do not edit by hand. -->',
    '',
    'Each option is declared once, as data: its flag, its name in the API (`run()`, `explore()`: [your own',
    'races](your-own-races.md), [explore](explore.md)), what it takes and its default. `race <command> --help`, the',
    "API's option types and its check of unknown options, and these tables all come from that declaration, so the",
    'command line and the API agree on every name and default. An option of one side only says why the other has no',
    "twin. A scenario's own flags (`race show <scenario>` lists them, [the scenario reference](scenarios.md) too) are",
    "`params` in the API. Durations are text such as `300ms` or `5s` on both sides; the API also takes milliseconds.",
    '',
    '## `race run` and `run()`',
    '',
    ...optionsTable(RUN_OPTIONS),
    '',
    '## `race explore` and `explore()`',
    '',
    ...optionsTable(EXPLORE_OPTIONS),
    '',
    "## `race spec`'s and `race bench`'s own options",
    '',
    'These commands have no API twin. Each also takes the options of a command that connects (`--database-url`, the',
    'bounds, `--json`, ...: as in the tables above); `race check` and `race matrix` take only those, and `--junit`,',
    "`--github` (and `race check` `--pooler`, `--pooled`). `race spec`'s `--run-timeout` is 30m by default.",
    '',
    '### `race spec`',
    '',
    ...optionsTable(SPEC_OWN),
    '',
    '### `race bench`',
    '',
    ...optionsTable(BENCH_OWN),
    '',
    '## Earlier names',
    '',
    "`explore()` named its bounds `connectTimeoutMs`, `stepTimeoutMs` and `runTimeoutMs` (milliseconds) where `run()`",
    'and the command line say `connectTimeout`, `stepTimeout` and `runTimeout`. Both names are taken (one of the two',
    "per bound); the earlier ones are deprecated. `explore()`'s whole-run bound was 30 minutes by default; it is now",
    "`race explore`'s and `run()`'s, 5 minutes: give `runTimeout: '30m'` for the earlier bound.",
    '',
  ].join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const text = optionsDoc()
  if (process.argv.includes('--check')) {
    const same = fs.existsSync(OPTIONS_DOC) && fs.readFileSync(OPTIONS_DOC, 'utf8') === text
    process.stderr.write(same ? 'docs/options.md is as the options are declared\n' : 'docs/options.md differs from the declared options: run node dist/scripts/options-doc.js\n')
    process.exit(same ? 0 : 1)
  }
  fs.writeFileSync(OPTIONS_DOC, text)
  process.stderr.write('wrote docs/options.md\n')
}
