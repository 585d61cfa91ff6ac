// npm run pack: the tarball a project installs (npm install ./racelab-<version>.tgz), made from what the build left in
// dist/ (npm run pack builds first). It is `npm pack`'s tarball (package.json's `files`: the compiled code, the
// scenario index, the types, bin/race, the README) with one change to its package.json: no scripts. The checkout's
// `prepare` builds dist/ from the sources, which the tarball does not hold and does not need; left in, npm 11 lists
// it as an install script "not yet covered by allowScripts" in every project that installs the tarball.
//
//   node dist/scripts/pack.js [--out DIR]     prints the tarball's path
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const at = process.argv.indexOf('--out')
const out = path.resolve(at > 0 ? process.argv[at + 1] : ROOT)
const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'cli.js')) || !fs.existsSync(path.join(ROOT, 'dist', 'scenarios', 'index.json'))) {
  process.stderr.write('pack: dist/ is not built: run npm run pack (it builds first)\n')
  process.exit(2)
}
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'racelab-pack-'))
try {
  // npm's own file selection and layout, then the manifest without scripts, packed again by npm.
  const [first] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT)) as { filename: string }[]
  execFileSync('tar', ['-xzf', path.join(work, first.filename), '-C', work])
  const dir = path.join(work, 'package')
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown>
  delete manifest.scripts
  delete manifest.allowScripts // the checkout's own approvals; a project that installs racelab keeps its own
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2) + '\n')
  fs.mkdirSync(out, { recursive: true })
  const [made] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', out, dir], work)) as { filename: string; size: number; entryCount: number }[]
  process.stdout.write(`${path.join(out, made.filename)}\n`)
  process.stderr.write(`pack: ${made.entryCount} files, ${(made.size / 1024).toFixed(0)} kB\n`)
} finally {
  fs.rmSync(work, { recursive: true, force: true })
}
