// race explore <scenario|FILE.spec|FILE.mjs>: every interleaving of the sessions' steps (or a seeded sample),
// each judged by the invariant; how many violate it, grouped, and the shortest violating one as a --schedule line.
import { FLAGS } from '../run/params.js'
import { plan } from '../plan.js'
import type { RunContext } from '../lifecycle.js'
import type { Command } from 'commander'
import { findScenario, judgedBy, summaries, type ScenarioSummary } from '../registry.js'
import { parseOracle, refuseTooMany, refuseUnjudged } from '../engine/oracle.js'
import { closingLines, render } from '../report/explore.js'
import { cliWords } from './words.js'
import { executeExplore } from '../explore/execute.js'
import { checkExplore, DEFAULT_MAX, DEFAULT_SAMPLE, DEFAULT_SHRINK, refuseOneSession } from '../explore/request.js'
import { isLevelList } from '../levels.js'
import { addScenarioParamOptions, addTargetOptions, eachPg, scenarioParams, self, type TargetOptions } from './common.js'
import { assertRunsOn, engineFor } from '../run/lab.js'
import { parseBounds } from '../run/params.js'

export interface ExploreCommandOptions extends TargetOptions {
  n?: string
  max: string
  sample?: string
  acceptSample?: string
  seed?: string
  shrink: string
  depth?: string
  preemptions?: string
  shard?: string
  jobs?: string
  expect?: string
  all?: boolean
  inject?: string
  exhaustive?: boolean
  reduce?: boolean
  html?: string
  junit?: string
  github?: boolean
  save?: string
  oracle?: string
  [param: string]: unknown
}

export function registerExplore(program: Command, all: readonly ScenarioSummary[], exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('explore')
    .description('search the interleavings of the sessions\' steps (one of each set of orders that cannot end differently; --exhaustive: every order), judge each by the invariant, and give the shortest violating one')
    .argument('<scenario>', 'scenario id (race list), .spec file or .mjs module')
    .option('--n <n>', 'number of sessions; default per scenario, usually 2')
    .option('--exhaustive', 'run every order of the steps (the exact enumeration), whatever --max says; default: the reduced search')
    .option('--reduce', "application races: the reduced search (default: every interleaving). It assumes the sessions share no state outside the database (a module-level variable, an in-process cache or lock)")
    .option('--max <count>', "a reduced search of declared steps past this many runs (orders left) is followed by a seeded random sample; an application race's search stops after this many runs", String(DEFAULT_MAX))
    .option('--sample <k>', `run K random interleavings instead of searching (default ${DEFAULT_SAMPLE} after a reduced search past --max)`)
    .option('--accept-sample <p>', "expect held: a sample that found no violation passes (exit 0) when it states a probability of at least P (0 < P < 1) of finding one of its --depth; without it a sample, like a search --max cut short, is not known to hold (exit 3)")
    .option('--seed <s>', "the sample's seed (default a random one, printed: the same seed draws the same sample)")
    .option('--preemptions <k>', 'run every order with at most K preemptions (leaving a session that could go on), fewest first, instead of the reduced search')
    .option('--shard <i/n>', "run part i of n of a sample (--sample K; the same --seed in every part) or of an --exhaustive search: mergeShards, or npm run explore:merge, joins the parts' --json")
    .option('--jobs <n>', "runs at once, each in its own schema with its own connections (default the machine's cores); the reduced search, --preemptions and application races run on one")
    .option('--depth <d>', "a sample's PCT depth: the report states the least probability that a violation needing d steps in a given order would have been found (default 3: at most 2 preemptions)")
    .option('--shrink <runs>', 'runs spent at most on shrinking a sampled violation to a minimal one (0: none)', String(DEFAULT_SHRINK))
    .option('--expect <held|violated>', 'held: exit 1 when any interleaving violates; violated: exit 1 when none does (default: the spec\'s expect line, or the scenario\'s documentation)')
    .option('--all', 'list every interleaving of each group (default: the first 3, fewest switches first)')
    .option('--save <file>', 'write the shortest violating interleaving (else the shortest failure) as a counterexample file (race replay runs it again; docs/counterexamples.md)')
    .option('--inject <faults>', 'application races: also explore the server failing a query, e.g. 40001@commit,40P01@2,lost@3 (each at most once per interleaving)')
    .option('--html <file>', 'also write the search as one self-contained HTML page: the outcome groups, the shortest violating interleaving as lanes, its replay').option('--junit <file>', 'also write a JUnit XML file: one testcase, a <failure> when the search deviates').option('--github', 'print a GitHub Actions ::error annotation (on the race file) when the search deviates or is undecided')
    .option('--oracle <serial>', 'also judge every interleaving against the outcomes of every serial order of the sessions (run first, n <= 5); a race module or spec with no invariant needs it (docs/oracle.md)')
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
  const found = judgedBy(await findScenario(id), oracle)
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
    } else process.stdout.write(render(r, Boolean(o.all), self(), oracle !== undefined) + '\n')
    if (files) files.write(r, plan(scenario, { params, n: checked.n, engine }), id)
    // Stopped (--run-timeout, a signal): what was found is in the report; the exit code is this search's, and a
    // signal's own (130, 143) stays, said in one line as for any command it stops.
    if (r.stopped) ctx.stopReported = true
    for (const l of closingLines(r, ctx)) process.stderr.write(`${l}\n`)
    return r.exitCode
  })
}
