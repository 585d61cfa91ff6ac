// What the two soundness test files share (soundness.test.ts: the generator and its fixed-seed slice; kept.test.ts: every
// kept case): the slice's seed and size, and one case's check against a server, failing with which property broke.
import assert from 'node:assert/strict'
import { checkCase, type Checked } from './check.js'
import { generate, type Case } from './generate.js'

export const SEED = 38
export const CASES = 50
export const TRIALS = 4

/** The slice's cases, as the generator draws them today. */
export const sliceCases = (): Case[] => Array.from({ length: CASES }, (_, i) => generate(SEED, i, { maxSteps: 2 }))

function verdictOf(r: Checked): string | null {
  if (r.error) return `could not check ${r.case.file}: ${r.error}\n\n${r.case.text}`
  if (!r.breaks.length) return null
  const props = [...new Set(r.breaks.map((b) => b.property))].map((p) => (p === 'a' ? '(a) reduced search = --exhaustive' : '(b) free-running trials within --exhaustive'))
  return `${r.case.file} broke ${props.join(' and ')}:\n${r.breaks.map((b) => `  (${b.property}) ${b.what}`).join('\n')}\nthe case (features: ${r.case.features.join(', ')}):\n${r.case.text}`
}

export async function check(c: Case, o: { url: string; trials: number; dir: string }): Promise<void> {
  const r = await checkCase(c, { databaseUrl: o.url, trials: o.trials, dir: o.dir, stepTimeoutMs: 5000 })
  const failure = verdictOf(r)
  assert.equal(failure, null, failure ?? '')
}
