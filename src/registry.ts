// Where scenarios come from: every module in scenarios/ (_shared/ holds the code they share, not a scenario), found
// on disk, so that adding a scenario is adding one file. Ordered as the two articles tell them.
//
// What list, show, run and help need of every scenario (its summary: id, title, source, where it runs, its
// params) comes from an index, dist/scenarios/index.json, written by the build (scripts/scenario-index.ts), so
// that they do not load every scenario module. The index carries a fingerprint of the files it was made from
// (their sizes and mtimes, and a hash of their contents); when it is missing or does not match (a scenario was
// added or edited and only tsc ran), the modules are loaded and the index is written again.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { UsageError } from './errors.js'
import { carryDigest, fileDigest, sha256 } from './digest.js'
import type { OracleName } from './engine/oracle.js'
import { SRC } from './home.js'
import { importModule } from './load-module.js'
import { closest } from './parse.js'
import type { Engine, ParamSpec, Scenario, Source } from './scenario.js'

const SCENARIOS = new URL('../scenarios/', SRC)
const DIR = fileURLToPath(SCENARIOS)
/** The index of the built-in scenarios' summaries (dist/scenarios/index.json). */
export const INDEX_FILE = path.join(DIR, 'index.json')
/** Bumped when the summary's shape or how it is computed changes: an index of another version is stale. */
const INDEX_VERSION = 1

/** The two articles race comes from, by their English titles. */
export const ARTICLES: Record<Exclude<Source['article'], 'file'>, string> = {
  'advisory-locks': 'PostgreSQL advisory locks in practice: serializing the check-then-insert race that FOR UPDATE cannot prevent, with pg_advisory_xact_lock',
  'isolation-levels': 'Isolation levels',
}

/** The isolation-levels article's sections, in its order (its headings are not numbered). */
export const ISOLATION_SECTIONS = [
  'Anomalies: dirty read',
  'Anomalies: non-repeatable read (read skew)',
  'Anomalies: phantom read',
  'Anomalies: write skew',
  'Anomalies: lost update',
  'MVCC internals',
  'Lock internals: InnoDB gap locks',
  'Lock internals: PostgreSQL predicate locks (SSI)',
  'Lock internals: deadlock detection',
  'SSI: retrying serialization failures',
  'Application patterns: SKIP LOCKED queue workers',
  'Application patterns: optimistic locking with a version column',
  'Application patterns: read-modify-write and its fixes',
  'Common pitfalls: 1. isolation level leaking through a connection pool',
  'Common pitfalls: 2. MySQL REPEATABLE READ does not prevent write skew',
  'Common pitfalls: 3. long transactions block VACUUM',
] as const

/** "advisory-locks article §4.1" / "isolation-levels article, Anomalies: write skew". */
export function sourceText(s: Source): string {
  if (s.article === 'file') return `file ${s.section}`
  return s.article === 'advisory-locks' ? `advisory-locks article §${s.section}` : `isolation-levels article, ${s.section}`
}

function sourceKey(s: Source): [number, number[]] {
  if (s.article === 'file') return [2, []]
  if (s.article === 'advisory-locks') return [0, s.section.split('.').map((x) => Number.parseInt(x, 10) || 0)]
  const at = (ISOLATION_SECTIONS as readonly string[]).indexOf(s.section)
  return [1, [at < 0 ? ISOLATION_SECTIONS.length : at]]
}

function bySource(a: Scenario, b: Scenario): number {
  const [x, xs] = sourceKey(a.source)
  const [y, ys] = sourceKey(b.source)
  if (x !== y) return x - y
  for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
    const d = (xs[i] ?? -1) - (ys[i] ?? -1)
    if (d) return d
  }
  return 0
}

/** The ids of the built-in scenarios (file names), without loading them. */
export function scenarioIds(): string[] {
  return fs
    .readdirSync(DIR)
    .filter((f) => f.endsWith('.js') && !f.startsWith('_') && f !== 'index.js')
    .map((f) => f.slice(0, -3))
    .sort()
}

/** The scenario objects race loaded from its own scenarios/ folder: their SQL is race's, not a user's. */
const BUILT_IN = new WeakSet<Scenario>()

/**
 * Whether `s` is one of race's own scenarios, by identity (the object the registry loaded), never by a field a
 * user's module or object could set: only then does its SQL run as the control role (no run role, db/run-role.ts).
 */
export function isBuiltIn(s: Scenario): boolean {
  return BUILT_IN.has(s)
}

/**
 * The scenario judged by `oracle` too (--oracle serial, engine/oracle.ts): a copy that is still what `s` was (a
 * built-in, read from the same file), so that it runs and is named as `s` does.
 */
export async function judgedBy(s: Scenario, oracle: OracleName | undefined): Promise<Scenario> {
  // Loaded only when asked for: race list and race show load no engine module (test/cli/lazy-start).
  if (oracle === undefined) return s
  const t = (await import('./engine/oracle.js')).withOracle(s, oracle)
  if (t === s) return s
  if (BUILT_IN.has(s)) BUILT_IN.add(t)
  carryDigest(s, t)
  return t
}

/**
 * The SHA-256 of the race's text: the file a spec or module was loaded from; a built-in's module file; else (an
 * object given to explore()) its definition, functions as their source text.
 */
export function raceDigest(s: Scenario): string {
  const file = fileDigest(s)
  if (file) return file
  if (isBuiltIn(s)) {
    try {
      return sha256(fs.readFileSync(new URL(`${s.id}.js`, SCENARIOS)))
    } catch {
      /* its file gone since it was loaded: its definition */
    }
  }
  try {
    return sha256(JSON.stringify(s, (_k, v: unknown) => (typeof v === 'function' || typeof v === 'bigint' ? String(v) : v)))
  } catch {
    return sha256(`${s.id}`)
  }
}

async function load(id: string): Promise<Scenario> {
  const mod = await importModule<{ default?: Scenario }>(new URL(`${id}.js`, SCENARIOS).href)
  const s = mod.default
  if (!s || typeof s !== 'object' || s.id !== id) throw new Error(`scenarios/${id}: its default export must be defineScenario({ id: '${id}', ... })`)
  BUILT_IN.add(s)
  return s
}

let all: Promise<Scenario[]> | undefined

/** Every built-in scenario, in the articles' order (loads every scenario module). */
export function scenarios(): Promise<Scenario[]> {
  all ??= Promise.all(scenarioIds().map(load)).then((list) => list.sort(bySource))
  return all
}

/**
 * What list, help and the param flags need of a scenario, without its module: plain data (JSON in the index).
 * `unavailable`: for each engine it does not run on, the one-line reason (plan.unavailableOn's).
 */
export interface ScenarioSummary {
  id: string
  title: string
  source: Source
  runsOn: Engine[]
  unavailable: Partial<Record<Engine, string>>
  params: Record<string, ParamSpec>
}

const ENGINES: readonly Engine[] = ['postgres', 'mysql']

/** A scenario's summary (the same reason text as plan.unavailableOn, which this must agree with: a test checks). */
export function summaryOf(s: Scenario): ScenarioSummary {
  const runsOn = ENGINES.filter((e) => s.documented[e])
  const unavailable: Partial<Record<Engine, string>> = {}
  for (const e of ENGINES) {
    if (!s.documented[e]) unavailable[e] = s.unavailable?.[e] ?? `documents nothing for ${e === 'mysql' ? 'MySQL/MariaDB (InnoDB)' : e}`
  }
  return { id: s.id, title: s.title, source: s.source, runsOn, unavailable, params: s.params }
}

interface IndexFile {
  version: number
  /** Every file the summaries come from: relative path -> [size, mtimeMs]. */
  files: Record<string, [number, number]>
  /** sha256 of those files' contents, in path order: the index stays valid when only mtimes changed (a copy, npm pack). */
  hash: string
  scenarios: ScenarioSummary[]
}

/** The files a summary depends on: every scenario module and the code they share (_shared/), and the race modules that shape it. */
function sources(): string[] {
  const out: string[] = []
  const walk = (dir: string, rel: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(dir, e.name), `${rel}${e.name}/`)
      else if (e.name.endsWith('.js')) out.push(`scenarios/${rel}${e.name}`)
    }
  }
  walk(DIR, '')
  out.push('src/registry.js', 'src/scenario.js', 'src/plan.js')
  return out.sort()
}

const distPath = (rel: string) => path.join(DIR, '..', rel)

function statAll(files: readonly string[]): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {}
  for (const f of files) {
    const st = fs.statSync(distPath(f))
    out[f] = [st.size, st.mtimeMs]
  }
  return out
}

async function hashAll(files: readonly string[]): Promise<string> {
  // node:crypto only when it is needed (mtimes that do not match, or writing the index): not at every start.
  const { createHash } = await importModule<typeof import('node:crypto')>('node:crypto')
  const h = createHash('sha256')
  for (const f of files) h.update(f).update('\0').update(fs.readFileSync(distPath(f))).update('\0')
  return h.digest('hex')
}

/** How the index stands: fresh (its fingerprint matches the files), or stale/missing/unreadable with why. */
export async function indexState(): Promise<{ fresh: true; index: IndexFile } | { fresh: false; why: string }> {
  let index: IndexFile
  try {
    index = JSON.parse(fs.readFileSync(INDEX_FILE, 'utf8')) as IndexFile
  } catch (e) {
    return { fresh: false, why: (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable' }
  }
  if (index?.version !== INDEX_VERSION || !Array.isArray(index.scenarios) || !index.files) return { fresh: false, why: 'another version' }
  let files: string[]
  try {
    files = sources()
  } catch {
    return { fresh: false, why: 'the scenario folder could not be read' }
  }
  const known = Object.keys(index.files)
  if (known.length !== files.length || files.some((f, i) => f !== known[i])) return { fresh: false, why: 'the scenario files changed' }
  const now = statAll(files)
  if (files.every((f) => now[f][0] === index.files[f][0] && now[f][1] === index.files[f][1])) return { fresh: true, index }
  if (files.some((f) => now[f][0] !== index.files[f][0]) || (await hashAll(files)) !== index.hash) return { fresh: false, why: 'the scenario files changed' }
  // Same contents, new mtimes (copied, packed, rebuilt unchanged): still fresh; note the mtimes for next time.
  writeIndex({ ...index, files: now })
  return { fresh: true, index }
}

/** Writes the index atomically (a temporary file renamed over it); false when the folder is not writable. */
function writeIndex(index: IndexFile): boolean {
  const tmp = `${INDEX_FILE}.${process.pid}.${Date.now()}.tmp`
  try {
    fs.writeFileSync(tmp, JSON.stringify(index) + '\n')
    fs.renameSync(tmp, INDEX_FILE)
    return true
  } catch {
    fs.rmSync(tmp, { force: true })
    return false
  }
}

/**
 * Loads every scenario module and writes the index from them (the build runs this; so does a stale index).
 * Returns the summaries and whether the index could be written.
 */
export async function rebuildIndex(): Promise<{ scenarios: ScenarioSummary[]; written: boolean }> {
  const files = sources()
  // Fingerprint first: a file changed while loading makes the index stale next time, never wrongly fresh.
  const stats = statAll(files)
  const hash = await hashAll(files)
  const list = (await scenarios()).map(summaryOf)
  return { scenarios: list, written: writeIndex({ version: INDEX_VERSION, files: stats, hash, scenarios: list }) }
}

/** A scenario argument that names a file rather than a built-in scenario. */
export function isScenarioPath(arg: string): boolean {
  return /\.(spec|mjs|js|ts|mts)$/.test(arg) || arg.includes('/') || arg.includes(path.sep)
}

let summaryList: Promise<ScenarioSummary[]> | undefined

/** Every built-in scenario's summary, in the articles' order: from the index, else from the modules (rewriting the index). */
export function summaries(): Promise<ScenarioSummary[]> {
  summaryList ??= (async () => {
    const state = await indexState()
    if (state.fresh) return state.index.scenarios
    return (await rebuildIndex()).scenarios
  })()
  return summaryList
}

/** Starts loading a built-in scenario's module (findScenario loads it again, at no cost); anything else is left alone. */
export function prefetchScenario(id: string): void {
  if (/^[a-z0-9-]+$/.test(id) && fs.existsSync(path.join(DIR, `${id}.js`))) load(id).catch(() => {})
}

/** One built-in scenario by id, or a user's own file (a .spec, or a .mjs module); an unknown id is bad input with a suggestion. */
export async function findScenario(id: string): Promise<Scenario> {
  if (isScenarioPath(id)) return (await import('./load.js')).loadScenarioFile(id)
  const ids = scenarioIds()
  if (ids.includes(id)) return load(id)
  const near = closest(id, ids)
  throw new UsageError(`unknown scenario '${id}'${near ? `: did you mean '${near}'?` : ''} (race list shows them all)`)
}
