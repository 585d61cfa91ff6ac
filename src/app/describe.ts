// What an application race makes of an error its function threw: a rejection the race module declares, or a
// failure of the code under test, named by its class and message.
import type { AppRace } from './types.js'

/**
 * Whether an error the function threw is one the race module declares as the application's rejection (`rejects`):
 * an instance of a declared class, or an error whose class has a declared class's name (the module's copy of the class
 * may not be the application's), or what the predicate accepts. Anything else is a failure of the code under test.
 */
export function isDeclaredRejection(race: Pick<AppRace, 'rejects'>, err: unknown): boolean {
  const r = race.rejects
  if (!r) return false
  if (!Array.isArray(r)) {
    try {
      return Boolean((r as (e: unknown) => boolean)(err))
    } catch {
      return false
    }
  }
  if (!err || typeof err !== 'object') return false
  const names = new Set<string>()
  for (let p = Object.getPrototypeOf(err); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    if (typeof p.constructor?.name === 'string') names.add(p.constructor.name)
  }
  if (typeof (err as Error).name === 'string') names.add((err as Error).name)
  return (r as readonly (abstract new (...a: unknown[]) => unknown)[]).some((c) => {
    try {
      if (err instanceof c) return true
    } catch {
      // not a class: the name still counts
    }
    return typeof c.name === 'string' && c.name !== '' && c.name !== 'Error' && names.has(c.name)
  })
}

/** An error's class and message, as a failure names it: "TypeError: x is not a function". */
export function describeThrown(err: unknown): string {
  if (err && typeof err === 'object') {
    const name = (err as Error).constructor?.name && (err as Error).constructor.name !== 'Object' ? (err as Error).constructor.name : (err as Error).name
    const msg = (err as Error).message
    return `${name ?? 'Error'}${msg !== undefined ? `: ${msg}` : ''}`
  }
  return `${typeof err} ${String(err)}`
}
