// What bin/race loads. `npm run build` bundles the CLI (cli.ts and every module it may load, with commander,
// cli-table3, chalk and postgres.js) into one file, dist/src/cli.bundle.cjs, and stores V8's compiled code for it
// beside it (cli.bundle.cache, made by running the bundle once: scripts/bundle.ts). Started from that cache, race
// compiles almost nothing: compiling some 80 modules one by one was most of what `race run` spent on itself
// (CONTRIBUTING.md, "Benchmark of race itself"). V8 refuses a cache made by another Node.js or V8 build; the bundle
// is then compiled as usual. Without a bundle (a build by tsc alone), or with RACE_BUNDLE=0, the modules are imported
// one by one as before.
//
// The bundle's first line names the modules it was built from, each with the start of its SHA-256 (scripts/bundle.ts).
// When one of them changed since (a build by tsc alone after `npm run build`, or a module edited by hand), the
// bundle would run older code than the modules: race runs the modules instead and says so in one line on stderr.
// Checking costs a stat of each module the bundle holds (some 110); only a module newer than the bundle is read and
// hashed (after tsc alone, every module; in an installed package, whose files npm writes in its own order, a few),
// so a module rewritten with the same text, or merely touched, still runs the bundle.
//
// The bundle's own dynamic imports are resolved when it is built; what it imports at run time (a user's module, a
// driver, a built-in scenario file) goes through src/load-module.ts, which uses this module's import (a script
// compiled from a code cache has no dynamic import of its own).
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import vm from 'node:vm'
import { lendImport } from './load-module.js'

const BUNDLE = fileURLToPath(new URL('./cli.bundle.cjs', import.meta.url))
const CACHE = `${BUNDLE.replace(/\.cjs$/, '')}.cache`

function bundleSource(): string | undefined {
  if (process.env.RACE_BUNDLE === '0') return undefined
  try {
    return fs.readFileSync(BUNDLE, 'utf8')
  } catch {
    return undefined
  }
}

const INPUTS_LINE = '// race bundle inputs: '

/** Why the bundle is older than the modules it was built from, if it is: the first module that changed, named from dist/. */
async function staleness(text: string): Promise<string | undefined> {
  if (!text.startsWith(INPUTS_LINE)) return 'the bundle dist/src/cli.bundle.cjs does not name the modules it was built from'
  const built = fs.statSync(BUNDLE).mtimeMs
  const dir = path.dirname(BUNDLE)
  let hash: ((data: Buffer) => string) | undefined
  for (const entry of text.slice(INPUTS_LINE.length, text.indexOf('\n')).split(' ')) {
    const at = entry.lastIndexOf(':')
    const name = entry.slice(0, at)
    const file = path.join(dir, name)
    const st = fs.statSync(file, { throwIfNoEntry: false })
    if (!st) return `dist/src/${name}, which the bundle dist/src/cli.bundle.cjs was built from, is gone`
    if (st.mtimeMs <= built) continue
    if (!hash) {
      const { createHash } = await import('node:crypto')
      hash = (data) => createHash('sha256').update(data).digest('hex').slice(0, 16)
    }
    if (hash(fs.readFileSync(file)) !== entry.slice(at + 1)) return `dist/src/${name} changed since the bundle dist/src/cli.bundle.cjs was built`
  }
  return undefined
}

let source = bundleSource()
const stale = source === undefined ? undefined : await staleness(source)
if (stale !== undefined) {
  process.stderr.write(`race: ${stale}: running the modules instead (npm run build makes the bundle again)\n`)
  source = undefined
}
if (source === undefined) {
  await import('./cli.js')
} else {
  lendImport((specifier) => import(specifier))
  // RACE_CODE_CACHE=write (scripts/bundle.ts only): compile without the cache and store it when the process exits.
  const write = process.env.RACE_CODE_CACHE === 'write'
  let cachedData: Buffer | undefined
  if (!write) {
    try {
      cachedData = fs.readFileSync(CACHE)
    } catch {
      /* no cache: compiled as usual */
    }
  }
  // The wrapper CommonJS gives a module: the bundle uses require (Node's built-ins, the mariadb driver) and __filename.
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: BUNDLE, cachedData })
  // RACE_CODE_CACHE=check (a test): says whether V8 took the cache, then runs as always.
  if (process.env.RACE_CODE_CACHE === 'check') process.stderr.write(`race: code cache ${cachedData ? (script.cachedDataRejected ? 'rejected' : 'accepted') : 'absent'}\n`)
  if (write) {
    process.once('exit', () => {
      const tmp = `${CACHE}.${process.pid}`
      fs.writeFileSync(tmp, script.createCachedData())
      fs.renameSync(tmp, CACHE)
    })
  }
  const mod = { exports: {} }
  script.runInThisContext()(mod.exports, createRequire(BUNDLE), mod, BUNDLE, path.dirname(BUNDLE))
}
