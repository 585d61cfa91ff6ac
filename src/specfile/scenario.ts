// A spec file as a race scenario: the same contract (src/scenario.ts) the built-in scenarios use, so `race run`,
// `show` and `check` run it through the same engine and judge.
//  - sessions: each spec session, its setup block as a first step named `setup` and its teardown as a last step
//    named `teardown`; a template session `s*` becomes s1..sN (--n, default 2);
//  - setup: each global setup block, in one checked transaction (guard.ts: nothing outside the run's schema);
//    the spec's global teardown is not needed (the schema is dropped);
//  - lockstep: the spec's first permutation line that names every step once (session setup steps first,
//    teardown steps last, markers dropped), else round-robin step by step; a spec with such a line runs it by
//    default, any other spec runs at a barrier;
//  - invariant: every `invariant` line, each a query returning one boolean, all of which must hold;
//  - documented: nothing per session. A spec says only `expect held|violated` (or nothing): that is the
//    scenario's `expects`, judged as --expect is.
import path from 'node:path'
import { withoutFinalSemicolon } from '../binds.js'
import { DEFAULT_LEVEL, sessionLevelParam, type Row, type Scenario, type SessionSpec, type Step } from '../scenario.js'
import { guardedSql, quickGuardedSql } from './guard.js'
import { plainSetup } from './plain.js'
import { statements } from '../lex.js'
import { outsideReach, transactionControl, unterminated } from './files.js'
import type { Permutation, Spec, SpecSession } from './parse.js'
import { SpecError } from './parse.js'
// What run and check use of a file's scenario (expectsOverride, specFailure) lives apart, in common.ts, so that they
// do not load the spec parser.

/** A kebab-case id from a file name: orders.spec -> orders, My_Race.spec -> my-race. */
export function idFromFile(file: string): string {
  const base = path.basename(file).replace(/\.(spec|mjs|js)$/, '')
  return (
    base
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '') || 'spec'
  )
}

/** An invariant's query as a subquery: without its final `;`, and on lines of its own (a `-- comment` it ends with stays a comment). */
function asSubquery(sql: string): string {
  return `(\n${withoutFinalSemicolon(sql)}\n)`
}

function sessionNames(spec: Spec, n: number): string[][] {
  return spec.sessions.map((s) => (s.template ? Array.from({ length: n }, (_, i) => `${s.name}${i + 1}`) : [s.name]))
}

function stepsOf(s: SpecSession): Record<string, Step> {
  const steps: Record<string, Step> = {}
  if (s.setup !== undefined) steps.setup = s.setup
  for (const st of s.steps) steps[st.name] = st.sql
  if (s.teardown !== undefined) steps.teardown = s.teardown
  return steps
}

/** The first permutation line race can run as a lockstep schedule (each step once), as session.step text. */
function lockstepPermutation(spec: Spec): { text: string; line: number } | undefined {
  if (spec.sessions.some((s) => s.template)) return undefined
  const owner = new Map<string, SpecSession>()
  for (const s of spec.sessions) for (const st of s.steps) owner.set(st.name, s)
  const total = spec.sessions.reduce((a, s) => a + s.steps.length, 0)
  const once = (p: Permutation) => p.steps.length === total && new Set(p.steps.map((x) => x.name)).size === total
  const inOrder = (p: Permutation) =>
    spec.sessions.every((s) => {
      const mine = p.steps.filter((x) => owner.get(x.name) === s).map((x) => x.name)
      return mine.every((name, i) => name === s.steps[i].name)
    })
  const p = spec.permutations.find((x) => once(x) && inOrder(x))
  if (!p) return undefined
  const head = spec.sessions.filter((s) => s.setup !== undefined).map((s) => `${s.name}.setup`)
  const body = p.steps.map((x) => `${owner.get(x.name)!.name}.${x.name}`)
  const tail = spec.sessions.filter((s) => s.teardown !== undefined).map((s) => `${s.name}.teardown`)
  return { text: [...head, ...body, ...tail].join(' '), line: p.pos.line }
}

export function specToScenario(spec: Spec, story: string[] = []): Scenario {
  const file = spec.file
  if (spec.expect && !spec.invariants.length) {
    throw new SpecError(file, spec.expect.pos.line, spec.expect.pos.column, `expect ${spec.expect.value} needs an invariant line: say what must hold, e.g. invariant "at most one open order" { select count(*) <= 1 from orders where status = 'open' }`)
  }
  for (const [i, b] of spec.setup.entries()) {
    const own = transactionControl(b.sql)
    if (own) throw new SpecError(file, b.pos.line, b.pos.column, `setup block ${i + 1} runs '${own.split(/\s+/).slice(0, 3).join(' ')}': race runs each setup block in a transaction of its own (to check it changes nothing outside race's schema): leave transaction control out of it`)
    const open = unterminated(b.sql)
    if (open) throw new SpecError(file, b.pos.line, b.pos.column, `setup block ${i + 1} has ${open} that never ends: close it inside the block`)
    const reach = outsideReach(b.sql)
    if (reach) throw new SpecError(file, b.pos.line, b.pos.column, `setup block ${i + 1} ${reach}: a spec may change only what it creates in race's schema, and nothing outside the database (see docs/spec-setup-rules.md)`)
  }
  // A prepared transaction outlives its session: it keeps its locks, the run's schema and role until someone runs
  // COMMIT/ROLLBACK PREPARED, and race's cleanup would wait for it forever. Refused before anything runs (issue 39).
  for (const s of spec.sessions) {
    for (const st of [...(s.setup ? [{ sql: s.setup, pos: s.pos }] : []), ...s.steps, ...(s.teardown ? [{ sql: s.teardown, pos: s.pos }] : [])]) {
      const prepared = statements(st.sql).find((x) => /^\s*(prepare\s+transaction|commit\s+prepared|rollback\s+prepared)\b/i.test(x))
      if (prepared) throw new SpecError(file, st.pos.line, st.pos.column, `session ${s.name} runs '${prepared.split(/\s+/).slice(0, 2).join(' ').toUpperCase()}': race does not race two-phase commit (a prepared transaction outlives its session and would keep the run's schema and role): leave it out`)
    }
  }
  const template = spec.sessions.some((s) => s.template)
  const fixed = spec.sessions.length
  const perm = lockstepPermutation(spec)
  const invariants = spec.invariants
  const quick = new Map(spec.setup.map((b, i) => [guardedSql(b.sql, `${file}:${b.pos.line}: setup block ${i + 1}`), quickGuardedSql(b.sql)] as const))
  // A setup that provably touches nothing outside the schema (plain.ts): its blocks as written, after a run's first trial.
  const plain = plainSetup(spec.setup.map((b) => b.sql)) ? new Map(spec.setup.map((b, i) => [guardedSql(b.sql, `${file}:${b.pos.line}: setup block ${i + 1}`), b.sql] as const)) : undefined
  const invariantSql = invariants.length
    ? `select ${invariants.map((_, i) => `i${i}`).join(' and ')} as held, ${invariants.map((_, i) => `i${i}`).join(', ')} from (select ${invariants.map((x, i) => `${asSubquery(x.sql)} as i${i}`).join(', ')}) as race_invariants`
    : `select true as held`
  const description = invariants.length ? invariants.map((x) => x.description).join('; ') : 'none declared (the spec has no invariant line)'
  const value = (v: unknown) => (v === null || v === undefined ? 'NULL' : String(v))
  const observed = (row: Row) => {
    if (!invariants.length) return 'nothing to check'
    if (invariants.length === 1) return value(row.i0)
    const bad = invariants.filter((_, i) => row[`i${i}`] !== true).map((x, i) => `${x.description} ${value(row[`i${i}`])}`)
    return bad.length ? bad.join('; ') : `all ${invariants.length} true`
  }
  return {
    id: idFromFile(file),
    title: story[0] ?? `the spec ${path.basename(file)}`,
    source: { article: 'file', section: file },
    story: story.length > 1 ? story.slice(1) : [`${fixed} session(s)${template ? ', template sessions replicated by --n' : ''}, from ${path.basename(file)}`],
    // --isolation: each session's connection's default level; a step that names its own level keeps it (read back).
    params: sessionLevelParam(),
    sessionCount: template ? { default: 2, min: 1, max: 10_000 } : { default: fixed, min: fixed, max: fixed },
    isolation: (v) => Object.fromEntries(sessionNames(spec, v.n).flat().map((n) => [n, null])),
    setup: spec.setup.map((b, i) => guardedSql(b.sql, `${file}:${b.pos.line}: setup block ${i + 1}`)),
    // Each block's check made quick for the trials where it passes (the whole check decides where it does not).
    quickSetup: (statement) => quick.get(statement),
    ...(plain ? { plainSetup: (statement: string) => plain.get(statement) } : {}),
    sessions: (v) => {
      const out: Record<string, SessionSpec> = {}
      const names = sessionNames(spec, v.n)
      spec.sessions.forEach((s, i) => {
        const level = String(v.params.isolation ?? DEFAULT_LEVEL)
        const one: SessionSpec = { steps: stepsOf(s), ...(level === DEFAULT_LEVEL ? {} : { connection: { default_transaction_isolation: level } }) }
        for (const name of names[i]) out[name] = one
      })
      return out
    },
    permutation: perm?.text,
    defaultSchedule: perm ? 'lockstep' : 'barrier',
    invariant: { description, sql: invariantSql, observed },
    documented: { postgres: { lockstep: [], serial: [], barrier: [] } },
    expects: spec.expect?.value ?? 'reported',
    ...(spec.prevented ? { prevention: spec.prevented.codes } : {}),
    ...(spec.complete ? { mustComplete: true } : {}),
    ...(invariants.length ? {} : { noInvariant: true as const }),
  }
}
