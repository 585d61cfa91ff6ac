// race explore <scenario|FILE.spec|FILE.mjs>: every interleaving of the sessions' steps (or a seeded sample),
// each judged by the invariant; how many violate it, grouped, and the shortest violating one as a --schedule line.
import { FLAGS } from '../run/params.js'
import { plan } from '../plan.js'
import type { RunContext } from '../lifecycle.js'
import { plain } from '../report/color.js'
import type { Command } from 'commander'
import { findScenario, judgedBy, summaries, type ScenarioSummary } from '../registry.js'
import { parseOracle, refuseTooMany, refuseUnjudged } from '../engine/oracle.js'
import { closingLines, render } from '../report/explore.js'
import { cliWords } from './words.js'
import { executeExplore } from '../explore/execute.js'
import { checkExplore, refuseOneSession } from '../explore/request.js'
import { EXPLORE_OPTIONS, EXPLORE_OWN } from '../explore/options.js'
import { addOptions, type CliFlags } from '../run/options.js'
import { isLevelList } from '../levels.js'
import { addScenarioParamOptions, addTargetOptions, eachPg, scenarioParams, self } from './common.js'
import { assertRunsOn, engineFor } from '../run/lab.js'
import { parseBounds } from '../run/params.js'

/** race explore's flags as commander reads them (typed from EXPLORE_OPTIONS; a scenario's own flags by their names). */
export type ExploreCommandOptions = CliFlags<typeof EXPLORE_OPTIONS> & { [param: string]: unknown }

export function registerExplore(program: Command, all: readonly ScenarioSummary[], exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('explore')
    .description('search the interleavings of the sessions\' steps (one of each set of orders that cannot end differently; --exhaustive: every order), judge each by the invariant, and give the shortest violating one')
    .argument('<scenario>', 'scenario id (race list), .spec file or .mjs module')
  // race explore's own options, declared once (explore/options.ts EXPLORE_OWN): the scenario's flags and the target's follow.
  addOptions(cmd, EXPLORE_OWN)
  addScenarioParamOptions(cmd, all)
  addTargetOptions(cmd, ctx, { keep: false, pg: true })
  // --pg 13-18: the same exploration on each version's embedded server, one after another.
  cmd.action(async (id: string, o: ExploreCommandOptions, self: Command) => exit(await eachPg(ctx, o, () => exploreCommand(ctx, id, o, self))))
  cmd.addHelpText(
    'after',
    `
Each interleaving runs from a fresh state (the schema made again, the setup run
again), through the same engine, block detection and judge as race run. A step
of a session that is seen waiting is not offered until it wakes: an order that
would run it then cannot happen. The shortest violating interleaving (fewest
switches between sessions) is printed as a race run --schedule line.

By default the search is reduced: orders that differ only by swapping steps
that cannot affect each other (as the server's locks say after each step) are
run once; --exhaustive runs every order. A sample (--sample, or after a reduced
search of declared steps past --max runs) is PCT's, and says what it covered;
under expect held it passes (exit 0) only with --accept-sample P, when its
stated probability is P or more (else exit 3, as a search cut short at --max).

Examples:
  $ race explore examples/explore-orders.spec               4 of 6 runs violate
  $ race explore examples/explore-orders.spec --exhaustive  12 of 20 violate
  $ race explore examples/explore-orders-fixed.spec         holds
  $ race explore lost-update --expect held --json
  $ race explore examples/app/orders.race.mjs               60 of 70 violate
  $ race explore examples/app/withdraw-ledger.race.mjs --n 3 --reduce   3 sessions, 220 runs
  $ race explore examples/orders.spec --n 3 --preemptions 2
  $ race explore examples/orders.spec --n 4 --sample 100 --seed 7

Which isolation level is enough, and does the retry loop survive:
  $ race explore examples/app/withdraw.race.mjs --isolation all     one row per level
  $ race explore lost-update --isolation rc,rr
  $ race explore examples/app/withdraw-retry.race.mjs --isolation ser --inject 40001@commit`,
  )
  return cmd
}


export async function exploreCommand(ctx: RunContext, id: string, o: ExploreCommandOptions, cmd: Command): Promise<number> {
  // --oracle serial: every interleaving judged against the serial orders too (engine/oracle.ts).
  const oracle = parseOracle(o.oracle)
  const found = await judgedBy(await findScenario(id), oracle)
  refuseUnjudged(found)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(found, engine)
  // --inject: the application race's explorations also offer the server failing its queries (app/labels.ts).
  const scenario = o.inject === undefined ? found : (await import('../app/scenario.js')).withFaults(found, (await import('../app/labels.js')).parseFaults(o.inject), engine)
  const files = o.html !== undefined || o.junit !== undefined || o.github ? (await import('../report/html.js')).exploreFiles(o, isLevelList(o.isolation)) : undefined
  const save = o.save === undefined ? undefined : (await import('../evidence/save.js')).exploreSaver(o.save, scenario, id, o.inject, o.isolation)
  // --isolation all (or rc,rr,ser): the exploration once per level (explore/levels.ts).
  if (isLevelList(o.isolation)) return (await import('./explore-levels.js')).exploreLevelsCommand(ctx, id, scenario, engine, o, cmd)
  const params = scenarioParams(scenario, cmd, o, await summaries(), engine)
  const checked = checkExplore(scenario, o, FLAGS)
  refuseOneSession(checked.n)
  if (oracle) refuseTooMany(checked.n)
  const bounds = parseBounds(o)
  const tty = process.stderr.isTTY
  let lastLine = 0
  const started = Date.now()
  const onProgress = (x: { runs: number; violating: number; planned: number | null; exact: boolean; phase: 'explore' | 'shrink' }) => {
    const of = x.planned === null ? '' : x.exact ? `/${x.planned}` : ` (of at most ${x.planned})`
    const text = `${x.phase === 'shrink' ? 'shrinking' : 'exploring'}: ${x.runs}${of} runs, ${x.violating} violating`
    if (tty) process.stderr.write(`\r\x1b[2K${text}`)
    else if (Date.now() - lastLine >= 10_000 && Date.now() - started >= 10_000) {
      // In a log (CI), a line every 10 s once the run is long.
      lastLine = Date.now()
      process.stderr.write(`race explore: ${text}\n`)
    }
  }
  const request = { scenario, engine, params, checked, bounds, databaseUrl: o.databaseUrl, name: id, onProgress, word: cliWords, keepOnStop: true }
  return executeExplore(ctx, request, (r) => {
    if (tty) process.stderr.write('\r\x1b[2K')
    save?.(r)
    if (o.json) {
      const { every, ...rest } = r
      process.stdout.write(JSON.stringify({ ...rest, interleavings: r.interleavings, every }, null, 2) + '\n')
    } else process.stdout.write(render(ctx.style ?? plain, r, Boolean(o.all), self(), oracle !== undefined) + '\n')
    if (files) files.write(r, plan(scenario, { params, n: checked.n, engine }), id)
    // Stopped (--run-timeout, a signal): what was found is in the report; the exit code is this search's, and a
    // signal's own (130, 143) stays, said in one line as for any command it stops.
    if (r.stopped) ctx.stopReported = true
    for (const l of closingLines(r, ctx)) process.stderr.write(`${l}\n`)
    return r.exitCode
  })
}
