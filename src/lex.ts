// The lexer of SQL text race reads blocks with (quotes, dollar quotes, comments), and the split into statements:
// its own module, with no import, so that the engine can split a step's statements without loading the spec parser.

/**
 * Where the comment, string, quoted identifier or dollar-quoted text starting at `i` ends (the index after it),
 * as PostgreSQL's scanner reads it: `--` to the end of the line, nested block comments, '' and "" doubled,
 * backslash escapes in E'' strings, $tag$ only where an identifier does not go on. undefined: none starts at
 * `i`; `open`: it never ends.
 */
export function lexeme(sql: string, i: number): { end: number; open: boolean; kind: 'comment' | 'string' | 'identifier' | 'dollar' } | undefined {
  const ch = sql[i]
  const before = sql[i - 1] ?? ''
  if (ch === '-' && sql[i + 1] === '-') {
    const e = sql.indexOf('\n', i)
    return { end: e < 0 ? sql.length : e, open: false, kind: 'comment' }
  }
  if (ch === '/' && sql[i + 1] === '*') {
    let depth = 1
    let k = i + 2
    while (k < sql.length && depth > 0) {
      if (sql[k] === '/' && sql[k + 1] === '*') (depth++, (k += 2))
      else if (sql[k] === '*' && sql[k + 1] === '/') (depth--, (k += 2))
      else k++
    }
    return { end: k, open: depth > 0, kind: 'comment' }
  }
  if (ch === "'" || ch === '"') {
    const escapes = ch === "'" && /[eE]/.test(before) && !/[\w$]/.test(sql[i - 2] ?? '')
    let k = i + 1
    while (k < sql.length) {
      if (escapes && sql[k] === '\\') k += 2
      else if (sql[k] === ch && sql[k + 1] === ch) k += 2
      else if (sql[k] === ch) return { end: k + 1, open: false, kind: ch === '"' ? 'identifier' : 'string' }
      else k++
    }
    return { end: sql.length, open: true, kind: ch === '"' ? 'identifier' : 'string' }
  }
  if (ch === '$' && !/[\w$]/.test(before)) {
    const m = /^\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$/.exec(sql.slice(i))
    if (m) {
      const e = sql.indexOf(m[0], i + m[0].length)
      return { end: e < 0 ? sql.length : e + m[0].length, open: e < 0, kind: 'dollar' }
    }
  }
  return undefined
}

/** `sql` with its strings, dollar quotes, quoted identifiers and comments blanked (each a space): what its words are. */
export function bareWords(sql: string): string {
  const known = bare.get(sql)
  if (known !== undefined) return known
  let out = ''
  let i = 0
  while (i < sql.length) {
    const l = lexeme(sql, i)
    if (l) {
      out += ' '
      i = l.end
      continue
    }
    out += sql[i++]
  }
  remember(bare, sql, out)
  return out
}

/**
 * Whether SQL asks for a row lock without waiting (NOWAIT, SKIP LOCKED), outside strings and comments: the one test,
 * for the engine's declared steps (engine/points.ts, engine/session.ts) and an application's queries (app/session.ts).
 */
export function triesLock(sql: string): boolean {
  return /\b(nowait|skip\s+locked)\b/i.test(bareWords(sql))
}

/** Splits SQL into statements (outside quotes, dollar quotes and comments); used to read what a block does. */
export function statements(sql: string): string[] {
  const known = split.get(sql)
  if (known) return [...known]
  const out: string[] = []
  let cur = ''
  let i = 0
  while (i < sql.length) {
    const l = lexeme(sql, i)
    if (l) {
      cur += l.kind === 'comment' ? ' ' : sql.slice(i, l.end)
      i = l.end
      continue
    }
    if (sql[i] === ';') {
      if (cur.trim()) out.push(cur.trim())
      cur = ''
      i++
      continue
    }
    cur += sql[i]
    i++
  }
  if (cur.trim()) out.push(cur.trim())
  remember(split, sql, out)
  return [...out]
}

/**
 * What bareWords and statements made of a text, kept: race explore asks both about the same few steps at every
 * moment of every order (points.ts, session.ts), and lexing a step again each time was most of the JavaScript an
 * order costs between two steps. Pure functions of the text; a text seen again is answered from here. Bounded: texts
 * of a step's size only (a guarded setup block is lexed once a run), and past MEMO texts it is emptied and fills again.
 */
const MEMO = 2000
const MEMO_CHARS = 4096
const bare = new Map<string, string>()
const split = new Map<string, readonly string[]>()
function remember<T>(memo: Map<string, T>, sql: string, v: T): void {
  if (sql.length > MEMO_CHARS) return
  if (memo.size >= MEMO) memo.clear()
  memo.set(sql, v)
}

