// Named binds in SQL (`:user`, `:check.pending`, `:s1.check.pending`) turned into positional parameters ($1, $2, ...). The text a
// scenario shows is the text that runs: only the bind markers are replaced, and only outside string
// literals, quoted identifiers, comments and dollar-quoted bodies; `::type` casts are left alone.

export interface Parsed {
  /** The SQL with $1, $2, ... in place of the binds (the same name is the same parameter), or one ? per use (MySQL). */
  text: string
  /** Bind names in parameter order: `user`, `check.pending`, ... (with ?, a name used twice is listed twice) */
  names: string[]
}

/**
 * PostgreSQL's numbered parameters ($1: a name used twice is one parameter), or MySQL's `?` (one per use;
 * there `\` escapes inside '...' strings and `identifiers` are quoted with backticks, so both are skipped).
 */
export type Placeholders = 'dollar' | 'question'

const IDENT_START = /[A-Za-z_]/
const IDENT = /[A-Za-z0-9_]/

/** `sql[k]`, or '' past either end. A function of its own, not a closure made at every call: esbuild's keepNames
 * (the bundle) names each closure as it is made, which cost more than the lexing itself on every character. */
function charAt(sql: string, k: number): string {
  return sql[k] ?? ''
}

/**
 * Where the text that starts at `i` and is not SQL code ends: a -- or nested /* comment, a 'string' (E'...'
 * and every MySQL string with backslash escapes), a "quoted identifier", a MySQL `identifier`, a $tag$ body.
 * Returns `i` itself when code starts there.
 */
export function skipNonCode(sql: string, i: number, style: Placeholders = 'dollar'): number {
  const mysql = style === 'question'
  const n = sql.length
  const ch = sql[i]
  // -- line comment
  if (ch === '-' && charAt(sql, i + 1) === '-') {
    const end = sql.indexOf('\n', i)
    return end < 0 ? n : end
  }
  // /* block comment */ (nested, as PostgreSQL allows)
  if (ch === '/' && charAt(sql, i + 1) === '*') {
    let depth = 0
    let k = i
    while (k < n) {
      if (sql[k] === '/' && charAt(sql, k + 1) === '*') {
        depth++
        k += 2
      } else if (sql[k] === '*' && charAt(sql, k + 1) === '/') {
        depth--
        k += 2
        if (depth === 0) break
      } else k++
    }
    return k
  }
  // 'string' (with '' escapes; E'...' also with backslash escapes, as every MySQL string) and "quoted identifier" (with "")
  if (ch === "'" || ch === '"') {
    const escapes = ch === "'" && (mysql || (i > 0 && /[eE]/.test(sql[i - 1]) && (i < 2 || !IDENT.test(sql[i - 2]))))
    return closingQuote(sql, i, escapes)
  }
  // `quoted identifier` (MySQL)
  if (mysql && ch === '`') {
    const end = sql.indexOf('`', i + 1)
    return end < 0 ? n : end + 1
  }
  // $tag$ dollar-quoted body $tag$ (not $1, a positional parameter)
  if (!mysql && ch === '$' && (i === 0 || !IDENT.test(sql[i - 1]))) {
    const m = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))
    if (m) {
      const tag = m[0]
      const end = sql.indexOf(tag, i + tag.length)
      return end < 0 ? n : end + tag.length
    }
  }
  return i
}

/**
 * Finds every named bind of `sql`. Pure; never throws. A colon is a bind only where a value can stand: not in
 * a `::cast`, nor inside a subscript's brackets (`arr[1:n]`, `arr[:n]` are array slices; an ARRAY[...]
 * constructor's elements are values, so `array[:a, :b]` has binds), nor in text that is not code.
 */
export function parseBinds(sql: string, style: Placeholders = 'dollar'): Parsed {
  const memo = style === 'question' ? parsedQuestion : parsedDollar
  let p = memo.get(sql)
  if (!p) {
    p = parse(sql, style)
    if (sql.length <= MEMO_CHARS) {
      if (memo.size >= MEMO) memo.clear()
      memo.set(sql, p)
    }
  }
  return { text: p.text, names: [...p.names] }
}

/**
 * What parseBinds made of a text, by placeholder style: a session parses its step's SQL each time it sends it, the
 * same few texts over every trial of a run. A pure function of the text; bounded: texts of a step's size only (the
 * run parses its setup once, engine/run.ts), and emptied past MEMO texts.
 */
const MEMO = 2000
const MEMO_CHARS = 4096
const parsedDollar = new Map<string, Parsed>()
const parsedQuestion = new Map<string, Parsed>()

function parse(sql: string, style: Placeholders): Parsed {
  const mysql = style === 'question'
  const names: string[] = []
  let out = ''
  let i = 0
  const n = sql.length
  // Open brackets, innermost last: true for a subscript (a slice's colon is not a bind), false for ARRAY[.
  const brackets: boolean[] = []
  while (i < n) {
    const ch = sql[i]
    const k = skipNonCode(sql, i, style)
    if (k > i) {
      out += sql.slice(i, k)
      i = k
      continue
    }
    if (ch === '[') brackets.push(!/\barray\s*$/i.test(out.slice(-64)))
    else if (ch === ']') brackets.pop()
    // :name, :step.column or (in an invariant) :session.step.column, but not ::cast and not a slice bound
    const inSubscript = brackets.length > 0 && brackets[brackets.length - 1]
    if (ch === ':' && !inSubscript && charAt(sql, i + 1) !== ':' && charAt(sql, i - 1) !== ':' && IDENT_START.test(charAt(sql, i + 1))) {
      let k = i + 1
      while (k < n && IDENT.test(sql[k])) k++
      for (let dots = 0; dots < 2 && sql[k] === '.' && IDENT_START.test(charAt(sql, k + 1)); dots++) {
        k++
        while (k < n && IDENT.test(sql[k])) k++
      }
      const name = sql.slice(i + 1, k)
      if (mysql) {
        names.push(name)
        out += '?'
        i = k
        continue
      }
      let idx = names.indexOf(name)
      if (idx < 0) {
        names.push(name)
        idx = names.length - 1
      }
      out += `$${idx + 1}`
      i = k
      continue
    }
    out += ch
    i++
  }
  return { text: out, names }
}

/**
 * The SQL without a final `;` (and what follows it, when that is only blanks and comments), so that it can be
 * wrapped as a subquery: `select 1; -- done` becomes `select 1`, and a trailing `-- comment` without one is kept
 * (the caller wraps with a newline before its closing parenthesis).
 */
export function withoutFinalSemicolon(sql: string, style: Placeholders = 'dollar'): string {
  let last = -1
  for (let i = 0; i < sql.length; ) {
    const k = skipNonCode(sql, i, style)
    if (k > i) {
      // Strings, quoted identifiers and dollar bodies are code as far as the end is concerned; comments are not.
      if (!(sql.startsWith('--', i) || sql.startsWith('/*', i))) last = k - 1
      i = k
      continue
    }
    if (!/\s/.test(sql[i])) last = i
    i++
  }
  return last >= 0 && sql[last] === ';' ? sql.slice(0, last).trim() : sql.trim()
}

/** The index just past the quote that closes the one at `i` (a doubled quote is part of the text). */
function closingQuote(sql: string, i: number, backslashEscapes: boolean): number {
  const q = sql[i]
  let k = i + 1
  while (k < sql.length) {
    if (backslashEscapes && sql[k] === '\\') k += 2
    else if (sql[k] === q && sql[k + 1] === q) k += 2
    else if (sql[k] === q) return k + 1
    else k++
  }
  return k
}

/** The bind names of `sql`, in order of first use. */
export function bindNames(sql: string): string[] {
  return parseBinds(sql).names
}
