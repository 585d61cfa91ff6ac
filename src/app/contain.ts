// What the code under test does to the whole process, contained to its session. An application race runs the
// user's function inside race's own process: a process.exit, an uncaught exception or an unhandled rejection from it
// would otherwise end race (exit 0 with no output, or "internal error") and leave the run's schema or embedded
// server behind. While a session's function runs, its async context names the session (underTest): what comes from
// there is that session's failure, the code's, and the run goes on to its report and cleanup.
import { AsyncLocalStorage } from 'node:async_hooks'
import { setContainer } from '../lifecycle.js'
import { describeThrown } from './describe.js'

/** What a session does when the code under test misbehaves process-wide. */
export interface Containable {
  readonly name: string
  /** The code under test failed outside its function's own throw (a process.exit, an uncaught exception). */
  crash(what: string): void
  /** The timers its code started and that have neither fired nor been cleared, each with when it is due (containTimers). */
  readonly timers?: Map<unknown, number>
  /** One of them fired or was cleared. */
  timerEnded?(): void
}

/** The session whose function (or anything it started: timers, promises, callbacks) is running. */
export const underTest = new AsyncLocalStorage<Containable>()

/** The error a contained process.exit throws, so that the code after it does not go on. */
export class ExitContained extends Error {
  readonly code = 'RACE_EXIT_CONTAINED'
  constructor(readonly exitCode: unknown) {
    super(`called process.exit(${exitCode === undefined ? '' : String(exitCode)})`)
  }
}

/**
 * An uncaught exception or unhandled rejection: if it comes from a session's code, that session fails with it and
 * true is returned (handled, race goes on); false otherwise (not the code under test's: whoever else decides).
 */
export function containError(err: unknown, kind: 'uncaught exception' | 'unhandled rejection'): boolean {
  const s = underTest.getStore()
  if (!s) return false
  // A contained process.exit thrown out of a timer or callback was already the session's failure.
  if (err instanceof ExitContained) return true
  s.crash(`${kind} ${describeThrown(err)}`)
  return true
}

// The CLI's process-wide handlers ask this module through lifecycle.ts (contained), once it is loaded.
setContainer(containError)

let installs = 0
let original: typeof process.exit | undefined

/**
 * While the returned release has not been called, process.exit called from a session's code does not exit: the
 * session fails ("called process.exit(0)") and the call throws, so that the code after it does not run. Calls from
 * anywhere else (race's own exit, the caller's code under the API) go to the real process.exit. Nested and
 * concurrent races share one replacement; the last release restores process.exit.
 */
export function containExit(): () => void {
  if (installs++ === 0) {
    const real = process.exit
    original = real
    const contained = function exit(code?: number | string | null): never {
      const s = underTest.getStore()
      if (!s) return real.call(process, code as number)
      const e = new ExitContained(code ?? 0)
      s.crash(e.message)
      throw e
    }
    process.exit = contained as typeof process.exit
  }
  let released = false
  return () => {
    if (released) return
    released = true
    if (--installs === 0 && original) {
      process.exit = original
      original = undefined
    }
  }
}

let timerInstalls = 0
let realTimers: { set: typeof setTimeout; clear: typeof clearTimeout } | undefined

/**
 * While the returned release has not been called, a setTimeout a session's code starts (its function, or anything it
 * started) is noted on the session until it fires or is cleared: a query sent from it after the function returned is
 * then seen in its own trial (the trial waits for such timers, as far as the step timeout), never in the next one's.
 * Timers started anywhere else are the real ones, untouched. Nested and concurrent races share one replacement.
 */
export function containTimers(): () => void {
  if (timerInstalls++ === 0) {
    const real = { set: globalThis.setTimeout, clear: globalThis.clearTimeout }
    realTimers = real
    const owners = new WeakMap<object, Containable>()
    const ended = (t: object) => {
      const s = owners.get(t)
      if (!s) return
      owners.delete(t)
      s.timers!.delete(t)
      s.timerEnded?.()
    }
    const set = function setTimeout(cb: unknown, ms?: number, ...args: unknown[]) {
      const s = underTest.getStore()
      if (!s?.timers || typeof cb !== 'function') return (real.set as (...a: unknown[]) => unknown)(cb, ms, ...args)
      const t = real.set(function (this: unknown, ...a: unknown[]) {
        ended(t)
        return (cb as (...a: unknown[]) => unknown).apply(this, a)
      }, ms, ...args)
      owners.set(t, s)
      s.timers.set(t, Date.now() + Math.max(1, Number(ms) || 0))
      return t
    }
    // util.promisify(setTimeout) keeps working (Node's own custom promisified form).
    const custom = Symbol.for('nodejs.util.promisify.custom')
    const own = (real.set as unknown as Record<symbol, unknown>)[custom]
    if (own) Object.defineProperty(set, custom, { value: own })
    const clear = function clearTimeout(t: unknown) {
      if (t && typeof t === 'object') ended(t)
      return real.clear(t as never)
    }
    globalThis.setTimeout = set as unknown as typeof setTimeout
    globalThis.clearTimeout = clear as typeof clearTimeout
  }
  let released = false
  return () => {
    if (released) return
    released = true
    if (--timerInstalls === 0 && realTimers) {
      globalThis.setTimeout = realTimers.set
      globalThis.clearTimeout = realTimers.clear
      realTimers = undefined
    }
  }
}
