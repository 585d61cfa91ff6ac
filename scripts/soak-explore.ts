// The soundness soak of race explore (issue 38, item 5): N generated races, each checked for (a) the reduced search
// finds exactly --exhaustive's outcome groups (and the same fewest switches), (b) free-running trials show no
// outcome --exhaustive did not find. Prints progress, the figures (cases by feature, runs, time) and every case that
// broke (a) or (b), written as a file to keep under --keep DIR (default soak-breaks/, to copy into
// test/soundness/cases/). The same seed draws the same cases.
//   npm run soak:explore -- --cases 200 --seed 7
//   npm run soak:explore -- --cases 50 --seed 1 --trials 8 --from 100 --keep /tmp/breaks
//   npm run soak:explore -- --cases 1000 --seed 2026 --only multi-statement,nowait     those cases of the 1000 only
//   npm run soak:explore -- --cases 1000 --seed 2026 --indices 4,7,8                   those case numbers only
//   npm run soak:explore -- --cases 50 --seed 38 --trials 4 --max-steps 2     npm test's slice (test/soundness)
// On DATABASE_URL when set, else one embedded PostgreSQL started for the whole soak.
// Exit 0: no break; 1: a case broke (a) or (b); 3: a case could not be checked.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { checkCase, keptText, ROOT, type Checked } from '../test/soundness/check.js'
import { generate } from '../test/soundness/generate.js'
import { startEmbedded } from '../src/servers/embedded.js'

interface Options {
  cases: number
  seed: number
  from: number
  trials: number
  keep: string
  maxSteps: 2 | 3
  /** Only the cases (of from..from+cases-1) with one of these features: after a change to how race explores them. */
  only?: string[]
  /** Only these case numbers (of from..from+cases-1). */
  indices?: Set<number>
}

function options(argv: string[]): Options {
  const o: Options = { cases: 100, seed: 1, from: 0, trials: 6, keep: path.resolve('soak-breaks'), maxSteps: 3 }
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    const value = argv[++i]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (flag === '--keep') {
      o.keep = path.resolve(value)
      continue
    }
    if (flag === '--indices') {
      o.indices = new Set(value.split(',').map(Number))
      continue
    }
    if (flag === '--only') {
      o.only = value.split(',').map((x) => x.trim()).filter(Boolean)
      continue
    }
    const n = Number(value)
    if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} takes a whole number, got ${value}`)
    if (flag === '--cases') o.cases = n
    else if (flag === '--seed') o.seed = n
    else if (flag === '--from') o.from = n
    else if (flag === '--trials') o.trials = n
    else if (flag === '--max-steps' && (n === 2 || n === 3)) o.maxSteps = n
    else throw new Error(`unknown option ${flag} (see the head of scripts/soak-explore.ts)`)
  }
  return o
}

async function main(): Promise<number> {
  let o: Options
  try {
    o = options(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`soak:explore: ${(e as Error).message}\n`)
    return 2
  }
  const server = process.env.DATABASE_URL ? null : await startEmbedded()
  const url = process.env.DATABASE_URL ?? server!.url
  const dir = await mkdtemp(path.join(ROOT, '.soundness-'))
  const started = performance.now()
  const results: Checked[] = []
  try {
    process.stdout.write(`soak:explore: ${o.cases} cases of seed ${o.seed} from ${o.from}, ${o.trials} free-running trials each, on ${server ? 'an embedded PostgreSQL' : 'DATABASE_URL'}\n`)
    const drawn = Array.from({ length: o.cases }, (_, k) => o.from + k)
      .filter((i) => !o.indices || o.indices.has(i))
      .map((i) => generate(o.seed, i, { maxSteps: o.maxSteps }))
    const chosen = o.only ? drawn.filter((c) => c.features.some((f) => o.only!.includes(f))) : drawn
    if (o.only || o.indices) process.stdout.write(`only the ${chosen.length} of them${o.indices ? ' listed by --indices' : ''}${o.only ? ` with ${o.only.join(' or ')}` : ''}\n`)
    for (let k = 0; k < chosen.length; k++) {
      const c = chosen[k]
      const r = await checkCase(c, { databaseUrl: url, trials: o.trials, dir })
      results.push(r)
      const state = r.error ? 'ERROR' : r.breaks.length ? `BREAK ${[...new Set(r.breaks.map((b) => b.property))].join('')}` : 'ok'
      process.stdout.write(`[${k + 1}/${chosen.length}] ${c.file}  ${state}  reduced ${r.runs.reduced} / exhaustive ${r.runs.exhaustive} runs, ${r.runs.trials} trials, ${(r.ms / 1000).toFixed(1)} s (${r.phases.reduced}/${r.phases.exhaustive}/${r.phases.trials} ms)  (${c.features.join(', ')})\n`)
      for (const b of r.breaks) process.stdout.write(`    (${b.property}) ${b.what}\n`)
      for (const n of r.notes) process.stdout.write(`    note: ${n}\n`)
      for (const n of r.outside) process.stdout.write(`    outside the model: ${n}\n`)
      if (r.error) process.stdout.write(`    error: ${r.error.split('\n')[0]}\n`)
      if (r.breaks.length) {
        await mkdir(o.keep, { recursive: true })
        await writeFile(path.join(o.keep, c.file), keptText(r))
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
    await server?.stop()
  }
  process.stdout.write('\n' + figures(results, performance.now() - started, o.keep))
  return results.some((r) => r.breaks.length) ? 1 : results.some((r) => r.error) ? 3 : 0
}

/** Cases, breaks of (a) and (b), errors by feature; runs and time. */
export function figures(results: Checked[], ms: number, keep?: string): string {
  const by = new Map<string, { cases: number; a: number; b: number; error: number; outside: number }>()
  for (const r of results)
    for (const f of r.case.features) {
      const e = by.get(f) ?? { cases: 0, a: 0, b: 0, error: 0, outside: 0 }
      e.cases++
      if (r.outside.length) e.outside++
      if (r.breaks.some((b) => b.property === 'a')) e.a++
      if (r.breaks.some((b) => b.property === 'b')) e.b++
      if (r.error) e.error++
      by.set(f, e)
    }
  const w = Math.max(8, ...[...by.keys()].map((k) => k.length))
  const lines = [`${'feature'.padEnd(w)}  cases  broke(a)  broke(b)  errors  outside(b)`]
  for (const [f, e] of [...by].sort((x, y) => y[1].cases - x[1].cases || x[0].localeCompare(y[0]))) lines.push(`${f.padEnd(w)}  ${String(e.cases).padStart(5)}  ${String(e.a).padStart(8)}  ${String(e.b).padStart(8)}  ${String(e.error).padStart(6)}  ${String(e.outside).padStart(10)}`)
  const sum = (f: (r: Checked) => number) => results.reduce((s, r) => s + f(r), 0)
  const broke = results.filter((r) => r.breaks.length)
  lines.push(
    '',
    `${results.length} cases: ${broke.length} broke (a: ${results.filter((r) => r.breaks.some((b) => b.property === 'a')).length}, b: ${results.filter((r) => r.breaks.some((b) => b.property === 'b')).length}), ${results.filter((r) => r.error).length} could not be checked`,
    `${results.filter((r) => r.outside.length).length} cases whose free-running trials ended in a way no order of their points can, for a reason outside the model (outside(b), application races only: several statements in one query; a NOWAIT/SKIP LOCKED statement overtaken mid-statement at REPEATABLE READ or SERIALIZABLE)`,
    `runs: ${sum((r) => r.runs.reduced)} reduced, ${sum((r) => r.runs.exhaustive)} exhaustive, ${sum((r) => r.runs.trials)} free-running trials; ${(ms / 1000).toFixed(1)} s (${(ms / 1000 / Math.max(1, results.length)).toFixed(1)} s a case)`,
  )
  if (broke.length && keep) lines.push(`the ${broke.length} broken cases are in ${keep}/ (copy them into test/soundness/cases/ to keep them)`)
  for (const r of results.filter((x) => x.error)) lines.push(`could not check ${r.case.file}: ${r.error!.split('\n')[0]}`)
  for (const r of broke) lines.push('', `--- ${keep ? path.join(keep, r.case.file) : r.case.file} ---`, keptText(r).trimEnd())
  return lines.join('\n') + '\n'
}

process.exitCode = await main()
