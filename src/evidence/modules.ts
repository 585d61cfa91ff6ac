// The local modules a race module imports, found by reading the source (no module is loaded): a counterexample file
// binds itself to their contents (evidence/format.ts), so a replay on changed code says so instead of judging it.
//
// Followed: relative specifiers ('./x.mjs', '../lib/y.js') of static import and export ... from lines, of import('...')
// and require('...') with a string literal, from the race module and then from each module found, transitively.
// A specifier without its extension, or naming .js for a TypeScript source (tsx's convention), is looked up as the
// loaders do: the file itself, then .ts/.mts/.js/.mjs/.cjs, then an index file. Not followed (docs/counterexamples.md):
// packages (bare specifiers: node_modules, the server's driver), absolute paths and URLs, tsconfig path aliases,
// specifiers computed at run time, and files read rather than imported (JSON read with fs, SQL files).
import fs from 'node:fs'
import path from 'node:path'
import { sha256 } from '../digest.js'

/** What the walk reads: JavaScript and TypeScript sources (a JSON import is hashed, not read for imports). */
const SOURCE = /\.(m?[jt]s|cjs|cts|tsx|jsx)$/
const SPECIFIERS = [
  /(?:^|[\s;}])(?:import|export)\s[^'"`;]*?\bfrom\s*(['"])([^'"\n]+)\1/gm,
  /(?:^|[\s;}])import\s*(['"])([^'"\n]+)\1/gm,
  /\bimport\s*\(\s*(['"])([^'"\n]+)\1\s*\)/g,
  /\brequire\s*\(\s*(['"])([^'"\n]+)\1\s*\)/g,
]

/** The relative specifiers a source text names. Comments are removed first, so an import in a comment is not one. */
export function relativeSpecifiers(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"\\])\/\/.*$/gm, '$1')
  const out = new Set<string>()
  for (const re of SPECIFIERS) for (const m of code.matchAll(re)) if (m[2].startsWith('./') || m[2].startsWith('../')) out.add(m[2])
  return [...out]
}

/** The file a relative specifier names from `from`'s folder, as Node and tsx look it up; undefined when none is there. */
export function resolveLocal(from: string, spec: string): string | undefined {
  const base = path.resolve(path.dirname(from), spec.replace(/[?#].*$/, ''))
  const tries = [base, ...['.ts', '.mts', '.cts', '.tsx', '.js', '.mjs', '.cjs', '.json'].map((e) => base + e)]
  if (/\.[cm]?js$/.test(base)) tries.push(base.replace(/\.js$/, '.ts').replace(/\.mjs$/, '.mts').replace(/\.cjs$/, '.cts'), base.replace(/\.js$/, '.tsx'))
  tries.push(...['index.ts', 'index.js', 'index.mjs'].map((x) => path.join(base, x)))
  return tries.find((f) => {
    try {
      return fs.statSync(f).isFile()
    } catch {
      return false
    }
  })
}

/**
 * Every local module `file` imports, directly or through another, in the order first found, absolute; the race
 * file itself not among them. A specifier that resolves to nothing is left out (the race could not load it either).
 */
export function localImports(file: string): string[] {
  const root = path.resolve(file)
  const seen = new Set<string>([root])
  const out: string[] = []
  const queue = [root]
  while (queue.length) {
    const at = queue.shift()!
    if (!SOURCE.test(at)) continue
    let text: string
    try {
      text = fs.readFileSync(at, 'utf8')
    } catch {
      continue
    }
    for (const spec of relativeSpecifiers(text)) {
      const found = resolveLocal(at, spec)
      if (!found || seen.has(found) || found.split(path.sep).includes('node_modules')) continue
      seen.add(found)
      out.push(found)
      queue.push(found)
    }
  }
  return out
}

/** The SHA-256 of a file's bytes; undefined when it cannot be read (gone). */
export function fileHash(file: string): string | undefined {
  try {
    return sha256(fs.readFileSync(file))
  } catch {
    return undefined
  }
}
