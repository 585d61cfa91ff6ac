// Pure judgement: outcomes and the invariant in, verdict out; verdicts against the documented expectation.
import { conditionName, isPrevention } from '../db/sqlstate.js'
import type { Verdict } from '../scenario.js'
import type { InvariantReport, SessionReport, TrialResult } from '../engine/types.js'

type Judged = Pick<SessionReport, 'name' | 'outcome' | 'sqlstate' | 'errors' | 'waitedMs' | 'step' | 'reason'>

function code(x: string | null | undefined): string | undefined {
  return x ?? undefined
}

export function judge(sessions: readonly Judged[], invariant: Pick<InvariantReport, 'held' | 'error'>): { verdict: Verdict; why: string } {
  const timedOut = sessions.find((s) => s.outcome === 'timeout')
  if (timedOut) {
    return { verdict: 'unknown', why: `${timedOut.name} timed out in step ${timedOut.step ?? '?'}${timedOut.reason ? ` (${timedOut.reason})` : ''}` }
  }
  if (invariant.held === null) return { verdict: 'unknown', why: `the invariant could not be evaluated${invariant.error ? `: ${invariant.error}` : ''}` }
  if (!invariant.held) return { verdict: 'anomaly', why: 'the invariant was violated' }
  // A violation among what committed is a fact; a hold is not, when a session never got to its end: what it
  // would have written might have broken the invariant. So a lost session leaves a held invariant undecided.
  const lost = sessions.filter((s) => s.outcome === 'lost')
  if (lost.length) {
    const which = lost.map((s) => `${s.name}${s.step ? ` (in step ${s.step})` : ''}`).join(', ')
    return { verdict: 'unknown', why: `held on what committed, but ${which} lost ${lost.length > 1 ? 'their connections' : 'its connection'}: the race did not run to its end` }
  }
  const odd = sessions.find((s) => s.outcome === 'failed' && !isPrevention(code(s.sqlstate)))
  if (odd) {
    return {
      verdict: 'unknown',
      why: `${odd.name} failed with ${odd.sqlstate ?? 'an error'}${conditionName(code(odd.sqlstate)) ? ' ' + conditionName(code(odd.sqlstate)) : ''}, which no scenario expects`,
    }
  }
  const preventer = sessions.find((s) => s.errors.some(isPrevention))
  if (preventer) {
    const code = preventer.errors.find(isPrevention)!
    return { verdict: 'prevented', why: `held: PostgreSQL raised ${code} ${conditionName(code) ?? ''}`.trim() }
  }
  if (sessions.some((s) => s.waitedMs > 0)) return { verdict: 'serialized', why: 'held: sessions waited for each other' }
  return { verdict: 'clean', why: 'held: no session was seen waiting or failing' }
}

export type ExpectOverride = 'held' | 'violated' | undefined

export interface Summary {
  /** The most significant verdict across trials: anomaly > unknown > prevented > serialized > clean. */
  verdict: Verdict
  tally: Partial<Record<Verdict, number>>
  trials: number
  violations: number
  unknowns: number
  expected: string[]
  matched: boolean
}

const ORDER: Verdict[] = ['anomaly', 'unknown', 'prevented', 'serialized', 'clean']

export function summarize(trials: readonly Pick<TrialResult, 'verdict'>[], expected: readonly Verdict[], override?: ExpectOverride): Summary {
  const tally: Partial<Record<Verdict, number>> = {}
  for (const t of trials) tally[t.verdict] = (tally[t.verdict] ?? 0) + 1
  const verdict = ORDER.find((v) => tally[v]) ?? 'unknown'
  const violations = tally.anomaly ?? 0
  const unknowns = tally.unknown ?? 0
  let matched: boolean
  let exp: string[]
  if (override === 'held') {
    exp = ['held']
    matched = trials.length > 0 && violations === 0 && unknowns === 0
  } else if (override === 'violated') {
    exp = ['violated']
    matched = violations > 0
  } else if (expected.length === 0) {
    // Nothing is documented for this schedule (a custom permutation): report what happened, pass if decided.
    exp = ['(not documented: use --expect held|violated)']
    matched = trials.length > 0 && unknowns === 0
  } else {
    exp = [...expected]
    matched = trials.length > 0 && trials.every((t) => t.verdict !== 'unknown' && expected.includes(t.verdict))
  }
  return { verdict, tally, trials: trials.length, violations, unknowns, expected: exp, matched }
}

/** 0 as documented (or as --expect asked), 1 a deviation, 3 could not decide. */
export function exitCode(s: Summary): 0 | 1 | 3 {
  if (s.matched) return 0
  return s.unknowns > 0 ? 3 : 1
}
