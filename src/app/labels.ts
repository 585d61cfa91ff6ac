// The labels of an application race's steps, as a permutation names them: s1.q1 (the first query session s1
// sends), s1.check (a point its code marks). Pure: no connection.
import { UsageError } from '../errors.js'

/** A permutation of application steps: session.q<k> (the k-th query) or session.<point>; checked against the session names. */
export function parseAppPermutation(text: string, names: readonly string[]): { session: string; label: string }[] {
  const toks = String(text).trim().split(/[\s,]+/).filter(Boolean)
  if (!toks.length) throw new UsageError('the permutation is empty: list query labels like "s1.q1 s2.q1 s1.q2 ..." (race show names them)')
  const seen = new Set<string>()
  return toks.map((tok) => {
    const m = /^([^.()\s]+)\.([A-Za-z_][\w@]*)$/.exec(tok)
    if (!m) throw new UsageError(`'${tok}' in the permutation is not session.step (for example s1.q1, the first query of s1, or s1.check, a point)`)
    if (!names.includes(m[1])) throw new UsageError(`the permutation names session '${m[1]}', but this run has ${names.join(', ')}`)
    if (seen.has(tok)) throw new UsageError(`${tok} appears twice in the permutation (each step runs once)`)
    seen.add(tok)
    const q = /^q(\d+)$/.exec(m[2])
    if (q) {
      const k = Number(q[1])
      if (k > 1 && !seen.has(`${m[1]}.q${k - 1}`)) throw new UsageError(`${tok} comes before ${m[1]}.q${k - 1}: a session's queries run in its own order, each named`)
    }
    return { session: m[1], label: tok }
  })
}
