// The house's floors: which part of src/ may import which (CONTRIBUTING.md, "Layout"). Read from the source's own
// import lines (static, `import type` and `import()` alike), so a new arrow that runs back up, or a circle, fails
// here before anyone draws the structure.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../support/conformance.js'

/**
 * Floors from the top down: a file may import files of its own floor or of a floor below, never above. A floor
 * is a list of folders (ending in /) or files under src/. Within a floor, files may import each other, as long
 * as no circle forms.
 */
export const FLOORS: readonly (readonly string[])[] = [
  ['index.ts', 'start.ts', 'session-host.ts'],
  ['cli.ts', 'api.ts'],
  ['commands/'],
  ['evidence/', 'bench/'],
  ['report/'],
  ['explore/'],
  ['run/'],
  ['registry.ts', 'load.ts', 'self-hook.ts'],
  ['app/', 'tester/'],
  ['judge/'],
  ['engine/', 'specfile/'],
  ['plan.ts'],
  ['servers/'],
  ['db/'],
  ['scenario.ts', 'permutation.ts', 'binds.ts', 'parse.ts', 'lex.ts', 'digest.ts'],
  ['lifecycle.ts', 'errors.ts', 'levels.ts', 'known-bugs.ts', 'home.ts', 'load-module.ts'],
]

const SRC = path.join(ROOT, 'src')

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? files(p) : e.name.endsWith('.ts') ? [p] : []
  })
}

/** Every relative import of a source file, resolved to a path under src/ (as `engine/run.ts`). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8')
  const specs = [...text.matchAll(/(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm)].map((m) => m[1] ?? m[2] ?? m[3])
  return specs
    .filter((s) => s.startsWith('.'))
    .map((s) => path.relative(SRC, path.resolve(path.dirname(file), s.replace(/\.js$/, '.ts'))))
    .filter((p) => !p.startsWith('..'))
}

/** The floor of a path under src/ (0 is the top); undefined when no floor names it. */
export function floorOf(rel: string): number | undefined {
  const i = FLOORS.findIndex((floor) => floor.some((f) => (f.endsWith('/') ? rel.startsWith(f) : rel === f)))
  return i < 0 ? undefined : i
}

const graph = new Map(files(SRC).map((f) => [path.relative(SRC, f), importsOf(f)]))

test('every source file stands on a floor of the table', () => {
  const homeless = [...graph.keys()].filter((f) => floorOf(f) === undefined)
  assert.deepEqual(homeless, [], `files on no floor of test/pure/layers.test.ts (add their folder to FLOORS and to CONTRIBUTING.md): ${homeless.join(', ')}`)
})

test('no import runs back up a floor', () => {
  const up: string[] = []
  for (const [from, tos] of graph) {
    const a = floorOf(from)
    for (const to of tos) {
      const b = floorOf(to)
      if (a !== undefined && b !== undefined && b < a) up.push(`${from} -> ${to}`)
    }
  }
  assert.deepEqual(up, [], `imports that run back up:\n${up.join('\n')}`)
})

test('no circle of imports', () => {
  // Tarjan's strongly connected components: any component of more than one file (or a file importing itself) is a circle.
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const on = new Set<string>()
  const circles: string[][] = []
  const visit = (v: string) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue
      if (!idx.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!))
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = []
      let w: string
      do {
        w = stack.pop()!
        on.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(scc.sort())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) visit(v)
  assert.deepEqual(circles, [], `circles:\n${circles.map((c) => c.join(' <-> ')).join('\n')}`)
})

test('the checker sees arrows: the CLI imports the commands, and a made-up upward import would be caught', () => {
  // Guards the reader itself (a regex that matched nothing would pass every test above).
  assert.ok((graph.get('cli.ts') ?? []).some((f) => f.startsWith('commands/')), 'cli.ts imports commands/')
  assert.ok(graph.size > 50, `${graph.size} source files read`)
  assert.ok(floorOf('engine/run.ts')! > floorOf('commands/run.ts')!, 'engine/ stands below commands/')
})
