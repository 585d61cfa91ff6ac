// A spec's setup that provably touches nothing outside race's schema, told from its text alone: only CREATE TABLE
// (columns of built-in types, with NOT NULL, NULL, DEFAULT a literal, PRIMARY KEY, UNIQUE, REFERENCES a table the
// setup made), CREATE [UNIQUE] INDEX on columns of such a table, and INSERT INTO such a table VALUES rows of
// literals. No function is called by name, no name is qualified, no type is the user's, no name starts with pg_
// (unqualified, pg_catalog's relations come first), nothing sets the session's state, nothing is bound.
//
// Such a setup, sent as it is (one implicit transaction, on the connection that runs the run's SQL, whose
// search_path is the run's schema), makes the same tables and rows as the guarded block (guard.ts) and can change
// nothing the guard looks for: so after the first trial, whose setup ran guarded, race explore's later trials run it
// without the guard's two catalog digests (engine/run.ts). Anything this reader does not know is not plain.

/** Type words a column may use: unqualified, they are pg_catalog's (searched first). */
const TYPE_WORDS = new Set([
  'int', 'integer', 'int2', 'int4', 'int8', 'smallint', 'bigint', 'serial', 'bigserial', 'smallserial', 'serial4', 'serial8',
  'numeric', 'decimal', 'real', 'float', 'float4', 'float8', 'double', 'precision', 'text', 'varchar', 'char',
  'character', 'varying', 'boolean', 'bool', 'date', 'time', 'timestamp', 'timestamptz', 'with', 'without', 'zone',
  'uuid', 'bytea', 'json', 'jsonb', 'money', 'interval',
])

type Tok = { k: 'word'; v: string } | { k: 'num'; v: string } | { k: 'str'; v: string } | { k: 'p'; v: string }

/** The block's tokens, or undefined at anything this reader does not know (a cast, a dollar quote, a qualified name...). */
function tokens(sql: string): Tok[] | undefined {
  const out: Tok[] = []
  let i = 0
  while (i < sql.length) {
    const c = sql[i]
    if (/\s/.test(c)) {
      i++
      continue
    }
    if (sql.startsWith('--', i)) {
      const nl = sql.indexOf('\n', i)
      i = nl < 0 ? sql.length : nl + 1
      continue
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i, i + 64))
    if (word) {
      // A word right before a quote (E'..', U&'..', B'..') is a special literal: not known.
      if (sql[i + word[0].length] === "'" || sql[i + word[0].length] === '&' || word[0].length >= 64) return undefined
      out.push({ k: 'word', v: word[0].toLowerCase() })
      i += word[0].length
      continue
    }
    const num = /^[0-9]+(\.[0-9]+)?/.exec(sql.slice(i, i + 40))
    if (num) {
      if (/[A-Za-z_.]/.test(sql[i + num[0].length] ?? '')) return undefined
      out.push({ k: 'num', v: num[0] })
      i += num[0].length
      continue
    }
    if (c === "'") {
      // A standard string: '' inside it; a backslash is refused (its meaning depends on standard_conforming_strings).
      let j = i + 1
      let v = ''
      for (;;) {
        if (j >= sql.length) return undefined
        if (sql[j] === '\\') return undefined
        if (sql[j] === "'") {
          if (sql[j + 1] === "'") {
            v += "'"
            j += 2
            continue
          }
          break
        }
        v += sql[j++]
      }
      out.push({ k: 'str', v })
      i = j + 1
      continue
    }
    if ('(),;-'.includes(c)) {
      out.push({ k: 'p', v: c })
      i++
      continue
    }
    return undefined
  }
  return out
}

/** Names a plain setup may give a table, an index or a column: a plain word, not pg_... (pg_catalog's come first). */
const NAME = /^[a-z_][a-z0-9_]*$/
const RESERVED = new Set(['table', 'index', 'on', 'into', 'values', 'default', 'null', 'not', 'primary', 'key', 'unique', 'references', 'constraint', 'foreign', 'check', 'using', 'select', 'true', 'false', 'create', 'insert', 'like', 'as', 'only', 'if', 'exists', 'temp', 'temporary', 'unlogged'])

class Reader {
  private at = 0
  constructor(
    private readonly t: Tok[],
    /** Tables the setup made so far (those INSERT, REFERENCES and CREATE INDEX may name). */
    readonly tables: Set<string>,
  ) {}

  get done(): boolean {
    return this.at >= this.t.length
  }

  private peek(): Tok | undefined {
    return this.t[this.at]
  }

  private word(...vs: string[]): boolean {
    const x = this.peek()
    if (x?.k === 'word' && vs.includes(x.v)) {
      this.at++
      return true
    }
    return false
  }

  private p(v: string): boolean {
    const x = this.peek()
    if (x?.k === 'p' && x.v === v) {
      this.at++
      return true
    }
    return false
  }

  private name(): string | undefined {
    const x = this.peek()
    if (x?.k !== 'word' || !NAME.test(x.v) || x.v.startsWith('pg_') || RESERVED.has(x.v)) return undefined
    this.at++
    return x.v
  }

  /** `( a, b, ... )`: plain names. */
  private names(): string[] | undefined {
    if (!this.p('(')) return undefined
    const out: string[] = []
    do {
      const n = this.name()
      if (!n) return undefined
      out.push(n)
    } while (this.p(','))
    return this.p(')') ? out : undefined
  }

  /** A literal: a number (maybe negative), a string, true, false, null. */
  private literal(): boolean {
    if (this.p('-')) {
      const x = this.peek()
      if (x?.k !== 'num') return false
      this.at++
      return true
    }
    const x = this.peek()
    if (x?.k === 'num' || x?.k === 'str') {
      this.at++
      return true
    }
    return this.word('true', 'false', 'null')
  }

  private type(): boolean {
    let n = 0
    for (;;) {
      const x = this.peek()
      if (x?.k !== 'word' || !TYPE_WORDS.has(x.v)) break
      this.at++
      n++
    }
    if (!n) return false
    // A type modifier: (n) or (p, s).
    if (this.p('(')) {
      do {
        const x = this.peek()
        if (x?.k !== 'num') return false
        this.at++
      } while (this.p(','))
      if (!this.p(')')) return false
    }
    return true
  }

  private references(): boolean {
    const table = this.name()
    if (!table || !this.tables.has(table)) return false
    if (this.peek()?.k === 'p' && this.peek()!.v === '(') return this.names() !== undefined
    return true
  }

  private tableElement(): boolean {
    if (this.word('constraint') && !this.name()) return false
    if (this.word('primary')) return this.word('key') && this.names() !== undefined
    if (this.word('unique')) return this.names() !== undefined
    if (this.word('foreign')) return this.word('key') && this.names() !== undefined && this.word('references') && this.references()
    if (!this.name() || !this.type()) return false
    for (;;) {
      const x = this.peek()
      if (!x || (x.k === 'p' && (x.v === ',' || x.v === ')'))) return true
      if (this.word('not')) {
        if (!this.word('null')) return false
      } else if (this.word('null')) {
        /* nullable */
      } else if (this.word('primary')) {
        if (!this.word('key')) return false
      } else if (this.word('unique')) {
        /* unique */
      } else if (this.word('default')) {
        if (!this.literal()) return false
      } else if (this.word('references')) {
        if (!this.references()) return false
      } else if (this.word('constraint')) {
        if (!this.name()) return false
      } else return false
    }
  }

  private createTable(): boolean {
    const table = this.name()
    if (!table || this.tables.has(table) || !this.p('(')) return false
    do if (!this.tableElement()) return false
    while (this.p(','))
    if (!this.p(')')) return false
    this.tables.add(table)
    return true
  }

  private createIndex(): boolean {
    // CREATE [UNIQUE] INDEX [name] ON table (columns).
    if (!this.word('on')) {
      if (!this.name() || !this.word('on')) return false
    }
    const table = this.name()
    return Boolean(table && this.tables.has(table) && this.names())
  }

  private insert(): boolean {
    if (!this.word('into')) return false
    const table = this.name()
    if (!table || !this.tables.has(table)) return false
    if (this.peek()?.k === 'p' && this.peek()!.v === '(' && !this.names()) return false
    if (!this.word('values')) return false
    do {
      if (!this.p('(')) return false
      do if (!this.literal() && !this.word('default')) return false
      while (this.p(','))
      if (!this.p(')')) return false
    } while (this.p(','))
    return true
  }

  /** One statement, up to its `;` or the end. */
  statement(): boolean {
    let ok: boolean
    if (this.word('create')) {
      if (this.word('table')) ok = this.createTable()
      else if (this.word('unique')) ok = this.word('index') && this.createIndex()
      else ok = this.word('index') && this.createIndex()
    } else if (this.word('insert')) ok = this.insert()
    else ok = false
    return ok && (this.done || this.p(';'))
  }
}

/**
 * Whether every block of a setup is plain (see above), read in order (a block may name the tables an earlier one
 * made). Empty blocks are plain.
 */
export function plainSetup(blocks: readonly string[]): boolean {
  const tables = new Set<string>()
  for (const b of blocks) {
    const t = tokens(b)
    if (!t) return false
    const r = new Reader(t, tables)
    while (!r.done) if (!r.statement()) return false
  }
  return true
}
