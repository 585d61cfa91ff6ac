// Measures, side by side in one run, what race costs over doing the same by hand (issue 2):
//   1. wall time of `race run advisory --n 5 --max-pending 3` against a running server, divided by that of
//      bench/bare.ts (5 postgres.js connections, the same statements, nothing else). Goal: under 2x.
//   2. wall time of the same race command on the embedded default (starts and removes PostgreSQL 18). Goal: under 1.5 s.
// Runs alternate (race, bare, race, bare, ...) so drift on a shared machine hits both; medians are printed.
// Usage: npm run bench [-- --database-url URL] [-- --rounds 15]. Without a URL it uses DATABASE_URL, else
// starts one embedded server for part 1.
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { startEmbedded } from '../src/db/embedded.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const bin = path.join(root, 'bin', 'race')
const bare = path.join(root, 'dist', 'bench', 'bare.js')
const arg = (name: string) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : undefined
}
const rounds = Number(arg('--rounds') ?? 11)

function wall(cmd: string[], env: NodeJS.ProcessEnv): number {
  const t0 = process.hrtime.bigint()
  const r = spawnSync(process.execPath, cmd, { env, stdio: ['ignore', 'ignore', 'pipe'] })
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  if (r.status !== 0) throw new Error(`${cmd.join(' ')} exited ${r.status}: ${r.stderr}`)
  return ms
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

let url = arg('--database-url') ?? process.env.DATABASE_URL
const server = url ? undefined : await startEmbedded()
url ??= server!.url
const env = { ...process.env, NO_COLOR: '1', DATABASE_URL: url }
const raceCmd = [bin, 'run', 'advisory', '--n', '5', '--max-pending', '3']
try {
  wall(raceCmd, env) // warm-up: file cache, first connections
  wall([bare, url], env)
  const raceMs: number[] = []
  const bareMs: number[] = []
  for (let i = 0; i < rounds; i++) {
    raceMs.push(wall(raceCmd, env))
    bareMs.push(wall([bare, url], env))
  }
  const embEnv: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' }
  delete embEnv.DATABASE_URL
  const embMs: number[] = []
  for (let i = 0; i < Math.max(3, Math.ceil(rounds / 2)); i++) embMs.push(wall(raceCmd, embEnv))
  const r = median(raceMs)
  const b = median(bareMs)
  const e = median(embMs)
  console.log(`target: ${server ? 'embedded PostgreSQL 18 (one server for all of part 1)' : url.replace(/:[^:@/]*@/, ':***@')}; ${rounds} rounds, medians`)
  console.log(`race run advisory --n 5 --max-pending 3   ${r.toFixed(0)} ms`)
  console.log(`bare postgres.js, same statements        ${b.toFixed(0)} ms`)
  console.log(`ratio race / bare                        ${(r / b).toFixed(2)}x   (goal < 2x)`)
  console.log(`race on the embedded default             ${e.toFixed(0)} ms   (goal < 1500 ms; starts and removes PostgreSQL 18)`)
} finally {
  await server?.stop()
}
