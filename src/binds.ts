// Named binds in SQL (`:user`, `:check.pending`, `:s1.check.pending`) turned into positional parameters ($1, $2, ...). The text a
// scenario shows is the text that runs: only the bind markers are replaced, and only outside string
// literals, quoted identifiers, comments and dollar-quoted bodies; `::type` casts are left alone.

export interface Parsed {
  /** The SQL with $1, $2, ... in place of the binds (the same name is the same parameter). */
  text: string
  /** Bind names in parameter order: `user`, `check.pending`, ... */
  names: string[]
}

const IDENT_START = /[A-Za-z_]/
const IDENT = /[A-Za-z0-9_]/

/** Finds every named bind of `sql`. Pure; never throws. */
export function parseBinds(sql: string): Parsed {
  const names: string[] = []
  let out = ''
  let i = 0
  const n = sql.length
  const at = (k: number) => sql[k] ?? ''
  while (i < n) {
    const ch = sql[i]
    // -- line comment
    if (ch === '-' && at(i + 1) === '-') {
      const end = sql.indexOf('\n', i)
      const stop = end < 0 ? n : end
      out += sql.slice(i, stop)
      i = stop
      continue
    }
    // /* block comment */ (nested, as PostgreSQL allows)
    if (ch === '/' && at(i + 1) === '*') {
      let depth = 0
      let k = i
      while (k < n) {
        if (sql[k] === '/' && at(k + 1) === '*') {
          depth++
          k += 2
        } else if (sql[k] === '*' && at(k + 1) === '/') {
          depth--
          k += 2
          if (depth === 0) break
        } else k++
      }
      out += sql.slice(i, k)
      i = k
      continue
    }
    // 'string' (with '' escapes; E'...' also with backslash escapes)
    if (ch === "'") {
      const escapes = i > 0 && /[eE]/.test(sql[i - 1]) && (i < 2 || !IDENT.test(sql[i - 2]))
      let k = i + 1
      while (k < n) {
        if (escapes && sql[k] === '\\') k += 2
        else if (sql[k] === "'" && at(k + 1) === "'") k += 2
        else if (sql[k] === "'") {
          k++
          break
        } else k++
      }
      out += sql.slice(i, k)
      i = k
      continue
    }
    // "quoted identifier"
    if (ch === '"') {
      let k = i + 1
      while (k < n) {
        if (sql[k] === '"' && at(k + 1) === '"') k += 2
        else if (sql[k] === '"') {
          k++
          break
        } else k++
      }
      out += sql.slice(i, k)
      i = k
      continue
    }
    // $tag$ dollar-quoted body $tag$ (not $1, a positional parameter)
    if (ch === '$' && (i === 0 || !IDENT.test(sql[i - 1]))) {
      const m = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))
      if (m) {
        const tag = m[0]
        const end = sql.indexOf(tag, i + tag.length)
        const stop = end < 0 ? n : end + tag.length
        out += sql.slice(i, stop)
        i = stop
        continue
      }
    }
    // :name, :step.column or (in an invariant) :session.step.column, but not ::cast and not a:b inside an identifier run
    if (ch === ':' && at(i + 1) !== ':' && at(i - 1) !== ':' && IDENT_START.test(at(i + 1))) {
      let k = i + 1
      while (k < n && IDENT.test(sql[k])) k++
      for (let dots = 0; dots < 2 && sql[k] === '.' && IDENT_START.test(at(k + 1)); dots++) {
        k++
        while (k < n && IDENT.test(sql[k])) k++
      }
      const name = sql.slice(i + 1, k)
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

/** The bind names of `sql`, in order of first use. */
export function bindNames(sql: string): string[] {
  return parseBinds(sql).names
}
