// The one reader and printer of permutations, as PostgreSQL's isolation tests write interleavings:
// "s1.begin s2.begin s1.check s2.check s1.insert(wait) ...". Pure: no connection, no engine.
import { UsageError } from './errors.js'

export interface Token {
  session: string
  step: string
  /** `s1.lock(wait)`: wait for the step to end even if it is seen blocked (its wait ends by itself). */
  await: boolean
}

export interface Entry {
  session: number
  step: number
  await?: boolean
  /**
   * `s1.ins:commit`: the commit point of step `step`, a statement that would commit by itself (autocommit). The step
   * then runs in a transaction race opens for it (nothing else sees its writes yet), and commits here.
   */
  commit?: boolean
  /**
   * race explore's points of a step split into points (engine/points.ts): how this point is named after the step
   * (`/2`, `:snapshot`, `/2:snapshot`; '' for the first statement after a snapshot point). With `part`, a later point
   * of step `step`, not its launch; without, the step's launch, named so (`s1.a1:snapshot`).
   */
  suffix?: string
  part?: boolean
}

/** A point of a step split into points, after the step's name: `/2`, `:snapshot`, `/2:snapshot`. */
export const PART_POINT = /^(.*?)((?:\/[1-9][0-9]*)?(?::snapshot)?)$/

/** The suffix that names a step's own commit point in a permutation: `s1.ins:commit`. */
export const COMMIT_POINT = ':commit'

export interface Named {
  name: string
  steps: readonly { name: string }[]
}

/** Splits a permutation into session.step tokens; anything else is bad input. */
export function tokenize(text: string, example = 's1.begin'): Token[] {
  const raw = String(text).trim().split(/[\s,]+/).filter(Boolean)
  if (!raw.length) throw new UsageError(`the permutation is empty: list steps like "s1.begin s2.begin s1.check ..."`)
  return raw.map((tok) => {
    const w = /^(.*)\(wait\)$/.exec(tok)
    const m = /^([^.()]+)\.([^.()]+)$/.exec(w ? w[1] : tok)
    if (!m) throw new UsageError(`'${tok}' in the permutation is not session.step (for example ${example})`)
    return { session: m[1], step: m[2], await: Boolean(w) }
  })
}

/**
 * Parses and checks a permutation against the sessions of a run: every step of every session exactly once,
 * in the session's own order. Anything else is bad input, refused before any connection opens.
 */
export function parsePermutation(text: string, sessions: readonly Named[]): Entry[] {
  const example = `${sessions[0]?.name ?? 's1'}.${sessions[0]?.steps[0]?.name ?? 'begin'}`
  const raw = String(text).trim().split(/[\s,]+/).filter(Boolean)
  if (!raw.length) tokenize('', example)
  const next = sessions.map(() => 0)
  const names = sessions.map((s) => s.name)
  const out: Entry[] = []
  // Token by token, so the first thing wrong is the one reported.
  for (const r of raw) {
    const [t] = tokenize(r, example)
    const tok = `${t.session}.${t.step}${t.await ? '(wait)' : ''}`
    const si = names.indexOf(t.session)
    if (si < 0) throw new UsageError(`the permutation names session '${t.session}', but this run has ${names.join(', ')}`)
    const steps = sessions[si].steps.map((x) => x.name)
    if (t.step.endsWith(COMMIT_POINT) && !steps.includes(t.step)) {
      // The commit point of the session's step just before it (a statement that commits by itself).
      const base = t.step.slice(0, -COMMIT_POINT.length)
      const k = steps.indexOf(base)
      if (k < 0) throw new UsageError(`session ${t.session} has no step '${base}' (in ${tok}): its steps are ${steps.join(' ')}`)
      const last = out.filter((e) => e.session === si).at(-1)
      if (!last || last.step !== k || last.commit) throw new UsageError(`${tok} must come after ${t.session}.${base} and before the session's next step: it is that step's commit point`)
      out.push({ session: si, step: k, commit: true, ...(t.await ? { await: true } : {}) })
      continue
    }
    // A point of a step split into points: `s1.a1/2`, `s1.a1:snapshot` (its launch, when it is the step's first),
    // and the step's own name after its snapshot point (the statement the snapshot was taken for).
    const mine = out.filter((e) => e.session === si).at(-1)
    const afterSnapshot = mine && !mine.commit && steps[mine.step] === t.step && Boolean(mine.suffix?.endsWith(':snapshot'))
    if (afterSnapshot || !steps.includes(t.step)) {
      const [, base, suffix] = PART_POINT.exec(t.step)!
      const k = steps.indexOf(base)
      if (k < 0 || (!suffix && !afterSnapshot)) throw new UsageError(`session ${t.session} has no step '${base}'${base !== t.step ? ` (in ${tok})` : ''}: its steps are ${steps.join(' ')}`)
      const wait = t.await ? { await: true } : {}
      if (suffix === ':snapshot' && k === next[si]) {
        next[si]++
        out.push({ session: si, step: k, suffix, ...wait })
        continue
      }
      if (!mine || mine.step !== k || mine.commit) throw new UsageError(`${tok} must come after ${t.session}.${base} and before the session's next step: it is a later point of that step`)
      out.push({ session: si, step: k, part: true, suffix, ...wait })
      continue
    }
    const k = steps.indexOf(t.step)
    if (k < 0) throw new UsageError(`session ${t.session} has no step '${t.step}': its steps are ${steps.join(' ')}`)
    if (k < next[si]) throw new UsageError(`${tok} appears twice in the permutation (each step runs once)`)
    if (k > next[si]) throw new UsageError(`${tok} comes before ${t.session}.${steps[next[si]]}: a session's steps run in its own order`)
    next[si]++
    out.push({ session: si, step: k, ...(t.await ? { await: true } : {}) })
  }
  const missing = sessions.flatMap((s, i) => s.steps.slice(next[i]).map((x) => `${s.name}.${x.name}`))
  if (missing.length) throw new UsageError(`the permutation leaves out ${missing.join(' ')}: every step of every session must appear once`)
  return out
}

/** The text of a permutation, as parsePermutation reads it. */
export function formatPermutation(entries: readonly Entry[], sessions: readonly Named[]): string {
  return entries.map((e) => `${sessions[e.session].name}.${sessions[e.session].steps[e.step].name}${e.suffix ?? ''}${e.commit ? COMMIT_POINT : ''}${e.await ? '(wait)' : ''}`).join(' ')
}

/** Lockstep: step k of every session before step k+1 of any. */
export function lockstepOrder(sessions: readonly Named[]): Entry[] {
  const out: Entry[] = []
  const longest = Math.max(0, ...sessions.map((s) => s.steps.length))
  for (let k = 0; k < longest; k++) {
    sessions.forEach((s, i) => {
      if (k < s.steps.length) out.push({ session: i, step: k })
    })
  }
  return out
}

/** Serial: every step of the first session, then every step of the next, ... */
export function serialOrder(sessions: readonly Named[]): Entry[] {
  return sessions.flatMap((s, i) => s.steps.map((_, k) => ({ session: i, step: k })))
}
