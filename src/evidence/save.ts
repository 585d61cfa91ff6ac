// --save FILE on race explore and race run: the failing schedule written as a counterexample file (format.ts), bound
// to the race's text and the local modules it imports. When nothing failed nothing is written, and one line says so
// (the exit code is the command's own).
import path from 'node:path'
import { racelabVersion } from '../home.js'
import { UsageError } from '../errors.js'
import { isLevelList } from '../levels.js'
import type { ExploreResult, Interleaving } from '../explore/result.js'
import { replayCommand, replayTarget } from '../explore/replay.js'
import { codeFailure } from '../judge/failure.js'
import { labelOf } from '../judge/index.js'
import { isFileScenario } from '../specfile/common.js'
import { raceDigest } from '../registry.js'
import type { RunView } from '../run/view.js'
import { declaredCodes, type Trial } from '../run/judge.js'
import { kindOf, type Scenario } from '../scenario.js'
import { checkSavePath, FORMAT, recorded, writeCounterexample, type Counterexample, type Judged } from './format.js'
import { fileHash, localImports } from './modules.js'

/** The race's file (or built-in id) and the local modules it imports, with their hashes, as the file records them. */
export function bindingOf(cxFile: string, s: Scenario): Pick<Counterexample, 'race' | 'modules'> {
  const kind = kindOf(s).type === 'application' ? 'application' : 'declared'
  if (!isFileScenario(s)) return { race: { id: s.id, ref: s.id, builtIn: true, kind, sha256: raceDigest(s) }, modules: [] }
  const abs = path.resolve(s.source.section)
  const modules = localImports(abs).flatMap((m) => {
    const h = fileHash(m)
    return h ? [{ path: recorded(cxFile, m), sha256: h }] : []
  })
  return { race: { id: s.id, ref: recorded(cxFile, abs), builtIn: false, kind, sha256: fileHash(abs) ?? raceDigest(s) }, modules }
}

function isolationParam(s: Scenario, params: Record<string, unknown>): string | null {
  return s.params.isolation ? String(params.isolation) : null
}

const say = (line: string): void => void process.stderr.write(`race: ${line}\n`)

/**
 * race explore --save: a function for the command to call once it has its result. Checks the file's place now (bad
 * input before the search runs, exit 2), writes once the search is done.
 */
export function exploreSaver(file: string | undefined, scenario: Scenario, name: string, inject: string | undefined, isolation?: unknown): ((r: ExploreResult) => void) | undefined {
  if (file === undefined) return undefined
  checkSavePath(file)
  if (isLevelList(isolation)) throw new UsageError(`--save writes one exploration's counterexample: give one --isolation level, not ${String(isolation)}`)
  return (r) => {
    const it: Interleaving | null = r.shortest ?? r.shortestFailure
    if (!it) return say(`--save ${file}: no interleaving violated the invariant or failed: nothing written`)
    const what = r.shortest ? 'the shortest violating interleaving' : 'the shortest interleaving in which the code failed'
    const cx: Counterexample = {
      format: FORMAT,
      from: 'explore',
      saved: new Date().toISOString(),
      ...bindingOf(file, scenario),
      racelab: racelabVersion(),
      server: { product: r.server.product ?? 'PostgreSQL', version: r.server.version, versionNum: r.server.versionNum ?? null, target: r.target },
      isolation: { asked: isolationParam(scenario, r.params), sessions: it.levels },
      faults: { inject: inject ?? null, injected: it.injected ?? [] },
      n: r.n,
      params: r.params,
      schedule: it.line,
      replay: (r.shortest ? r.replay : r.failureReplay) ?? '',
      judged: { held: it.held, verdict: it.verdict, observed: it.observed, outcomes: it.outcomes, ...(it.failure ? { failure: it.failure } : {}) },
      outcome: { ...it },
    }
    if (!cx.replay) cx.replay = `race run ${name} --schedule "${it.line}"`
    writeCounterexample(file, cx)
    say(`--save: ${what} written to ${file} (race replay ${file} runs it again)`)
  }
}

/** A trial's ending in replay's terms, and the failure explore would name in it. */
export function judgedOf(t: Trial, view: Pick<RunView, 'docs' | 'plan'>): Judged {
  const failure = t.failure ?? (t.verdict === 'unknown' ? codeFailure(t.sessions, declaredCodes(view.docs, view.plan)) : undefined)
  return { held: t.invariant.held, verdict: t.verdict, observed: t.invariant.observed, outcomes: Object.fromEntries(t.sessions.map((s) => [s.name, labelOf(s)])), ...(failure ? { failure } : {}) }
}

/** It failed: the invariant was violated, or the code failed. */
export const failedIn = (j: Judged) => j.held === false || j.failure !== undefined

/** race run --save: as exploreSaver, for a run (its first failing trial that a schedule replays, as its order line says). */
export function runSaver(file: string | undefined, name: string, scheduleText: string | undefined, databaseUrl: string | undefined): ((view: RunView, code: number) => Promise<void>) | undefined {
  if (file === undefined) return undefined
  checkSavePath(file)
  return async (view, code) => {
    const app = kindOf(view.scenario).type === 'application'
    const failing = view.trials.filter((x) => failedIn(judgedOf(x, view)))
    // Of several failing trials (--trials), an application race's first whose order a schedule replays.
    const t = failing.find((x) => !app || (x.order?.length && !x.overlap)) ?? failing[0]
    if (!t) return say(`--save ${file}: no trial violated the invariant or failed: nothing written`)
    // What replays it: an application race's order line (what ran); a declared race's deterministic schedule.
    let schedule: string | undefined
    if (app && t.order?.length && !t.overlap) schedule = t.order.join(' ')
    else if (!app && view.schedule !== 'barrier') schedule = view.schedule === 'permutation' ? scheduleText : view.schedule
    if (!schedule) {
      const why = t.overlap ? `two queries (${t.overlap.join(', ')}) were on the server at once, which no schedule replays` : 'a barrier run has no order a schedule replays'
      return say(`--save ${file}: the failing trial cannot be replayed (${why}): nothing written; race explore --save finds one that can`)
    }
    const { toJson } = await import('../report/json.js')
    const doc = toJson({ ...view, representative: t }, { timeline: false, exitCode: code, kept: false }) as unknown as Record<string, unknown>
    const { schema: _schema, kept: _kept, ...outcome } = doc
    const target = replayTarget(databaseUrl)
    const cx: Counterexample = {
      format: FORMAT,
      from: 'run',
      saved: new Date().toISOString(),
      ...bindingOf(file, view.scenario),
      racelab: racelabVersion(),
      server: { product: view.server.product ?? 'PostgreSQL', version: view.server.version, versionNum: view.server.versionNum ?? null, target: view.target },
      isolation: { asked: isolationParam(view.scenario, view.params), sessions: Object.fromEntries(t.sessions.map((s) => [s.name, s.isolation])) },
      faults: { inject: null, injected: (t.injections ?? []).filter((x) => x.at).map((x) => ({ fault: x.fault, at: x.at! })) },
      n: view.n,
      params: view.given,
      schedule,
      replay: replayCommand(name, view.scenario, view.plan, schedule, target.args),
      judged: judgedOf(t, view),
      outcome,
    }
    writeCounterexample(file, cx)
    say(`--save: the failing trial's schedule written to ${file} (race replay ${file} runs it again)`)
  }
}
