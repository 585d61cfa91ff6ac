// What a CI system reads: a JUnit XML file (one testcase per case or cell, a <failure> carrying what deviates, an
// <error> for what could not be decided, durations), GitHub Actions annotations (::error lines), and the one JSON
// document race prints even when it could not run. Pure, apart from writing the file the user named.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { UsageError } from '../errors.js'
import { strip } from './width.js'

export interface CiCase {
  /** Dotted group, e.g. race.check.write-skew. */
  classname: string
  /** The case within it, e.g. "serializable" or "n=5 max-pending=3". */
  name: string
  ms: number
  /** Deviates from what is documented (exit 1): the deviation lines. */
  failure?: { message: string; lines: string[] }
  /** Could not run or decide (exit 3). */
  error?: { message: string; lines: string[] }
  /** What happened, for the record (verdict, invariant). */
  out?: string
  /** Left out on this server, and why (e.g. lock-limit on a server race did not start): a <skipped/>. */
  skipped?: string
  /** The user's own scenario file (a spec file, a .mjs module) the case came from: an annotation's file=. */
  file?: string
}

// XML 1.0 allows tab, newline, carriage return and everything from space up, except surrogates and U+FFFE/F.
// eslint-disable-next-line no-control-regex
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g

export function xml(s: string): string {
  return strip(s)
    .replace(NOT_XML, '')
    .replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[ch]!)
}

const secs = (ms: number) => (Math.max(0, ms) / 1000).toFixed(3)

/** One <testsuites> with one <testsuite>: the shape Jenkins, GitLab, GitHub test reporters and Surefire read. */
/** `ms`: the whole run's time (connecting, creating and dropping the schema, starting servers), else the cases' sum. */
export function junitXml(suite: string, cases: readonly CiCase[], o: { timestamp?: Date; properties?: Record<string, string>; ms?: number } = {}): string {
  const failures = cases.filter((k) => k.failure).length
  const errors = cases.filter((k) => k.error && !k.failure).length
  const skipped = cases.filter((k) => k.skipped !== undefined && !k.failure && !k.error).length
  const ms = o.ms ?? cases.reduce((a, k) => a + k.ms, 0)
  const stamp = (o.timestamp ?? new Date()).toISOString().replace(/\.\d+Z$/, '')
  const props = Object.entries(o.properties ?? {})
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xml(suite)}" tests="${cases.length}" failures="${failures}" errors="${errors}" time="${secs(ms)}">`,
    `  <testsuite name="${xml(suite)}" tests="${cases.length}" failures="${failures}" errors="${errors}" skipped="${skipped}" time="${secs(ms)}" timestamp="${stamp}" hostname="${xml(os.hostname())}">`,
  ]
  if (props.length) {
    lines.push('    <properties>')
    for (const [k, v] of props) lines.push(`      <property name="${xml(k)}" value="${xml(v)}"/>`)
    lines.push('    </properties>')
  }
  for (const k of cases) {
    const open = `    <testcase classname="${xml(k.classname)}" name="${xml(k.name)}" time="${secs(k.ms)}"`
    const body: string[] = []
    if (k.failure) body.push(`      <failure message="${xml(k.failure.message)}" type="deviation">${xml(k.failure.lines.join('\n'))}</failure>`)
    else if (k.error) body.push(`      <error message="${xml(k.error.message)}" type="undecided">${xml(k.error.lines.join('\n'))}</error>`)
    else if (k.skipped !== undefined) body.push(`      <skipped message="${xml(k.skipped)}"/>`)
    if (k.out) body.push(`      <system-out>${xml(k.out)}</system-out>`)
    lines.push(body.length ? [`${open}>`, ...body, '    </testcase>'].join('\n') : `${open}/>`)
  }
  lines.push('  </testsuite>', '</testsuites>', '')
  return lines.join('\n')
}

/** --junit FILE: refused before anything runs when the file cannot be written there. */
export function checkWritable(flag: string, file: string): string {
  const target = path.resolve(String(file))
  if (!String(file).trim()) throw new UsageError(`${flag} needs a file name, e.g. ${flag} race-junit.xml`)
  try {
    if (fs.existsSync(target) && fs.statSync(target).isDirectory()) throw new UsageError(`${flag} ${file} is a directory: give a file name, e.g. ${path.join(file, 'race-junit.xml')}`)
    fs.accessSync(path.dirname(target), fs.constants.W_OK)
  } catch (e) {
    if (e instanceof UsageError) throw e
    throw new UsageError(`${flag} ${file}: cannot write there (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): give a path in a folder that exists`)
  }
  return target
}

/** `ms`: the whole run's time, for the suite (see junitXml). */
export function writeJunit(file: string, suite: string, cases: readonly CiCase[], properties?: Record<string, string>, ms?: number): void {
  fs.writeFileSync(file, junitXml(suite, cases, { properties, ...(ms === undefined ? {} : { ms }) }))
}

// ---------- GitHub Actions ----------

/** --github, or automatically inside GitHub Actions (GITHUB_ACTIONS=true). */
export function githubWanted(flag: boolean | undefined): boolean {
  return Boolean(flag) || process.env.GITHUB_ACTIONS === 'true'
}

/** The escaping the runner expects: the message's %, CR and LF; a property also its : and ,. */
const data = (s: string) => strip(s).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')
const prop = (s: string) => data(s).replace(/:/g, '%3A').replace(/,/g, '%2C')

/**
 * One ::error workflow command: shown as an annotation on the run (title, then the lines); with `file`, on that
 * file too (a user's spec or .mjs scenario, as a path relative to the working directory, which in a workflow is
 * the checkout).
 */
export function annotation(title: string, lines: readonly string[], level: 'error' | 'warning' = 'error', file?: string): string {
  const rel = file && path.isAbsolute(file) ? path.relative(process.cwd(), file) : file
  const at = file ? `file=${prop(rel && !rel.startsWith('..') ? rel : file)},` : ''
  return `::${level} ${at}title=${prop(title)}::${data(lines.join('\n'))}`
}

/**
 * Prints annotations where the runner reads them: stdout (as GitHub documents), or stderr when stdout carries the
 * JSON document (the runner reads workflow commands from both streams).
 */
export function printAnnotations(list: readonly string[], json: boolean): void {
  if (!list.length) return
  ;(json ? process.stderr : process.stdout).write(list.join('\n') + '\n')
}

// ---------- the one JSON document, also when race could not run ----------

export function errorDocument(command: string, exitCode: number, error: string): Record<string, unknown> {
  return { command, exitCode, error }
}

// ---------- one judged case ----------

interface JudgedCase {
  verdict: string
  why: string
  invariant: { description: string; observed: string; held: boolean | null }
}

/**
 * A judged run as a CI case: a <failure> with the documented outcome and each difference when it deviates (exit
 * 1), an <error> when it could not be decided (exit 3), and what happened in <system-out>.
 */
export function ciCase(
  classname: string,
  name: string,
  ms: number,
  t: JudgedCase,
  s: { matched: boolean; deviations: readonly string[]; expected: readonly string[] },
  exit: number,
): CiCase {
  const held = t.invariant.held === null ? 'undecided' : t.invariant.held ? 'HELD' : 'VIOLATED'
  const out = `verdict ${t.verdict} (${t.why}); invariant ${t.invariant.description}: observed ${t.invariant.observed} ${held}`
  const lines = [`expected: ${s.expected.join('; or ')}`, `got: ${t.verdict} (${t.why})`, ...s.deviations]
  if (exit === 1) return { classname, name, ms, out, failure: { message: s.deviations[0] ?? `expected ${s.expected.join(' | ')}, got ${t.verdict}`, lines } }
  if (exit === 3) return { classname, name, ms, out, error: { message: `could not decide: ${t.verdict === 'unknown' ? t.why : (s.deviations[0] ?? t.why)}`, lines } }
  return { classname, name, ms, out }
}

/** The annotations of the cases that deviate or could not be decided. */
export function annotationsOf(title: (k: CiCase) => string, cases: readonly CiCase[]): string[] {
  return cases.filter((k) => k.failure || k.error).map((k) => annotation(title(k), [(k.failure ?? k.error)!.message, ...(k.failure ?? k.error)!.lines.filter((l) => l !== (k.failure ?? k.error)!.message)], 'error', k.file))
}

// ---------- one search (race explore) ----------

/** What a CI case of race explore reads of its --json document (explore/result.ts ExploreResult). */
export interface SearchCase {
  scenario: string
  n: number
  mode: string
  search: string
  interleavings: number
  violating: number
  failed: number
  unknown: number
  complete: boolean
  stopped?: string
  expected: string
  matched: boolean
  exitCode: number
  ms: number
  shortest: { line: string } | null
  replay: string | null
  shortestFailure: { line: string; failure?: string } | null
  failureReplay: string | null
}

/** Why a search did not decide (exit 3), in a few words; the command's own report says it in full. */
export function undecided(d: Pick<SearchCase, 'stopped' | 'mode' | 'complete' | 'unknown' | 'failed'>): string {
  if (d.stopped) return `the search was stopped (${d.stopped})`
  if (d.mode === 'sample') return 'a sample, not every order: the others were not run'
  if (!d.complete) return 'stopped at --max with interleavings not run'
  if (d.unknown) return `${d.unknown} interleavings undecided`
  return 'undecided: see its report'
}

/**
 * A search as a CI case: a <failure> when it deviates (exit 1: a violation where held was expected, none where one
 * was, the code failing), carrying the shortest interleaving's replay; an <error> when it could not decide (exit 3).
 */
export function searchCase(d: SearchCase, file?: string): CiCase {
  const classname = `race.explore.${d.scenario}`
  const name = `${d.n} sessions, ${d.search} search`
  const found = d.violating ? `VIOLATED in ${d.violating} of ${d.interleavings} interleavings` : d.failed ? `the code failed in ${d.failed} of ${d.interleavings} interleavings` : `held in all ${d.interleavings} interleavings run`
  const out = `${found}; expected ${d.expected}`
  const lines = [`expected: ${d.expected}`, `got: ${found}`, ...(d.replay ? [`shortest violating: ${d.replay}`] : []), ...(d.shortestFailure && d.failureReplay ? [`shortest failing (${d.shortestFailure.failure ?? 'failed'}): ${d.failureReplay}`] : [])]
  const at = file ? { file } : {}
  if (d.exitCode === 1) return { classname, name, ms: d.ms, out, failure: { message: `expected ${d.expected}, but ${found}`, lines }, ...at }
  if (d.exitCode === 3) {
    return { classname, name, ms: d.ms, out, error: { message: `could not decide: ${undecided(d)}`, lines }, ...at }
  }
  return { classname, name, ms: d.ms, out, ...at }
}
