// A module race does not carry in its own code (a user's scenario or race module, a driver package, tsx, the
// PostgreSQL binaries' package, a built-in scenario file, a Node built-in loaded only when needed): imported here, and
// only here. bin/race runs the CLI as one file compiled from V8's code cache (src/start.ts), where a dynamic import()
// of the file's own cannot run: start.ts then lends its own import (lendImport). A bare name resolves from race's own
// folder either way.
const HOOK = Symbol.for('racelab.importModule')

/** Makes importModule use `load` (start.ts's own import), in this copy of race's code and in the bundle's alike. */
export function lendImport(load: (specifier: string) => Promise<unknown>): void {
  ;(globalThis as Record<symbol, unknown>)[HOOK] = load
}

export function importModule<T = unknown>(specifier: string): Promise<T> {
  const lent = (globalThis as Record<symbol, ((s: string) => Promise<unknown>) | undefined>)[HOOK]
  return (lent ? lent(specifier) : import(specifier)) as Promise<T>
}
