// The one way an exploration runs, for race explore, race explore --isolation all (or a list of levels) and the
// API's explore(): the request checked by its caller, the lab opened on its target, the search made (once, or once
// per level: levels.ts), and the caller's `done` given the result while the lab is open.
import type { Words } from '../engine/refusals.js'
import { specFailure } from '../specfile/common.js'
import type { Level } from '../levels.js'
import type { RunContext } from '../lifecycle.js'
import { assertSound, plan, type Plan } from '../plan.js'
import { findScenario } from '../registry.js'
import { assertRunsOn, engineFor, withLab } from '../run/lab.js'
import { NAMES, paramsOf, type Bounds } from '../run/params.js'
import type { Engine, Params, Scenario } from '../scenario.js'
import { exploreLevels, type LevelsResult } from './levels.js'
import { checkExplore, exploreBounds, type ExploreChecked, type ExploreOptions } from './request.js'
import type { ExploreResult } from './result.js'
import { Search } from './search.js'
import { SharedOnJobs } from './trial.js'
import { EXPLORE_OPTIONS } from './options.js'
import { refuseUnknown } from '../run/options.js'

/** An exploration asked for, checked. */
export interface ExploreRequest {
  scenario: Scenario
  /** The engine the target's URL names (the command checks the scenario against it before any server starts). */
  engine: Engine
  params: Params
  checked: ExploreChecked
  bounds: Bounds
  databaseUrl?: string
  /** How the replay command names the scenario (what the user typed). */
  name?: string
  onProgress?: ExploreOptions['onProgress']
  /** The CLI's words for the engine's refusals (--flag), and its stop: a search stopped keeps what it found. */
  word?: Words
  keepOnStop?: boolean
  /** --isolation all (or a list): the search once per level, `params` without `isolation`. */
  levels?: readonly Level[]
  /** Each level as its search begins (the command's progress line names it). */
  onLevel?: (level: Level) => void
  /**
   * explore() from code: the scenario is checked against the engine the lab runs, and the control connection is
   * closed at the end (nothing else ends it: it would keep the caller's process alive).
   */
  fromCode?: boolean
}

export function executeExplore<T>(ctx: RunContext, r: ExploreRequest & { levels?: undefined }, done: (x: ExploreResult) => T | Promise<T>): Promise<T>
export function executeExplore<T>(ctx: RunContext, r: ExploreRequest & { levels: readonly Level[] }, done: (x: LevelsResult) => T | Promise<T>): Promise<T>
export async function executeExplore<T>(ctx: RunContext, r: ExploreRequest, done: (x: never) => T | Promise<T>): Promise<T> {
  const { scenario, params, checked, bounds } = r
  const n = checked.n
  if (!r.fromCode) for (const level of r.levels ?? [undefined]) assertSound(scenario, level ? { ...params, isolation: level } : params, n, r.engine)
  const p = r.fromCode || r.levels ? undefined : plan(scenario, { params, n, engine: r.engine })
  const o = { ...checked, name: r.name, onProgress: r.onProgress, word: r.word, databaseUrl: r.databaseUrl, keepOnStop: r.keepOnStop }
  return withLab(
    ctx,
    r.databaseUrl,
    bounds,
    async (lab, target) => {
      try {
        if (r.fromCode) {
          assertRunsOn(scenario, lab.engine)
          assertSound(scenario, params, n, lab.engine)
        }
        const search = (q: Plan) => oneJobIfShared((opts) => new Search(ctx, lab, scenario, q, opts, bounds).run(target.label), o)
        const found = r.levels ? exploreLevels(lab, target.label, scenario, r.levels, params, n, search, r.onLevel) : search(p ?? plan(scenario, { params, n, engine: lab.engine }))
        const result = await (found as Promise<ExploreResult | LevelsResult>).catch((e) => {
          throw r.fromCode ? e : specFailure(scenario, e)
        })
        return await done(result as never)
      } finally {
        if (r.fromCode) await lab.close()
      }
    },
    scenario,
    // Each job its own sessions and control connection (the embedded server's max_connections).
    { sessions: (n + 1) * checked.jobs },
  )
}

/**
 * An application race's search on several jobs that meets a query on what the whole database shares (its files do
 * not name it: a library's advisory lock, say) ends (trial.ts refuseShared); it is then run again from the start on
 * one job, none of the first attempt kept, and its result says why it ran on one (jobsNote).
 */
async function oneJobIfShared<O extends { jobs: number }>(run: (o: O) => Promise<ExploreResult>, o: O): Promise<ExploreResult> {
  try {
    return await run(o)
  } catch (e) {
    if (!(e instanceof SharedOnJobs) || o.jobs < 2) throw e
    const r = await run({ ...o, jobs: 1 })
    return { ...r, jobsNote: `${e.message}: ran again from the start on one job` }
  }
}

/** explore(): the API's exploration (api.ts), its options checked here as race explore's flags are. */
export async function explore(ctx: RunContext, scenarioOrId: string | Scenario, o: ExploreOptions = {}): Promise<ExploreResult> {
  const scenario = typeof scenarioOrId === 'string' ? await findScenario(scenarioOrId) : scenarioOrId
  // An option explore() does not take (EXPLORE_OPTIONS) is bad input, never run with the defaults.
  refuseUnknown('explore()', EXPLORE_OPTIONS, o)
  const bounds = exploreBounds(o)
  const checked = checkExplore(scenario, o, NAMES)
  const engine = engineFor(o.databaseUrl)
  const params = paramsOf(scenario, o.params ?? {}, engine, 'explore()')
  return executeExplore(ctx, { scenario, engine, params, checked, bounds, databaseUrl: o.databaseUrl, name: o.name, onProgress: o.onProgress, fromCode: true }, (r) => r)
}
