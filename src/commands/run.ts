// race run <scenario>: one scenario, N sessions, one schedule, K trials; the table, timeline or JSON.
import type { Command } from 'commander'
import { run } from '../engine/run.js'
import { exitCode, summarize, type ExpectOverride } from '../judge/index.js'
import { UsageError } from '../errors.js'
import { parseDuration, parseWhole, formatDuration } from '../parse.js'
import type { Params, Scenario, Schedule } from '../scenario.js'
import { stepsOf } from '../engine/session.js'
import { parsePermutation } from '../engine/schedule.js'
import { c } from '../report/color.js'
import { toJson, type RunView } from '../report/json.js'
import { invariantLine, sessionsTable, trialsTable, verdictLine } from '../report/table.js'
import { timeline } from '../report/timeline.js'
import { describeParams, findScenario, parseBounds, scenarioParams, withLab } from './common.js'

export const SCHEDULES: readonly Schedule[] = ['barrier', 'lockstep', 'serial']

/** A schedule name, or a permutation ("s1.begin s2.begin ..."), checked against the scenario's sessions. */
export function parseSchedule(raw: string, scenario: Scenario, params: Params, n: number, windowMs: number): { schedule: Schedule; permutation?: string } {
  const v = String(raw).trim()
  if ((SCHEDULES as readonly string[]).includes(v)) return { schedule: v as Schedule }
  if (v.includes('.')) {
    const sessions = Object.entries(scenario.sessions(params, n)).map(([name, spec]) => ({ name, steps: stepsOf(spec, windowMs) }))
    parsePermutation(v, sessions)
    return { schedule: 'permutation', permutation: v }
  }
  throw new UsageError(
    `unknown schedule '${raw}': use barrier (all start together, run free), lockstep (step by step), serial (one after another), or a permutation like "s1.begin s2.begin s1.check ..."`,
  )
}

export function parseUuid(raw: string): string {
  const v = String(raw).trim().toLowerCase()
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(v)) return v
  throw new UsageError(`--user takes a uuid like 5f0c6d7e-2a1b-4c3d-8e9f-0a1b2c3d4e5f, got '${raw}'`)
}

export function parseExpect(raw: string | undefined): ExpectOverride {
  if (raw === undefined) return undefined
  if (raw === 'held' || raw === 'violated') return raw
  throw new UsageError(`--expect takes held or violated, got '${raw}'`)
}

export async function runCommand(id: string, o: Record<string, any>, cmd: Command): Promise<number> {
  const scenario = findScenario(id)
  const params = scenarioParams(scenario, cmd, o)
  const [nMin, nMax] = scenario.nRange ?? [1, 10_000]
  if (o.n !== undefined && nMin === nMax && String(o.n).trim() !== String(nMin)) {
    throw new UsageError(`${scenario.id} has exactly ${nMin} sessions; leave out --n`)
  }
  const n = o.n === undefined ? scenario.defaultN : parseWhole('--n', o.n, nMin, nMax)
  const windowMs = o.window === undefined ? 0 : parseDuration('--window', o.window, { allowZero: true })
  const { schedule, permutation } = parseSchedule(o.schedule ?? scenario.defaultSchedule ?? 'barrier', scenario, params, n, windowMs)
  const trials = parseWhole('--trials', o.trials, 1, 100_000)
  const override = parseExpect(o.expect)
  const bounds = parseBounds(o)
  const user = o.user === undefined ? undefined : parseUuid(o.user)
  const holdMs = o.hold === undefined ? 0 : parseDuration('--hold', o.hold)
  if (holdMs > 10 * 60_000) throw new UsageError(`--hold must be at most 10m, got '${o.hold}'`)
  if (holdMs && holdMs + 10_000 > bounds.runTimeoutMs) {
    throw new UsageError(`--hold ${o.hold} does not fit in --run-timeout ${o.runTimeout}: give --run-timeout ${formatDuration(holdMs + 60_000)} or a shorter --hold`)
  }
  if (holdMs && trials > 1) throw new UsageError(`--hold holds one race: leave out --trials`)
  const progress = !o.json && process.stderr.isTTY && trials > 1
  let violations = 0

  return withLab(o.databaseUrl, bounds, async (lab, target) => {
    const out = await run(lab, {
      scenario,
      params,
      n,
      schedule,
      permutation,
      windowMs,
      trials,
      stepTimeoutMs: bounds.stepTimeoutMs,
      connectTimeoutMs: bounds.connectTimeoutMs,
      keep: Boolean(o.keep),
      user,
      holdMs,
      onHold: (pids, ms) => {
        const url = target.kind === 'embedded' ? ` --database-url '${lab.target.url}'` : o.databaseUrl ? ` --database-url '<the same URL>'` : ''
        process.stderr.write(
          `holding for ${formatDuration(ms)} (backends ${pids.join(', ')}); in another terminal:\n  race locks${url}\n`,
        )
      },
      onTrial: (done, r) => {
        if (r.verdict === 'anomaly') violations++
        if (progress) process.stderr.write(`\r\x1b[2Ktrial ${done}/${trials}  violated ${violations}`)
      },
    })
    if (progress) process.stderr.write('\r\x1b[2K')
    const expected = scenario.expect({ params, schedule, n, windowMs })
    const summary = summarize(out.trials, expected, override)
    const representative = out.trials.find((t) => t.verdict === summary.verdict) ?? out.trials[out.trials.length - 1]
    const result: RunView = {
      scenario,
      params,
      n,
      schedule,
      windowMs,
      isolation: scenario.isolation(params),
      target: target.label,
      out,
      summary,
      representative,
    }
    const code = exitCode(summary)
    if (o.json) process.stdout.write(JSON.stringify(toJson(result, { timeline: Boolean(o.timeline), exitCode: code, kept: Boolean(o.keep) }), null, 2) + '\n')
    else process.stdout.write(render(result, Boolean(o.timeline), Boolean(o.keep)) + '\n')
    if (code === 3) process.stderr.write(`race: could not decide: ${representative.why}\n`)
    return code
  })
}

function render(r: RunView, withTimeline: boolean, kept: boolean): string {
  const { scenario, out, summary, representative: t } = r
  const where = r.target === 'embedded' ? 'embedded' : r.target
  const head = [
    c.bold(`race run ${scenario.id}`),
    `PostgreSQL ${out.server.version} (${where})`,
    `${t.sessions.length} session${t.sessions.length === 1 ? '' : 's'}`,
    `${r.schedule}${r.windowMs ? ` window ${formatDuration(r.windowMs)}` : ''}`,
    r.isolation,
  ].join('  ·  ')
  const lines = [head]
  const p = describeParams(scenario, r.params)
  if (p) lines.push(c.dim(p))
  lines.push('')
  if (withTimeline) lines.push(timeline(t), '')
  if (summary.trials > 1) {
    lines.push(trialsTable(out.trials, summary), '', c.dim(`one ${t.verdict} trial:`))
  }
  lines.push(sessionsTable(t), invariantLine(t), verdictLine(summary, summary.trials === 1 ? t.why : undefined))
  if (kept) lines.push(c.dim(`schema ${out.schema} kept (--keep): drop schema "${out.schema}" cascade`))
  return lines.join('\n')
}
