// race run <scenario>: one scenario, N sessions, one schedule, K trials; the table, timeline or JSON.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import { plain } from '../report/color.js'
import { formatDuration } from '../parse.js'
import { findScenario, judgedBy, summaries, type ScenarioSummary } from '../registry.js'
import { parseOracle, refuseTooMany, refuseUnjudged } from '../engine/oracle.js'
import { describeParams, headParts, render } from '../report/run.js'
import { executeRun, extendForHold } from '../run/execute.js'
import { FLAGS } from '../run/params.js'
import { addOptions, RUN_OPTIONS, RUN_OWN, type CliFlags } from '../run/options.js'
import { validateRun } from '../run/request.js'
import { addPoolerOptions, parsePool } from './pool-options.js'
import { cliWords } from './words.js'
// The PostgreSQL driver, which withLab imports when it opens the target: loaded with this module, not after it.
import '../db/postgres.js'
import { addCiOptions, addScenarioParamOptions, addTargetOptions, eachPg, self, scenarioParams } from './common.js'
import { assertRunsOn, engineFor } from '../run/lab.js'

/** race run's flags as commander reads them (typed from RUN_OPTIONS; a scenario's own flags by their names); mapped to the run service's RunRequest (run/request.ts). */
export type RunFlags = CliFlags<typeof RUN_OPTIONS> & { [param: string]: unknown }

export function registerRun(program: Command, all: readonly ScenarioSummary[], exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('run')
    .description('run one scenario over N real connections and judge the invariant')
    .argument('<scenario>', 'scenario id (race list)')
  // race run's own options, declared once (run/options.ts RUN_OWN): the scenario's flags and the target's follow.
  addOptions(cmd, RUN_OWN)
  addScenarioParamOptions(cmd, all)
  addTargetOptions(cmd, ctx, { pg: true })
  addCiOptions(cmd, 'run')
  addPoolerOptions(cmd)
  cmd.action(async (id: string, o: RunFlags, self: Command) => exit(await eachPg(ctx, o, () => runCommand(ctx, id, o, self))))
  cmd.addHelpText(
    'after',
    `
Examples:
  $ race run broken --n 2 --timeline
  $ race run broken --step                 (in a terminal: one step per Enter)
  $ race run broken --step --theme presenter   (bold, for a projector)
  $ race run broken --schedule lockstep --trials 20
  $ race run advisory --n 5 --max-pending 3
  $ race run advisory --n 50 --max-pending 3 --trials 200
  $ race run serializable --retries 3 --timeline
  $ race run repeatable-read --no-guard
  $ race run unique-index --window 300ms --json
  $ race run deadlock --ordered --timeline
  $ race run write-skew --isolation serializable --timeline
  $ race run lost-update --isolation rr
  $ race run lost-update --schedule "t1.begin t2.begin t1.read t2.read
      t1.update t2.update t1.commit t2.commit"
  $ race run skip-locked --n 8 --no-skip-locked
  $ race run session-lock --pooler pgbouncer --timeline
  $ race run advisory --pooler pgbouncer --n 5 --max-pending 3`,
  )
  return cmd
}

/** --timeline (the race) or --timeline all (set-up steps too); undefined: no timeline. */
export function parseTimeline(raw: boolean | string | undefined): 'race' | 'all' | undefined {
  if (raw === undefined || raw === false) return undefined
  if (raw === true) return 'race'
  if (String(raw).trim().toLowerCase() === 'all') return 'all'
  throw new UsageError(`--timeline takes nothing or all (set-up steps too), got '${raw}'`)
}

export async function runCommand(ctx: RunContext, id: string, o: RunFlags, cmd: Command): Promise<number> {
  // --oracle serial: every trial judged against the serial orders too (engine/oracle.ts).
  const oracle = parseOracle(o.oracle)
  const scenario = await judgedBy(await findScenario(id), oracle)
  refuseUnjudged(scenario)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(scenario, engine)
  const given = scenarioParams(scenario, cmd, o, await summaries(), engine)
  // --step: the room talks between steps as long as it likes, within the run's bound: an hour unless given.
  const runTimeout = o.step && cmd.getOptionValueSource('runTimeout') !== 'cli' ? '60m' : o.runTimeout
  const checked = validateRun(
    { scenario, engine, params: given, databaseUrl: o.databaseUrl, n: o.n, schedule: o.schedule ?? (o.step ? 'lockstep' : undefined), window: o.window, trials: o.trials, expect: o.expect, user: o.user, hold: o.hold, keep: o.keep, freshConnections: o.freshConnections, connectTimeout: o.connectTimeout, stepTimeout: o.stepTimeout, runTimeout },
    FLAGS,
  )
  const { n, windowMs, trials, bounds, holdMs } = checked
  if (oracle) refuseTooMany(n)
  const drawn = parseTimeline(o.timeline)
  // What only some runs print is loaded only for them: JSON, a timeline, the CI reports.
  const ci = o.junit !== undefined || o.github || process.env.GITHUB_ACTIONS === 'true' ? await import('../report/ci.js') : undefined
  const junit = o.junit === undefined ? undefined : ci!.checkWritable('--junit', o.junit)
  const html = o.html === undefined ? undefined : (await import('../report/html.js')).htmlFile(o.html)
  if (o.step) {
    if (o.json) throw new UsageError('--step is for a room, --json for a machine: choose one')
    if (trials > 1) throw new UsageError('--step walks through one race: leave out --trials')
    if (holdMs) throw new UsageError('--step already holds every lock as long as you like: leave out --hold')
    if (o.schedule === 'barrier') throw new UsageError('--step runs a deterministic interleaving (lockstep, serial or a permutation); a barrier runs free')
    const { requireTerminal } = await import('./step.js')
    requireTerminal()
  }
  // --step holds every lock as long as the room pauses: the scenario's safety-net waits (a lock_timeout that is not
  // the story) and the step bound are extended by the run's whole bound, so a pause never changes an outcome.
  const paused = o.step ? bounds.runTimeoutMs : 0
  const params = paused ? extendForHold(scenario, given, paused) : checked.params
  if (paused) bounds.stepTimeoutMs += paused
  const asked = parsePool(o, cmd, engine)
  const json = o.json ? await import('../report/json.js') : undefined
  const step = o.step ? await import('./step.js') : undefined
  const drawing = drawn || o.step ? await import('../report/timeline.js') : undefined
  const progress = !o.json && process.stderr.isTTY && trials > 1
  const save = o.save === undefined ? undefined : (await import('../evidence/save.js')).runSaver(o.save, id, o.schedule, o.databaseUrl)
  const started = performance.now()
  // The input is checked: the report's tables load while the run connects.
  const table = import('../report/table.js')
  table.catch(() => {}) // awaited once the run is done
  let presenter: ReturnType<NonNullable<typeof step>['stepper']> | undefined
  const { view, code } = await executeRun(ctx, {
    ...checked,
    params,
    pool: asked,
    word: cliWords,
    onHold: (pids, ms, lab, target) => {
      if (lab.engine === 'mysql') {
        process.stderr.write(`holding for ${formatDuration(ms)} (threads ${pids.join(', ')}); in another client: select * from information_schema.innodb_lock_waits\n`)
        return
      }
      const url = target.kind === 'embedded' ? ` --database-url '${lab.target.url}'` : o.databaseUrl ? ` --database-url '<the same URL>'` : ''
      process.stderr.write(`holding for ${formatDuration(ms)} (backends ${pids.join(', ')}); in another terminal:\n  ${self()} locks${url}\n`)
    },
    presenter: step
      ? (lab, target, p, schedule) => {
          presenter = step.stepper(ctx, p, [headParts(ctx.style ?? plain, scenario.id, `${lab.server.product ?? 'PostgreSQL'} ${lab.server.version}`, target.label, n, schedule, windowMs).join('  ·  ') + '  ·  --step'])
          return presenter
        }
      : undefined,
    onTrial: (done, violations) => {
      if (progress) process.stderr.write(`\r\x1b[2Ktrial ${done}/${trials}  violated ${violations}`)
    },
  })
  if (progress) process.stderr.write('\r\x1b[2K')
  await save?.(view, code)
  if (presenter) {
    presenter.close()
    process.stdout.write('\x1b[2J\x1b[H')
  }
  const { schedule, representative, summary } = view
  const name = [schedule, `n=${n}`, describeParams(scenario, params)].filter(Boolean).join(' ')
  const file = scenario.source.article === 'file' ? { file: scenario.source.section } : {}
  const cases = ci ? [{ ...ci.ciCase(`race.run.${scenario.id}`, name, Math.round(performance.now() - started), representative, summary, code), ...file }] : []
  // The suite's time is the whole run's (since race started), the case's its trials'.
  if (junit) ci!.writeJunit(junit, 'race run', cases, { server: `PostgreSQL ${view.server.version}`, target: view.target, schedule, trials: String(trials) }, Math.round(performance.now()))
  if (html) (await import('../report/html.js')).writeRunPage(html, view, { exitCode: code, kept: Boolean(o.keep) })
  const notes = ci?.githubWanted(o.github) ? ci.annotationsOf(() => `race run ${scenario.id} (${name})`, cases) : []
  if (json) process.stdout.write(JSON.stringify(json.toJson(view, { timeline: drawn !== undefined, exitCode: code, kept: Boolean(o.keep) }), null, 2) + '\n')
  else process.stdout.write(render(ctx.style ?? plain, view, drawn ?? (o.step ? 'race' : undefined), Boolean(o.keep), await table, drawing?.timeline) + '\n')
  ci?.printAnnotations(notes, Boolean(o.json))
  if (code === 3) process.stderr.write(`race: could not decide: ${representative.verdict === 'unknown' ? representative.why : (representative.comparison.deviations[0] ?? representative.why)}\n`)
  return code
}
