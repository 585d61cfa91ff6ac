// Loading a user's own scenario by path: a spec file (compiled by spec/scenario.ts) or a JavaScript module
// whose default export is defineScenario({...}) from the package's public entry (`import { defineScenario }
// from 'race'`). Either way it is checked with checkScenario before anything connects.
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { UsageError } from '../errors.js'
import { checkScenario, sessionCount } from '../plan.js'
import { defaultParams, type Scenario } from '../scenario.js'
import { readSpec } from './files.js'
import { specToScenario } from './scenario.js'
import { appScenario, isAppRace } from '../app/scenario.js'

export { isScenarioPath } from '../registry.js'

/** The leading comment lines of a spec (its story): '# ' removed, '# env:' lines left out. */
export function leadingComments(file: string): string[] {
  const out: string[] = []
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('#')) {
      if (line.trim() === '' && !out.length) continue
      break
    }
    const text = line.replace(/^#\s?/, '')
    if (!/^env:/.test(text)) out.push(text)
  }
  return out
}

const loaded = new Map<string, Promise<Scenario>>()

export function loadScenarioFile(file: string): Promise<Scenario> {
  const abs = path.resolve(file)
  let p = loaded.get(abs)
  if (!p) {
    p = load(file, abs)
    loaded.set(abs, p)
  }
  return p
}

async function load(file: string, abs: string): Promise<Scenario> {
  if (!fs.existsSync(abs)) throw new UsageError(`${file}: no such file (a scenario is a built-in id from race list, a .spec file or a .mjs module)`)
  if (file.endsWith('.spec')) return specToScenario(readSpec(file), leadingComments(file))
  if (!/\.(mjs|js)$/.test(file)) throw new UsageError(`${file}: race runs .spec files and .mjs modules (default export: defineScenario({...}))`)
  let mod: { default?: unknown }
  try {
    mod = (await import(pathToFileURL(abs).href)) as { default?: unknown }
  } catch (e) {
    const code = (e as { code?: string }).code
    if (code === 'ERR_MODULE_NOT_FOUND' && /'race'/.test((e as Error).message)) {
      throw new UsageError(`${file} imports 'race', which is not installed where the module is: npm install race (or link it) next to it`)
    }
    throw new UsageError(`${file} could not be loaded: ${(e as Error).message.split('\n')[0]}`)
  }
  if (isAppRace(mod.default)) return appScenario(mod.default, file)
  const s = mod.default as Scenario | undefined
  if (!s || typeof s !== 'object' || typeof s.id !== 'string' || typeof s.sessions !== 'function') {
    throw new UsageError(`${file}: its default export must be defineScenario({ id, title, sessions, invariant, documented, ... }) from 'race'`)
  }
  const scenario: Scenario = { ...s, source: s.source ?? { article: 'file', section: file }, story: s.story ?? [], params: s.params ?? {} }
  const problems = checkScenario(scenario, defaultParams(scenario), sessionCount(scenario).default)
  if (problems.length) throw new UsageError(`${file}: scenario ${scenario.id} is not sound: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`)
  return scenario
}
