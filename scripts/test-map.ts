// docs/dev/test-map.md: for each module of src/, the test files that import it, and those that reach it only on the way
// (through the CLI they run, or through the src modules they import). Read from the import lines of src/, test/ and
// the scripts the tests import, never written by hand. `npm run readme` or `npm run test-map` rewrites it;
// `node dist/scripts/test-map.js --check` exits 1 when the committed file differs; test/pure/test-map.test.ts checks
// the same, and that every src module is reached by some test.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const TEST_MAP_DOC = path.join(ROOT, 'docs', 'dev', 'test-map.md')

/**
 * Arrows that are no import line: a module that another one starts by its path. Each names the text in the source
 * file that shows the arrow (test/pure/test-map.test.ts checks it is still there).
 */
export const BY_PATH: readonly { from: string; to: string; shown: string; why: string }[] = [
  { from: 'app/isolated.ts', to: 'session-host.ts', shown: "new URL('session-host.js'", why: "an isolated session's worker thread runs it" },
  { from: 'load.ts', to: 'self-hook.ts', shown: "register(new URL('self-hook.js'", why: "registered as a module hook, so that a race file's `import 'racelab'` resolves" },
]

/** A repository file (as `src/engine/run.ts`) and the repository files it imports (relative imports only). */
function importsOf(root: string, rel: string): string[] {
  const text = fs.readFileSync(path.join(root, rel), 'utf8')
  const specs = [...text.matchAll(/(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm)].map((m) => m[1] ?? m[2] ?? m[3])
  return specs
    .filter((s) => s.startsWith('.'))
    .map((s) => path.relative(root, path.resolve(path.dirname(path.join(root, rel)), s.replace(/\.js$/, '.ts'))).split(path.sep).join('/'))
    .filter((p) => !p.startsWith('..') && fs.existsSync(path.join(root, p)))
}

function tsFiles(root: string, dir: string): string[] {
  if (!fs.existsSync(path.join(root, dir))) return []
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const p = `${dir}/${e.name}`
    return e.isDirectory() ? tsFiles(root, p) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : []
  })
}

/** Names a file declares at its top level (exported or not), each with the text of its declaration. */
function declarations(text: string): Map<string, string> {
  const out = new Map<string, string>()
  const starts = [...text.matchAll(/^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?|const|let|class)\s+([A-Za-z_$][\w$]*)/gm)]
  starts.forEach((m, i) => out.set(m[1], text.slice(m.index, starts[i + 1]?.index ?? text.length)))
  return out
}

/** Text that starts race's CLI: bin/race's path. */
const NAMES_BIN = /['"]bin['"]\s*,\s*['"]race['"]|['"]bin\/race['"]/

/** What a file's text uses of the names it imports: its code outside import lines and comments. */
const withoutImports = (text: string) =>
  text
    .replace(/^import\s[^;]*?from\s*'[^']+'\s*$/gm, '')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"\w])\/\/[^\n]*/g, '$1')

export interface TestMap {
  modules: string[]
  direct: Map<string, string[]>
  onTheWay: Map<string, string[]>
  unreached: string[]
}

/** The map, read from the tree at `root`. */
export function testMap(root = ROOT): TestMap {
  const src = tsFiles(root, 'src').filter((f) => f !== 'src/cli.bundle.ts')
  const tests = tsFiles(root, 'test').filter((f) => f.endsWith('.test.ts'))
  const graph = new Map<string, string[]>()
  const edges = (f: string): string[] => {
    let e = graph.get(f)
    if (!e) {
      e = importsOf(root, f)
      if (f.startsWith('src/')) for (const b of BY_PATH) if (f === `src/${b.from}`) e.push(`src/${b.to}`)
      graph.set(f, e)
    }
    return e
  }
  // Which names of which helper (a test-side module: test/support, scripts/, ...) run the CLI, to a fixpoint: a
  // declaration that names bin/race, or uses such a name of its own file or of a helper it imports.
  const helpers = new Set<string>()
  const walk = (f: string) => {
    for (const g of edges(f)) if (!g.startsWith('src/') && !g.endsWith('.test.ts') && !helpers.has(g)) (helpers.add(g), walk(g))
  }
  tests.forEach(walk)
  const text = new Map([...helpers, ...tests].map((f) => [f, fs.readFileSync(path.join(root, f), 'utf8')]))
  const decls = new Map([...helpers].map((h) => [h, declarations(text.get(h)!)]))
  const runsCli = new Map<string, Set<string>>([...helpers].map((h) => [h, new Set<string>()]))
  // The names a file imports from each helper, as it calls them there: `{ race, exploreJson as ej }` gives race, ej.
  const importedNames = (f: string): { local: string; name: string; from: string }[] =>
    [...text.get(f)!.matchAll(/^import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*'(\.[^']+)'/gm)].flatMap((m) => {
      const from = path.relative(root, path.resolve(path.dirname(path.join(root, f)), m[2].replace(/\.js$/, '.ts'))).split(path.sep).join('/')
      return m[1]
        .split(',')
        .map((x) => x.trim().replace(/^type\s+/, ''))
        .filter(Boolean)
        .map((x) => {
          const [name, local] = x.split(/\s+as\s+/)
          return { local: local ?? name, name, from }
        })
    })
  const called = (body: string, name: string) => new RegExp(`(?<![\\w$.'"])${name.replace(/\$/g, '\\$')}\\b(?!['"])`).test(body)
  const usesCli = (body: string, f: string, own: Iterable<string>) =>
    NAMES_BIN.test(body) || [...own].some((n) => called(body, n)) || importedNames(f).some((i) => runsCli.get(i.from)?.has(i.name) && called(body, i.local))
  for (let changed = true; changed; ) {
    changed = false
    for (const h of helpers)
      for (const [name, body] of decls.get(h)!) {
        if (runsCli.get(h)!.has(name)) continue
        if (usesCli(withoutImports(body), h, runsCli.get(h)!)) (runsCli.get(h)!.add(name), (changed = true))
      }
  }
  const below = (from: string[]): Set<string> => {
    const seen = new Set<string>()
    const stack = [...from]
    while (stack.length) {
      const f = stack.pop()!
      for (const g of edges(f)) if (g.startsWith('src/') && !seen.has(g)) (seen.add(g), stack.push(g))
    }
    return seen
  }
  const direct = new Map<string, string[]>(src.map((m) => [m, []]))
  const onTheWay = new Map<string, string[]>(src.map((m) => [m, []]))
  for (const t of tests) {
    const name = t.slice('test/'.length, -'.test.ts'.length)
    const own = [t, ...[...helpers].filter((h) => reaches(t, h, edges))]
    const named = new Set(own.flatMap((f) => edges(f).filter((g) => g.startsWith('src/'))))
    const cli = usesCli(withoutImports(text.get(t)!), t, [])
    const reached = below([...named, ...(cli ? ['src/start.ts'] : [])])
    if (cli) reached.add('src/start.ts')
    for (const m of src) {
      if (named.has(m)) direct.get(m)!.push(name)
      else if (reached.has(m)) onTheWay.get(m)!.push(name)
    }
  }
  const unreached = src.filter((m) => !direct.get(m)!.length && !onTheWay.get(m)!.length)
  return { modules: src, direct, onTheWay, unreached }
}

/** Whether `from` imports `to`, through test-side files only. */
function reaches(from: string, to: string, edges: (f: string) => string[]): boolean {
  const seen = new Set<string>()
  const stack = [from]
  while (stack.length) {
    const f = stack.pop()!
    for (const g of edges(f)) {
      if (g === to) return true
      if (!g.startsWith('src/') && !seen.has(g)) (seen.add(g), stack.push(g))
    }
  }
  return false
}

/** A list of test files as a cell: each by name when there are a few, else how many per area. */
function cell(names: string[], few = 6): string {
  if (!names.length) return ''
  if (names.length <= few) return names.join(', ')
  const areas = new Map<string, number>()
  for (const n of names) areas.set(n.split('/')[0], (areas.get(n.split('/')[0]) ?? 0) + 1)
  return `${names.length} files (${[...areas].map(([a, k]) => `${a} ${k}`).join(', ')})`
}

/** docs/dev/test-map.md as the tree at `root` makes it. */
export function testMapDoc(root = ROOT): string {
  const m = testMap(root)
  const rows = m.modules.map((f) => `| \`${f.slice('src/'.length)}\` | ${cell(m.direct.get(f)!, 12)} | ${cell(m.onTheWay.get(f)!)} |`)
  return [
    '# Which tests reach which module',
    '',
    '<!-- Generated from the import lines of src/ and test/ by scripts/test-map.ts (npm run readme, or npm run test-map): do not edit by hand. -->',
    '',
    'For each module of `src/`, the test files (under `test/`, without `.test.ts`) that import it, and those that reach',
    'it only on the way: through the modules they import, or through the CLI they run (`bin/race`, which loads',
    '`start.ts` and from it `cli.ts`). A test imports a module when the test file, or a helper of its own that it',
    'imports (`test/support/`, `scripts/`, ...), names the module in an import line. A test runs the CLI when its text',
    "names bin/race's path or calls a helper that does (`race()`, `spawnRace()`, `exploreJson()`, ...); command lines a",
    'test reads from a document and runs through a shell (cli/guide, cli/workflow) are not seen. Arrows that are no',
    `import line: ${BY_PATH.map((b) => `\`${b.from}\` starts \`${b.to}\` (${b.why})`).join('; ')}.`,
    '',
    'Changing a module: run the files of its first column, then those of the second that concern the change',
    '(CONTRIBUTING.md, "Layout").',
    '',
    '| module | imported by | reached on the way by |',
    '|---|---|---|',
    ...rows,
    '',
    `Modules no test reaches: ${m.unreached.length ? m.unreached.map((f) => `\`${f.slice('src/'.length)}\``).join(', ') : 'none'}.`,
    '',
  ].join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const doc = testMapDoc()
  if (process.argv.includes('--check')) {
    const same = fs.existsSync(TEST_MAP_DOC) && fs.readFileSync(TEST_MAP_DOC, 'utf8') === doc
    if (!same) process.stderr.write('docs/dev/test-map.md differs from what scripts/test-map.ts writes: run npm run test-map\n')
    process.exitCode = same ? 0 : 1
  } else {
    fs.writeFileSync(TEST_MAP_DOC, doc)
    const m = testMap()
    process.stdout.write(`docs/dev/test-map.md: ${m.modules.length} modules, ${m.unreached.length} reached by no test\n`)
  }
}
