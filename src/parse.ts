// Parsing and validating user input. Every failure is a UsageError naming the flag, the value and the fix.
import { UsageError } from './errors.js'

export function parseWhole(flag: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const s = String(raw).trim()
  if (!/^[+]?\d+$/.test(s)) {
    throw new UsageError(`${flag} must be a whole number, got '${raw}': for example ${flag} ${Math.max(min, 2)}`)
  }
  const n = Number(s)
  if (n < min) throw new UsageError(`${flag} must be at least ${min}, got ${raw}`)
  if (n > max) throw new UsageError(`${flag} must be at most ${max}, got ${raw}`)
  return n
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000 }
/** The longest duration race accepts anywhere: an hour. Longer is a typo, not an experiment. */
export const MAX_DURATION_MS = 3_600_000

/** '300ms', '2s', '1.5s', '1m', or a bare number of milliseconds. */
export function parseDuration(flag: string, raw: string, opts: { allowZero?: boolean } = {}): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$/.exec(String(raw))
  if (!m) {
    throw new UsageError(`${flag} takes a duration like 300ms, 2s or 1m, got '${raw}'`)
  }
  const ms = Math.round(Number(m[1]) * UNITS[m[2] ?? 'ms'])
  if (ms === 0 && !opts.allowZero) throw new UsageError(`${flag} must be longer than 0, got '${raw}'`)
  if (ms > MAX_DURATION_MS) throw new UsageError(`${flag} must be at most 60m, got '${raw}'`)
  return ms
}

export function formatDuration(ms: number): string {
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0 && ms > 0) return `${ms / 1000}s`
  return `${ms}ms`
}

/** Levenshtein distance, for "did you mean" suggestions. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined
  let bestD = Infinity
  for (const c of candidates) {
    const d = distance(word.toLowerCase(), c.toLowerCase())
    if (d < bestD) {
      bestD = d
      best = c
    }
  }
  return bestD <= Math.max(2, Math.floor(word.length / 2)) ? best : undefined
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = tmp
    }
  }
  return row[b.length]
}
