// `npm run bench:start`: what race costs before its first order and after its last (issue 41), whole process
// against whole process, measured side by side in one run. Each command is timed from spawn to exit, stdout
// discarded, NO_COLOR=1; the rounds alternate the order of the commands (A B C, C B A, ...) so that drift on a
// shared machine hits them all; each figure is the median of the rounds with the spread [p25-p75].
//
//   node -e 0                                      the yardstick: Node.js's own start and exit
//   race --version, race --help                    race's start-up alone (--help registers every command)
//   race run advisory --n 2 --trials 1             one trial: start-up, control, the run role and schema, the end
//   race explore (2 sessions x 1 step, 2 orders)   the same for explore (the yardstick's spec, two steps)
//
// --against DIR: the same commands from another checkout's bin/race (built), in the same rounds, beside this one's:
// a before/after of a change on one machine at one time (e.g. --against /work/main).
// Usage: npm run bench:start [-- --database-url URL] [--rounds K] [--against DIR]
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : undefined
}

const url = arg('--database-url') ?? process.env.DATABASE_URL
const rounds = Number(arg('--rounds') ?? 15)
const against = arg('--against')
if (!url) {
  console.error('bench:start: give --database-url (or DATABASE_URL): the run and explore rows need a server')
  process.exit(2)
}
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`bench:start: --rounds ${arg('--rounds')} is not a whole number of rounds`)
  process.exit(2)
}

/** Two sessions of one step each, on the yardstick's table: two orders, so that the figure is start and end. */
const SPEC = `setup { create table orders (id serial primary key, customer_id int not null, status text not null) }

invariant "at most one open order for customer 1" { select count(*) <= 1 from orders where customer_id = 1 and status = 'open' }
expect held

session s1
step ins1 { insert into orders (customer_id, status) select 1, 'open' where not exists (select 1 from orders where customer_id = 1 and status = 'open') }

session s2
step ins2 { insert into orders (customer_id, status) select 1, 'open' where not exists (select 1 from orders where customer_id = 1 and status = 'open') }
`

function child(args: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const c = spawn(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    c.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)))
    const timer = setTimeout(() => c.kill('SIGKILL'), 120_000)
    c.once('error', (e) => (clearTimeout(timer), reject(e)))
    c.once('close', (code) => (clearTimeout(timer), resolve({ ms: performance.now() - t0, code, stderr })))
  })
}

function quantile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.round((s.length - 1) * p)]
}

const fmt = (x: number) => x.toFixed(0).padStart(5)

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'race-bench-start-'))
  const spec = path.join(work, 'start.spec')
  fs.writeFileSync(spec, SPEC)
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete env.DATABASE_URL
  const bins: [string, string][] = [['', path.join(ROOT, 'bin', 'race')]]
  if (against) bins.push([' (against)', path.join(path.resolve(against), 'bin', 'race')])
  for (const [, bin] of bins) if (!fs.existsSync(bin)) throw new Error(`no ${bin}`)
  // What may exit 1: explore finds the check-then-insert violated. Anything else is a failure of the bench.
  const rows: { label: string; args: string[]; ok: number[]; ms: number[] }[] = [{ label: 'node -e 0', args: ['-e', '0'], ok: [0], ms: [] }]
  for (const [tag, bin] of bins) {
    rows.push({ label: `race --version${tag}`, args: [bin, '--version'], ok: [0], ms: [] })
    rows.push({ label: `race --help${tag}`, args: [bin, '--help'], ok: [0], ms: [] })
    rows.push({ label: `race run, 1 trial${tag}`, args: [bin, 'run', 'advisory', '--n', '2', '--trials', '1', '--database-url', url!], ok: [0], ms: [] })
    rows.push({ label: `race explore, 2 orders${tag}`, args: [bin, 'explore', spec, '--exhaustive', '--jobs', '1', '--database-url', url!], ok: [0, 1], ms: [] })
  }
  console.log(`bench:start: whole processes, ${rounds} rounds alternating, median [p25-p75] ms; Node.js ${process.version}${process.env.NODE_EXTRA_CA_CERTS ? ', NODE_EXTRA_CA_CERTS set (Node.js reads it at every start)' : ''}`)
  try {
    for (const r of rows) await child(r.args, env) // warm the file cache
    for (let k = 0; k < rounds; k++) {
      for (const r of k % 2 ? [...rows].reverse() : rows) {
        const x = await child(r.args, env)
        if (!r.ok.includes(x.code ?? -1)) throw new Error(`${r.label} exited ${x.code}: ${x.stderr.trim()}`)
        r.ms.push(x.ms)
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
  const node = quantile(rows[0].ms, 0.5)
  for (const r of rows) {
    const m = quantile(r.ms, 0.5)
    const over = r === rows[0] ? '' : `   node -e 0 + ${fmt(m - node).trim()} ms`
    console.log(`  ${r.label.padEnd(32)} ${fmt(m)} [${fmt(quantile(r.ms, 0.25)).trim()}-${fmt(quantile(r.ms, 0.75)).trim()}]${over}`)
  }
  if (against) {
    for (const name of ['race --version', 'race --help', 'race run, 1 trial', 'race explore, 2 orders']) {
      const a = rows.find((r) => r.label === name)!
      const b = rows.find((r) => r.label === `${name} (against)`)!
      const d = a.ms.map((x, i) => x - b.ms[i])
      console.log(`  ${`${name}: this - against`.padEnd(40)} ${fmt(quantile(d, 0.5))} [${fmt(quantile(d, 0.25)).trim()}-${fmt(quantile(d, 0.75)).trim()}] ms (paired by round)`)
    }
  }
}

main().catch((e) => {
  console.error(`bench:start: ${(e as Error).message}`)
  process.exit(1)
})
