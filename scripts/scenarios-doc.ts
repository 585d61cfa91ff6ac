// docs/scenarios.md, the scenario reference, is generated from the scenario files (never written by hand, so it
// cannot drift from them): each built-in scenario's title, source, story, sessions, flags, invariant, the engines it
// runs on (or why not), and what each engine is documented to do at its defaults (per isolation level for the rows
// of race matrix). `npm run readme` rewrites it; `node dist/scripts/scenarios-doc.js --check` exits 1 when the
// committed file differs; test/cli/scenarios-doc.test.ts checks the same.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describeDoc } from '../src/judge/index.js'
import { formatDuration } from '../src/parse.js'
import { documentedFor, sessionCount } from '../src/plan.js'
import { ARTICLES, scenarios, sourceText } from '../src/registry.js'
import { defaultParams, type Engine, type ParamSpec, type Scenario } from '../src/scenario.js'
import { levelsOn } from '../src/levels.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const SCENARIOS_DOC = path.join(ROOT, 'docs', 'scenarios.md')

const ENGINE_NAME: Record<Engine, string> = { postgres: 'PostgreSQL', mysql: 'MySQL/MariaDB (InnoDB)' }
/** Markdown table cells: a pipe would end the cell, a newline the row. */
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

function paramDefault(p: ParamSpec): string {
  if (p.kind === 'duration' && typeof p.default === 'number') return formatDuration(p.default)
  if (p.kind === 'boolean') return p.default ? 'on' : 'off'
  return String(p.default)
}

function documentedAt(s: Scenario, engine: Engine): string[] {
  const doc = s.documented[engine]!
  const params = defaultParams(s)
  const n = sessionCount(s).default
  const one = (isolation?: string) => {
    const p = isolation ? { ...params, isolation } : params
    try {
      const ds = documentedFor(s, { params: p, n, engine, schedule: 'lockstep', windowMs: 0 })
      return ds.length ? ds.map((d) => `${describeDoc(d)} (${d.why})`).join('; or ') : 'reported, not documented'
    } catch (e) {
      return `not documented (${(e as Error).message})`
    }
  }
  if (s.expects) return [`the invariant ${s.expects}`]
  if (doc.levels) {
    const levels = [...levelsOn(engine)]
    return levels.filter((l) => (doc.levels as Record<string, unknown>)[l] !== undefined).map((l) => `at ${l.toUpperCase()}: ${one(l)}`)
  }
  return [`step by step (lockstep), at the defaults: ${one()}`]
}

function section(s: Scenario): string[] {
  const out = [`### \`${s.id}\``, '', `${s.title}. From the ${sourceText(s.source)}.`, '']
  for (const line of s.story) out.push(`> ${line}`)
  out.push('')
  const count = sessionCount(s)
  out.push(`- sessions: ${count.min === count.max ? `${count.default} (fixed)` : `${count.default} by default (\`--n\`, ${count.min} to ${count.max.toLocaleString('en-US')})`}`)
  const desc = typeof s.invariant.description === 'function' ? s.invariant.description(defaultParams(s)) : s.invariant.description
  out.push(`- invariant (at the defaults): ${desc}`)
  for (const e of ['postgres', 'mysql'] as const) {
    if (!s.documented[e]) {
      out.push(`- ${ENGINE_NAME[e]}: does not run: ${s.unavailable?.[e] ?? 'documents nothing there'}`)
      continue
    }
    const lines = documentedAt(s, e)
    out.push(`- ${ENGINE_NAME[e]}${e === 'postgres' && s.postgresSince ? ` (${s.postgresSince.major} and later: ${s.postgresSince.why})` : ''}, documented:`)
    for (const l of lines) out.push(`  - ${l}`)
  }
  if (s.pooled) out.push(`- through a pooler (\`--pooler pgbouncer\`): documented, ${(s.pooled.modes ?? ['transaction']).join(', ')} mode`)
  if (s.ownServer) out.push('- runs only on a server race starts for it (the embedded default)')
  const params = Object.values(s.params)
  if (params.length) {
    out.push('', '| flag | what it sets | default |', '| --- | --- | --- |')
    for (const p of params) out.push(`| \`${cell(p.flag)}\` | ${cell(p.description)}${p.choices ? ` (${p.choices.map(cell).join(', ')})` : ''} | ${cell(paramDefault(p))} |`)
  }
  out.push('', `\`./bin/race show ${s.id}\` prints its schema, every step's SQL and the documented outcome for every schedule.`, '')
  return out
}

export async function scenariosDoc(): Promise<string> {
  const all = await scenarios()
  const out = [
    '# Scenario reference',
    '',
    '<!-- Generated from scenarios/*.ts by scripts/scenarios-doc.ts (npm run readme): do not edit by hand. -->',
    '',
    `Every built-in scenario (${all.length}), in the order of the two articles it comes from, as its file in`,
    '`scenarios/` declares it. Flags are given to `race run`, `race show` and `race check`; what a verdict means is in',
    '[how race decides](how-race-decides.md), and the story told to a room in [the workshop guide](workshop.md).',
    '',
  ]
  const groups: [string, Scenario[]][] = [
    [`The advisory-locks article: *${ARTICLES['advisory-locks']}*`, all.filter((s) => s.source.article === 'advisory-locks')],
    [`The isolation-levels article: *${ARTICLES['isolation-levels']}*`, all.filter((s) => s.source.article === 'isolation-levels')],
  ]
  for (const [title, list] of groups) {
    out.push(`## ${title}`, '', list.map((s) => `[\`${s.id}\`](#${s.id})`).join(' · '), '')
    for (const s of list) out.push(...section(s))
  }
  return out.join('\n').replace(/\n+$/, '\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const text = await scenariosDoc()
  if (process.argv.includes('--check')) {
    const same = fs.existsSync(SCENARIOS_DOC) && fs.readFileSync(SCENARIOS_DOC, 'utf8') === text
    process.stderr.write(same ? 'docs/scenarios.md is as the scenario files say\n' : 'docs/scenarios.md differs from the scenario files: run node dist/scripts/scenarios-doc.js\n')
    process.exit(same ? 0 : 1)
  }
  fs.writeFileSync(SCENARIOS_DOC, text)
  process.stderr.write(`wrote docs/scenarios.md (${(text.match(/^### /gm) ?? []).length} scenarios)\n`)
}

