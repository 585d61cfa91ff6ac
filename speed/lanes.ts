// `npm run bench:lanes`: a run of many trials on two lanes (engine/run.ts: the next trial's schema made again and set
// up beside the trial running) against the same run on one (RACE_LANES=1), whole process against whole process,
// measured side by side in one run; the rounds alternate which goes first, so that drift on a shared machine hits
// both. Printed: each command's median seconds with the spread [min-max], and two lanes / one lane, the median of the
// rounds' ratios.
//
//   race explore <the yardstick's spec> --exhaustive --jobs 1     70 orders (speed/yardstick.ts)
//   race run lost-update --trials 200                             200 trials of a built-in
//
// Usage: npm run bench:lanes [-- --database-url URL] [--rounds K]
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { median, raceSpec } from './yardstick.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : undefined
}

const url = arg('--database-url') ?? process.env.DATABASE_URL
const rounds = Number(arg('--rounds') ?? 5)
if (!url) {
  console.error('bench:lanes: give --database-url (or DATABASE_URL): two lanes are made on a server given by URL')
  process.exit(2)
}
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`bench:lanes: --rounds ${arg('--rounds')} is not a whole number of rounds`)
  process.exit(2)
}

function timed(args: string[], lanes: 1 | 2): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', DATABASE_URL: url }
  if (lanes === 1) env.RACE_LANES = '1'
  else delete env.RACE_LANES
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const c = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    c.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)))
    c.once('error', reject)
    c.once('close', (code) => (code === 0 || code === 1 ? resolve(performance.now() - t0) : reject(new Error(`race ${args.join(' ')} exited ${code}: ${stderr.trim()}`))))
  })
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'race-lanes-'))
try {
  const spec = path.join(work, 'yardstick.spec')
  fs.writeFileSync(spec, raceSpec())
  const rows: [string, string[]][] = [
    ['explore, 70 orders (--exhaustive --jobs 1)', ['explore', spec, '--exhaustive', '--jobs', '1']],
    ['run lost-update --trials 200', ['run', 'lost-update', '--trials', '200']],
  ]
  console.log(`bench:lanes: two lanes beside one (RACE_LANES=1), ${rounds} rounds, alternating which goes first`)
  for (const [name, args] of rows) {
    const two: number[] = []
    const one: number[] = []
    for (let k = 0; k < rounds; k++) {
      if (k % 2 === 0) {
        two.push(await timed(args, 2))
        one.push(await timed(args, 1))
      } else {
        one.push(await timed(args, 1))
        two.push(await timed(args, 2))
      }
    }
    const ratios = two.map((t, i) => t / one[i])
    const s = (xs: number[]) => `${(median(xs) / 1000).toFixed(2)} s [${(Math.min(...xs) / 1000).toFixed(2)}-${(Math.max(...xs) / 1000).toFixed(2)}]`
    console.log(`  ${name}: two lanes ${s(two)}, one lane ${s(one)}: two/one ${median(ratios).toFixed(2)}x [${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}]`)
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true })
}
