// Loading a user's own scenario by path: a spec file (compiled by specfile/scenario.ts) or a JavaScript module
// whose default export is defineScenario({...}) from the package's public entry (`import { defineScenario }
// from 'racelab'`). A module's shape is checked field by field first (one line per mistake, exit 2), then with
// checkScenario, before anything connects.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire, register } from 'node:module'
import { pathToFileURL } from 'node:url'
import { UsageError } from './errors.js'
import { SRC } from './home.js'
import { importModule } from './load-module.js'
import { checkScenario, sessionCount } from './plan.js'
import { defaultParams, type Scenario } from './scenario.js'
import { recordFile } from './digest.js'
import { readScenarioBytes } from './specfile/files.js'
import { parseSpec } from './specfile/parse.js'
import { specToScenario } from './specfile/scenario.js'
import { appScenario, isAppRace } from './app/scenario.js'

/** The leading comment lines of a spec (its story): '# ' removed, '# env:' lines left out. */
export function leadingComments(text: string): string[] {
  const out: string[] = []
  for (const line of text.split('\n')) {
    if (!line.startsWith('#')) {
      if (line.trim() === '' && !out.length) continue
      break
    }
    const text = line.replace(/^#\s?/, '')
    if (!/^env:/.test(text)) out.push(text)
  }
  return out
}

/**
 * Scenario files loaded in this process, by absolute path, with the size and modification time they had: a spec whose
 * file changed since (a test runner that watches the files, a long-lived process) is read again. A module stays as
 * first imported: Node's module cache keeps it for the process.
 */
const loaded = new Map<string, { stamp: string; scenario: Promise<Scenario> }>()

function stampOf(abs: string): string {
  try {
    const st = fs.statSync(abs)
    return `${st.size}:${st.mtimeMs}:${st.ino}`
  } catch {
    return 'missing'
  }
}

export function loadScenarioFile(file: string): Promise<Scenario> {
  const abs = path.resolve(file)
  const stamp = file.endsWith('.spec') ? stampOf(abs) : ''
  const had = loaded.get(abs)
  if (had && had.stamp === stamp) return had.scenario
  const scenario = load(file, abs)
  loaded.set(abs, { stamp, scenario })
  return scenario
}

async function load(file: string, abs: string): Promise<Scenario> {
  if (!fs.existsSync(abs)) throw new UsageError(`${file}: no such file (a scenario is a built-in id from race list, a .spec file, a .mjs module or a TypeScript module)`)
  // Not a regular file (a FIFO, a device, a directory) or too big: refused before anything reads or imports it.
  const bytes = readScenarioBytes(file)
  if (file.endsWith('.spec')) return recordFile(specToScenario(parseSpec(bytes.toString('latin1'), file), leadingComments(bytes.toString('utf8'))), bytes)
  if (!/\.(mjs|js|ts|mts)$/.test(file)) throw new UsageError(`${file}: race runs .spec files, .mjs modules and TypeScript modules (.ts, .mts) (default export: defineScenario({...}) or defineAppRace({...}))`)
  let mod: { default?: unknown }
  // A TypeScript module (and the user's TypeScript code it imports) is loaded through tsx, looked up only then. A
  // test runner with a module system of its own (Jest) refuses module hooks, tsx's too: there the runner's own
  // transform may compile it (docs/app-races.md), and tsx's refusal is the answer only if the runner's import fails.
  let noTsx: UsageError | undefined
  if (/\.m?ts$/.test(file)) {
    try {
      await typescript(file, abs)
    } catch (e) {
      resolveSelf()
      if (!(e instanceof UsageError) || !hooksRefused) throw e
      noTsx = e
    }
  }
  try {
    resolveSelf()
    mod = (await importModule<{ default?: unknown }>(pathToFileURL(abs).href))
  } catch (e) {
    const why = (e as Error).message.split('\n')[0]
    if (noTsx) throw new UsageError(`${file}: a TypeScript race module here (a test runner that refuses module hooks, as Jest does) is compiled by the runner's own transform, and importing it failed (${why.slice(0, 120)}): give the runner a transform for .ts files (docs/app-races.md) or give race the compiled .mjs`)
    throw new UsageError(`${file} could not be loaded: ${why}`)
  }
  return recordFile(userScenario(mod.default, file, true), bytes)
}

let tsx: Promise<void> | undefined
/**
 * Registers tsx's module hooks (once, for the process), from the user's project (beside the module) or race's own
 * copy: tsx strips the types (esbuild, no type check) of .ts/.mts/.cts files as they are imported, and resolves the
 * `./orders.js` that TypeScript code writes for `./orders.ts`. A process that loads no TypeScript module never loads it.
 */
function typescript(file: string, abs: string): Promise<void> {
  tsx ??= (async () => {
    let api: { register(): unknown } | undefined
    try {
      // The ESM entry of the user's tsx (require.resolve would give its CommonJS one): read from its exports map.
      const pkg = createRequire(abs).resolve('tsx/package.json')
      const entry = (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports['./esm/api'].import.default
      api = await importModule<{ register(): unknown }>(pathToFileURL(path.join(path.dirname(pkg), entry)).href)
    } catch {
      try {
        api = await importModule<{ register(): unknown }>('tsx/esm/api')
      } catch {
        api = undefined
      }
    }
    if (!api) {
      tsx = undefined
      throw new UsageError(`${file}: a TypeScript race module is loaded through tsx, which is not installed: npm install --save-dev tsx (or compile it and give race the .mjs)`)
    }
    try {
      api.register()
    } catch (e) {
      tsx = undefined
      // A test runner with a module system of its own (Jest) refuses module hooks.
      throw new UsageError(`${file}: tsx's module hooks could not be registered here (${(e as Error).message.split('\n')[0].slice(0, 120)}): give race the compiled .mjs`)
    }
  })()
  return tsx
}

let hooked = false
/** This process refuses module hooks (module.register threw): a test runner with a module system of its own (Jest). */
let hooksRefused = false
/** `import ... from 'racelab'` in a user's module resolves to this race when racelab is not installed next to it. */
function resolveSelf(): void {
  if (hooked) return
  hooked = true
  try {
    register(new URL('self-hook.js', SRC).href, { data: { self: new URL('index.js', SRC).href } })
  } catch {
    hooksRefused = true
    // A test runner with a module system of its own (Jest) refuses module hooks: there racelab is installed in the
    // project, and its resolver finds it by name.
  }
}

/**
 * A user's scenario (a module's default export, or an object handed to the API's run()), checked: its shape field
 * by field, each mistake one line naming the field and the fix, then its soundness (checkScenario). `where` names it
 * in the messages (the file's path).
 */
export function userScenario(value: unknown, where: string, fromFile = false): Scenario {
  // An application race (src/app): the user's own function, its queries the steps. Loaded from its file, race explore
  // can import that file again in each session's worker (isolated sessions); an object handed over cannot be.
  if (isAppRace(value)) return appScenario(value, where, { isolated: fromFile })
  const bad = (what: string) => new UsageError(`${where}: ${what}`)
  if (!value || typeof value !== 'object') {
    throw bad(`its default export must be defineScenario({ id, sessionCount, setup, sessions, invariant, documented }) from 'racelab', got ${describe(value)}`)
  }
  const s = value as Record<string, unknown>
  for (const k of shapeProblems(s)) throw bad(k)
  const scenario = {
    ...(s as unknown as Scenario),
    title: typeof s.title === 'string' ? s.title : String(s.id),
    source: (s.source as Scenario['source']) ?? { article: 'file', section: where },
    story: (s.story as string[]) ?? [],
    params: (s.params as Scenario['params']) ?? {},
    isolation: (s.isolation as Scenario['isolation']) ?? 'read committed',
  }
  let problems: string[]
  try {
    problems = checkScenario(scenario, defaultParams(scenario), sessionCount(scenario).default)
  } catch (e) {
    problems = [`checking it threw: ${(e as Error)?.message ?? e}`]
  }
  if (problems.length) throw bad(`scenario ${scenario.id} is not sound: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`)
  return scenario
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing (export default defineScenario({...}))'
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'string') return `a string ('${v.length > 30 ? v.slice(0, 30) + '...' : v}')`
  return `a ${typeof v}`
}

/** The fields a scenario must have, by type, with the fix for each mistake; the first problem is reported. */
function shapeProblems(s: Record<string, unknown>): string[] {
  const out: string[] = []
  if (typeof s.id !== 'string' || !s.id) out.push(`id is ${describe(s.id)}: give it a kebab-case name, e.g. id: 'double-booking'`)
  const count = s.sessionCount as Record<string, unknown> | undefined
  if (count === undefined) out.push(`sessionCount is missing: say how many sessions it runs, e.g. sessionCount: { default: 2 } (add min and max to allow --n)`)
  else if (typeof count !== 'object' || count === null || !Number.isInteger(count.default) || (count.default as number) < 1) {
    out.push(`sessionCount must be { default: <whole number>, min?, max? }, got ${JSON.stringify(count)}`)
  } else {
    for (const k of ['min', 'max'] as const) if (count[k] !== undefined && !Number.isInteger(count[k])) out.push(`sessionCount.${k} must be a whole number, got ${describe(count[k])}`)
  }
  if (typeof s.setup === 'string') out.push(`setup must be a list of SQL statements, one string each (setup: ['create table ...', 'insert ...']), got one string`)
  else if (s.setup !== undefined && typeof s.setup !== 'function' && !(Array.isArray(s.setup) && s.setup.every((x) => typeof x === 'string'))) {
    out.push(`setup must be a list of SQL strings (or a function of the variant returning one), got ${describe(s.setup)}`)
  }
  if (typeof s.sessions !== 'function') {
    out.push(`sessions must be a function of the variant returning the sessions by name, e.g. sessions: (v) => replicate(v.n, { steps: {...} }), got ${describe(s.sessions)}`)
  }
  const inv = s.invariant as Record<string, unknown> | undefined
  if (!inv || typeof inv !== 'object') out.push(`invariant is ${describe(inv)}: give { description: '...', sql: 'select <boolean> as held ...' }`)
  else {
    if (typeof inv.sql !== 'string' && typeof inv.sql !== 'function') out.push(`invariant.sql must be SQL returning a boolean column held, got ${describe(inv.sql)}`)
    if (typeof inv.description !== 'string' && typeof inv.description !== 'function') out.push(`invariant.description must say what must hold, e.g. 'at most one order per user', got ${describe(inv.description)}`)
  }
  const doc = s.documented as Record<string, unknown> | undefined
  if (s.expects === undefined && (!doc || typeof doc !== 'object' || !Object.keys(doc).length)) {
    out.push(`documented is ${describe(doc)}: say what the server is documented to do, e.g. documented: { postgres: { lockstep: anomaly('...', { s1: 'committed', s2: 'committed' }), serial: clean('...', {...}) } }`)
  }
  if (s.setup === undefined) out.push(`setup is missing: the SQL that creates its tables, e.g. setup: ['create table orders (...)'] (an empty list when it needs none)`)
  if (s.params !== undefined && (typeof s.params !== 'object' || s.params === null || Array.isArray(s.params))) out.push(`params must be an object of param declarations, got ${describe(s.params)}`)
  return out
}
