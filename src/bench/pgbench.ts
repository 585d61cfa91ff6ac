// --vs-pgbench: the same workload through pgbench (a generated script), the same clients, duration and
// isolation level, in the same schema; pgbench's own summary is parsed for TPS, retries and failures.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Target } from '../db/target.js'
import { RunError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import type { PgbenchScript } from './workloads.js'

export interface Pgbench {
  bin: string
  version: string
  major: number
}

/** pgbench on PATH, else the newest in /usr/lib/postgresql/<major>/bin (Debian's layout); 15+ for --max-tries. */
export function findPgbench(env: NodeJS.ProcessEnv = process.env): Pgbench {
  const candidates: string[] = []
  for (const dir of (env.PATH ?? '').split(path.delimiter)) if (dir) candidates.push(path.join(dir, 'pgbench'))
  try {
    const majors = fs.readdirSync('/usr/lib/postgresql').filter((d) => /^\d+$/.test(d)).sort((a, b) => Number(b) - Number(a))
    for (const m of majors) candidates.push(`/usr/lib/postgresql/${m}/bin/pgbench`)
  } catch {
    /* not Debian's layout */
  }
  for (const bin of candidates) {
    if (!fs.existsSync(bin)) continue
    const out = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 })
    const m = /(\d+)(?:\.(\d+))?/.exec(out.stdout ?? '')
    if (out.status !== 0 || !m) continue
    const major = Number(m[1])
    if (major < 15) {
      throw new RunError(`--vs-pgbench needs pgbench 15 or newer (for --max-tries); ${bin} is ${out.stdout.trim()}`)
    }
    return { bin, version: out.stdout.trim(), major }
  }
  throw new RunError('--vs-pgbench: pgbench is not on PATH (install postgresql-client, or leave out --vs-pgbench)')
}

export interface PgbenchConfig {
  pgbench: Pgbench
  target: Target
  schema: string
  level: string
  clients: number
  durationS: number
  maxTries: number
  statementTimeoutMs: number
  scripts: PgbenchScript[]
  /** The run's: pgbench is stopped by its abort and its cleanup. */
  context: RunContext
}

export interface PgbenchResult {
  tps: number
  txns: number
  failures: number
  retries: number
  retried: number
  latencyAvgMs: number | null
  /** Transactions per script, in script order. */
  mix: Record<string, number>
  /** Set when pgbench aborted a client or exited non-zero: its first error line. */
  error?: string
}

/** PGOPTIONS values: spaces are escaped with a backslash. */
function opt(name: string, value: string): string {
  return `-c ${name}=${value.replace(/\\/g, '\\\\').replace(/ /g, '\\ ')}`
}

export function pgbenchArgs(cfg: PgbenchConfig, files: string[]): { args: string[]; env: NodeJS.ProcessEnv } {
  const args = ['-n', '-M', 'prepared', '-c', String(cfg.clients), '-j', '1', '-T', String(cfg.durationS), '--max-tries', String(cfg.maxTries)]
  cfg.scripts.forEach((s, i) => args.push('-f', `${files[i]}@${s.weight}`))
  if (cfg.target.url) args.push(cfg.target.url)
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PGAPPNAME: 'race bench pgbench',
    PGOPTIONS: [opt('search_path', cfg.schema), opt('default_transaction_isolation', cfg.level), opt('statement_timeout', String(cfg.statementTimeoutMs))].join(' '),
  }
  return { args, env }
}

export function parsePgbench(out: string): Omit<PgbenchResult, 'mix' | 'error'> & { perScript: number[] } {
  const num = (re: RegExp) => {
    const m = re.exec(out)
    return m ? Number(m[1]) : null
  }
  const perScript = [...out.matchAll(/^ - (\d+) transactions \(/gm)].map((m) => Number(m[1]))
  return {
    tps: num(/^tps = ([\d.]+)/m) ?? 0,
    txns: num(/^number of transactions actually processed: (\d+)/m) ?? 0,
    failures: num(/^number of failed transactions: (\d+)/m) ?? 0,
    retries: num(/^total number of retries: (\d+)/m) ?? 0,
    retried: num(/^number of transactions retried: (\d+)/m) ?? 0,
    latencyAvgMs: num(/^latency average = ([\d.]+) ms/m),
    perScript,
  }
}

export async function runPgbench(cfg: PgbenchConfig): Promise<PgbenchResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-pgbench-'))
  const files = cfg.scripts.map((s) => {
    const f = path.join(dir, `${s.name}.sql`)
    fs.writeFileSync(f, s.text)
    return f
  })
  const { args, env } = pgbenchArgs(cfg, files)
  const child = spawn(cfg.pgbench.bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const kill = () => child.exitCode === null && child.kill('SIGINT')
  const abortSignal = cfg.context.signal
  const release = cfg.context.onCleanup('pgbench', async () => void kill(), () => void child.kill('SIGKILL'))
  abortSignal.addEventListener('abort', kill, { once: true })
  // Bounded: pgbench stops by itself after -T; give it the duration plus a generous margin.
  const guard = setTimeout(() => child.kill('SIGKILL'), (cfg.durationS + 60) * 1000)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject)
      child.on('close', resolve)
    })
    if (abortSignal.aborted) throw abortSignal.reason
    const r = parsePgbench(stdout)
    const firstError = stderr.split('\n').find((l) => /error|FATAL|aborted/i.test(l))
    if (code !== 0 && !/^tps = /m.test(stdout)) {
      throw new RunError(`pgbench failed (exit ${code}): ${firstError ?? stderr.trim().split('\n').pop() ?? 'no output'}`)
    }
    const mix = Object.fromEntries(cfg.scripts.map((s, i) => [s.name, r.perScript[i] ?? (cfg.scripts.length === 1 ? r.txns : 0)]))
    return { tps: r.tps, txns: r.txns, failures: r.failures, retries: r.retries, retried: r.retried, latencyAvgMs: r.latencyAvgMs, mix, ...(code !== 0 || firstError ? { error: firstError ?? `exit ${code}` } : {}) }
  } finally {
    clearTimeout(guard)
    abortSignal.removeEventListener('abort', kill)
    release()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
