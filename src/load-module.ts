// A module race does not carry in its own code (a user's scenario or race module, a driver package, tsx, the
// PostgreSQL binaries' package, a built-in scenario file): imported here, and only here. bin/race runs the CLI as one
// file compiled from V8's code cache (src/start.ts), where a dynamic import() of the file's own cannot run: start.ts
// then lends its own import under HOOK. A bare name resolves from race's own folder either way.
const HOOK = Symbol.for('racelab.importModule')

export function importModule<T = unknown>(specifier: string): Promise<T> {
  const lent = (globalThis as Record<symbol, ((s: string) => Promise<unknown>) | undefined>)[HOOK]
  return (lent ? lent(specifier) : import(specifier)) as Promise<T>
}
