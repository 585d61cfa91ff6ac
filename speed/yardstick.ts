// The first figure of `npm run bench:explore` (issue 41): what one interleaving of race explore costs beside what
// one permutation of PostgreSQL's own isolationtester costs, on the same server, with the same steps. The spec: two
// sessions of four steps each (begin; a read; an INSERT ... SELECT ... WHERE NOT EXISTS; commit), nothing blocks,
// so both run 70 orders: isolationtester every permutation (its setup and teardown around each), race explore
// --exhaustive --jobs 1 every order (its schema made again and the setup run before each).
// Each side is one child process timed whole, from spawn to exit; the rounds alternate which side goes first, so
// that drift on a shared machine hits both. Printed: seconds per permutation and per order, and their ratio (median
// over the rounds, with the spread). race's own figure (the exploration alone, from its summary line) beside it.
// Each side's CPU time on the whole machine too (speed/cpu.ts: its client, the server's backends): the time it
// cannot go under on this machine's cores, however its work were spread over them.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { maskUrl } from '../src/db/target.js'
import { NATIVE, regressEnv, runTo, testerFor } from '../test/support/conformance.js'
import { cores, withCpu } from './cpu.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')

/** The orders both sides run: 8!/(4!4!). */
export const ORDERS = 70

const SETUP = `create table orders (id serial primary key, customer_id int not null, status text not null)`
const READ = `select count(*) from orders where customer_id = 1 and status = 'open'`
const INSERT = `insert into orders (customer_id, status) select 1, 'open' where not exists (select 1 from orders where customer_id = 1 and status = 'open')`

function sessions(): string {
  return [1, 2]
    .map((i) => `session s${i}\nstep b${i} { begin isolation level read committed }\nstep r${i} { ${READ} }\nstep ins${i} { ${INSERT} }\nstep c${i} { commit }\n`)
    .join('\n')
}

/** The spec race explores: the setup, an invariant, the sessions (race drops its schema after every order). */
export function raceSpec(): string {
  return `setup { ${SETUP} }\n\ninvariant "at most one open order for customer 1" { select count(*) <= 1 from orders where customer_id = 1 and status = 'open' }\nexpect held\n\n${sessions()}`
}

/** The same for isolationtester: no invariant; a teardown, since its setup runs again before every permutation. */
export function testerSpec(): string {
  return `setup { ${SETUP} }\nteardown { drop table orders }\n\n${sessions()}`
}

/**
 * One line on the server's catalogs, for every figure measured on it: whether autovacuum runs, and the dead rows of
 * the catalogs a run's schema fills (each trial makes its schema again: its tables, types, columns and dependencies
 * are written and deleted). Without autovacuum they pile up, and the server's reads of its catalogs slow every later
 * run (examples/explore-orders-3.spec on one job, PostgreSQL 15 with autovacuum off: 2.05 s on a fresh server, 2.7 s
 * after an afternoon of runs, 2.3 s once the catalogs were vacuumed). Undefined where they cannot be read.
 */
export async function catalogLine(url: string): Promise<string | undefined> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const [r] = await sql`select current_setting('autovacuum') as av,
      coalesce(sum(n_dead_tup) filter (where relname = 'pg_attribute'), 0)::int8 as attribute,
      coalesce(sum(n_dead_tup) filter (where relname = 'pg_class'), 0)::int8 as class,
      coalesce(sum(n_dead_tup) filter (where relname = 'pg_depend'), 0)::int8 as depend
      from pg_catalog.pg_stat_sys_tables where schemaname = 'pg_catalog'`
    const n = (x: unknown) => Number(x).toLocaleString('en-US')
    return `server: autovacuum ${r.av}; dead rows in its catalogs: pg_attribute ${n(r.attribute)}, pg_class ${n(r.class)}, pg_depend ${n(r.depend)} (every trial's schema made again adds some; many slow every run: vacuum the catalogs before comparing figures)`
  } catch {
    return undefined
  } finally {
    await sql.end({ timeout: 1 })
  }
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * The CPU both sides used, as a floor: race's CPU an order over this machine's cores is the least time an order can
 * take here, however race spread its work (its Node process and the server's backends share the cores). Undefined
 * where the CPU could not be read.
 */
export function cpuFloor(y: Pick<YardstickResult, 'tester' | 'testerCpu' | 'raceCpu'>, n = cores()): string | undefined {
  const b = cpuBound(y, n)
  if (!b) return undefined
  return `the machine's CPU (client and server, /proc/stat; anything else running adds to it): isolationtester ${(b.testerCpu / 1000).toFixed(4)} CPU-s a permutation, race ${(b.raceCpu / 1000).toFixed(4)} CPU-s an order (${b.cpu.toFixed(2)}x); on ${n} cores an order takes at least ${(b.leastMs / 1000).toFixed(4)} s, ${b.least.toFixed(2)}x isolationtester's permutation`
}

/**
 * The medians behind the floor: CPU milliseconds a permutation and an order, race's over isolationtester's (`cpu`), the
 * least milliseconds an order can take on `n` cores, and that over isolationtester's time a permutation (`least`).
 */
export function cpuBound(y: Pick<YardstickResult, 'tester' | 'testerCpu' | 'raceCpu'>, n: number): { testerCpu: number; raceCpu: number; cpu: number; leastMs: number; least: number } | undefined {
  if (!y.raceCpu.length || !y.testerCpu.length) return undefined
  const [testerCpu, raceCpu] = [median(y.testerCpu), median(y.raceCpu)]
  const leastMs = raceCpu / n
  return { testerCpu, raceCpu, cpu: raceCpu / testerCpu, leastMs, least: leastMs / median(y.tester) }
}

/** race explore as a child, timed whole; its stdout kept (its summary line says how long the exploration took). */
function raceChild(args: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)))
    const timer = setTimeout(() => child.kill('SIGKILL'), 10 * 60_000)
    child.once('error', (e) => (clearTimeout(timer), reject(e)))
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ ms: performance.now() - t0, code, stdout, stderr })
    })
  })
}

export interface YardstickResult {
  /** Milliseconds per permutation (isolationtester) and per order (race, whole process; race's own exploration). */
  tester: number[]
  race: number[]
  explored: number[]
  ratio: number
  /** The machine's busy CPU milliseconds per permutation and per order (empty where /proc/stat cannot be read). */
  testerCpu: number[]
  raceCpu: number[]
}

/**
 * Runs the yardstick on `url` (a server this machine has an isolationtester for) for `rounds` rounds, printing one
 * line a round and a summary. `embedded`: the server is the embedded one (its isolationtester needs its libraries).
 */
export async function yardstick(url: string, rounds: number, embedded: boolean, log: (line: string) => void = console.log): Promise<YardstickResult | undefined> {
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'race-yardstick-'))
  // isolationtester works in a schema of its own (its setup creates a table by that name; others may use the database).
  const schema = `race_yardstick_${process.pid}`
  try {
    const [v] = await admin`select current_setting('server_version_num')::int as num, split_part(current_setting('server_version'), ' ', 1) as version`
    const tester = testerFor(Number(v.num))
    if (!tester) {
      log(`yardstick: no isolationtester on this machine for PostgreSQL ${v.version}: skipped`)
      return undefined
    }
    const raceFile = path.join(work, 'yardstick.spec')
    const testerFile = path.join(work, 'yardstick-isolationtester.spec')
    fs.writeFileSync(raceFile, raceSpec())
    fs.writeFileSync(testerFile, testerSpec())
    const env = regressEnv()
    if (embedded) env.LD_LIBRARY_PATH = path.join(NATIVE, 'lib')
    const raceEnv: NodeJS.ProcessEnv = { ...env, NO_COLOR: '1' }
    delete raceEnv.PGOPTIONS
    const options = encodeURIComponent(`${env.PGOPTIONS ? env.PGOPTIONS + ' ' : ''}-c search_path=${schema}`)
    const conninfo = `${url}${url.includes('?') ? '&' : '?'}options=${options}`
    log(`yardstick: isolationtester's ${ORDERS} permutations beside race explore --exhaustive --jobs 1 (${ORDERS} orders), 2 sessions x 4 steps, on PostgreSQL ${v.version} ${maskUrl(url)}`)
    log(`  isolationtester: ${tester}`)
    const catalogs = await catalogLine(url)
    if (catalogs) log(`  ${catalogs}`)
    const it = async (): Promise<number> => {
      await admin.unsafe(`drop schema if exists "${schema}" cascade; create schema "${schema}"`)
      const out = path.join(work, 'isolationtester.out')
      const t0 = performance.now()
      const code = await runTo(tester, [conninfo], env, testerFile, out, 10 * 60_000)
      const ms = performance.now() - t0
      const text = fs.readFileSync(out, 'latin1')
      const perms = text.match(/^starting permutation:/gm)?.length ?? 0
      if (code !== 0 || perms !== ORDERS) throw new Error(`isolationtester exited ${code} after ${perms} permutations:\n${text.slice(-2000)}`)
      return ms / ORDERS
    }
    const race = async (): Promise<{ ms: number; explored: number }> => {
      const r = await raceChild(['explore', raceFile, '--exhaustive', '--jobs', '1', '--database-url', url], raceEnv)
      const m = r.stdout.match(/^(\d+) runs in ([\d.]+) s/m)
      if (!m || Number(m[1]) !== ORDERS || (r.code !== 0 && r.code !== 1)) throw new Error(`race explore exited ${r.code}: ${r.stderr.trim() || r.stdout.slice(-2000)}`)
      return { ms: r.ms / ORDERS, explored: (Number(m[2]) * 1000) / ORDERS }
    }
    const res: YardstickResult = { tester: [], race: [], explored: [], ratio: 0, testerCpu: [], raceCpu: [] }
    const cpu = (ms: number | undefined) => (ms === undefined ? '' : `, ${(ms / 1000).toFixed(4)} CPU-s`)
    for (let k = 0; k < rounds; k++) {
      let a: { value: number; cpuMs?: number }
      let b: { value: { ms: number; explored: number }; cpuMs?: number }
      if (k % 2 === 0) {
        a = await withCpu(it)
        b = await withCpu(race)
      } else {
        b = await withCpu(race)
        a = await withCpu(it)
      }
      res.tester.push(a.value)
      res.race.push(b.value.ms)
      res.explored.push(b.value.explored)
      const [ac, bc] = [a.cpuMs === undefined ? undefined : a.cpuMs / ORDERS, b.cpuMs === undefined ? undefined : b.cpuMs / ORDERS]
      if (ac !== undefined && bc !== undefined) {
        res.testerCpu.push(ac)
        res.raceCpu.push(bc)
      }
      log(
        `  round ${k + 1}: isolationtester ${(a.value / 1000).toFixed(4)} s a permutation${cpu(ac)}, race ${(b.value.ms / 1000).toFixed(4)} s an order${cpu(bc)} (${(b.value.explored / 1000).toFixed(4)} s exploring): ${(b.value.ms / a.value).toFixed(2)}x`,
      )
    }
    const ratios = res.race.map((r, i) => r / res.tester[i])
    res.ratio = median(ratios)
    const s = (xs: number[]) => `${(median(xs) / 1000).toFixed(4)} s`
    log(
      `  median of ${rounds}: isolationtester ${s(res.tester)} a permutation (${((median(res.tester) * ORDERS) / 1000).toFixed(2)} s for ${ORDERS}); race ${s(res.race)} an order (${((median(res.race) * ORDERS) / 1000).toFixed(2)} s for ${ORDERS}, ${s(res.explored)} of it exploring): race/isolationtester ${res.ratio.toFixed(2)}x [${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}]`,
    )
    const floor = cpuFloor(res)
    if (floor) log(`  ${floor}`)
    return res
  } finally {
    await admin.unsafe(`drop schema if exists "${schema}" cascade`).catch(() => {})
    await admin.end({ timeout: 1 })
    fs.rmSync(work, { recursive: true, force: true })
  }
}
