// What is left of process-wide state in src/ is what CONTRIBUTING.md ("Process-wide state: the few that must be")
// names, and why: a run's own state (its abort, cleanup, colour style, its connections' type source) belongs to its
// RunContext or its PostgresLab, never to a module. Read from the source: every module-level `let`, and every module-level
// Map, Set, WeakMap, WeakSet, AsyncLocalStorage or array whose name is not a CONSTANT's (a constant table is read
// only), must be on that list; and every name on the list must still be one, so the list stays true.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../support/conformance.js'

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? files(p) : e.name.endsWith('.ts') ? [p] : []
  })
}

const MUTABLE = /^(?:export )?(?:let ([A-Za-z_$][\w$]*)|const ([a-z_$][\w$]*)(?::[^=]+)? = (?:new (?:Map|Set|WeakMap|WeakSet|AsyncLocalStorage)\b|\[\]))/gm

/** Every module-level mutable of src/, as `src/file.ts name`. */
function found(): string[] {
  const out: string[] = []
  for (const f of files(path.join(ROOT, 'src'))) {
    const rel = path.relative(ROOT, f).split(path.sep).join('/')
    for (const m of fs.readFileSync(f, 'utf8').matchAll(MUTABLE)) out.push(`${rel} ${m[1] ?? m[2]}`)
  }
  return out.sort()
}

/** The names CONTRIBUTING.md's list gives: each item's `src/...ts` files, then the `names` after each. */
function listed(): string[] {
  const doc = fs.readFileSync(path.join(ROOT, 'CONTRIBUTING.md'), 'utf8')
  const at = doc.indexOf('### Process-wide state: the few that must be')
  assert.ok(at >= 0, 'CONTRIBUTING.md has its list of process-wide state')
  const section = doc.slice(at, doc.indexOf('\n### ', at + 1))
  const out: string[] = []
  for (const item of section.split(/\n- /).slice(1)) {
    // An item names a file, then its names, and maybe another file with its own names, before the colon that says why.
    let file = ''
    for (const [, word] of item.slice(0, item.indexOf(': ')).matchAll(/`([^`]+)`/g)) {
      if (word.startsWith('src/')) file = word
      else out.push(`${file} ${word}`)
    }
  }
  return out.sort()
}

test('every module-level mutable of src/ is one CONTRIBUTING.md names as process-wide, and says why', () => {
  const names = new Set(listed())
  const unlisted = found().filter((x) => !names.has(x))
  assert.deepEqual(unlisted, [], `state of the process that CONTRIBUTING.md does not name (a run's own belongs to its RunContext):\n${unlisted.join('\n')}`)
})

test("every name on CONTRIBUTING.md's list is still module-level state in that file", () => {
  const gone = listed().filter((x) => {
    const [file, name] = x.split(' ')
    const text = fs.existsSync(path.join(ROOT, file)) ? fs.readFileSync(path.join(ROOT, file), 'utf8') : ''
    return !new RegExp(`^(?:export )?(?:let|const) ${name}\\b`, 'm').test(text)
  })
  assert.deepEqual(gone, [], 'named in CONTRIBUTING.md but not module-level state there any more')
})
