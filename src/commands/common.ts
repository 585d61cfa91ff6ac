// What the commands share: the flags of a command that connects (its embedded-server choices go to its context),
// scenario flags, one run per --pg version. Where the database is, bounds on every wait and one trial judged
// against its documentation are the run service's (src/run: lab.ts, params.ts, judge.ts), imported from there.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { worstExit } from '../judge/index.js'
import type { RunContext } from '../lifecycle.js'
import { parsePg } from '../servers/versions.js'
import { formatDuration } from '../parse.js'
import { FLAGS, parseParam, pgConflict } from '../run/params.js'
import type { Engine, ParamSpec, Params, Scenario } from '../scenario.js'
import { addOptions, CONNECT_TIMEOUT, DATABASE_URL, GITHUB, JSON_OUT, junitOption, KEEP, NO_CACHE, NO_COLOR, PG, RUN_TIMEOUT, STEP_TIMEOUT } from '../run/options.js'

/** What the scenario flags need of a scenario: a loaded one, or its summary from the index (registry.ts). */
type Flagged = Pick<Scenario, 'id' | 'params'>

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

/** The flags every command that connects takes (declared in run/options.ts); --no-cache and --pg are the command's context's embedded-server choices. */
export function addTargetOptions(cmd: Command, ctx: RunContext, o: { keep?: boolean; stepTimeout?: boolean; embedded?: boolean; pg?: boolean } = {}): Command {
  addOptions(cmd, [DATABASE_URL, CONNECT_TIMEOUT, ...(o.stepTimeout !== false ? [STEP_TIMEOUT] : []), RUN_TIMEOUT, ...(o.keep !== false ? [KEEP] : [])])
  if (o.embedded !== false) {
    addOptions(cmd, [NO_CACHE])
    cmd.hook('preAction', (_c, action) => {
      ctx.embedded.cache = action.opts().cache !== false
    })
  }
  if (o.pg) {
    addOptions(cmd, [PG])
    cmd.hook('preAction', (_c, action) => {
      const raw = action.opts().pg as string | undefined
      ctx.embedded.pgList = raw === undefined ? undefined : parsePg(raw)
      ctx.embedded.pg = ctx.embedded.pgList?.[0]
      if (ctx.embedded.pgList) pgConflict(action.opts().databaseUrl as string | undefined, FLAGS)
    })
  }
  return addOptions(cmd, [JSON_OUT, NO_COLOR])
}

/**
 * Runs a command once per --pg version, one after another, each on its own embedded server, which is stopped
 * (and everything of that run cleaned up) before the next starts; the exit code is the worst. Without --pg, or
 * with one version, just runs it. Several versions print one report each, so one JSON document or JUnit file
 * cannot hold them: --json, --junit, --html and race spec's --results then take one version (race matrix has a form of its own for them).
 */
export async function eachPg(ctx: RunContext, o: { json?: boolean; junit?: string; results?: string; html?: string }, fn: (pg: number | undefined) => Promise<number>): Promise<number> {
  const { pgList } = ctx.embedded
  if (!pgList || pgList.length < 2) {
    ctx.embedded.pg = pgList?.[0]
    return fn(ctx.embedded.pg)
  }
  const one = o.json ? 'json' : o.junit !== undefined ? 'junit' : o.results !== undefined ? 'results' : o.html !== undefined ? 'html' : undefined
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
  return addOptions(cmd, [junitOption(what), GITHUB])
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


