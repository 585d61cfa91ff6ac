// Test support: a real server for every test (DATABASE_URL when set, else a throwaway embedded PostgreSQL 18),
// the real CLI as a child process, and the engine in-process with the same judge the commands use.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { judgeTrial, type Trial } from '../../src/run/judge.js'
import { startEmbedded } from '../../src/servers/embedded.js'
import { PostgresLab } from '../../src/db/postgres.js'
import { resolveTarget } from '../../src/db/target.js'
import { run, type RunConfig } from '../../src/engine/run.js'
import { documentedFor, plan, type Plan } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { defaultParams, type Documented, type Params, type Pool, type Scenario, type Schedule } from '../../src/scenario.js'
import { pooledDriver } from '../../src/run/pooler.js'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
export const BIN = path.join(ROOT, 'bin', 'race')

export interface TestServer {
  url: string
  embedded: boolean
  stop(): Promise<void>
}

export async function useServer(): Promise<TestServer> {
  const url = process.env.DATABASE_URL
  if (url) return { url, embedded: false, stop: async () => {} }
  const s = await startEmbedded()
  return { url: s.url, embedded: true, stop: () => s.stop() }
}

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
  /** The race process: its schemas are marked with this pid. */
  pid: number
}

/** Runs bin/race with args; env replaces the database variables so a test chooses its target. */
export function race(args: string[], o: { url?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string; bin?: string } = {}): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.DATABASE_URL
  for (const k of ['PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD']) delete env[k]
  // Output does not depend on the terminal or the CI the tests run in, unless a test says so.
  for (const k of ['COLUMNS', 'GITHUB_ACTIONS']) delete env[k]
  if (o.url) env.DATABASE_URL = o.url
  Object.assign(env, o.env ?? {})
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [o.bin ?? BIN, ...args], { env, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr, pid: child.pid ?? 0 })
    })
  })
}

export async function openLab(url: string): Promise<PostgresLab> {
  return PostgresLab.open(resolveTarget(url), 5000)
}

/**
 * A scenario with a server of its own (Scenario.ownServer): an embedded server started with its settings, whatever
 * DATABASE_URL says (race never runs it elsewhere), and a PostgresLab on it; `stop` ends both.
 */
export async function openOwnLab(s: Scenario): Promise<{ lab: PostgresLab; stop: () => Promise<void> }> {
  const server = await startEmbedded({ settings: s.ownServer?.settings })
  const lab = await PostgresLab.open({ kind: 'embedded', url: server.url, label: 'embedded' }, 5000)
  return {
    lab,
    stop: async () => {
      await lab.close()
      await server.stop()
    },
  }
}

export interface Ran {
  plan: Plan
  docs: Documented[]
  trials: Trial[]
  schema: string
}

/** Runs a scenario in-process (lockstep unless told), and judges every trial as race run does. */
export async function runScenario(
  lab: PostgresLab,
  id: string | Scenario,
  o: Partial<Omit<RunConfig, 'plan' | 'schedule'>> & { params?: Params; n?: number; schedule?: Schedule; windowMs?: number; pool?: Pool } = {},
): Promise<Ran> {
  const scenario = typeof id === 'string' ? await findScenario(id) : id
  const variant = { params: defaultParams(scenario, o.params), n: o.n ?? scenario.sessionCount.default, engine: 'postgres' as const, ...(o.pool ? { pool: o.pool } : {}) }
  const p = plan(scenario, variant, o.windowMs ?? 0)
  const schedule = o.schedule ?? 'lockstep'
  const docs = documentedFor(scenario, { ...variant, schedule, windowMs: o.windowMs ?? 0 })
  // Through a pooler: a driver whose sessions are the clients of a PgBouncer of race's own.
  const out = await run(o.pool ? pooledDriver(o.pool, lab, 5000) : lab, {
    context: lab.context,
    plan: p,
    schedule,
    permutation: o.permutation,
    trials: o.trials ?? 1,
    stepTimeoutMs: o.stepTimeoutMs ?? 10_000,
    connectTimeoutMs: o.connectTimeoutMs ?? 5000,
    keep: o.keep ?? false,
    freshConnections: o.freshConnections,
    user: o.user,
    holdMs: o.holdMs,
  })
  return { plan: p, docs, trials: out.trials.map((f) => judgeTrial(f, docs, p)), schema: out.schema }
}

export function count<T>(xs: readonly T[], pred: (x: T) => boolean): number {
  return xs.filter(pred).length
}

/** For a test file: one server (and control connection) for all its tests, stopped after them. */
export function useLab(): { readonly server: TestServer; readonly lab: PostgresLab } {
  const ctx = {} as { server: TestServer; lab: PostgresLab }
  before(async () => {
    ctx.server = await useServer()
    ctx.lab = await openLab(ctx.server.url)
  })
  after(async () => {
    await ctx.lab?.close()
    await ctx.server?.stop()
  })
  return ctx
}

/** The schemas race process `pid` created and left on this server (found by the mark race writes on each). */
export async function schemasOf(sql: Sql, pid: number): Promise<string[]> {
  const rows = await sql`
    select n.nspname from pg_namespace n join pg_description d on d.objoid = n.oid and d.classoid = 'pg_namespace'::regclass
     where n.nspname like 'race\\_%' and d.description ~ '^race:\\{' and (substr(d.description, 6)::jsonb ->> 'pid')::int = ${pid}`
  return rows.map((r) => String(r.nspname))
}

/** Whether a schema exists (a test checks only schemas it knows are its own). */
export async function schemaExists(sql: Sql, name: string): Promise<boolean> {
  const rows = await sql`select 1 from pg_namespace where nspname = ${name}`
  return rows.length > 0
}

/** The machine's PostgreSQL 15, a second server version for tests that check a guard on more than one. */
export const PG15 = 'postgres://postgres@127.0.0.1:5432/test'

/**
 * The servers a test checks on, each named: the test server (embedded, or DATABASE_URL), and PostgreSQL 15 at
 * 127.0.0.1:5432 when it answers (and is not the test server already).
 */
export async function serverUrls(server: TestServer): Promise<[name: string, url: string][]> {
  const urls: [string, string][] = [[server.embedded ? 'embedded' : 'DATABASE_URL', server.url]]
  if (server.url === PG15) return urls
  const probe = postgres(PG15, { max: 1, connect_timeout: 3, onnotice: () => {} })
  try {
    await probe`select 1`
    urls.push(['PostgreSQL 15', PG15])
  } catch {
    /* not on this machine: the test server alone */
  } finally {
    await probe.end({ timeout: 1 })
  }
  return urls
}
