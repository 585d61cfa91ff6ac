// --html FILE on race run and race explore: one self-contained page (inline CSS, no script, no font, no link: it
// opens offline, on a projector or as a CI artifact) drawn from the same document --json prints. A lane per session:
// each statement, what it answered or raised, where it waited and on whom (when the run knows), the injected faults,
// the commit points, the invariant's answer, the verdict and the command that runs it again; for explore, the
// outcome groups with their counts and the shortest violating interleaving drawn as lanes. Every piece of text on
// the page is the user's or the server's (SQL, values, messages) and is escaped. Pure, apart from writing the file
// the user named (writeRunPage, writeExplorePage, writeErrorPage).
import fs from 'node:fs'
import { maskUrl } from '../db/target.js'
import { UsageError } from '../errors.js'
import type { Plan } from '../plan.js'
import { annotationsOf, checkWritable, printAnnotations, searchCase, undecided, writeJunit, type SearchCase } from './ci.js'
import type { SessionReport, TimelineEvent } from '../engine/types.js'
import { toJson, type RunDocument } from './json.js'
import type { RunView } from '../run/view.js'
import { strip } from './width.js'

/** Each session's declared statements in order (a spec's or scenario's steps; an application race has none declared). */
export type Statements = Record<string, { step: string; sql: string }[]>

/** What the run page draws: the --json document (with its timeline), the statements, and the command to run it again. */
export interface RunPage {
  doc: RunDocument
  statements: Statements
  /** The command that runs this again (a replay of the order when the run recorded one): see againCommand. */
  again: string
  /** Whether `again` replays this interleaving exactly (an application race's order), or runs the same race again. */
  replays: boolean
}

/** The fields of race explore's --json document (explore/result.ts ExploreResult) the page draws. */
export interface ExploreDoc extends SearchCase {
  server: { version: string; product?: string }
  target: string
  invariant: string
  orders: string
  steps: string
  runs: number
  groups: { key: string; held: boolean | null; verdict: string; outcomes: Record<string, string>; count: number; lines: string[]; failure?: string }[]
  shortest: ExploreRun | null
  replay: string | null
  replayNote?: string
  shortestFailure: ExploreRun | null
  failureReplay: string | null
  stopped?: string
  diverged: number
  injections?: { fault: string; runs: number; offered: number }[]
  notFired?: string[]
  expected: string
  matched: boolean
  exitCode: number
  sample?: { seed: number }
}

interface ExploreRun {
  line: string
  verdict: string
  held: boolean | null
  observed: string
  outcomes: Record<string, string>
  waited: string[]
  raised: string[]
  levels?: Record<string, string | null>
  switches: number
  why: string
  failure?: string
  injected?: { fault: string; at: string }[]
}

// XML and HTML allow tab, newline, carriage return and everything from space up; the rest (and colour codes) go.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\ufffe\uffff]/g

/** Text for the page: colour codes and control characters removed, the five HTML characters escaped. */
export function esc(s: unknown): string {
  return strip(String(s ?? ''))
    .replace(CONTROL, '')
    .replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!)
}

/** The declared statements of a plan's sessions (an application race's one placeholder step has no SQL: none). */
export function statementsOf(p: Plan): Statements {
  return Object.fromEntries(p.sessions.map((s) => [s.name, s.steps.filter((x) => x.def.sql.trim() !== '').map((x) => ({ step: x.name, sql: x.def.sql.trim() }))]))
}

const quote = (x: string) => (/^[\w./:@%+=,-]+$/.test(x) ? x : `'${x.replace(/'/g, `'\\''`)}'`)

/** Flags that only choose what race prints or writes, or how many times: left out of the command that runs it again. */
const OUTPUT_VALUE = new Set(['--html', '--junit', '--trials', '--theme', '--schedule'])
const OUTPUT_FLAG = new Set(['--json', '--github', '--step', '--keep', '--no-color', '--fresh-connections'])

/**
 * The command that runs this race again, from the arguments race was given (`argv`: after `race`): the flags that
 * only choose the output (--html, --json, --junit, --timeline, --trials...) left out, a URL's password masked, and
 * with `order` (a replayable order: an application race's, not a barrier's overlap) its --schedule, which replays
 * the same interleaving; else the schedule given, if any.
 */
export function againCommand(argv: readonly string[], order?: string): { command: string; replays: boolean } {
  const out: string[] = []
  let schedule: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined]
    if (OUTPUT_VALUE.has(flag)) {
      const v = inline ?? argv[++i]
      if (flag === '--schedule') schedule = v
      continue
    }
    if (OUTPUT_FLAG.has(flag)) continue
    if (flag === '--timeline') {
      if (inline === undefined && argv[i + 1] === 'all') i++
      continue
    }
    out.push(a.includes('://') ? maskUrl(a) : a)
  }
  const sched = order ?? schedule
  return { command: ['race', ...out.map(quote), ...(sched ? ['--schedule', `"${sched}"`] : [])].join(' '), replays: order !== undefined }
}

// ---------- the page ----------

const CSS = [
  '*{box-sizing:border-box}',
  'body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1240px;padding:0 1em;color:#222;line-height:1.35}',
  'h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .4em}',
  '.meta{color:#555}',
  '.verdict{font-size:1.25em;font-weight:bold;padding:.4em .6em;border-radius:4px;margin:.6em 0}',
  '.bad{background:#fde8e8;color:#a00}.good{background:#e6f4e6;color:#060}.unknown{background:#fff4d6;color:#7a5200}',
  'table{border-collapse:collapse;width:100%}',
  'table.lanes{table-layout:fixed}',
  'td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere;word-break:break-word}',
  'th{background:#f4f4f4}',
  'td.t{width:4.5em;color:#666;text-align:right;white-space:nowrap}',
  'code,pre{font-family:ui-monospace,monospace;font-size:90%;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}',
  'pre{background:#f6f6f6;padding:.5em;margin:.3em 0;border:1px solid #ddd}',
  '.ev{margin:.15em 0}.label{font-weight:bold}',
  '.k-error,.k-lost,.k-timeout{color:#a00}.k-reject{color:#8a4b00}.k-wait{color:#7a5200}.k-ok{color:#060}',
  '.commit{border-left:4px solid #2a7;padding-left:4px}',
  '.fault{background:#fde8e8;color:#a00;font-weight:bold;padding:0 .3em;border-radius:3px}',
  '.setup{color:#888}',
  '.sql{color:#124;display:block}',
  'details{margin:.2em 0}',
  'ul{margin:.3em 0;padding-left:1.4em}',
].join('\n')

function page(title: string, body: string[]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)}</title>
<style>
${CSS}
</style>
</head><body>
${body.join('\n')}
</body></html>
`
}

const HELD = (held: boolean | null) => (held === null ? 'undecided' : held ? 'HELD' : 'VIOLATED')

/** The banner: red for a finding or a deviation, green for a pass, amber for unknown (exit 3: never a pass). */
function banner(exitCode: number, text: string): string {
  const cls = exitCode === 0 ? 'good' : exitCode === 3 ? 'unknown' : 'bad'
  const head = exitCode === 0 ? 'PASS' : exitCode === 3 ? 'UNKNOWN' : 'FAIL'
  return `<div class="verdict ${cls}" id="verdict">${head} (exit ${exitCode}): ${esc(text)}</div>`
}

/** A statement's SQL by session and step name. */
function sqlOf(statements: Statements, session: string, step: string): string | undefined {
  return statements[session]?.find((x) => x.step === step)?.sql
}

/** A commit point: a COMMIT or ROLLBACK statement, a step's own commit point (s1.ins:commit), or what answered COMMIT. */
function isCommit(step: string, sql: string | undefined, detail?: string): boolean {
  return /:commit$/.test(step) || /^\s*(commit|rollback|end)\b/i.test(sql ?? '') || detail === 'COMMIT' || detail === 'ROLLBACK'
}

/** What an event says: a statement's answer, its error (SQLSTATE and condition), a wait and on whom when known. */
function answerText(e: TimelineEvent, s: SessionReport, byPid: Map<number, string>): string {
  const injected = e.kind === 'error' && / \(injected by race\)$/.test(e.detail ?? '')
  // On whom: the run records it for a session given up waiting (the backends it waited for then, blockedBy).
  const on = e.kind === 'timeout' ? (s.blockedBy ?? []).map((p) => byPid.get(p) ?? `backend ${p}`) : []
  if (e.kind === 'wait') return 'waiting'
  if (e.kind === 'woke') return 'woke'
  if (e.kind === 'timeout') return `timed out${on.length ? ` waiting for ${esc(on.join(', '))}` : ''}${e.detail ? `: ${esc(e.detail)}` : ''}`
  return `${e.kind === 'ok' ? '→ ' : `${esc(e.kind)}: `}${esc(e.detail ?? '')}${injected ? ' <span class="fault">injected fault</span>' : ''}`
}

/** race run: the representative trial's sessions as lanes, its events in time order. */
export function runPage(x: RunPage): string {
  const d = x.doc
  const names = d.sessions.map((s) => s.name)
  const byPid = new Map(d.sessions.map((s) => [s.pid, s.name]))
  const events = d.timeline ?? []
  const held = HELD(d.invariant.held)
  const summary =
    d.exitCode === 3
      ? `could not decide: ${d.verdict === 'unknown' ? d.why : (d.deviations[0] ?? d.why)}`
      : `${d.verdict} (${d.why}); expected ${d.expected.join(' or ')}: ${d.matched ? 'MATCH' : 'DEVIATION'}`
  const ran = new Set(events.map((e) => `${e.session}\u0000${e.step}`))
  // One row per event: its time, and the event in its session's lane; a statement's answer that comes right after it
  // was sent (nothing else happened between) shares its row.
  const folded = new Set<number>()
  events.forEach((e, i) => {
    const next = events[i + 1]
    if (e.kind === 'run' && next && next.session === e.session && next.step === e.step && next.kind !== 'run' && next.kind !== 'wait') folded.add(i + 1)
  })
  const rows = events.map((e, i) => {
    if (folded.has(i)) return ''
    const sql = e.kind === 'run' ? sqlOf(x.statements, e.session, e.step) : undefined
    const cells = names.map((n) => {
      if (n !== e.session) return '<td></td>'
      const s = d.sessions.find((y) => y.name === n)!
      const what = e.kind === 'run' ? (sql !== undefined ? `<code class="sql">${esc(sql)}</code>` : '') : answerText(e, s, byPid)
      const answer = folded.has(i + 1) ? events[i + 1] : undefined
      const shown = answer ?? e
      const commit = isCommit(e.step, sqlOf(x.statements, e.session, e.step), shown.detail) && shown.kind !== 'run' ? ' commit' : ''
      const then = answer ? `<div class="ev k-${esc(answer.kind)}">${answerText(answer, s, byPid)}</div>` : ''
      return `<td class="k-${esc(shown.kind)}${e.setup || answer?.setup ? ' setup' : ''}${commit}"><div class="ev"><span class="label">${esc(e.step)}</span> ${what}</div>${then}</td>`
    })
    return `<tr><td class="t">${esc(e.t.toFixed(1))}</td>${cells.join('')}</tr>`
  })
  // A declared statement that never ran (its session ended before it): on the page, said so.
  const unrun = names.flatMap((n) =>
    (x.statements[n] ?? [])
      .filter((st) => !ran.has(`${n}\u0000${st.step}`))
      .map((st) => `<tr><td class="t">-</td>${names.map((m) => (m === n ? `<td class="setup"><div class="ev"><span class="label">${esc(st.step)}</span> not run <code class="sql">${esc(st.sql)}</code></div></td>` : '<td></td>')).join('')}</tr>`),
  )
  const head = d.sessions.map((s) => `<th>${esc(s.name)}<div class="meta">pid ${esc(s.pid)}${s.isolation ? `, ${esc(s.isolation)}` : ''}</div></th>`)
  const ends = d.sessions.map((s) => {
    const parts = [
      `<b>${esc(s.outcome)}</b>${s.reason ? `: ${esc(s.reason)}` : ''}`,
      s.sqlstate ? `SQLSTATE ${esc(s.sqlstate)}${s.condition ? ` ${esc(s.condition)}` : ''}` : '',
      s.step ? `at ${esc(s.step)}` : '',
      s.commitTag ? `answered ${esc(s.commitTag)}` : '',
      `waited ${esc(s.waitedMs.toFixed(1))} ms of ${esc(s.ms.toFixed(1))} ms`,
      s.retries ? `${esc(s.retries)} retries` : '',
      s.errors.length ? `raised ${esc(s.errors.join(', '))}` : '',
      s.blockedBy?.length ? `was waiting for ${esc(s.blockedBy.map((p) => byPid.get(p) ?? `backend ${p}`).join(', '))}` : '',
      s.injected?.length ? `<span class="fault">injected ${esc(s.injected.join(', '))}</span>` : '',
      s.unrecovered ? `unrecovered: ${esc(s.unrecovered)}` : '',
      s.thrown ? `threw ${esc(s.thrown)}` : '',
    ].filter(Boolean)
    return `<td>${parts.join('<br>')}</td>`
  })
  const params = Object.entries(d.params).map(([k, v]) => `${k}=${v}`).join(' ')
  const trials = d.trials > 1 ? `<p id="trials">${esc(d.trials)} trials: ${esc(Object.entries(d.verdicts).map(([k, v]) => `${k} ${v}`).join(', '))}; ${esc(d.violations)} violated. The lanes show one trial: the first that deviates, else the first with the summary's verdict.</p>` : ''
  return page(`race run ${d.scenario}: ${d.verdict}`, [
    `<h1>race run ${esc(d.scenario)}</h1>`,
    `<p class="meta">${esc(d.title)}<br>${esc(d.source)} · server ${esc(d.server.version)} (${esc(d.target)})${d.pooler ? ` · through ${esc(d.pooler)}` : ''} · ${esc(d.n)} sessions · schedule ${esc(d.schedule)}${params ? ` · ${esc(params)}` : ''}</p>`,
    banner(d.exitCode, summary),
    `<p id="invariant"><b>invariant</b> ${esc(d.invariant.description)}: observed <code>${esc(d.invariant.observed)}</code> <b>${held}</b>${d.invariant.error ? ` (${esc(d.invariant.error)})` : ''}</p>`,
    d.deviations.length ? `<ul id="deviations">${d.deviations.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>` : '',
    trials,
    `<h2>The sessions, one lane each</h2>`,
    `<table class="lanes" id="lanes"><colgroup><col style="width:4.5em">${names.map(() => '<col>').join('')}</colgroup><tr><th>ms</th>${head.join('')}</tr>`,
    ...rows,
    ...unrun,
    `<tr><th>end</th>${ends.join('')}</tr></table>`,
    d.order ? `<p id="order"><b>order</b> <code>${esc(d.order)}</code>${d.overlap ? ` (${esc(d.overlap.join(' and '))} were on the server at once: the order they were sent, not a replay)` : ''}</p>` : '',
    d.unfollowed ? `<p><b>not followed</b> ${esc(d.unfollowed)}</p>` : '',
    `<h2>Run it again</h2>`,
    `<pre id="again">${esc(x.again)}</pre>`,
    `<p class="meta">${x.replays ? 'This replays the same order of queries.' : d.schedule === 'barrier' ? 'A barrier run lets the sessions race: run again, it may interleave otherwise. race explore finds the orders that violate, each as a --schedule line that replays it.' : 'The schedule is deterministic: this runs the same interleaving.'}</p>`,
  ])
}

/** Draws an interleaving's order (`s1.b1 s2.b2 s1.ins1:commit s2.q4!40001 ...`) as lanes, one row per point. */
function orderLanes(id: string, it: ExploreRun, names: readonly string[], statements: Statements): string {
  const tokens = it.line.split(/\s+/).filter(Boolean)
  const rows = tokens.map((tok, i) => {
    const dot = tok.indexOf('.')
    const session = dot < 0 ? tok : tok.slice(0, dot)
    const label = dot < 0 ? '' : tok.slice(dot + 1)
    const [base, fault] = label.split('!')
    const step = base.replace(/[:/].*$/, '')
    // The statement's SQL once, at its first point (a split step's later parts and its commit point name it).
    const first = base === step
    const sql = first ? sqlOf(statements, session, step) : undefined
    const commit = isCommit(base, sqlOf(statements, session, step)) ? ' commit' : ''
    const cells = names.map((n) =>
      n === session
        ? `<td class="${commit.trim()}"><div class="ev"><span class="label">${esc(base)}</span>${fault ? ` <span class="fault">injected ${esc(fault)}</span>` : ''}${commit ? ' <span class="meta">commit point</span>' : ''}${sql !== undefined ? ` <code class="sql">${esc(sql)}</code>` : ''}</div></td>`
        : '<td></td>',
    )
    return `<tr><td class="t">${i + 1}</td>${cells.join('')}</tr>`
  })
  const ends = names.map((n) => {
    const parts = [
      `<b>${esc(it.outcomes[n] ?? 'not in this interleaving')}</b>`,
      it.levels?.[n] ? esc(it.levels[n]) : '',
      it.waited.includes(n) ? 'was seen waiting' : '',
      ...(it.injected ?? []).filter((f) => f.at.startsWith(`${n}.`)).map((f) => `<span class="fault">injected ${esc(f.fault)} at ${esc(f.at)}</span>`),
    ].filter(Boolean)
    return `<td>${parts.join('<br>')}</td>`
  })
  return [
    `<table class="lanes" id="${id}"><colgroup><col style="width:4.5em">${names.map(() => '<col>').join('')}</colgroup><tr><th>#</th>${names.map((n) => `<th>${esc(n)}</th>`).join('')}</tr>`,
    ...rows,
    `<tr><th>end</th>${ends.join('')}</tr></table>`,
    `<p><b>invariant</b> observed <code>${esc(it.observed)}</code> <b>${HELD(it.held)}</b>: ${esc(it.verdict)} (${esc(it.why)})${it.raised.length ? `; the server raised ${esc(it.raised.join(', '))}` : ''}${it.failure ? `; failed: ${esc(it.failure)}` : ''}</p>`,
  ].join('\n')
}

/** race explore: the outcome groups with their counts, and the shortest violating interleaving as lanes. */
export function explorePage(d: ExploreDoc, statements: Statements): string {
  const names = [...new Set([...Object.keys(statements), ...d.groups.flatMap((g) => Object.keys(g.outcomes)), ...Object.keys(d.shortest?.outcomes ?? {})])]
  const summary =
    d.exitCode === 3
      ? `not known: ${d.violating ? `violated in ${d.violating}` : `no violation in the ${d.interleavings} interleavings run`}, but the search did not decide (${undecided(d)}); expected ${d.expected}`
      : `${d.violating ? `VIOLATED in ${d.violating} of ${d.interleavings}` : d.failed ? `the code FAILED in ${d.failed} of ${d.interleavings}` : `HELD in all ${d.interleavings}`} interleavings${d.mode === 'sample' ? ' sampled' : ''}; expected ${d.expected}: ${d.matched ? 'MATCH' : 'DEVIATION'}`
  const groups = d.groups.map((g) => {
    const state = g.held === false ? 'VIOLATED' : g.failure ? 'FAILED' : g.held === null ? 'UNKNOWN' : 'HELD'
    const ends = Object.entries(g.outcomes).map(([k, v]) => `${k} ${v}`).join(', ')
    const shown = g.lines.slice(0, 3).map((l) => `<code>${esc(l)}</code>`).join('<br>')
    const rest = g.lines.length > 3 ? `<details><summary>${g.lines.length - 3} more</summary>${g.lines.slice(3).map((l) => `<code>${esc(l)}</code>`).join('<br>')}</details>` : ''
    return `<tr><td>${esc(g.count)}</td><td class="${state === 'HELD' ? 'k-ok' : state === 'UNKNOWN' ? 'k-wait' : 'k-error'}">${state}</td><td>${g.failure ? `failed: ${esc(g.failure)}` : `${esc(g.verdict)}: ${esc(ends)}`}</td><td>${shown}${rest}</td></tr>`
  })
  const fired = (d.injections ?? []).filter((x) => x.runs > 0)
  const search = `${d.search} search: ${d.runs} runs, ${d.interleavings} different interleavings of ${d.orders} orders of the ${d.steps} steps${d.complete ? '' : ' (not every interleaving was run)'}${d.sample ? `, seed ${d.sample.seed}` : ''}`
  const server = `${d.server.product ?? 'PostgreSQL'} ${d.server.version}`
  return page(`race explore ${d.scenario}: ${d.violating ? 'violated' : d.exitCode === 3 ? 'unknown' : 'held'}`, [
    `<h1>race explore ${esc(d.scenario)}</h1>`,
    `<p class="meta">${esc(server)} (${esc(d.target)}) · ${esc(d.n)} sessions · ${esc(search)}</p>`,
    banner(d.exitCode, summary),
    `<p id="invariant"><b>invariant</b> ${esc(d.invariant)}</p>`,
    fired.length ? `<p><b>injected</b> ${esc(fired.map((x) => `${x.fault} in ${x.runs} of ${d.runs} runs`).join(', '))}</p>` : '',
    ...(d.notFired ?? []).map((l) => `<p class="k-wait">${esc(l)}</p>`),
    d.diverged ? `<p class="k-wait">${esc(d.diverged)} run(s) went otherwise than the same choices did before: some interleavings may be missing</p>` : '',
    `<h2>Outcomes</h2>`,
    `<table id="groups"><tr><th style="width:5em">count</th><th style="width:7em"></th><th>verdict and how the sessions ended</th><th>interleavings (fewest switches first)</th></tr>`,
    ...groups,
    '</table>',
    ...(d.shortest
      ? [
          `<h2>Shortest violating interleaving (${esc(d.shortest.switches)} switches between sessions)</h2>`,
          orderLanes('shortest', d.shortest, names, statements),
          d.replay ? `<pre id="replay">${esc(d.replay)}</pre>` : '',
          d.replayNote ? `<p class="meta">${esc(d.replayNote)}</p>` : '',
        ]
      : []),
    ...(d.shortestFailure
      ? [
          `<h2>Shortest interleaving in which the code failed (${esc(d.shortestFailure.switches)} switches)</h2>`,
          orderLanes('failure', d.shortestFailure, names, statements),
          d.failureReplay ? `<pre id="failure-replay">${esc(d.failureReplay)}</pre>` : '',
        ]
      : []),
    d.shortest || d.shortestFailure ? `<p class="meta">Run the command with --html for each statement's answer, waits and timings in that interleaving.</p>` : '',
  ])
}

/** The page of a race that could not run (exit 2 or 3 before any report): a stale page is never left behind. */
export function errorPage(command: string, code: number, message: string, argv: readonly string[]): string {
  return page(`race ${command}: could not run`, [
    `<h1>race ${esc(command)}</h1>`,
    banner(code, `could not run: ${message}`),
    `<pre id="again">${esc(againCommand(argv).command)}</pre>`,
  ])
}

// ---------- the files ----------

/** The page of a race that could not run, in the file --html named. */
export function writeErrorPage(file: string, command: string, code: number, message: string, argv: readonly string[]): void {
  fs.writeFileSync(file, errorPage(command, code, message, argv))
}

/** --html FILE: refused before anything runs when the file cannot be written there (as --junit). */
export function htmlFile(file: string): string {
  return checkWritable('--html', file)
}

/** race run --html FILE: the page of the run's --json document (with its timeline, always). */
export function writeRunPage(file: string, view: RunView, o: { exitCode: number; kept: boolean }, argv: readonly string[] = process.argv.slice(2)): void {
  const doc = toJson(view, { timeline: true, ...o })
  const again = againCommand(argv, doc.order && !doc.overlap ? doc.order : undefined)
  fs.writeFileSync(file, runPage({ doc, statements: statementsOf(view.plan), again: again.command, replays: again.replays }))
}

/**
 * race explore's files: --html (the page), --junit (one testcase) and --github (an annotation on the race file), each
 * file refused before anything runs when it cannot be written (exit 2), as are they with --isolation all (a search per
 * level: its own table). `write` is called with the search's --json document.
 */
export function exploreFiles(o: { html?: string; junit?: string; github?: boolean; json?: boolean }, levels: boolean): { write(doc: ExploreDoc, p: Plan, name: string): void } {
  if (levels) throw new UsageError(`${o.html !== undefined ? '--html' : o.junit !== undefined ? '--junit' : '--github'} takes one search: with --isolation all (or a list of levels) run one level per call, e.g. --isolation rc`)
  const html = o.html === undefined ? undefined : checkWritable('--html', o.html)
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  return {
    write(doc, p, name) {
      if (html) fs.writeFileSync(html, explorePage(doc, statementsOf(p)))
      // The user's race file (a spec, a module), for the annotation's file=; a built-in scenario has none.
      const file = fs.existsSync(name) && fs.statSync(name).isFile() ? name : undefined
      const k = searchCase(doc, file)
      if (junit) writeJunit(junit, 'race explore', [k], { server: `${doc.server.product ?? 'PostgreSQL'} ${doc.server.version}`, target: doc.target, search: doc.search }, doc.ms)
      if (o.github) printAnnotations(annotationsOf(() => `race explore ${name}`, [k]), Boolean(o.json))
    },
  }
}
