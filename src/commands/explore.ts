// race explore <scenario|FILE.spec|FILE.mjs>: every interleaving of the sessions' steps (or a seeded sample),
// each judged by the invariant; how many violate it, grouped, and the shortest violating one as a --schedule line.
import { FLAGS } from '../run/request.js'
import type { RunContext } from '../lifecycle.js'
import type { Command } from 'commander'
import { assertSound, plan } from '../plan.js'
import { findScenario, summaries, type ScenarioSummary } from '../registry.js'
import { c } from '../report/color.js'
import { columns, hang, joinFit } from '../report/width.js'
import { specFailure } from '../isolation/common.js'
import { cliWords } from './words.js'
import { DEFAULT_MAX, DEFAULT_SAMPLE, DEFAULT_SHRINK, exploreOn, type ExploreResult } from '../explore/index.js'
import { checkExplore, refuseOneSession } from '../explore/request.js'
import { isLevelList } from '../levels.js'
import { addScenarioParamOptions, addTargetOptions, eachPg, assertRunsOn, engineFor, parseBounds, scenarioParams, self, withLab, type TargetOptions } from './common.js'

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
    .option('--max <count>', "above this many orders of the declared steps, a seeded random sample; an application race's search stops after this many runs", String(DEFAULT_MAX))
    .option('--sample <k>', `run K random interleavings instead of searching (default ${DEFAULT_SAMPLE} when the count is above --max)`)
    .option('--accept-sample <p>', "expect held: a sample that found no violation passes (exit 0) when it states a probability of at least P (0 < P < 1) of finding one of its --depth; without it a sample, like a search --max cut short, is not known to hold (exit 3)")
    .option('--seed <s>', "the sample's seed (default a random one, printed: the same seed draws the same sample)")
    .option('--preemptions <k>', 'run every order with at most K preemptions (leaving a session that could go on), fewest first, instead of the reduced search')
    .option('--shard <i/n>', "run part i of n of a sample (--sample K; the same --seed in every part) or of an --exhaustive search: mergeShards, or npm run explore:merge, joins the parts' --json")
    .option('--jobs <n>', "runs at once, each in its own schema with its own connections (default the machine's cores); the reduced search, --preemptions and application races run on one")
    .option('--depth <d>', "a sample's PCT depth: the report states the least probability that a violation needing d steps in a given order would have been found (default 3: at most 2 preemptions)")
    .option('--shrink <runs>', 'runs spent at most on shrinking a sampled violation to a minimal one (0: none)', String(DEFAULT_SHRINK))
    .option('--expect <held|violated>', 'held: exit 1 when any interleaving violates; violated: exit 1 when none does (default: the spec\'s expect line, or the scenario\'s documentation)')
    .option('--all', 'list every interleaving of each group (default: the first 3, fewest switches first)')
    .option('--inject <faults>', 'application races: also explore the server failing a query, e.g. 40001@commit,40P01@2,lost@3 (each at most once per interleaving)')
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
run once; --exhaustive runs every order. A sample (--sample, or declared steps
above --max orders) is PCT's, and says what it covered; under expect held it
passes (exit 0) only with --accept-sample P, when its stated probability is P
or more (else exit 3, as a search cut short at --max).

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
  const found = await findScenario(id)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(found, engine)
  // --inject: the application race's explorations also offer the server failing its queries (app/labels.ts).
  const scenario = o.inject === undefined ? found : (await import('../app/scenario.js')).withFaults(found, (await import('../app/labels.js')).parseFaults(o.inject), engine)
  // --isolation all (or rc,rr,ser): the exploration once per level (explore/levels.ts).
  if (isLevelList(o.isolation)) return (await import('./explore-levels.js')).exploreLevelsCommand(ctx, id, scenario, engine, o, cmd)
  const params = scenarioParams(scenario, cmd, o, await summaries(), engine)
  const { n, max, sample, acceptSample, seed, depth, preemptions, shard, jobs, shrink, expect, exhaustive, reduce } = checkExplore(scenario, o, FLAGS)
  refuseOneSession(n)
  const bounds = parseBounds(o)
  assertSound(scenario, params, n, engine)
  const p = plan(scenario, { params, n, engine })
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
  return withLab(
    ctx,
    o.databaseUrl,
    bounds,
    async (lab, target) => {
      const r = await exploreOn(ctx, lab, target.label, scenario, p, { max, sample, acceptSample, seed, depth, preemptions, shard, jobs, shrink, expect, exhaustive, reduce, name: id, onProgress, word: cliWords, databaseUrl: o.databaseUrl, keepOnStop: true }, bounds).catch((e) => {
        throw specFailure(scenario, e)
      })
      if (tty) process.stderr.write('\r\x1b[2K')
      if (o.json) {
        const { every, ...rest } = r
        process.stdout.write(JSON.stringify({ ...rest, interleavings: r.interleavings, every }, null, 2) + '\n')
      } else process.stdout.write(render(r, Boolean(o.all)) + '\n')
      // Stopped (--run-timeout, a signal): what was found is in the report; the exit code is this search's, and a
      // signal's own (130, 143) stays, said in one line as for any command it stops.
      if (r.stopped) {
        ctx.stopReported = true
        if (r.stopped === 'run-timeout') process.stderr.write(`race: ${stoppedText(r, ctx)}\n`)
      }
      // --inject: a fault injected nowhere leaves the search unknown, said first (one line each).
      for (const l of r.exitCode === 3 ? (r.notFired ?? []) : []) process.stderr.write(`race: ${l}\n`)
      // A string of several statements run as one point: named, one line (the result is unknown).
      for (const x of r.exitCode === 3 ? (r.whole ?? []) : []) process.stderr.write(`race: ${wholeLine(x)}\n`)
      for (const x of r.exitCode === 3 ? (r.unordered ?? []) : []) process.stderr.write(`race: ${unorderedLine(x)}\n`)
      if (!r.stopped && r.exitCode === 3 && !((r.notFired?.length || r.whole?.length || r.unordered?.length) && !r.unknown && r.complete && !r.diverged)) {
        const first = r.every.find((x) => x.verdict === 'unknown' && !x.failure)
        if (!r.unknown && !r.diverged && r.sample && r.mode === 'sample') process.stderr.write(sampleShort(r) + '\n')
        else if (r.unknown || (r.complete && !r.diverged)) process.stderr.write(`race: could not decide ${r.unknown} interleaving(s)${first ? `, e.g. ${first.line}: ${first.why}` : ''}\n`)
        else if (!r.complete) process.stderr.write(`race: held in the ${r.interleavings} interleavings run, but --max ${r.runs} runs left others unexplored: raise --max to run them all, or --sample K --accept-sample P for a sample's verdict\n`)
        else process.stderr.write(`race: held in every interleaving run, but ${r.diverged} run(s) went otherwise than chosen: some interleavings may be missing\n`)
      }
      return r.exitCode
    },
    scenario,
    // Each job its own sessions and control connection (the embedded server's max_connections).
    { sessions: (n + 1) * jobs },
  )
}

/** Why a sample that held is not a pass (exit 3), and how to ask for a sample's verdict. */
export function sampleShort(r: ExploreResult): string {
  const s = r.sample!
  // Rounded down: the line never states more than the sample gives.
  const p = s.probability < 0.0001 ? s.probability.toExponential(1) : (Math.floor(s.probability * 10_000) / 10_000).toFixed(4)
  const covered = `held in the ${r.interleavings} sampled interleavings (${r.runs} runs, seed ${s.seed}), which state probability >= ${p} of finding a violation needing ${s.depth} steps in a given order; the other orders were not run`
  return s.accept === undefined
    ? `race: ${covered}: a sample is not a certificate. --accept-sample P passes a sample stating at least P; --exhaustive runs every order`
    : `race: ${covered}, short of --accept-sample ${s.accept}: raise --sample (more runs), or --exhaustive to run every order`
}

/** What a sample covered, in words: PCT's bound for its depth (docs/explore.md). */
export function coverage(r: ExploreResult): string {
  const s = r.sample!
  const p = s.probability >= 0.9999 ? '0.9999' : s.probability < 0.0001 ? s.probability.toExponential(1) : s.probability.toFixed(4)
  const what = `a violation needing ${s.depth} step${s.depth === 1 ? '' : 's'} in a given order (at most ${s.depth - 1} preemption${s.depth === 2 ? '' : 's'})`
  return r.violating
    ? `covered: PCT at depth ${s.depth} over ${r.n} sessions of ${s.steps} steps; violations were found`
    : `covered: no violation found; ${what} would have been found by these ${s.counted} runs with probability >= ${p} (PCT: ${r.n} sessions, ${s.steps} steps a run)${s.faults ? '; each injected fault was taken or not at random where offered, which that bound does not count' : ''}; the other orders were not run`
}

/** Some interleavings race could not decide, or in which the code failed (not those where a session merely did not complete). */
function undecidedOrFailed(r: ExploreResult): boolean {
  return r.unknown > 0 || r.failed > (r.incomplete ?? 0)
}

/** The heading when nothing violated but some interleavings were not judged: the code failing, or undecided. */
function notJudged(r: ExploreResult): string {
  // `unknown` counts only what race could not decide; `failed` the interleavings with a failure (the code failing, or
  // a session that did not complete where every one must: the latter has its own FAILED line below the heading).
  const codeFailed = r.failed - (r.incomplete ?? 0)
  const held = r.interleavings - r.unknown - r.failed
  if (!codeFailed) return c.yellow(`held in ${held}, undecided in ${r.unknown} of ${r.interleavings}`)
  return c.red(c.bold(`the code under test FAILED in ${codeFailed} of ${r.interleavings} interleavings`)) + (r.unknown ? c.yellow(`, undecided in ${r.unknown}`) : '') + (held > 0 ? c.dim(`, held in ${held}`) : '')
}

/** The shortest interleaving in which the code failed, as a line that replays it, and what failed. */
function failureLines(r: ExploreResult, w: number): string[] {
  const f = r.shortestFailure!
  const cmd = r.failureReplay!.replace(/^race /, `${self()} `)
  const at = cmd.lastIndexOf(' --schedule "')
  return [
    ...hang(`shortest in which the code failed (${f.switches} switch${f.switches === 1 ? '' : 'es'} between sessions; ${f.failure}):`, w, 2),
    ...(cmd.length + 2 <= w || at < 0 ? hang(`  ${cmd}`, w, 4) : [`  ${cmd.slice(0, at)} \\`, ...hang(`    ${cmd.slice(at + 1)}`, w, 6)]),
    ...hang(c.dim(`  (${f.why})`), w, 3),
  ]
}

/** What a search --run-timeout stopped says on stderr: the timeout, and what it had found. */
function stoppedText(r: ExploreResult, ctx: RunContext): string {
  const why = (ctx.signal.reason as Error).message
  const found = [r.violating ? `${r.violating} violating` : '', r.failed ? `${r.failed} in which the code failed` : ''].filter(Boolean).join(' and ')
  return `${why}: stopped after ${r.runs} runs; ${found ? `what it found (${found} interleavings) is in the report` : 'nothing violated or failed in the interleavings run, which is not all of them'}`
}

function render(r: ExploreResult, all: boolean): string {
  const w = columns()
  const lines = joinFit([c.bold(`race explore ${r.scenario}`), `${r.server.product ?? 'PostgreSQL'} ${r.server.version} (${r.target})`, `${r.n} session${r.n === 1 ? '' : 's'}`], '  ·  ', w, 2)
  const discovered = r.steps === 'discovered'
  const red = r.search === 'reduced' && r.reduction
  const pb = r.preemptions
  const what = pb
    ? `every order with at most ${pb.bound} preemption${pb.bound === 1 ? '' : 's'} (a preemption leaves a session that could go on), fewest first: ${r.runs} runs, the most ${pb.reached}${pb.complete ? '' : ' (stopped with orders within the bound left)'}`
    : red
    ? r.complete
      ? `a reduced search: ${r.runs} runs cover every order of the steps (${r.orders} orders${discovered ? " of the first run's queries" : ''}) up to swapping steps that cannot affect each other, as the server's locks said after each step (${r.reduction!.unclassified} of the ${r.reduction!.steps} steps run could not be classified: each was ordered both ways against every other)${discovered && r.sessionsRan?.mode !== 'isolated' ? "; --reduce assumes the sessions share no state outside the database (a module-level variable, an in-process cache or lock): without it every interleaving runs" : ''}`
      : `a reduced search, stopped at --max ${r.runs} runs with orders left (${r.orders} orders of the steps): raise --max, or --exhaustive`
    : r.mode === 'all'
      ? discovered
        ? r.complete
          ? `every interleaving: ${r.interleavings} (the sessions' queries, discovered as each function ran: the leaves of the tree of choices)`
          : `the first ${r.interleavings} interleavings (the search reached --max ${r.runs} runs with interleavings left: raise --max, or --sample)`
        : `every interleaving: ${r.interleavings} (${r.orders} orders of the steps keep each session's order${r.interleavings < Number(r.orders) ? '; the others would start a step of a session while it waits, or after it ended' : ''})`
      : discovered
        ? `a PCT sample: ${r.runs} runs, seed ${r.sample!.seed} (${r.interleavings} different interleavings; the first run's queries alone have ${r.orders} orders; --seed ${r.sample!.seed} draws it again)`
        : `a PCT sample: ${r.runs} runs, seed ${r.sample!.seed} (${r.interleavings} different interleavings of ${r.orders} orders of the steps; --seed ${r.sample!.seed} draws it again)`
  lines.push(...hang(c.dim(r.stopped ? `stopped (${r.stopped === 'run-timeout' ? '--run-timeout' : r.stopped}) after ${r.runs} runs, ${r.interleavings} different interleavings: the search is not complete, and this is what it had found` : what), w, 2))
  if (r.sessionsRan) lines.push(...hang(c.dim(`sessions ${r.sessionsRan.mode}: ${r.sessionsRan.assumes}`), w, 2))
  const ac = r.autocommit
  if (ac?.split.length) {
    const names = ac.split.length > 4 ? `${ac.split.slice(0, 4).join(', ')}, ... ${ac.split.length - 4} more` : ac.split.join(', ')
    lines.push(...hang(c.dim(`steps that commit by themselves (${names}) each run, then commit, as two points (:commit), as real sessions' statements overlap`), w, 2))
  }
  for (const x of r.whole ?? []) lines.push(...hang(c.yellow(wholeLine(x)), w, 2))
  for (const x of r.unordered ?? []) lines.push(...hang(c.yellow(unorderedLine(x)), w, 2))
  for (const x of ac?.indivisible ?? []) lines.push(...hang(c.yellow(`${x} ran as one point: PostgreSQL refuses it inside a transaction block (25001), so its run and commit were not split`), w, 2))
  lines.push(...hang(`${c.dim('invariant')}  ${r.invariant}`, w, 11))
  // A search stopped at --max ran some interleavings only: "all" is not what it saw.
  const partial = r.mode === 'all' && !r.complete
  if (pb) {
    const within = `with at most ${pb.bound} preemption${pb.bound === 1 ? '' : 's'}`
    lines.push(
      ...hang(
        r.violating
          ? c.red(c.bold(`VIOLATED in ${r.violating} of the ${r.interleavings} interleavings ${within}`))
          : undecidedOrFailed(r)
            ? notJudged(r)
            : c.green(c.bold(`HELD in all ${r.interleavings} interleavings ${within}`)) + c.dim(' (orders with more were not run)'),
        w,
        2,
      ),
    )
  } else if (red && r.complete) {
    lines.push(
      ...hang(
        r.violating
          ? c.red(c.bold(`VIOLATED in ${r.violating} of the ${r.interleavings} interleavings run`)) + c.dim(' (any other order ends as one of these)')
          : undecidedOrFailed(r)
            ? notJudged(r)
            : c.green(c.bold(`HELD in all ${r.interleavings} interleavings run`)) + c.dim(' (any other order ends as one of these)'),
        w,
        2,
      ),
    )
  }
  const sampled = r.mode === 'sample' ? ' sampled' : ''
  const share = partial ? `${r.violating} of the ${r.interleavings} interleavings run` : `${r.violating} of ${r.interleavings}${sampled} interleavings`
  const heldAll = partial ? `HELD in the ${r.interleavings} interleavings run` : `HELD in all ${r.interleavings}${sampled} interleavings`
  const others = sampled ? ' (a sample: the others were not run)' : partial ? ` (${r.stopped ? 'the search was stopped' : '--max stopped the search'}: the others were not run)` : ''
  if (!pb && !(red && r.complete)) lines.push(r.violating ? c.red(c.bold(`VIOLATED in ${share}`)) : undecidedOrFailed(r) ? notJudged(r) : c.green(c.bold(heldAll)) + c.dim(others))
  if (r.mode === 'sample' && r.sample) lines.push(...hang(c.dim(coverage(r)), w, 2))
  // Every session must complete (mustComplete): the interleavings where one did not are failures, held or not.
  if (r.incomplete) lines.push(...hang(c.red(c.bold(`FAILED in ${r.incomplete} of ${r.interleavings} interleavings: a session did not complete, and every session must (${r.every.find((x) => x.incomplete)!.failure})`)), w, 2))
  // --inject: where each fault went; one injected nowhere was not explored (the result is unknown).
  const fired = (r.injections ?? []).filter((x) => x.runs > 0)
  if (fired.length) lines.push(...hang(c.dim(`injected: ${fired.map((x) => `${x.fault} in ${x.runs} of ${r.runs} runs`).join(', ')}`), w, 2))
  for (const l of r.notFired ?? []) lines.push(...hang(c.yellow(l), w, 2))
  lines.push('')
  for (const g of r.groups) {
    const state = g.held === false ? c.red('VIOLATED') : g.failure ? c.red('FAILED') : g.held === null ? c.yellow('UNKNOWN') : c.green('HELD')
    const ends = Object.entries(g.outcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')
    lines.push(...hang(`${String(g.count).padStart(5)}  ${state} ${g.failure ? `failed: ${g.failure}` : `${g.verdict}: ${ends}`}`, w, 7))
    const shown = all ? g.lines : g.lines.slice(0, 3)
    for (const l of shown) lines.push(...hang(c.dim(`       ${l}`), w, 9))
    if (shown.length < g.lines.length) lines.push(c.dim(`       ... ${g.lines.length - shown.length} more (--all, or --json)`))
  }
  lines.push('')
  if (r.shortest) {
    const how = r.stopped
      ? ', the fewest among the runs made before the stop'
      : r.search === 'reduced' && r.complete
        ? `, the fewest of all${r.shortest.shrunk ? `: the simplest order equivalent to a run with more, run again in ${r.shortest.shrunk.runs} run${r.shortest.shrunk.runs === 1 ? '' : 's'} to confirm` : ''}`
        : r.shortest.shrunk
          ? `, shrunk in ${r.shortest.shrunk.runs} runs from ${r.shortest.shrunk.from}`
          : r.mode === 'all'
            ? r.preemptions
              ? `, the fewest within ${r.preemptions.bound} preemption${r.preemptions.bound === 1 ? '' : 's'}`
              : ', the fewest of all'
            : ''
    lines.push(...hang(`shortest violating (${r.shortest.switches} switch${r.shortest.switches === 1 ? '' : 'es'} between sessions${how}):`, w, 2))
    // Copied into a shell as printed: a break falls inside the quoted schedule (its tokens split on any space), or
    // after a backslash.
    const cmd = r.replay!.replace(/^race /, `${self()} `)
    const at = cmd.lastIndexOf(' --schedule "')
    if (cmd.length + 2 <= w || at < 0) lines.push(...hang(`  ${cmd}`, w, 4))
    else lines.push(`  ${cmd.slice(0, at)} \\`, ...hang(`    ${cmd.slice(at + 1)}`, w, 6))
    if (r.replayNote) lines.push(...hang(c.dim(`  (${r.replayNote})`), w, 3))
  }
  if (r.shortestFailure && r.failureReplay) lines.push(...failureLines(r, w))
  if (r.diverged) lines.push(...hang(c.yellow(`${r.diverged} run(s) went otherwise than the same choices did before: the database${r.steps === 'discovered' ? " (or the application's code)" : ''} did not repeat itself, so some interleavings may be missing`), w, 2))
  // Undecided (exit 3: a search cut short, an interleaving that could not be decided) is neither a match nor a deviation.
  const verdict = r.matched ? c.green('MATCH') : r.exitCode === 3 ? c.yellow('unknown') : c.red('DEVIATION')
  lines.push(...hang(`${c.dim('expected')}   ${r.expected}  ${verdict}`, w, 11))
  // The jobs the runs went over (--jobs); a search that runs on one says why.
  const jobs = `${r.jobs} job${r.jobs === 1 ? '' : 's'}`
  const saved = red
    ? ` (${r.search} search, on ${jobs}${r.reduction!.retried ? `; ${r.reduction!.retried} run again after going otherwise than chosen` : ''})`
    : ` (${jobs}${r.jobsNote ? `: ${r.jobsNote.replace(/ runs on one job$/, ' runs on one')}` : ''})`
  lines.push(c.dim(`${r.runs} runs in ${(r.ms / 1000).toFixed(1)} s: ${r.perSecond.toFixed(1)} interleavings per second${saved}`))
  return lines.join('\n')
}

/** Several statements race ran as one point, in one line: a spec's step it did not split, or an application's string. */
function wholeLine(x: string): string {
  return `${x} sent several statements that ran as one point (race splits a spec's steps and node-postgres's simple queries, but not one with named binds or a retry check, one in whose middle a transaction begins or ends, or another driver's string): other sessions' statements were never run between its statements, so held is not known; send them as separate steps or queries`
}

/** A statement that locks rows without waiting at SERIALIZABLE, in one line. */
function unorderedLine(x: string): string {
  return `${x} locks rows without waiting (NOWAIT, SKIP LOCKED) at SERIALIZABLE: which transaction SSI cancels can depend on when, inside that one statement, its reads and writes meet another's, which no order of whole statements gives, so held is not known; race explore certifies such a race at REPEATABLE READ or READ COMMITTED`
}
