// One explored trial's chooser (engine/types.ts Chooser): at each quiet moment, which ready session launches its next
// step, as the search's Pick says; a spec session's setup and teardown blocks pinned first and last; the free choices
// kept (the run's order for the search), and, for a search that learns, each step's footprint observed.
import { sharesDatabase, type Touched } from '../engine/footprint.js'
import type { FootprintObserver } from '../engine/footprint-observer.js'
import type { Chooser, Moment, ReadyStep } from '../engine/types.js'
import { RunError } from '../errors.js'
import type { Plan } from '../plan.js'
import type { Scenario } from '../scenario.js'
import type { Pick } from './enumerate.js'
import { pinned } from './steps.js'

export interface TrialShape {
  scenario: Scenario
  p: Plan
  /** An application race: its steps are the queries its functions send (none known before). */
  app: boolean
  /** Each session's points that are choices (declared steps). */
  counts: readonly number[]
  /** The search's jobs (set once they are known): more than one, and an application race's steps are checked as they come. */
  jobs?: number
}

/**
 * An application race's step that touches what the whole database shares (advisory keys, the lock and activity
 * views, ...), met on several jobs: the search ends, since the other jobs' trials would meet it (a spec's steps are
 * checked before, explore/steps.ts sharesState). Checked before the step is launched, on every job.
 */
function refuseShared(t: TrialShape, m: Moment): void {
  if (!t.app || (t.jobs ?? 1) < 2) return
  const s = m.ready.find((x) => sharesDatabase(x.sql))
  if (s) throw new SharedOnJobs(`a query of ${s.session} touches what the whole database shares (advisory keys, pg_locks, pg_stat_activity, settings), where other jobs' trials would meet it`)
}

/**
 * A search on several jobs met a query on what the whole database shares (refuseShared): nothing of it is kept, and
 * the exploration runs again on one job (execute.ts), saying why.
 */
export class SharedOnJobs extends RunError {}

/**
 * The chooser of one trial. `free`: filled with the sessions chosen by `pick` (not pinned), in order; `fps`: the
 * footprints `observer` gave so far (it pushes them), compared with `free` to know when a free step was launched.
 */
export function trialChooser(t: TrialShape, pick: Pick, observer: FootprintObserver | undefined, free: number[], fps: readonly Touched[]): Chooser {
  const { scenario, p, app, counts } = t
  const launched = p.sessions.map(() => 0)
  const decide = ({ ready }: Moment) => {
    const take = (s: ReadyStep) => (launched[s.index]++, ready.indexOf(s))
    // Pinned: a spec session's setup and teardown blocks, by their step's index (a commit point, or a later point
    // of a step split into points, is never one).
    const pin = (s: ReadyStep) => (s.part ? undefined : pinned(scenario, p, s.index, s.step ?? launched[s.index]))
    const first = ready.find((s) => pin(s) === 'first')
    if (first) return take(first)
    const open = ready.filter((s) => pin(s) !== 'last')
    if (!open.length) return take(ready[0])
    const idx = pick(
      open.map((s) => s.index),
      // What each session has left is known only for declared steps.
      app ? undefined : open.map((s) => counts[s.index] - free.filter((x) => x === s.index).length),
    )
    const s = open.find((x) => x.index === idx) ?? open[0]
    free.push(s.index)
    return take(s)
  }
  const choose: Chooser = async (m: Moment) => {
    refuseShared(t, m)
    if (observer) await observer.at(m)
    const i = decide(m)
    if (observer && free.length > fps.length) observer.watch(m.ready[i])
    return i
  }
  if (observer) choose.settled = (m) => observer.at(m)
  // A declared statement that would commit by itself runs, then commits, as two points: real sessions' statements
  // overlap (each takes its snapshot before the other commits). A spec session's setup/teardown blocks stay whole.
  choose.split = app ? () => true : (i, k) => !pinned(scenario, p, i, k)
  return choose
}
