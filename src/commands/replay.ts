// race replay FILE: a counterexample file (race explore --save, race run --save) run again exactly; evidence/replay.ts.
import type { Command } from 'commander'
import type { RunContext } from '../lifecycle.js'
import { FLAGS } from '../run/params.js'
import { replayFile } from '../evidence/replay.js'
import { plain } from '../report/color.js'
import { columns, hang } from '../report/width.js'
import { cliWords } from './words.js'
import { addTargetOptions, eachPg } from './common.js'

interface ReplayFlags {
  guided?: boolean
  databaseUrl?: string
  connectTimeout: string
  stepTimeout: string
  runTimeout: string
  json?: boolean
}

export function registerReplay(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('replay')
    .description('run a counterexample file (race explore --save, race run --save) again: exit 1 while it still fails, 0 once the code passes it')
    .argument('<file>', 'the counterexample file')
    .option('--guided', 'the race file or a module it imports changed: follow the saved order as far as the new code allows (default: refuse)')
  addTargetOptions(cmd, ctx, { keep: false, pg: true })
  // --pg 16 (or 13-18): on race's embedded server of that version (of each, one after another).
  cmd.action(async (file: string, o: ReplayFlags) => exit(await eachPg(ctx, o, () => replayCommand(ctx, file, o))))
  cmd.addHelpText(
    'after',
    `
The file holds the schedule, the race file's and its local modules' SHA-256, the
params, the faults injected and the outcome saved (docs/counterexamples.md).
Exit codes: 1 it still fails, 0 it now passes, 3 the replay could not be
followed or judged, 2 a bad file or changed code (without --guided).

Examples:
  $ race explore examples/app/withdraw.race.mjs --save withdraw.cx.json
  $ race replay withdraw.cx.json                 still fails: exit 1
  $ race replay withdraw.cx.json --guided        after a change to withdraw.mjs
  $ race replay withdraw.cx.json --pg 16         on the embedded PostgreSQL 16`,
  )
  return cmd
}

export async function replayCommand(ctx: RunContext, file: string, o: ReplayFlags): Promise<number> {
  const { outcome, view } = await replayFile(ctx, file, { guided: o.guided, databaseUrl: o.databaseUrl, connectTimeout: o.connectTimeout, stepTimeout: o.stepTimeout, runTimeout: o.runTimeout }, FLAGS, cliWords)
  if (o.json) {
    const doc = view ? (await import('../report/json.js')).toJson(view, { timeline: false, exitCode: outcome.exitCode, kept: false }) : undefined
    process.stdout.write(JSON.stringify({ ...outcome, ...(doc ? { run: doc } : {}) }, null, 2) + '\n')
    return outcome.exitCode
  }
  const c = ctx.style ?? plain
  const w = columns()
  const lines: string[] = []
  if (view) {
    const [{ render }, table, { timeline }] = await Promise.all([import('../report/run.js'), import('../report/table.js'), import('../report/timeline.js')])
    lines.push(render(c, view, 'race', false, table, timeline), '')
  }
  for (const n of outcome.notes) lines.push(...hang(c.dim(`note: ${n}`), w, 2))
  const head = outcome.result === 'still-fails' ? c.red(c.bold('STILL FAILS')) : outcome.result === 'passes' ? c.green(c.bold('PASSES')) : c.yellow(c.bold('UNKNOWN'))
  lines.push(...hang(`${c.bold(`replay ${file}`)}: ${head}  ${outcome.summary}`, w, 2))
  process.stdout.write(lines.join('\n') + '\n')
  if (outcome.exitCode === 3) process.stderr.write(`race: ${outcome.summary}\n`)
  return outcome.exitCode
}
