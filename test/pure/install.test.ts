// `npm install` in the checkout on Node 20 prints no EBADENGINE (issue 39, item 16): every package the lock file
// installs, development dependencies included, accepts Node 20 from 20.19 (the oldest Node 20 that vite, typeorm and
// prisma accept) and the Node running this test. The check is npm's own: npm-install-checks' checkEngine, the function
// that prints EBADENGINE, from the npm on the PATH, over the engines the lock records for each package.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../support/conformance.js'

interface Locked {
  version?: string
  engines?: Record<string, string> | string[]
  dev?: boolean
}

test('every package in package-lock.json accepts Node 20.19 and this Node: npm install prints no EBADENGINE', () => {
  const npmDir = path.join(execFileSync('npm', ['prefix', '-g'], { encoding: 'utf8' }).trim(), 'lib', 'node_modules', 'npm')
  const { checkEngine } = createRequire(path.join(npmDir, 'package.json'))('npm-install-checks') as {
    checkEngine(target: { engines?: unknown; _id: string }, npmVer: string | null, nodeVer: string): void
  }
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Locked> }
  const nodes = ['20.19.0', process.version.slice(1)]
  const refused: string[] = []
  let checked = 0
  for (const [where, p] of Object.entries(lock.packages)) {
    if (!where || !p.engines || Array.isArray(p.engines)) continue
    checked++
    for (const node of nodes) {
      try {
        checkEngine({ engines: { node: p.engines.node }, _id: `${where.replace(/.*node_modules\//, '')}@${p.version}` }, null, node)
      } catch (e) {
        refused.push(`${(e as { pkgid: string }).pkgid} needs node ${p.engines.node} (Node ${node})${p.dev ? ', a development dependency' : ''}`)
      }
    }
  }
  assert.ok(checked > 100, `${checked} packages with engines`)
  assert.deepEqual(refused, [])
})
