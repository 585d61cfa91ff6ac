// The soak: `race check` run again and again while every core is kept busy by other processes, on the embedded
// server and on a PostgreSQL the machine runs (PostgreSQL 15 here, when it answers), counting the cases that did
// not behave as documented. A CI smoke check that goes red only when the runner is busy is worse than none: the
// goal is 0 deviations. Not a test (it takes long, and proves nothing in one run); run it by hand:
//   node dist/scripts/soak.js                        20 runs on each server, one busy loop per core
//   node dist/scripts/soak.js --runs 3 --busy 4      3 runs, 4 busy loops
//   node dist/scripts/soak.js --targets embedded     only the embedded server (or: pg15)
//   node dist/scripts/soak.js --pg15-url URL         another server than postgres://postgres@127.0.0.1:5432/test
//   node dist/scripts/soak.js -- advisory deadlock   only these scenarios (what follows -- goes to race check)
// Exit 0 when no run deviated and every run could decide; 1 when one deviated; 3 when a run could not run.
import { spawn, type ChildProcess } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')

interface Options {
  runs: number
  busy: number
  targets: string[]
  pg15: string
  pass: string[]
}

function options(argv: string[]): Options {
  const dash = argv.indexOf('--')
  const own = dash < 0 ? argv : argv.slice(0, dash)
  const pass = dash < 0 ? [] : argv.slice(dash + 1)
  const o: Options = { runs: 20, busy: os.availableParallelism(), targets: ['embedded', 'pg15'], pg15: process.env.RACE_SOAK_PG15_URL ?? 'postgres://postgres@127.0.0.1:5432/test', pass }
  for (let i = 0; i < own.length; i++) {
    const flag = own[i]
    const value = own[++i]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (flag === '--runs' || flag === '--busy') {
      const n = Number(value)
      if (!Number.isInteger(n) || n < (flag === '--runs' ? 1 : 0)) throw new Error(`${flag} takes a whole number, got ${value}`)
      if (flag === '--runs') o.runs = n
      else o.busy = n
    } else if (flag === '--targets') {
      o.targets = value.split(',').map((x) => x.trim())
      for (const t of o.targets) if (t !== 'embedded' && t !== 'pg15') throw new Error(`--targets takes embedded, pg15 or both (comma-separated), got ${t}`)
    } else if (flag === '--pg15-url') o.pg15 = value
    else throw new Error(`unknown option ${flag} (see the head of scripts/soak.ts)`)
  }
  return o
}

/** Busy loops in processes of their own, one per core asked for: the load a shared CI runner has. */
function busyLoops(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
}

interface CheckDoc {
  results?: { scenario: string; case: string; matched: boolean; deviations: string[]; why: string }[]
  skipped?: { scenario: string; case: string; why: string }[]
  exitCode?: number
  error?: string
}

interface RunOutcome {
  code: number | null
  cases: number
  deviations: string[]
  skipped: number
  error?: string
  ms: number
}

let current: ChildProcess | undefined

function check(url: string | undefined, pass: string[]): Promise<RunOutcome> {
  const started = performance.now()
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  for (const k of ['DATABASE_URL', 'PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD']) delete env[k]
  const args = [BIN, 'check', '--json', ...(url ? ['--database-url', url] : []), ...pass]
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    current = child
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('close', (code) => {
      current = undefined
      const ms = performance.now() - started
      let doc: CheckDoc = {}
      try {
        doc = JSON.parse(stdout) as CheckDoc
      } catch {
        return resolve({ code, cases: 0, deviations: [], skipped: 0, error: stderr.trim() || `no JSON (exit ${code})`, ms })
      }
      const results = doc.results ?? []
      const deviations = results.filter((r) => !r.matched).map((r) => `${r.scenario} (${r.case}): ${r.deviations[0] ?? r.why}`)
      resolve({ code, cases: results.length, deviations, skipped: doc.skipped?.length ?? 0, error: doc.error ?? (code === 3 ? stderr.trim() : undefined), ms })
    })
  })
}

async function answers(url: string): Promise<string | undefined> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} })
  try {
    const [r] = await sql`select current_setting('server_version') as v`
    return String(r.v).split(' ')[0]
  } catch {
    return undefined
  } finally {
    await sql.end({ timeout: 1 })
  }
}

async function main(): Promise<number> {
  const o = options(process.argv.slice(2))
  const loops = busyLoops(o.busy)
  const stop = () => {
    for (const c of [...loops, ...(current ? [current] : [])]) if (c.pid) c.kill('SIGTERM')
  }
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      stop()
      process.exit(sig === 'SIGINT' ? 130 : 143)
    })
  }
  process.stdout.write(`race check soak: ${o.runs} run(s) per server, ${o.busy} busy loop(s) on ${os.availableParallelism()} core(s)${o.pass.length ? `, race check ${o.pass.join(' ')}` : ''}\n`)
  const totals: { label: string; runs: number; deviations: number; failed: number; cases: number }[] = []
  try {
    for (const t of o.targets) {
      let url: string | undefined
      let label = 'embedded PostgreSQL 18'
      if (t === 'pg15') {
        const v = await answers(o.pg15)
        if (!v) {
          process.stdout.write(`PostgreSQL at ${o.pg15} does not answer: not soaked\n`)
          continue
        }
        url = o.pg15
        label = `PostgreSQL ${v} (${o.pg15.replace(/:[^:@/]*@/, ':***@')})`
      }
      const total = { label, runs: 0, deviations: 0, failed: 0, cases: 0 }
      totals.push(total)
      for (let i = 1; i <= o.runs; i++) {
        const r = await check(url, o.pass)
        total.runs++
        total.cases += r.cases
        total.deviations += r.deviations.length
        if (r.error) total.failed++
        process.stdout.write(
          `${label} run ${i}/${o.runs}: ${r.cases} cases, ${r.deviations.length} deviation(s)${r.skipped ? `, ${r.skipped} skipped` : ''}, exit ${r.code}, ${(r.ms / 1000).toFixed(0)} s${r.error ? ` — could not run: ${r.error}` : ''}\n`,
        )
        for (const d of r.deviations) process.stdout.write(`  ${d}\n`)
      }
    }
  } finally {
    stop()
  }
  for (const t of totals) process.stdout.write(`total ${t.label}: ${t.deviations} deviation(s) in ${t.runs} run(s) (${t.cases} cases), ${t.failed} run(s) that could not run\n`)
  const deviations = totals.reduce((a, t) => a + t.deviations, 0)
  const failed = totals.reduce((a, t) => a + t.failed, 0)
  process.stdout.write(`total: ${deviations} deviation(s), ${failed} run(s) that could not run (goal: 0)\n`)
  return failed ? 3 : deviations ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`soak: ${(e as Error).message}\n`)
    process.exit(2)
  },
)
