// The report race explore prints: the search's heading and what it covered, the verdict, the groups of
// interleavings, the shortest violating one as a line that replays it; and the lines it says on stderr when the
// result is unknown (exit 3) or the search was stopped.
import type { ExploreResult } from '../explore/result.js'
import type { RunContext } from '../lifecycle.js'
import type { Style } from './color.js'
import { columns, hang, joinFit } from './width.js'

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
function notJudged(c: Style, r: ExploreResult): string {
  // `unknown` counts only what race could not decide; `failed` the interleavings with a failure (the code failing, or
  // a session that did not complete where every one must: the latter has its own FAILED line below the heading).
  const codeFailed = r.failed - (r.incomplete ?? 0)
  const held = r.interleavings - r.unknown - r.failed
  if (!codeFailed) return c.yellow(`held in ${held}, undecided in ${r.unknown} of ${r.interleavings}`)
  return c.red(c.bold(`the code under test FAILED in ${codeFailed} of ${r.interleavings} interleavings`)) + (r.unknown ? c.yellow(`, undecided in ${r.unknown}`) : '') + (held > 0 ? c.dim(`, held in ${held}`) : '')
}

/** The shortest interleaving in which the code failed, as a line that replays it, and what failed. */
function failureLines(c: Style, r: ExploreResult, w: number, self: string): string[] {
  const f = r.shortestFailure!
  const cmd = r.failureReplay!.replace(/^race /, `${self} `)
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

/** The report race explore prints; `self`: how the replay lines name race (what the user ran). */
export function render(c: Style, r: ExploreResult, all: boolean, self: string, oracle = false): string {
  const w = columns()
  const lines = joinFit([c.bold(`race explore ${r.scenario}`), `${r.server.product ?? 'PostgreSQL'} ${r.server.version} (${r.target})`, `${r.n} session${r.n === 1 ? '' : 's'}`], '  ·  ', w, 2)
  lines.push(...hang(c.dim(r.stopped ? `stopped (${r.stopped === 'run-timeout' ? '--run-timeout' : r.stopped}) after ${r.runs} runs, ${r.interleavings} different interleavings: the search is not complete, and this is what it had found` : searched(r)), w, 2))
  if (r.sessionsRan) lines.push(...hang(c.dim(`sessions ${r.sessionsRan.mode}: ${r.sessionsRan.assumes}`), w, 2))
  // Why the default search ran as it did, where the count of orders is above --max.
  if (r.chosen && !r.stopped) lines.push(...hang(c.dim(r.chosen.why), w, 2))
  lines.push(...notes(c, r, w))
  lines.push(...hang(`${c.dim('invariant')}  ${r.invariant}`, w, 11))
  lines.push(...verdictLines(c, r, w))
  lines.push('')
  lines.push(...groupLines(c, r, all, w))
  lines.push('')
  lines.push(...shortestLines(c, r, w, self, oracle))
  if (r.diverged) lines.push(...hang(c.yellow(`${r.diverged} run(s) went otherwise than the same choices did before: the database${r.steps === 'discovered' ? " (or the application's code)" : ''} did not repeat itself, so some interleavings may be missing`), w, 2))
  // Undecided (exit 3: a search cut short, an interleaving that could not be decided) is neither a match nor a deviation.
  const verdict = r.matched ? c.green('MATCH') : r.exitCode === 3 ? c.yellow('unknown') : c.red('DEVIATION')
  lines.push(...hang(`${c.dim('expected')}   ${r.expected}  ${verdict}`, w, 11))
  // The jobs the runs went over (--jobs); a search that runs on one says why.
  const jobs = `${r.jobs} job${r.jobs === 1 ? '' : 's'}`
  const why = r.jobsNote ? `: ${r.jobsNote.replace(/ runs on one job$/, ' runs on one')}` : ''
  const saved = reducedRun(r)
    ? ` (${r.search} search, on ${jobs}${partOf(r) || (r.jobs === 1 ? why : '')}${r.ahead ? `: ${r.ahead.made} runs made, ${r.ahead.wasted ? `${r.ahead.wasted} of them ahead of the one-job search and not needed` : 'none wasted'}` : ''}${r.reduction!.retried ? `; ${r.reduction!.retried} run again after going otherwise than chosen` : ''})`
    : ` (${jobs}${why})`
  lines.push(c.dim(`${r.runs} runs in ${(r.ms / 1000).toFixed(1)} s: ${r.perSecond.toFixed(1)} interleavings per second${saved}`))
  return lines.join('\n')
}

/** A part of a split reduced search (--shard i/n): what it ran, owned, and shared with the other parts. */
function partOf(r: ExploreResult): string {
  const w = r.shard?.reduced
  if (!r.shard || !w) return ''
  const split = w.branches ? `${w.before} made by other parts too before the split, ${w.owned} in its own branches, ${w.found} in branches found above the split (another part may run them too)` : 'the search ended before it could be split: every part ran all of it'
  return `; part ${r.shard.index}/${r.shard.count}: ${split}`
}

/** The reduced search's result (its reduction known). */
function reducedRun(r: ExploreResult): boolean {
  return Boolean(r.search === 'reduced' && r.reduction)
}

/** What the search ran, in one sentence. */
function searched(r: ExploreResult): string {
  const discovered = r.steps === 'discovered'
  const pb = r.preemptions
  if (pb) return `every order with at most ${pb.bound} preemption${pb.bound === 1 ? '' : 's'} (a preemption leaves a session that could go on), fewest first: ${r.runs} runs, the most ${pb.reached}${pb.complete ? '' : ' (stopped with orders within the bound left)'}`
  if (reducedRun(r)) {
    if (r.shard) return `part ${r.shard.index} of ${r.shard.count} of a reduced search: ${r.runs} runs${r.complete ? '' : `, stopped at --max with runs left`} (npm run explore:merge joins every part's --json into the whole search's groups and shortest)`
    return r.complete
      ? `a reduced search: ${r.runs} runs cover every order of the steps (${r.orders} orders${discovered ? " of the first run's queries" : ''}) up to swapping steps that cannot affect each other, as the server's locks said after each step (${r.reduction!.unclassified} of the ${r.reduction!.steps} steps run could not be classified: each was ordered both ways against every other)${discovered && r.sessionsRan?.mode !== 'isolated' ? "; --reduce assumes the sessions share no state outside the database (a module-level variable, an in-process cache or lock): without it every interleaving runs" : ''}`
      : `a reduced search, stopped at --max ${r.runs} runs with orders left (${r.orders} orders of the steps): raise --max, or --exhaustive`
  }
  if (r.mode === 'all') {
    if (!discovered) return `every interleaving: ${r.interleavings} (${r.orders} orders of the steps keep each session's order${r.interleavings < Number(r.orders) ? '; the others would start a step of a session while it waits, or after it ended' : ''})`
    return r.complete
      ? `every interleaving: ${r.interleavings} (the sessions' queries, discovered as each function ran: the leaves of the tree of choices)`
      : `the first ${r.interleavings} interleavings (the search reached --max ${r.runs} runs with interleavings left: raise --max, or --sample)`
  }
  if (r.chosen?.search === 'sample') return `${r.chosen.reducedRuns} runs of the reduced search, then a PCT sample: ${r.runs - r.chosen.reducedRuns} runs, seed ${r.sample!.seed} (${r.interleavings} different interleavings in all of ${r.orders} orders of the steps; --seed ${r.sample!.seed} draws the sample again)`
  return discovered
    ? `a PCT sample: ${r.runs} runs, seed ${r.sample!.seed} (${r.interleavings} different interleavings; the first run's queries alone have ${r.orders} orders; --seed ${r.sample!.seed} draws it again)`
    : `a PCT sample: ${r.runs} runs, seed ${r.sample!.seed} (${r.interleavings} different interleavings of ${r.orders} orders of the steps; --seed ${r.sample!.seed} draws it again)`
}

/** Steps split into their run and commit, and statements that were not (whole, unordered, indivisible). */
function notes(c: Style, r: ExploreResult, w: number): string[] {
  const lines: string[] = []
  const ac = r.autocommit
  if (ac?.split.length) {
    const names = ac.split.length > 4 ? `${ac.split.slice(0, 4).join(', ')}, ... ${ac.split.length - 4} more` : ac.split.join(', ')
    lines.push(...hang(c.dim(`steps that commit by themselves (${names}) each run, then commit, as two points (:commit), as real sessions' statements overlap`), w, 2))
  }
  for (const x of r.whole ?? []) lines.push(...hang(c.yellow(wholeLine(x)), w, 2))
  for (const x of r.unordered ?? []) lines.push(...hang(c.yellow(unorderedLine(x)), w, 2))
  for (const x of ac?.indivisible ?? []) lines.push(...hang(c.yellow(`${x} ran as one point: PostgreSQL refuses it inside a transaction block (25001), so its run and commit were not split`), w, 2))
  return lines
}

/** The verdict: violated, held, or not judged, in the search's own terms; what a sample covered; failures; faults. */
function verdictLines(c: Style, r: ExploreResult, w: number): string[] {
  const lines: string[] = []
  const pb = r.preemptions
  const red = reducedRun(r)
  // A search stopped at --max ran some interleavings only: "all" is not what it saw.
  const partial = r.mode === 'all' && !r.complete
  if (pb) {
    const within = `with at most ${pb.bound} preemption${pb.bound === 1 ? '' : 's'}`
    lines.push(...hang(r.violating ? c.red(c.bold(`VIOLATED in ${r.violating} of the ${r.interleavings} interleavings ${within}`)) : undecidedOrFailed(r) ? notJudged(c, r) : c.green(c.bold(`HELD in all ${r.interleavings} interleavings ${within}`)) + c.dim(' (orders with more were not run)'), w, 2))
  } else if (red && r.complete) {
    lines.push(...hang(r.violating ? c.red(c.bold(`VIOLATED in ${r.violating} of the ${r.interleavings} interleavings run`)) + c.dim(' (any other order ends as one of these)') : undecidedOrFailed(r) ? notJudged(c, r) : c.green(c.bold(`HELD in all ${r.interleavings} interleavings run`)) + c.dim(' (any other order ends as one of these)'), w, 2))
  } else {
    const sampled = r.mode === 'sample' ? ' sampled' : ''
    // A sample that followed the reduced search (chosen): its runs and the reduced search's, all run, not all sampled.
    const run = partial || r.chosen !== undefined
    const share = run ? `${r.violating} of the ${r.interleavings} interleavings run` : `${r.violating} of ${r.interleavings}${sampled} interleavings`
    const heldAll = run ? `HELD in the ${r.interleavings} interleavings run` : `HELD in all ${r.interleavings}${sampled} interleavings`
    const others = r.chosen ? ' (a sample followed the reduced search: the others were not run)' : sampled ? ' (a sample: the others were not run)' : partial ? ` (${r.stopped ? 'the search was stopped' : '--max stopped the search'}: the others were not run)` : ''
    lines.push(r.violating ? c.red(c.bold(`VIOLATED in ${share}`)) : undecidedOrFailed(r) ? notJudged(c, r) : c.green(c.bold(heldAll)) + c.dim(others))
  }
  if (r.mode === 'sample' && r.sample) lines.push(...hang(c.dim(coverage(r)), w, 2))
  // Every session must complete (mustComplete): the interleavings where one did not are failures, held or not.
  if (r.incomplete) lines.push(...hang(c.red(c.bold(`FAILED in ${r.incomplete} of ${r.interleavings} interleavings: a session did not complete, and every session must (${r.every.find((x) => x.incomplete)!.failure})`)), w, 2))
  // --inject: where each fault went; one injected nowhere was not explored (the result is unknown).
  const fired = (r.injections ?? []).filter((x) => x.runs > 0)
  if (fired.length) lines.push(...hang(c.dim(`injected: ${fired.map((x) => `${x.fault} in ${x.runs} of ${r.runs} runs`).join(', ')}`), w, 2))
  for (const l of r.notFired ?? []) lines.push(...hang(c.yellow(l), w, 2))
  return lines
}

/** Each group of interleavings, with its first lines (every line with --all). */
function groupLines(c: Style, r: ExploreResult, all: boolean, w: number): string[] {
  const lines: string[] = []
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
  return lines
}

/** The shortest violating interleaving and the shortest failure, each as a line that replays it. */
function shortestLines(c: Style, r: ExploreResult, w: number, self: string, oracle = false): string[] {
  const lines: string[] = []
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
    const cmd = r.replay!.replace(/^race /, `${self} `)
    const at = cmd.lastIndexOf(' --schedule "')
    if (cmd.length + 2 <= w || at < 0) lines.push(...hang(`  ${cmd}`, w, 4))
    else lines.push(`  ${cmd.slice(0, at)} \\`, ...hang(`    ${cmd.slice(at + 1)}`, w, 6))
    if (r.replayNote) lines.push(...hang(c.dim(`  (${r.replayNote})`), w, 3))
    // --oracle serial: what of it no serial order gives, and the closest serial order's difference.
    if (oracle && r.shortest.observed) lines.push(...hang(`  observed ${r.shortest.observed}`, w, 4))
  }
  if (r.shortestFailure && r.failureReplay) lines.push(...failureLines(c, r, w, self))
  return lines
}

/**
 * What race explore says on stderr after its report: a stop by --run-timeout, and when the result is unknown
 * (exit 3) why, one line each.
 */
export function closingLines(r: ExploreResult, ctx: RunContext): string[] {
  const out: string[] = []
  if (r.stopped === 'run-timeout') out.push(`race: ${stoppedText(r, ctx)}`)
  // --inject: a fault injected nowhere leaves the search unknown, said first (one line each).
  for (const l of r.exitCode === 3 ? (r.notFired ?? []) : []) out.push(`race: ${l}`)
  // A string of several statements run as one point: named, one line (the result is unknown).
  for (const x of r.exitCode === 3 ? (r.whole ?? []) : []) out.push(`race: ${wholeLine(x)}`)
  for (const x of r.exitCode === 3 ? (r.unordered ?? []) : []) out.push(`race: ${unorderedLine(x)}`)
  if (!r.stopped && r.exitCode === 3 && !((r.notFired?.length || r.whole?.length || r.unordered?.length) && !r.unknown && r.complete && !r.diverged)) {
    const first = r.every.find((x) => x.verdict === 'unknown' && !x.failure)
    if (!r.unknown && !r.diverged && r.sample && r.mode === 'sample') out.push(sampleShort(r))
    else if (r.unknown || (r.complete && !r.diverged)) out.push(`race: could not decide ${r.unknown} interleaving(s)${first ? `, e.g. ${first.line}: ${first.why}` : ''}`)
    else if (!r.complete) out.push(`race: held in the ${r.interleavings} interleavings run, but --max ${r.runs} runs left others unexplored: raise --max to run them all, or --sample K --accept-sample P for a sample's verdict`)
    else out.push(`race: held in every interleaving run, but ${r.diverged} run(s) went otherwise than chosen: some interleavings may be missing`)
  }
  return out
}

/** Several statements race ran as one point, in one line: a spec's step it did not split, or an application's string. */
function wholeLine(x: string): string {
  return `${x} sent several statements that ran as one point (race splits a spec's steps and node-postgres's simple queries, but not one with named binds or a retry check, one in whose middle a transaction begins or ends, or another driver's string): other sessions' statements were never run between its statements, so held is not known; send them as separate steps or queries`
}

/** A statement that locks rows without waiting at SERIALIZABLE, in one line. */
function unorderedLine(x: string): string {
  return `${x} locks rows without waiting (NOWAIT, SKIP LOCKED) at SERIALIZABLE: which transaction SSI cancels can depend on when, inside that one statement, its reads and writes meet another's, which no order of whole statements gives, so held is not known; race explore certifies such a race at REPEATABLE READ or READ COMMITTED`
}
