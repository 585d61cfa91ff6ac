// Where scenarios come from: every module in scenarios/ (files starting with _ are shared fixtures), found
// on disk, so that adding a scenario is adding one file. Ordered as the two articles tell them.
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { UsageError } from './errors.js'
import { closest } from './parse.js'
import type { Scenario, Source } from './scenario.js'
import { isScenarioPath, loadScenarioFile } from './spec/load.js'

const DIR = fileURLToPath(new URL('../scenarios/', import.meta.url))

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

async function load(id: string): Promise<Scenario> {
  const mod = (await import(new URL(`../scenarios/${id}.js`, import.meta.url).href)) as { default?: Scenario }
  const s = mod.default
  if (!s || typeof s !== 'object' || s.id !== id) throw new Error(`scenarios/${id}: its default export must be defineScenario({ id: '${id}', ... })`)
  return s
}

let all: Promise<Scenario[]> | undefined

/** Every built-in scenario, in the articles' order. */
export function scenarios(): Promise<Scenario[]> {
  all ??= Promise.all(scenarioIds().map(load)).then((list) => list.sort(bySource))
  return all
}

/** One built-in scenario by id, or a user's own file (a .spec, or a .mjs module); an unknown id is bad input with a suggestion. */
export async function findScenario(id: string): Promise<Scenario> {
  if (isScenarioPath(id)) return loadScenarioFile(id)
  const ids = scenarioIds()
  if (ids.includes(id)) return load(id)
  const near = closest(id, ids)
  throw new UsageError(`unknown scenario '${id}'${near ? `: did you mean '${near}'?` : ''} (race list shows them all)`)
}
