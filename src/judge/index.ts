// Pure judgement: facts in, verdicts out; a run against its documented outcome, session by session. Never
// touches the database, so every rule here is tested with hand-made facts.
import { UNREAD_LEVEL, conditionName, isConcurrencyControl, isIntegrityViolation, sqlstateOf } from '../db/sqlstate.js'
import type { Documented, Verdict, Who } from '../scenario.js'
import type { Level } from '../levels.js'
import type { InvariantReport, SessionReport } from '../engine/types.js'

type Judged = Pick<SessionReport, 'name' | 'outcome' | 'sqlstate' | 'errors' | 'waitedMs' | 'step' | 'reason'> & Pick<Partial<SessionReport>, 'thrown' | 'injected' | 'unrecovered'>

/** A SQLSTATE, or MySQL's 'SQLSTATE/errno' ('23000/1062'). */
const SQLSTATE = /^[0-9A-Z]{5}(\/\d+)?$/

/**
 * The SQLSTATEs the documented outcomes name. A session that fails with one of them does what the documentation
 * says (25P03 when idle_in_transaction_session_timeout ends a forgotten transaction): it is not an error no one
 * expects, and when the invariant holds it is the server's prevention.
 */
export function documentedCodes(docs: readonly Pick<Documented, 'who'>[]): Set<string> {
  const out = new Set<string>()
  for (const d of docs) for (const [k, v] of Object.entries(d.who)) for (const x of [k, v]) if (typeof x === 'string' && SQLSTATE.test(x)) out.add(x)
  return out
}

/**
 * The verdict of one trial from what the sessions did and whether the invariant held. `expected`: SQLSTATEs the
 * scenario declares (documentedCodes, a spec's `prevented by` line). A session that failed counts as the server's
 * prevention only with a code of its concurrency control (40001, 40P01, 55P03, ...) or one declared here: an
 * integrity error no one declared (23502 from an insert that omits a NOT NULL column, 23514 from a CHECK a typo
 * breaks) says the SQL never did what the race needs, so the trial is undecided, never `prevented`.
 */
export function judge(sessions: readonly Judged[], invariant: Pick<InvariantReport, 'held' | 'error'>, expected: ReadonlySet<string> = new Set()): { verdict: Verdict; why: string } {
  // A declared SQLSTATE covers MySQL's codes under it ('23000' covers '23000/1062'), as a retry loop's does.
  const prevents = (code: string | undefined) => isConcurrencyControl(code) || (code !== undefined && (expected.has(code) || expected.has(sqlstateOf(code))))
  const timedOut = sessions.find((s) => s.outcome === 'timeout')
  if (timedOut) {
    return { verdict: 'unknown', why: `${timedOut.name} timed out in step ${timedOut.step ?? '?'}${timedOut.reason ? ` (${timedOut.reason})` : ''}` }
  }
  // The code under test threw what it does not throw on purpose (a TypeError): what committed, or did not, says
  // nothing of the race, violated or held.
  const crashed = sessions.find((s) => s.outcome === 'failed' && s.thrown)
  if (crashed && /^(sent a query|met a query)/.test(crashed.thrown!)) {
    return { verdict: 'unknown', why: `${crashed.name} ${crashed.thrown}: race did not send it, and what the trial shows is not what the code does` }
  }
  if (crashed?.thrown!.startsWith('caught ')) {
    return { verdict: 'unknown', why: `${crashed.name} ${crashed.thrown}: an error neither the server's concurrency control nor the race module's prevention names, so the code did not do what the race needs` }
  }
  if (crashed) {
    return { verdict: 'unknown', why: `${crashed.name} ${didWhat(crashed.thrown!)} in step ${crashed.step ?? '?'}: a failure of the code under test, not a rejection its race module declares (rejects)` }
  }
  if (invariant.held === null) return { verdict: 'unknown', why: `the invariant could not be decided${invariant.error ? `: ${invariant.error}` : ''}` }
  if (!invariant.held) return { verdict: 'anomaly', why: 'the invariant was violated' }
  // A violation among what committed is a fact; a hold is not, when a session never got to its end: what it
  // would have written might have broken the invariant. So a lost session leaves a held invariant undecided.
  // A connection race itself ended (--inject lost) was ended before its step was sent: nothing of it is in doubt.
  const lost = sessions.filter((s) => s.outcome === 'lost' && !s.injected?.some((x) => x.startsWith('lost@')))
  if (lost.length) {
    const which = lost.map((s) => `${s.name}${s.step ? ` (in step ${s.step})` : ''}`).join(', ')
    return { verdict: 'unknown', why: `held on what committed, but ${which} lost ${lost.length > 1 ? 'their connections' : 'its connection'}: the race did not run to its end` }
  }
  const odd = sessions.find((s) => s.outcome === 'failed' && !prevents(s.sqlstate ?? undefined))
  if (odd) {
    const code = odd.sqlstate ?? undefined
    const integrity = isIntegrityViolation(code) ? `: an integrity error is a prevention only where it is declared (a spec's line: prevented by ${sqlstateOf(code!)}; a race module's field: prevention: ['${sqlstateOf(code!)}']; docs/verdicts.md)` : ''
    return {
      verdict: 'unknown',
      why: `${odd.name} failed with ${code ?? odd.reason ?? 'an error'}${conditionName(code) ? ' ' + conditionName(code) : ''}, which its documentation does not name${integrity}`,
    }
  }
  const preventer = sessions.find((s) => s.errors.some(prevents))
  if (preventer) {
    const code = preventer.errors.find(prevents)!
    return { verdict: 'prevented', why: `held: the server raised ${code} ${conditionName(code) ?? ''}`.trim() }
  }
  if (sessions.some((s) => s.waitedMs > 0)) return { verdict: 'serialized', why: 'held: sessions waited for each other' }
  return { verdict: 'clean', why: 'held: no session was seen waiting or failing' }
}

/**
 * A race whose every session must complete (a race module's `mustComplete: true`, a spec's `every session completes`
 * line): the first session that did not, in words ("s1 failed with 40001 serialization_failure in step q4"), or
 * undefined when each did. A session completes when it committed, or when the application said no on its own (a
 * rejection) with no server error left unrecovered. Whatever else the verdict says, a session that failed (any
 * error, the server's concurrency control and declared codes included), lost the connection race ended on purpose
 * (--inject lost), or gave up after a server error is a failure of the code: the request it served got an error.
 * What race itself cut short (a timeout, a connection lost otherwise, a query race did not send) is not judged here.
 */
export function notCompleted(sessions: readonly Judged[]): string | undefined {
  for (const s of sessions) {
    const at = s.step ? ` in step ${s.step}` : ''
    if (s.outcome === 'failed') {
      if (s.thrown && /^(sent a query|met a query)/.test(s.thrown)) continue
      const code = s.sqlstate ?? undefined
      const what = s.thrown ? didWhat(s.thrown) : code ? `failed with ${code}${conditionName(code) ? ` ${conditionName(code)}` : ''}` : `failed (${s.reason ?? 'an error'})`
      return `${s.name} ${what}${s.thrown && / in (step )?q\d/.test(s.thrown) ? '' : at}`
    }
    if (s.outcome === 'lost' && s.injected?.some((x) => x.startsWith('lost@'))) return `${s.name} lost its connection${at} (race ended it: --inject lost)`
    if ((s.outcome === 'committed' || s.outcome === 'rejected') && s.unrecovered) {
      return `${s.name} ${s.outcome === 'rejected' ? `was rejected (${s.reason ?? ''})` : 'returned'} after ${s.unrecovered}, which it did not retry`
    }
  }
  return undefined
}

/**
 * What the code under test did: a throw ("threw TypeError: x"), or what it did process-wide, contained by race
 * ("called process.exit(0)", "left an uncaught exception Error: x": app/contain.ts).
 */
function didWhat(thrown: string): string {
  if (thrown.startsWith('retried without end') || thrown.startsWith('sent more than')) return thrown
  if (thrown.startsWith('called ') || thrown.startsWith('caught ') || thrown.startsWith('returned after') || thrown.startsWith('sent a query') || thrown.startsWith('met a query')) return thrown
  if (thrown.startsWith('uncaught exception ') || thrown.startsWith('unhandled rejection ')) return `left an ${thrown}`
  return `threw ${thrown}`
}

/** How a session ended, in the words documented outcomes use: committed, rejected: <reason>, a SQLSTATE, failed, lost, timeout. */
export function labelOf(s: Pick<SessionReport, 'outcome' | 'sqlstate' | 'reason'> & Pick<Partial<SessionReport>, 'thrown'>): string {
  if (s.thrown) return didWhat(s.thrown)
  if (s.outcome === 'rejected') return `rejected: ${s.reason ?? ''}`
  if (s.outcome === 'failed') return s.sqlstate ?? 'failed'
  return s.outcome
}

/** Does an observed label satisfy a documented one? 'rejected' takes any reason; 'failed' any failure. */
export function labelMatches(documented: string, s: Pick<SessionReport, 'outcome' | 'sqlstate' | 'reason'>): boolean {
  const got = labelOf(s)
  if (documented === got) return true
  if (documented === 'rejected') return s.outcome === 'rejected'
  if (documented === 'failed') return s.outcome === 'failed'
  return false
}

function isCount(v: Who[string]): v is number | readonly [number, number] {
  return typeof v !== 'string'
}

function range(v: number | readonly [number, number]): [number, number] {
  return typeof v === 'number' ? [v, v] : [v[0], v[1]]
}

function countText(v: number | readonly [number, number]): string {
  const [lo, hi] = range(v)
  return lo === hi ? String(lo) : `${lo}-${hi}`
}

/** A documented outcome in a few words: "prevented: t1 committed, t2 40001" or "serialized: 3 committed, 2 rejected". */
export function describeDoc(d: Pick<Documented, 'verdict' | 'who' | 'waited'>): string {
  return `${d.verdict}${whoText(d.who, d.waited)}`
}

/** "1.5 s" or "200 ms". */
function ms(v: number): string {
  return v >= 1000 ? `${+(v / 1000).toFixed(3)} s` : `${v} ms`
}

function whoText(who: Who, waited: Documented['waited'] = {}): string {
  const parts = Object.entries(who)
    .filter(([, v]) => !(isCount(v) && range(v)[1] === 0))
    .map(([k, v]) => (isCount(v) ? `${countText(v)} ${k}` : `${k} ${v}${k in waited ? ` after waiting at least ${ms(waited[k])}` : ''}`))
  // Waits of sessions counted rather than named: "s2, s3 wait at least 200 ms".
  const counted = new Map<number, string[]>()
  for (const [k, v] of Object.entries(waited)) if (typeof who[k] !== 'string') counted.set(v, [...(counted.get(v) ?? []), k])
  for (const [v, names] of counted) parts.push(`${names.join(', ')} ${names.length > 1 ? 'wait' : 'waits'} at least ${ms(v)}`)
  return parts.length ? `: ${parts.join(', ')}` : ''
}

/** Several documented outcomes, those with the same endings together: "serialized | clean: 3 committed, 2 rejected". */
export function describeDocs(docs: readonly Pick<Documented, 'verdict' | 'who' | 'waited'>[]): string[] {
  const groups = new Map<string, string[]>()
  for (const d of docs) {
    const k = whoText(d.who, d.waited)
    groups.set(k, [...(groups.get(k) ?? []), d.verdict])
  }
  return [...groups].map(([who, verdicts]) => `${verdicts.join(' | ')}${who}`)
}

type Compared = Pick<SessionReport, 'name' | 'outcome' | 'sqlstate' | 'reason' | 'isolation'> & Partial<Pick<SessionReport, 'step' | 'waitedMs'>>

/** Every way a trial differs from one documented outcome (empty: it matches), e.g. "s2: documented 40P01, got 55P03". */
export function differences(verdict: Verdict, sessions: readonly Compared[], doc: Documented): string[] {
  const out: string[] = []
  if (verdict !== doc.verdict) out.push(`verdict: documented ${doc.verdict}, got ${verdict}`)
  const byName = new Map(sessions.map((s) => [s.name, s]))
  const named = new Set<string>()
  for (const [k, v] of Object.entries(doc.who)) {
    if (isCount(v)) continue
    named.add(k)
    const s = byName.get(k)
    if (!s) out.push(`${k}: documented ${v}, but the run has no session ${k}`)
    else if (!labelMatches(v, s)) out.push(`${k}: documented ${v}, got ${labelOf(s)}`)
  }
  for (const [k, least] of Object.entries(doc.waited ?? {})) {
    const s = byName.get(k)
    if (s && (s.waitedMs ?? 0) < least) out.push(`${k}: documented to wait at least ${ms(least)}, waited ${ms(s.waitedMs ?? 0)}`)
  }
  const rest = sessions.filter((s) => !named.has(s.name))
  const counts = Object.entries(doc.who).filter((e): e is [string, number | readonly [number, number]] => isCount(e[1]))
  const claimed = new Set<string>()
  for (const [label, v] of counts) {
    const hits = rest.filter((s) => labelMatches(label, s))
    hits.forEach((s) => claimed.add(s.name))
    const [lo, hi] = range(v)
    if (hits.length < lo || hits.length > hi) out.push(`${label}: documented ${countText(v)}, got ${hits.length}`)
  }
  const unclaimed = rest.filter((s) => !claimed.has(s.name))
  if (unclaimed.length) {
    const tally = new Map<string, string[]>()
    for (const s of unclaimed) tally.set(labelOf(s), [...(tally.get(labelOf(s)) ?? []), s.name])
    for (const [label, who] of tally) out.push(`${label}: documented 0, got ${who.length} (${who.join(', ')})`)
  }
  return out
}

/** Sessions that ran at another isolation level than the one documented (read from the server, not the scenario). */
export function isolationDifferences(sessions: readonly Compared[], documented: Record<string, Level | null>): string[] {
  const out: string[] = []
  for (const s of sessions) {
    const want = documented[s.name]
    if (!want || !s.isolation || s.isolation === want || s.isolation === UNREAD_LEVEL) continue
    out.push(`${s.name}: ran at ${s.isolation}, documented for ${want}`)
  }
  return out
}

export interface Comparison {
  matched: boolean
  /** The differences from the closest documented outcome (empty when matched). */
  deviations: string[]
  /** A session was lost or gave up: the run is no evidence either way (exit 3, not a deviation). */
  undecided?: boolean
}

/**
 * Sessions documented at a level whose transaction's level race asked for and the server did not tell in time
 * (UNREAD_LEVEL, shown as '?'): the transaction had a level, and a run at another one could match by chance. Not
 * compared in silence: such a run cannot be compared (undecided). (A level that is simply absent, null, is one no
 * statement depended on: MySQL shows no transaction that read or wrote no InnoDB row.)
 */
export function unreadLevels(sessions: readonly Compared[], documented: Record<string, Level | null>): string[] {
  const out: string[] = []
  for (const s of sessions) {
    const want = documented[s.name]
    if (!want || s.isolation !== UNREAD_LEVEL) continue
    out.push(`${s.name}: its isolation level could not be read from the server (documented for ${want}): the run cannot be compared with its documentation`)
  }
  return out
}

/** A trial against its documented outcomes: it matches when it equals any one of them, at the documented levels. */
export function compare(verdict: Verdict, sessions: readonly Compared[], docs: readonly Documented[], levels: Record<string, Level | null>): Comparison {
  const iso = isolationDifferences(sessions, levels)
  if (verdict === 'unknown') return { matched: false, deviations: [...iso], undecided: true }
  const unread = unreadLevels(sessions, levels)
  if (unread.length) return { matched: false, deviations: [...unread, ...iso], undecided: true }
  // A session that lost its connection or timed out did not end the way any documentation describes, and not
  // because of the database's semantics: the run cannot be compared (the verdict may still be a fact).
  const cut = sessions.filter((s) => s.outcome === 'lost' || s.outcome === 'timeout')
  if (cut.length) {
    const what = cut.map((s) => `${s.name} ${s.outcome === 'lost' ? 'lost its connection' : 'timed out'}${s.step ? ` in step ${s.step}` : ''}`).join(', ')
    return { matched: false, deviations: [`${what}: the run cannot be compared with its documentation`, ...iso], undecided: true }
  }
  if (!docs.length) return { matched: iso.length === 0, deviations: iso }
  let best: string[] | undefined
  for (const d of docs) {
    const diff = differences(verdict, sessions, d)
    if (!best || diff.length < best.length) best = diff
    if (!diff.length) break
  }
  const deviations = [...iso, ...(best ?? [])]
  return { matched: deviations.length === 0, deviations }
}

export type ExpectOverride = 'held' | 'violated' | undefined

export interface JudgedTrial {
  verdict: Verdict
  comparison: Comparison
  /** A race whose every session must complete: the session that did not (notCompleted). A failure, decided. */
  failure?: string
}

export interface Summary {
  /** The most significant verdict across trials: anomaly > unknown > prevented > serialized > clean. */
  verdict: Verdict
  tally: Partial<Record<Verdict, number>>
  trials: number
  violations: number
  unknowns: number
  /** What was expected, in words: the documented outcomes, or the --expect override. */
  expected: string[]
  matched: boolean
  /** Trials that did not match their documentation. */
  deviating: number
  /** The first deviating trial's differences. */
  deviations: string[]
  /** Trials in which a session did not complete, where every session must (a failure, never a pass). */
  failures?: number
}

const ORDER: Verdict[] = ['anomaly', 'unknown', 'prevented', 'serialized', 'clean']

export function summarize(trials: readonly JudgedTrial[], docs: readonly Documented[], override?: ExpectOverride): Summary {
  const tally: Partial<Record<Verdict, number>> = {}
  for (const t of trials) tally[t.verdict] = (tally[t.verdict] ?? 0) + 1
  const verdict = ORDER.find((v) => tally[v]) ?? 'unknown'
  const violations = tally.anomaly ?? 0
  // A trial in which a session did not complete, where every session must, is decided: it failed.
  const failed = trials.filter((t) => t.failure)
  const unknowns = trials.filter((t) => !t.failure && (t.verdict === 'unknown' || t.comparison.undecided)).length
  const deviatingTrials = trials.filter((t) => !t.comparison.matched || t.failure)
  let matched: boolean
  let expected: string[]
  if (override === 'held') {
    expected = ['held']
    matched = trials.length > 0 && violations === 0 && unknowns === 0 && !failed.length
  } else if (override === 'violated') {
    expected = ['violated']
    matched = violations > 0 && !failed.length
  } else {
    expected = docs.length ? describeDocs(docs) : ['(not documented: use --expect held|violated)']
    matched = trials.length > 0 && unknowns === 0 && deviatingTrials.length === 0
  }
  const failures = failed.length ? { failures: failed.length } : {}
  // Every session must complete, and one did not: that is the deviation to report first.
  const incomplete = failed.length ? [`every session must complete, but ${failed[0].failure}${trials.length > 1 ? ` (in ${failed.length} of ${trials.length} trials)` : ''}`] : []
  if (override) {
    // What --expect asked for is the documentation here: when it is not met, that is the deviation to report.
    const of = (k: number) => `${k} of ${trials.length} trial${trials.length === 1 ? '' : 's'}`
    // Met when the invariant did as expected (a session that did not complete is reported apart, above it).
    const met = override === 'held' ? trials.length > 0 && violations === 0 && unknowns === 0 : violations > 0
    const why = met
      ? []
      : !trials.length
        ? [`--expect ${override}: no trial ran`]
        : override === 'held'
          ? [violations ? `--expect held, but the invariant was violated in ${of(violations)}` : `--expect held, but the invariant could not be decided in ${of(unknowns)}`]
          : [`--expect violated, but the invariant was never violated (${of(trials.length - unknowns)} held${unknowns ? `, ${unknowns} undecided` : ''})`]
    const deviating = matched ? 0 : override === 'held' ? trials.filter((t) => t.failure || t.verdict === 'anomaly' || t.verdict === 'unknown' || t.comparison.undecided).length : trials.length
    return { verdict, tally, trials: trials.length, violations, unknowns, expected, matched, deviating, deviations: [...incomplete, ...why], ...failures }
  }
  const first = deviatingTrials.find((t) => !t.comparison.matched)?.comparison.deviations ?? []
  return { verdict, tally, trials: trials.length, violations, unknowns, expected, matched, deviating: deviatingTrials.length, deviations: [...incomplete, ...first], ...failures }
}

/** 0 as documented (or as --expect asked), 1 a deviation (a session that did not complete where each must, always), 3 could not decide. */
export function exitCode(s: Pick<Summary, 'matched' | 'unknowns'> & Pick<Partial<Summary>, 'failures'>): 0 | 1 | 3 {
  if (s.matched) return 0
  if (s.failures) return 1
  return s.unknowns > 0 ? 3 : 1
}

/** The exit code of several results (check, matrix): 3 if any could not be decided, else 1 if any deviated. */
export function worstExit(codes: readonly number[]): 0 | 1 | 3 {
  return codes.includes(3) ? 3 : codes.includes(1) ? 1 : 0
}
