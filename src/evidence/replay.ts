// race replay FILE (and the API's replay()): a counterexample file's schedule run again, exactly as race run
// --schedule runs it, and its outcome set beside the saved one. Exit 1: it still fails; 0: the code now passes it;
// 3: the replay could not be followed or judged. The race file or a module it imports changed since the file was
// saved: refused (exit 2) unless guided, which follows the saved order as far as the new code allows and says where
// it stopped following.
import path from 'node:path'
import { UsageError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import { racelabVersion } from '../home.js'
import { findScenario, raceDigest } from '../registry.js'
import { executeRun } from '../run/execute.js'
import { assertRunsOn, engineFor } from '../run/lab.js'
import { judgeTrial } from '../run/judge.js'
import { summarize } from '../judge/index.js'
import type { Words } from '../engine/refusals.js'
import { paramsOf, type Spelling } from '../run/params.js'
import { validateRun } from '../run/request.js'
import type { RunView } from '../run/view.js'
import { located, readCounterexample, type Counterexample, type Judged } from './format.js'
import { fileHash } from './modules.js'
import { failedIn, judgedOf } from './save.js'

export interface ReplayOptions {
  /** Follow the saved order as far as changed code allows, instead of refusing changed code. */
  guided?: boolean
  databaseUrl?: string
  connectTimeout?: string | number
  stepTimeout?: string | number
  runTimeout?: string | number
}

/** What a replay came to (the API's replay() resolves to it, race replay --json prints it without `view`). */
export interface ReplayOutcome {
  file: string
  format: string
  scenario: string
  schedule: string
  /** still-fails (exit 1), passes (exit 0), or unknown: not followed or not judged (exit 3). */
  result: 'still-fails' | 'passes' | 'unknown'
  /** The replay ended as the file says: the same invariant answer, observed rows, sessions' endings and failure. */
  same: boolean
  saved: Judged
  now: Judged
  /** What ran, when it is known (an application race's queries in the order they ran). */
  order?: string
  /** The saved order was not followed to its end: which steps never came, where each session ended. */
  unfollowed?: string
  /** --guided: the files that changed since the file was saved, and how far the saved order was followed. */
  changed?: string[]
  followed?: { steps: number; of: number; stoppedAt?: string }
  /** What differs from when it was saved beside the code: racelab's version, the server's. */
  notes: string[]
  /** One line that says it. */
  summary: string
  exitCode: 0 | 1 | 3
}

/** Changed files: the race's and its modules', named as the file records them, with why. */
export function changedFiles(file: string, cx: Counterexample): string[] {
  const out: string[] = []
  if (!cx.race.builtIn) {
    const h = fileHash(located(file, cx.race.ref))
    if (h !== cx.race.sha256) out.push(`${cx.race.ref} ${h ? 'changed' : 'is gone'}`)
  }
  for (const m of cx.modules) {
    const h = fileHash(located(file, m.path))
    if (h !== m.sha256) out.push(`${m.path} ${h ? 'changed' : 'is gone'}`)
  }
  return out
}

/** The saved schedule's steps that the run took in the same place, from the start; where it left them. */
export function followedOf(schedule: string, order: readonly string[] | undefined): { steps: number; of: number; stoppedAt?: string } | undefined {
  if (!order) return undefined
  const want = schedule.trim().split(/\s+/)
  let k = 0
  while (k < want.length && k < order.length && want[k] === order[k]) k++
  return { steps: k, of: want.length, ...(k < want.length ? { stoppedAt: `at step ${k + 1}: the file says ${want[k]}, the run took ${order[k] ?? 'nothing (every session had ended)'}` } : {}) }
}

const sameJudged = (a: Judged, b: Judged) =>
  a.held === b.held && a.observed === b.observed && (a.failure ?? '') === (b.failure ?? '') && JSON.stringify(Object.entries(a.outcomes).sort()) === JSON.stringify(Object.entries(b.outcomes).sort())

/** Replays the file on the target (the embedded server when none is given); see the module comment. */
export async function replayFile(ctx: RunContext, file: string, o: ReplayOptions, spell: Spelling, word?: Words): Promise<{ outcome: ReplayOutcome; view?: RunView }> {
  const cx = readCounterexample(file)
  const guided = spell('n') === '--n' ? '--guided' : '{ guided: true }'
  const changed = changedFiles(file, cx)
  if (changed.length && !o.guided) {
    throw new UsageError(`${file}: ${changed[0]}${changed.length > 1 ? ` (and ${changed.length - 1} more)` : ''} since the counterexample was saved: its outcome may not be this code's; ${guided} follows the saved order as far as the new code allows`)
  }
  const ref = cx.race.builtIn ? cx.race.ref : relativeRef(located(file, cx.race.ref))
  const scenario = await findScenario(ref)
  if (cx.race.builtIn && raceDigest(scenario) !== cx.race.sha256 && !o.guided) {
    throw new UsageError(`${file}: the built-in scenario ${cx.race.ref} changed since the counterexample was saved (racelab ${cx.racelab}, now ${racelabVersion()}): ${guided} follows the saved order as far as it allows`)
  }
  if (cx.race.builtIn && raceDigest(scenario) !== cx.race.sha256) changed.push(`the built-in scenario ${cx.race.ref} changed`)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(scenario, engine)
  const params = paramsOf(scenario, cx.params, engine, `${file}: params`)
  const checked = validateRun(
    { scenario, engine, params, databaseUrl: o.databaseUrl, n: cx.n, schedule: cx.schedule, trials: 1, connectTimeout: o.connectTimeout ?? '5s', stepTimeout: o.stepTimeout ?? '10s', runTimeout: o.runTimeout ?? '5m' },
    spell,
  )
  let view: RunView
  try {
    ;({ view } = await executeRun(ctx, { ...checked, ...(word ? { word } : {}) }))
  } catch (e) {
    // Changed code whose steps the saved order no longer names (a spec's step gone, a query become a point): it
    // cannot be followed; that is the replay's answer (unknown), not bad input.
    if (!(o.guided && changed.length && e instanceof UsageError)) throw e
    const saved = cx.judged
    const now: Judged = { held: null, verdict: 'unknown', observed: '', outcomes: {} }
    const summary = `could not follow the saved order on the changed code: ${e.message}`
    return { outcome: { file, format: cx.format, scenario: cx.race.id, schedule: cx.schedule, result: 'unknown', same: false, saved, now, changed, notes: [], summary, exitCode: 3 } }
  }
  let t = view.representative
  // Guided: what ran is judged as it is (the saved order left where the code no longer has its steps).
  if (o.guided && t.unfollowed && t.verdict === 'unknown') {
    t = judgeTrial({ ...t, unfollowed: undefined }, view.docs, view.plan)
    view = { ...view, trials: [t], representative: t, summary: summarize([t], view.docs, checked.override) }
  }
  const now = judgedOf(t, view)
  const saved = cx.judged
  const notes: string[] = []
  if (cx.racelab !== racelabVersion()) notes.push(`saved by racelab ${cx.racelab}, replayed by ${racelabVersion()}`)
  const product = view.server.product ?? 'PostgreSQL'
  if (cx.server.version !== view.server.version || cx.server.product !== product) notes.push(`saved on ${cx.server.product} ${cx.server.version}, replayed on ${product} ${view.server.version}`)
  const levels = Object.fromEntries(t.sessions.map((s) => [s.name, s.isolation]))
  const differs = Object.keys(cx.isolation.sessions ?? {}).filter((k) => k in levels && levels[k] !== cx.isolation.sessions[k])
  if (differs.length) notes.push(`the sessions ran at other levels than saved: ${differs.map((k) => `${k} ${levels[k] ?? 'unknown'} (saved ${cx.isolation.sessions[k] ?? 'unknown'})`).join(', ')}`)
  const order = t.order?.length ? t.order.join(' ') : undefined
  const followed = o.guided ? followedOf(cx.schedule, t.order) : undefined
  const same = sameJudged(saved, now)
  let result: ReplayOutcome['result']
  let summary: string
  if (t.unfollowed && !o.guided) {
    result = 'unknown'
    summary = `the replay could not be followed: ${t.unfollowed}`
  } else if (failedIn(now)) {
    result = 'still-fails'
    const what = now.held === false ? 'violated the invariant' : `failed (${now.failure})`
    summary = same ? `still fails: it ${what}, as saved` : `still fails, otherwise than saved: it ${what} (saved: ${describe(saved)}; now: ${describe(now)})`
  } else if (now.verdict === 'unknown' || now.held === null) {
    result = 'unknown'
    summary = `could not judge the replay: ${t.why}`
  } else {
    result = 'passes'
    summary = `passes: the invariant held and no session failed (saved: ${describe(saved)})`
  }
  if (o.guided && followed) summary += followed.stoppedAt ? `; guided: followed ${followed.steps} of ${followed.of} saved steps, then ${followed.stoppedAt}` : `; guided: followed all ${followed.of} saved steps`
  else if (o.guided && t.unfollowed) summary += `; guided: ${t.unfollowed}`
  const exitCode = result === 'still-fails' ? 1 : result === 'passes' ? 0 : 3
  return {
    outcome: {
      file,
      format: cx.format,
      scenario: cx.race.id,
      schedule: cx.schedule,
      result,
      same,
      saved,
      now,
      ...(order ? { order } : {}),
      ...(t.unfollowed ? { unfollowed: t.unfollowed } : {}),
      ...(o.guided ? { changed, ...(followed ? { followed } : {}) } : {}),
      notes,
      summary,
      exitCode,
    },
    view,
  }
}

function describe(j: Judged): string {
  const ends = Object.entries(j.outcomes).map(([s, x]) => `${s} ${x}`).join(', ')
  return [j.held === false ? 'violated' : j.held ? 'held' : 'undecided', j.observed, ends, j.failure ? `failed: ${j.failure}` : ''].filter(Boolean).join('; ')
}

/** A path race's loader takes: relative to the working folder when that is shorter, else absolute. */
function relativeRef(abs: string): string {
  const rel = path.relative(process.cwd(), abs)
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : abs
}
