// What race check prints: the JUnit file and annotations (ci.ts), then the JSON document or the table of cases with
// what deviated and what was left out, fitted to the terminal.
import type { Driver } from '../db/driver.js'
import type { Target } from '../db/target.js'
import { describeDoc, exitCode } from '../judge/index.js'
import { expectsOverride } from '../specfile/common.js'
import { ownServerRefusal, tooOldFor } from '../plan.js'
import type { Pool, Scenario } from '../scenario.js'
import { caseName, type CheckResult } from '../run/check.js'
import { annotationsOf, ciCase, githubWanted, printAnnotations, writeJunit, type CiCase } from './ci.js'
import { verdictColor, type Style } from './color.js'
import { ownSettings } from './run.js'
import { fitTable, type Col } from './table.js'
import { columns, hang, joinFit } from './width.js'

/** How the result is printed: the open target, the output options, and the pooler the cases went through. */
export interface CheckPrint {
  lab: Driver
  target: Target
  json?: boolean
  junit?: string
  github?: boolean
  through?: Pool
  /** The run's style (RunContext.style). */
  style: Style
}

/** Writes the JUnit file (when asked), prints the result, and returns the exit code. */
export function printCheck(r: CheckResult, o: CheckPrint): number {
  const { lab, target } = o
  const ci = ciCases(r, lab)
  // The suite's time is the whole run's (since race started: connecting, servers of their own, every case).
  if (o.junit) writeJunit(o.junit, 'race check', ci, { server: `PostgreSQL ${lab.server.version}`, target: target.label, schedule: 'lockstep' }, Math.round(performance.now()))
  const notes = githubWanted(o.github) ? annotationsOf((k) => `race check: ${k.classname.slice('race.check.'.length)} (${k.name})`, ci) : []
  if (o.json) {
    process.stdout.write(JSON.stringify(checkDocument(r, lab, target), null, 2) + '\n')
    printAnnotations(notes, true)
    return r.code
  }
  process.stdout.write(checkLines(r, o).join('\n') + '\n')
  printAnnotations(notes, false)
  return r.code
}

/** One JUnit case per row; a case left out on this server is in the file, skipped with the reason, not missing. */
function ciCases(r: CheckResult, lab: Driver): CiCase[] {
  const ci: CiCase[] = r.rows.map(({ k, t, summary, ms }) => ({ ...ciCase(`race.check.${k.scenario.id}`, caseName(k), ms, t, summary, exitCode(summary)), ...fileOf(k.scenario) }))
  for (const k of r.skipped) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: ownServerRefusal(k.scenario) })
  for (const k of r.old) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: tooOldFor(k.scenario, lab.server, lab.engine)! })
  for (const [k, why] of r.refused) ci.push({ classname: `race.check.${k.scenario.id}`, name: caseName(k), ms: 0, skipped: why })
  return ci
}

function checkDocument(r: CheckResult, lab: Driver, target: Target) {
  return {
    server: { version: lab.server.version },
    target: target.label,
    schedule: 'lockstep',
    results: r.rows.map(({ k, t, summary, docs, ms }) => ({
      scenario: k.scenario.id,
      case: k.label,
      ...(k.pool ? { pool: k.pool } : {}),
      sessions: t.sessions,
      params: k.params,
      invariant: t.invariant,
      verdict: t.verdict,
      why: t.why,
      documented: docs,
      expected: summary.expected,
      matched: summary.matched,
      deviations: summary.deviations,
      ms,
    })),
    skipped: [
      ...r.skipped.map((k) => ({ scenario: k.scenario.id, case: k.label, why: ownServerRefusal(k.scenario) })),
      ...r.old.map((k) => ({ scenario: k.scenario.id, case: k.label, why: tooOldFor(k.scenario, lab.server, lab.engine)! })),
      ...[...r.refused].map(([k, why]) => ({ scenario: k.scenario.id, case: k.label, why })),
    ],
    matched: r.code === 0,
    exitCode: r.code,
  }
}

/**
 * The text: fits the terminal or a CI log (80 columns when piped): the case and how its sessions ended stay whole;
 * the invariant's observed value is what wraps first. What deviates is listed below the table.
 */
function checkLines(r: CheckResult, o: CheckPrint): string[] {
  const { lab, target, through, style: c } = o
  const { rows, own, skipped, old, refused } = r
  const w = columns()
  const body = rows.map(({ k, t, summary }) => [
    c.bold(k.scenario.id) + (caseName(k) === 'default' ? '' : c.dim(` · ${caseName(k)}`)),
    tally(t.sessions.map((x) => x.outcome + (x.sqlstate ? ` ${x.sqlstate}` : ''))) +
      `\n${t.invariant.held === null ? verdictColor(c, 'unknown') : t.invariant.held ? c.green('HELD') : c.red('VIOLATED')} ${c.dim(t.invariant.observed)}`,
    `${verdictColor(c, t.verdict)} ${verdictColor(c, summary.matched ? 'MATCH' : 'DEVIATION')}`,
  ])
  // How the sessions ended wraps; the invariant's observed value under it is what matters least here (race run
  // shows it): it is cut at the column's edge, never its HELD or VIOLATED.
  const cols: Col[] = [{ min: 16, shrink: 2 }, { min: 24, shrink: 2, overflow: (line) => (line === 0 ? 'wrap' : 'cut') }, { shrink: 0 }]
  const table = fitTable(c, ['case', 'outcomes / invariant', 'verdict'], body, cols, w)
  const bad = rows.filter((x) => !x.summary.matched)
  const how = through?.kind === 'pgbouncer' ? 'each case through a PgBouncer of its own' : through ? 'through the pooler you run (--pooled)' : ''
  const lines = [...joinFit([c.bold('race check'), `${lab.server.product ?? 'PostgreSQL'} ${lab.server.version} (${target.label})`, 'lockstep', how], '  ·  ', w, 2), table]
  for (const x of bad) {
    // What it was held to: the documented outcomes, the file's --expect, or (never an empty "documented") neither.
    const by = expectsOverride(x.k.scenario)
    const said = by ? `expected ${by} (the file's expect)` : x.docs.length ? `documented ${x.docs.map(describeDoc).join(' | ')}` : 'not documented (give it an expect, or run it with --expect held|violated)'
    lines.push(...hang(c.red(`${x.k.scenario.id} (${x.k.label}): ${said}`), w, 2))
    for (const d of x.summary.deviations.length ? x.summary.deviations : [x.t.why]) lines.push(...hang(c.red(`  ${d}`), w, 4))
  }
  for (const s of [...new Set(own.map((k) => k.scenario))]) lines.push(...hang(c.dim(`${s.id} ran on an embedded server of its own, started with ${ownSettings(s)} (it ${s.ownServer!.why})`), w, 2))
  for (const s of [...new Set(skipped.map((k) => k.scenario))]) {
    lines.push(...hang(c.dim(`not run here: ${s.id} (it ${s.ownServer!.why}; it runs only on race's own embedded server: race check without --database-url runs it)`), w, 2))
  }
  for (const s of [...new Set(old.map((k) => k.scenario))]) lines.push(...hang(c.dim(`not run here: ${tooOldFor(s, lab.server, lab.engine)}`), w, 2))
  for (const [k, why] of refused) lines.push(...hang(c.yellow(`skipped: ${k.scenario.id} (${caseName(k)}): ${why}`), w, 2))
  const skippedNote = refused.size ? c.yellow(`; ${refused.size} skipped (not checked)`) : ''
  lines.push(
    !rows.length && refused.size
      ? c.red(`nothing could be checked: all ${refused.size} skipped`)
      : (bad.length ? c.red(`${bad.length} of ${rows.length} did not behave as documented`) : c.green(`all ${rows.length} behaved as documented`)) + skippedNote,
  )
  return lines
}

function tally(list: string[]): string {
  const m = new Map<string, number>()
  for (const x of list) m.set(x, (m.get(x) ?? 0) + 1)
  return [...m].map(([k, v]) => `${v} ${k}`).join(', ')
}

/** A user's own scenario file (spec or .mjs), for the annotations' file=. */
function fileOf(s: Scenario): { file?: string } {
  return s.source.article === 'file' ? { file: s.source.section } : {}
}
