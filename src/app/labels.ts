// The labels of an application race's steps, as a permutation names them: s1.q1 (the first query session s1
// sends), s1.check (a point its code marks). Pure: no connection.
import { UsageError } from '../errors.js'

/** What race can make the server do to a session's step instead of running it (--inject; docs/explore.md). */
export const FAULT_CODES = ['40001', '40P01', 'lost'] as const
export type FaultCode = (typeof FAULT_CODES)[number]

/** A fault to inject: its code, and where: a session's COMMIT, or its k-th query. */
export interface Fault {
  code: FaultCode
  site: 'commit' | number
  /** As given: 40001@commit. */
  text: string
}

/**
 * --inject's list: CODE@SITE, comma-separated, where CODE is 40001 (serialization failure), 40P01 (deadlock) or lost
 * (the connection ended), and SITE is commit (a COMMIT the session sends) or k / qk (its k-th query). Each entry is
 * injected at most once per trial (list one twice for two).
 */
export function parseFaults(raw: string, flag = '--inject'): Fault[] {
  const items = String(raw).split(',').map((x) => x.trim())
  if (!items.length || items.some((x) => !x)) throw new UsageError(`${flag} '${raw}' has an empty item: give CODE@SITE items separated by commas, e.g. 40001@commit,lost@2`)
  return items.map((text) => {
    const m = /^([0-9A-Za-z]+)@(commit|q?\d+)$/i.exec(text)
    const code = m?.[1].toUpperCase() === 'LOST' ? 'lost' : m?.[1].toUpperCase()
    if (!m || !(FAULT_CODES as readonly string[]).includes(code!)) {
      throw new UsageError(`${flag} '${text}' is not CODE@SITE: CODE is 40001 (serialization failure), 40P01 (deadlock) or lost (the connection ends); SITE is commit or k (the session's k-th query), e.g. 40001@commit`)
    }
    const site = m[2].toLowerCase() === 'commit' ? 'commit' : Number(m[2].replace(/^q/i, ''))
    if (site !== 'commit' && !(site >= 1)) throw new UsageError(`${flag} '${text}': queries are counted from 1`)
    return { code: code as FaultCode, site, text: `${code}@${site === 'commit' ? 'commit' : site}` }
  })
}

/** Does a fault's site match a session's pending query? */
export function faultAt(f: Fault, label: string, sql: string): boolean {
  return f.site === 'commit' ? /^\s*(commit|end)\b/i.test(sql) : label === `q${f.site}`
}

/** A step label with the fault race injected there: s1.q5!40001; and back. */
export function splitInjected(tok: string): { label: string; inject?: FaultCode } {
  const m = /^(.*)!(40001|40P01|lost)$/i.exec(tok)
  if (!m) return { label: tok }
  return { label: m[1], inject: (m[2].toLowerCase() === 'lost' ? 'lost' : m[2].toUpperCase()) as FaultCode }
}

/**
 * A permutation of application steps: session.q<k> (the k-th query) or session.<point>, checked against the session
 * names. A query may carry the fault race injected there (s1.q5!40001: the line explore prints with --inject).
 */
export function parseAppPermutation(text: string, names: readonly string[]): { session: string; label: string; inject?: FaultCode }[] {
  const toks = String(text).trim().split(/[\s,]+/).filter(Boolean)
  if (!toks.length) throw new UsageError('the permutation is empty: list query labels like "s1.q1 s2.q1 s1.q2 ..." (race show names them)')
  const seen = new Set<string>()
  return toks.map((whole) => {
    const { label: tok, inject } = splitInjected(whole)
    const m = /^([^.()\s]+)\.([A-Za-z_][\w@]*(?:\/\d+)?(?::commit|:snapshot)?)$/.exec(tok)
    if (!m) throw new UsageError(`'${tok}' in the permutation is not session.step (for example s1.q1, the first query of s1, or s1.check, a point)`)
    if (!names.includes(m[1])) throw new UsageError(`the permutation names session '${m[1]}', but this run has ${names.join(', ')}`)
    if (seen.has(tok)) throw new UsageError(`${tok} appears twice in the permutation (each step runs once)`)
    seen.add(tok)
    const q = /^q(\d+)(?::snapshot)?$/.exec(m[2])
    if (q) {
      const k = Number(q[1])
      if (k > 1 && !seen.has(`${m[1]}.q${k - 1}`)) throw new UsageError(`${tok} comes before ${m[1]}.q${k - 1}: a session's queries run in its own order, each named`)
    }
    // s1.q3:commit: the commit point of a query that would commit by itself (race explore splits it), after the query.
    if (m[2].endsWith(':commit') && !seen.has(tok.slice(0, -':commit'.length))) throw new UsageError(`${tok} comes before ${tok.slice(0, -':commit'.length)}: it is that query's commit point`)
    // s1.q3/2: the second statement of a string race runs statement by statement, after the one before it.
    const part = /^(q\d+)\/(\d+)(?::snapshot)?$/.exec(m[2])
    if (part) {
      const k = Number(part[2])
      const prev = k > 2 ? `${m[1]}.${part[1]}/${k - 1}` : `${m[1]}.${part[1]}`
      if (k < 2) throw new UsageError(`${tok}: a string's statements are q3, q3/2, q3/3... (its first is the query's own label)`)
      if (!seen.has(prev)) throw new UsageError(`${tok} comes before ${prev}: a string's statements run in its order`)
    }
    if (inject && !/^q\d+(\/\d+)?(:commit)?$/.test(m[2])) throw new UsageError(`${whole}: a fault is injected into a query (s1.q3!40001), not a point`)
    return { session: m[1], label: tok, ...(inject ? { inject } : {}) }
  })
}
