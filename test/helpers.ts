// Test support: a real server for every test (DATABASE_URL when set, else a throwaway embedded PostgreSQL 18),
// the real CLI as a child process, and the engine in-process.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before } from 'node:test'
import { endQuietly } from '../src/db/connect.js'
import { startEmbedded } from '../src/db/embedded.js'
import { resolveTarget } from '../src/db/target.js'
import { Lab, run, type RunConfig, type RunOutput } from '../src/engine/run.js'
import { defaultParams, type Params } from '../src/scenario.js'
import { scenarios } from '../scenarios/index.js'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
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
}

/** Runs bin/race with args; env replaces the database variables so a test chooses its target. */
export function race(args: string[], o: { url?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.DATABASE_URL
  for (const k of ['PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD']) delete env[k]
  if (o.url) env.DATABASE_URL = o.url
  Object.assign(env, o.env ?? {})
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

export async function openLab(url: string): Promise<Lab> {
  return Lab.open(resolveTarget(url), 5000)
}

/** Runs a scenario in-process with defaults for everything not given. */
export async function runScenario(
  lab: Lab,
  id: string,
  o: Partial<Omit<RunConfig, 'scenario' | 'params'>> & { params?: Params } = {},
): Promise<RunOutput> {
  const scenario = scenarios.find((s) => s.id === id)
  if (!scenario) throw new Error(`no scenario ${id}`)
  return run(lab, {
    scenario,
    params: defaultParams(scenario, o.params),
    n: o.n ?? scenario.defaultN,
    schedule: o.schedule ?? 'lockstep',
    permutation: o.permutation,
    windowMs: o.windowMs ?? 0,
    trials: o.trials ?? 1,
    stepTimeoutMs: o.stepTimeoutMs ?? 10_000,
    connectTimeoutMs: o.connectTimeoutMs ?? 5000,
    keep: o.keep ?? false,
  })
}

export function count<T>(xs: readonly T[], pred: (x: T) => boolean): number {
  return xs.filter(pred).length
}

/** For a test file: one server (and control connection) for all its tests, stopped after them. */
export function useLab(): { readonly server: TestServer; readonly lab: Lab } {
  const ctx = {} as { server: TestServer; lab: Lab }
  before(async () => {
    ctx.server = await useServer()
    ctx.lab = await openLab(ctx.server.url)
  })
  after(async () => {
    await endQuietly(ctx.lab?.control)
    await ctx.server?.stop()
  })
  return ctx
}
