// race show <scenario>: the story, the schema, every session's steps (the SQL exactly as it runs, and the
// application's decisions beside it as their own source), the interleaving, the invariant and what is
// documented, for the defaults or the params given.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { describeDoc } from '../judge/index.js'
import { formatDuration, parseWhole } from '../parse.js'
import { tokenize } from '../permutation.js'
import { BUILTIN_BINDS, assertSound, documentedFor, plan, sessionCount, windowSql, type Plan, type PlannedSession } from '../plan.js'
import { bindNames } from '../binds.js'
import { findScenario, summaries, sourceText, type ScenarioSummary } from '../registry.js'
import type { RunContext } from '../lifecycle.js'
import { plain, type Style } from '../report/color.js'
import { columns, fitLines, hang, width, wrap } from '../report/width.js'
import type { Documented, Engine, Params, Pool, Scenario, Schedule, StepDef } from '../scenario.js'
import { addScenarioParamOptions, scenarioParams } from './common.js'
import { describeParams, ownSettings } from '../report/run.js'
import { assertRunsOn, engineFor } from '../run/lab.js'
import { shownBlock } from '../specfile/guard.js'
import { addPoolerOptions, parsePool, type PoolerOptions } from './pool-options.js'
import { sizePool } from '../run/params.js'

export interface ShowOptions extends PoolerOptions {
  n?: string
  databaseUrl?: string
  json?: boolean
  color: boolean
  [param: string]: unknown
}

export function registerShow(program: Command, all: readonly ScenarioSummary[], exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('show')
    .description("a scenario's story, schema, steps (the SQL as it runs), interleaving and documented outcome")
    .argument('<scenario>', 'scenario id (race list)')
    .option('--n <n>', 'show it for this many sessions')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .option('--database-url <url>', "show it for this URL's engine: a mysql:// URL shows the MySQL/MariaDB form and InnoDB's documented outcome (nothing connects)")
  addScenarioParamOptions(cmd, all)
  addPoolerOptions(cmd)
  cmd.action(async (id: string, o: ShowOptions, self: Command) => exit(await showCommand(ctx.style ?? plain, id, o, self)))
  cmd.addHelpText(
    'after',
    '\nExamples:\n  $ race show advisory\n  $ race show write-skew --isolation serializable\n  $ race show repeatable-read --no-guard --json\n  $ race show session-lock --pooler pgbouncer   its clients through a real PgBouncer',
  )
  return cmd
}

/** Application code, shown as its own source: what runs is what is shown. */
export function codeOf(f: (...a: never[]) => unknown): string {
  return String(f).replace(/\s+/g, ' ').trim()
}

/** An application wait in words: "waits --api-ms (500ms) to call the external API; a transaction still open ...". */
export function appWaitText(p: Plan, w: NonNullable<StepDef['appWait']>): string {
  const spec = p.scenario.params[w.param]
  const flag = spec?.flag.split(' ')[0] ?? w.param
  const v = p.variant.params[w.param]
  return `waits ${flag} (${spec?.kind === 'duration' ? formatDuration(Number(v)) : `${v} ms`}) to ${w.what}; a transaction still open and its locks stay held meanwhile`
}

/** The steps of a session as data: SQL, and the application's decisions as source. */
function stepsJson(p: Plan, s: PlannedSession) {
  return s.steps.map((st) => ({
    name: st.name,
    sql: st.def.sql,
    ...(st.def.appWait ? { application: appWaitText(p, st.def.appWait) } : {}),
    ...(st.def.rejectIf ? { rejectIf: codeOf(st.def.rejectIf) } : {}),
    ...(st.def.retryIf ? { retryIf: codeOf(st.def.retryIf) } : {}),
  }))
}

const SCHEDULES: [Schedule, number, string][] = [
  ['lockstep', 0, 'lockstep'],
  ['serial', 0, 'serial'],
  ['barrier', 0, 'barrier'],
  ['barrier', 100, 'barrier with --window'],
]

function docs(p: Plan): { schedule: string; documented: Documented[] }[] {
  return SCHEDULES.map(([schedule, windowMs, label]) => ({ schedule: label, documented: documentedFor(p.scenario, { ...p.variant, schedule, windowMs }) }))
}

export async function showCommand(c: Style, id: string, o: ShowOptions, cmd: Command): Promise<number> {
  const s = await findScenario(id)
  const engine = engineFor(o.databaseUrl)
  assertRunsOn(s, engine)
  const params = scenarioParams(s, cmd, o, await summaries(), engine)
  const count = sessionCount(s)
  const n = o.n === undefined ? count.default : parseWhole('--n', o.n, count.min, count.max)
  const asked = parsePool(o, cmd, engine)
  const pool = asked && sizePool(asked, s, plan(s, { params, n, engine, pool: asked }).sessions.length)
  assertSound(s, params, n, engine, pool)
  const p = plan(s, { params, n, engine, ...(pool ? { pool } : {}) })
  if (s.kind?.type === 'application') {
    const { appShowJson, appShowLines } = await import('../app/show.js')
    process.stdout.write(o.json ? JSON.stringify(appShowJson(s, p, n), null, 2) + '\n' : appShowLines(s, p, n, c).join('\n') + '\n')
    return 0
  }
  const replicated = p.sessions.length > 1 && p.sessions.every((x) => x.spec === p.sessions[0].spec)
  const v: Shown = { s, p, params, n, engine, pool, replicated, binds: usedBinds(p), documented: docs(p) }
  if (o.json) {
    process.stdout.write(JSON.stringify(showJson(v), null, 2) + '\n')
    return 0
  }
  const w = columns()
  process.stdout.write(fitLines(showLines(c, v, w), w).join('\n') + '\n')
  return 0
}

/** A statement scenario as race show shows it: for these params and sessions, through this pool if any. */
interface Shown {
  s: Scenario
  p: Plan
  params: Params
  n: number
  engine: Engine
  pool?: Pool
  /** Every session runs the same steps (s1..sN): one is shown. */
  replicated: boolean
  binds: ReturnType<typeof usedBinds>
  documented: ReturnType<typeof docs>
}

function showJson({ s, p, params, n, engine, replicated, binds, documented }: Shown) {
  return {
    id: s.id,
    title: s.title,
    source: sourceText(s.source),
    ...(engine === 'mysql' ? { engine } : {}),
    story: s.story,
    params,
    n,
    isolation: p.isolation,
    setup: p.setup,
    replicated,
    sessions: p.sessions.map((x) => ({
      name: x.name,
      steps: stepsJson(p, x),
      racePoint: x.spec.racePoint ?? null,
      connection: x.spec.connection ?? {},
      shares: x.spec.shares ?? null,
      retry: x.spec.retry ?? null,
      ...(x.spec.release ? { release: x.spec.release } : {}),
    })),
    binds,
    permutation: p.permutation ?? null,
    ownServer: s.ownServer ?? null,
    postgresSince: s.postgresSince ?? null,
    invariant: { description: typeof s.invariant.description === 'function' ? s.invariant.description(params) : s.invariant.description, sql: p.invariantSql },
    documented,
    checks: s.checks ?? [],
  }
}

/** The text, `w` columns wide: the story and setup, the sessions, then what the run holds it to. */
function showLines(c: Style, v: Shown, w: number): string[] {
  const { s, p, engine, pool, replicated } = v
  const lines: string[] = []
  lines.push(`${c.bold(s.id)}: ${s.title}`, c.dim(`from the ${sourceText(s.source)}${engine === 'mysql' ? '; on MySQL/MariaDB (InnoDB)' : ''}`), '')
  if (pool) {
    const how = pool.kind === 'pgbouncer' ? `a PgBouncer race starts, ${pool.mode} mode, pool size ${pool.size}${pool.resetAlways ? ', reset query after every transaction' : ''}` : 'the pooler at --database-url (--pooled)'
    lines.push(`  ${c.bold('through')} ${how}: each session is a client of it, lent a server connection per ${pool.mode === 'session' ? 'client' : pool.mode}.`, '')
  } else if (s.pooled && engine === 'postgres') lines.push(c.dim(`  (documented through a connection pooler too: race show ${s.id} --pooler pgbouncer)`), '')
  for (const l of s.story) lines.push(`  ${l}`)
  lines.push('', c.bold('setup') + c.dim(" (in the run's own schema, before each trial)"))
  for (const stmt of p.setup) lines.push(indent(shownBlock(stmt).trim().replace(/;?$/, ';'), 2))
  if (s.expects) lines.push(c.dim("  (each block runs in one transaction that race rolls back, failing the run, if it changes anything outside the run's schema)"))
  for (const sess of replicated ? [p.sessions[0]] : p.sessions) lines.push(...sessionLines(c, sess, v, w))
  return [...lines, ...heldTo(c, v, w)]
}

function sessionLines(c: Style, sess: PlannedSession, { p, n, replicated }: Shown, w: number): string[] {
  const lines: string[] = []
  const conn = Object.entries(sess.spec.connection ?? {})
  const title = replicated ? `session` + c.dim(` (replicated as s1..sN; --n ${n})`) : `session ${sess.name}`
  lines.push('', c.bold(title))
  if (conn.length) lines.push(c.dim(`  connection: ${conn.map(([k, v]) => `${k}='${v}'`).join(', ')}`))
  if (sess.spec.shares) lines.push(c.dim(`  connection: ${sess.spec.shares}'s, borrowed from the pool after it (same backend)`))
  for (const st of sess.steps) {
    lines.push(...stepLines(c, st.name, st.def, p, w))
    if (st.name === sess.spec.racePoint) lines.push(c.dim(`  -- race point: --window <d> sleeps here, between check and write: ${windowSql(p.variant.engine, 300)} for --window 300ms`))
  }
  if (sess.spec.release) lines.push(c.yellow(`  application, finally (after a rejection or an error): ${sess.spec.release}`))
  const retry = sess.spec.retry
  if (retry?.max) {
    lines.push(c.dim(`  application: on ${retry.on?.length ? retry.on.join(', ') : "a step's retryIf"}, roll back and run the whole transaction again, at most ${retry.max} more time(s)${retry.backoff ? ' (exponential backoff with full jitter)' : ''}`))
  }
  return lines
}

/** The binds, the server it needs, the levels, the interleaving, the invariant and what is documented. */
function heldTo(c: Style, { s, p, params, engine, pool, binds, documented }: Shown, w: number): string[] {
  const lines: string[] = []
  if (binds.length) {
    lines.push('', c.bold('binds') + c.dim(' (sent as bind parameters)'))
    for (const b of binds) lines.push(`  :${b.name.padEnd(10)} ${b.describe}`)
  }
  if (s.postgresSince) lines.push('', `${c.bold('postgres')}   ${s.postgresSince.major} or later (it uses ${s.postgresSince.why}); an older server is refused`)
  if (s.ownServer) lines.push('', `${c.bold('server')}     its own: race starts an embedded server with ${ownSettings(s)} (it ${s.ownServer.why}); --database-url is refused`)
  const levels = [...new Set(Object.values(p.isolation).map((l) => l ?? 'not assumed'))]
  lines.push('', `${c.bold('isolation')}  ${levels.join(', ')} ${c.dim("(documented for; each session's real level is read from the server)")}`)
  if (p.permutation) {
    const by = (s.defaultSchedule ?? 'barrier') === 'lockstep' ? 'race run uses it by default' : 'race run --schedule lockstep uses it'
    lines.push(`${c.bold('lockstep')}   permutation ${p.permutation}`)
    lines.push('', c.bold('interleaving') + c.dim(` (${by}; --schedule "t1.begin ..." runs another)`))
    lines.push(...drawPermutation(c, p.permutation, p.sessions, w))
  }
  const desc = typeof s.invariant.description === 'function' ? s.invariant.description(params) : s.invariant.description
  lines.push('', `${c.bold('invariant')}  ${desc}`, indent(p.invariantSql, 11))
  const ps = describeParams(s, params)
  if (ps) lines.push(`${c.bold('params')}     ${ps}`)
  if (s.expects) {
    const what = s.expects === 'reported' ? 'nothing: race run reports what happens (no expect line)' : `the invariant ${s.expects} (the spec's expect line; who ends how is not documented)`
    lines.push('', `${c.bold('expected')}   ${what}`)
  } else lines.push('', c.bold('documented') + c.dim(' (how each session ends; any one of several alternatives may happen)'))
  if (!s.expects) for (const d of documented) lines.push(`  ${d.schedule}: ${d.documented.map((x) => `${describeDoc(x)} ${c.dim(`(${x.why})`)}`).join('\n    | ')}`)
  for (const k of s.checks ?? []) {
    if (k.engines && !k.engines.includes(engine)) continue
    if (k.pool && !pool) continue
    const kp = pool && { ...pool, ...k.pool }
    const v = { params: { ...params, ...(k.params ?? {}) }, n: k.n ?? s.sessionCount.default, engine, ...(kp ? { pool: kp } : {}) }
    const d = documentedFor(s, { ...v, schedule: 'lockstep', windowMs: 0 })
    if (d.length) lines.push(`  check ${k.label}: ${d.map(describeDoc).join(' | ')}`)
  }
  return lines
}

function stepLines(c: Style, name: string, def: StepDef, p: Plan, w: number): string[] {
  if (def.appWait) {
    const out = hang(`  step ${c.cyan(name.padEnd(9))} ${c.yellow(`application, not SQL: ${appWaitText(p, def.appWait)}`)}`, w, 17)
    if (def.rejectIf) out.push(...hang(c.yellow(`${' '.repeat(17)}application, before it: ${codeOf(def.rejectIf)}  (a reason: roll back, rejected)`), w, 19))
    return out
  }
  const sql = def.sql.split('\n')
  const head = `  step ${c.cyan(name.padEnd(9))} { `
  const at = width(head)
  // Long SQL wraps under itself; it is never cut: what differs between sessions may be at its end.
  const out = hang(`${head}${sql[0]}${sql.length > 1 ? '' : ' }'}`, w, at)
  for (let i = 1; i < sql.length; i++) out.push(...hang(`${' '.repeat(at)}${sql[i]}${i === sql.length - 1 ? ' }' : ''}`, w, at + 2))
  if (def.rejectIf) out.push(...hang(c.yellow(`${' '.repeat(17)}application, before it: ${codeOf(def.rejectIf)}  (a reason: roll back, rejected)`), w, 19))
  if (def.retryIf) out.push(...hang(c.yellow(`${' '.repeat(17)}application, after it: ${codeOf(def.retryIf)}  (a reason: roll back, try again)`), w, 19))
  return out
}

/** Every bind the plan's SQL uses, with how its value is made. */
function usedBinds(p: Plan): { name: string; describe: string }[] {
  const names = new Set<string>()
  for (const s of p.sessions) for (const st of s.steps) for (const b of bindNames(st.def.sql)) names.add(b)
  for (const b of bindNames(p.invariantSql)) names.add(b)
  for (const stmt of p.setup) for (const b of bindNames(stmt)) names.add(b)
  const out: { name: string; describe: string }[] = []
  for (const name of names) {
    const parts = name.split('.')
    if (parts.length === 3) {
      out.push({ name, describe: `column ${parts[2]} of the first row session ${parts[0]}'s step ${parts[1]} returned (NULL if none)` })
      continue
    }
    if (parts.length === 2) {
      out.push({ name, describe: `column ${parts[1]} of this session's step ${parts[0]}` })
      continue
    }
    const own = p.sessions.map((s) => s.spec.binds?.[name]).find(Boolean)
    const bind = own ?? p.scenario.binds?.[name]
    if (bind) out.push({ name, describe: bind.describe + (own && p.sessions.some((s) => !s.spec.binds?.[name]) ? ' (for the sessions that declare it)' : '') })
    else if (BUILTIN_BINDS[name]) out.push({ name, describe: BUILTIN_BINDS[name] })
    else if (name in p.variant.params) out.push({ name, describe: `the --${name.replace(/[A-Z]/g, (m) => '-' + m.toLowerCase())} param (${p.variant.params[name]})` })
    else throw new UsageError(`${p.scenario.id}: unknown bind :${name}`)
  }
  return out
}

/**
 * The permutation drawn as the articles draw it: one row per step, one column per session, when the whole
 * first line of every step's SQL fits the width; otherwise one row per step with the session named in front.
 * The SQL is never cut: the part that differs between sessions may be at its end.
 */
export function drawPermutation(c: Style, text: string, sessions: readonly PlannedSession[], width = columns()): string[] {
  const names = sessions.map((s) => s.name)
  const rows = tokenize(text).map((tok) => {
    const def = sessions[names.indexOf(tok.session)]?.steps.find((x) => x.name === tok.step)?.def
    const sql = def?.appWait ? `(application waits :${def.appWait.param})` : def ? (def.sql.split('\n').find((l) => !l.trim().startsWith('--')) ?? '') : ''
    return { col: names.indexOf(tok.session), step: tok.step + (tok.await ? '(wait)' : ''), sql: sql.trim() + (def && def.sql.trim().includes('\n') ? ' …' : '') }
  })
  const stepW = Math.max(...rows.map((r) => r.step.length))
  const cellW = Math.max(...rows.map((r) => stepW + 1 + r.sql.length), ...names.map((n) => n.length)) + 2
  if (2 + cellW * names.length <= width) {
    const out = ['  ' + names.map((n) => c.bold(n.toUpperCase().padEnd(cellW))).join('').trimEnd()]
    for (const r of rows) out.push('  ' + ' '.repeat(cellW * Math.max(0, r.col)) + c.cyan(r.step.padEnd(stepW)) + ' ' + r.sql)
    return out
  }
  const nameW = Math.max(...names.map((n) => n.length))
  const lead = 2 + nameW + 2 + stepW + 1
  return rows.map((r) => {
    const head = `  ${c.bold(names[r.col].padEnd(nameW))}  ${c.cyan(r.step.padEnd(stepW))} `
    return head + wrap(r.sql, Math.max(20, width - lead)).join('\n' + ' '.repeat(lead))
  })
}

function indent(sql: string, by: number): string {
  return sql
    .split('\n')
    .map((l) => ' '.repeat(by) + l)
    .join('\n')
}
