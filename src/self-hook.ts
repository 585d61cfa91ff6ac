// A module resolution hook (node:module register), installed only while race loads a user's .mjs scenario: an
// `import ... from 'racelab'` that cannot be resolved from the module's own folder (racelab is not installed next to
// it) resolves to the race that is running it, so a scenario file works wherever it lies. Where racelab is installed
// next to the module, that copy is used, as Node would.
let self = ''

export function initialize(data: { self: string }): void {
  self = data.self
}

type Next = (specifier: string, context: unknown) => Promise<{ url: string }>

export async function resolve(specifier: string, context: unknown, next: Next): Promise<{ url: string; shortCircuit?: boolean }> {
  try {
    return await next(specifier, context)
  } catch (e) {
    if (specifier === 'racelab' && (e as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && self) return { url: self, shortCircuit: true }
    throw e
  }
}
