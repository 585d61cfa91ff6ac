// Reading spec files, the environment libpq would read, and the statement-level checks on setup blocks.
import fs from 'node:fs'
import path from 'node:path'
import { UsageError } from '../errors.js'
import { parseSpec, type Spec } from './parse.js'
import { lexeme, statements } from '../lex.js'

/** The most a scenario or spec file may hold: the PostgreSQL suite's biggest spec is under 100 KB. */
export const MAX_SCENARIO_BYTES = 8 * 1024 * 1024

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a directory'
  if (st.isFIFO()) return 'a FIFO (named pipe)'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  if (st.isSocket()) return 'a socket'
  return 'not a regular file'
}

/**
 * A scenario or spec file's bytes, or bad input (exit 2, one line naming the path) when the path (symbolic links
 * followed) is not a regular file or holds more than MAX_SCENARIO_BYTES. Opened without blocking and checked on the
 * open descriptor, then read at most one byte past the bound: a FIFO never blocks race, /dev/zero never fills memory.
 */
export function readScenarioBytes(file: string): Buffer {
  let fd: number
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    throw new UsageError(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'ENXIO' ? 'it is not a regular file' : (e as Error).message}`)
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) {
      let real = file
      try {
        real = fs.realpathSync(file)
      } catch {
        /* named as given */
      }
      const via = real !== path.resolve(file) ? ` (a symbolic link to ${real})` : ''
      throw new UsageError(`cannot read ${file}${via}: it is ${kindOf(st)}, not a regular file`)
    }
    const tooBig = () => new UsageError(`cannot read ${file}: it holds more than ${MAX_SCENARIO_BYTES / 1024 / 1024} MB, more than any scenario or spec`)
    if (st.size > MAX_SCENARIO_BYTES) throw tooBig()
    const chunks: Buffer[] = []
    let total = 0
    for (;;) {
      const chunk = Buffer.alloc(Math.min(Math.max(st.size - total, 64 * 1024), MAX_SCENARIO_BYTES + 1 - total))
      const got = fs.readSync(fd, chunk, 0, chunk.length, null)
      if (got === 0) break
      chunks.push(chunk.subarray(0, got))
      total += got
      if (total > MAX_SCENARIO_BYTES) throw tooBig()
    }
    return Buffer.concat(chunks, total)
  } catch (e) {
    if (e instanceof UsageError) throw e
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code === 'EISDIR' ? 'it is a directory' : (e as Error).message}`)
  } finally {
    fs.closeSync(fd)
  }
}

/** Reads and parses a spec file; a missing file, one that is not a regular file or too big, or a bad spec is bad input (exit 2, one line). */
export function readSpec(file: string): Spec {
  return parseSpec(readScenarioBytes(file).toString('latin1'), file)
}

/** The spec's name: its file name without .spec (what pg_regress calls the test). */
export function specName(file: string): string {
  return path.basename(file).replace(/\.spec$/, '')
}

/**
 * Startup parameters as libpq sends them from the environment: PGOPTIONS (options), PGDATESTYLE (datestyle),
 * PGTZ (timezone), PGGEQO (geqo); 'default' means do not send. PGAPPNAME is returned apart.
 */
export function libpqEnv(env: NodeJS.ProcessEnv = process.env): { params: [string, string][]; appName?: string } {
  const params: [string, string][] = []
  if (env.PGOPTIONS) params.push(['options', env.PGOPTIONS])
  for (const [v, name] of [
    ['PGDATESTYLE', 'datestyle'],
    ['PGTZ', 'timezone'],
    ['PGGEQO', 'geqo'],
  ] as const) {
    const val = env[v]
    if (val !== undefined && val.toLowerCase() !== 'default') params.push([name, val])
  }
  return { params, appName: env.PGAPPNAME }
}

/**
 * What in a block never ends (a quoted string, a dollar-quoted text, a block comment), in words, or undefined.
 * race run sends a setup block between its guard's statements: an unended quote would swallow them.
 */
export function unterminated(sql: string): string | undefined {
  for (let i = 0; i < sql.length; ) {
    const l = lexeme(sql, i)
    if (!l) {
      i++
      continue
    }
    if (l.open) return { comment: 'a /* comment', string: 'a quoted string', identifier: 'a quoted identifier', dollar: 'a dollar-quoted string' }[l.kind]
    i = l.end
  }
  return undefined
}

/** The first statement of a block that ends or starts a transaction itself (race runs the block in its own). */
export function transactionControl(sql: string): string | undefined {
  for (const st of statements(sql)) {
    const w = st.toLowerCase().split(/\s+/)
    if (['begin', 'start', 'commit', 'end', 'abort'].includes(w[0])) return st
    if (w[0] === 'rollback' && w[1] !== 'to') return st
    if (w[0] === 'prepare' && w[1] === 'transaction') return st
  }
  return undefined
}

/** A block of maintenance statements that PostgreSQL refuses inside a transaction block (VACUUM, CREATE INDEX CONCURRENTLY...). */
export function maintenanceOnly(sql: string): boolean {
  const list = statements(sql)
  return (
    list.length > 0 &&
    list.every((st) => /^(vacuum|analyze|analyse|checkpoint|create\s+(unique\s+)?index\s+concurrently|reindex\s+\(?.*concurrently|drop\s+index\s+concurrently)\b/i.test(st)) &&
    !list.some((st) => /\./.test(st))
  )
}

/**
 * The texts a block runs, to read what it does: the block, and (three levels deep) what it hands to the server
 * as a body or a string: a DO block's or a function's body, the SQL an EXECUTE runs. SQL assembled at run time
 * from pieces (`'co' || 'py'`) is not read: the rule in docs/spec-setup-rules.md says so.
 */
function innerTexts(sql: string, depth = 0): string[] {
  const out = [sql]
  if (depth >= 3) return out
  for (let i = 0; i < sql.length; ) {
    const l = lexeme(sql, i)
    if (!l) {
      i++
      continue
    }
    if (l.kind === 'string') {
      const open = sql.indexOf("'", i)
      out.push(...innerTexts(sql.slice(open + 1, l.open ? l.end : l.end - 1).replace(/''/g, "'"), depth + 1))
    } else if (l.kind === 'dollar') {
      const tag = /^\$[^$]*\$/.exec(sql.slice(i))![0]
      out.push(...innerTexts(sql.slice(i + tag.length, l.open ? l.end : l.end - tag.length), depth + 1))
    }
    i = l.end
  }
  return out
}

/** A statement with its comments dropped and every string and dollar-quoted text emptied ('' and $$$$). */
function masked(st: string): string {
  let out = ''
  for (let i = 0; i < st.length; ) {
    const l = lexeme(st, i)
    if (!l) {
      out += st[i++]
      continue
    }
    out += l.kind === 'comment' ? ' ' : l.kind === 'string' ? "''" : l.kind === 'dollar' ? '$$$$' : st.slice(i, l.end)
    i = l.end
  }
  return out
}

/** Functions that act outside the database or on other connections: files, other backends, the server's state. */
const OUTSIDE_FUNCTIONS =
  /\b(lo_export|pg_file_write|pg_file_rename|pg_file_unlink|pg_file_sync|dblink\w*|pg_background_\w+|pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile\w*|pg_promote|pg_switch_wal|pg_create_restore_point|pg_stat_reset\w*|pg_create_\w*replication_slot|pg_drop_replication_slot|pg_copy_\w*replication_slot|pg_replication_origin_(create|drop))\s*\(/i

/**
 * What a block does outside the database, which no transaction can take back and no catalog shows, as a few words
 * (the first found), or undefined: COPY to a server file, COPY to or from a program, and the functions above.
 */
export function outsideReach(sql: string): string | undefined {
  for (const text of innerTexts(sql)) {
    for (const st of statements(text)) {
      const m = masked(st)
      if (/\bcopy\b[\s\S]*\b(to|from)\s+program\b/i.test(m)) return `runs a program on the server (copy ... program)`
      if (/\bcopy\b[\s\S]*\bto\s+(e\s*)?''/i.test(m)) return `writes a file on the server (copy ... to '<file>')`
      const f = OUTSIDE_FUNCTIONS.exec(m)
      if (f) return `calls ${f[1].toLowerCase()}(), which acts outside the database or on other connections`
    }
  }
  return undefined
}

/** A relation name as SQL writes one: an identifier or a quoted one, optionally qualified. */
const NAME = String.raw`(?:"(?:[^"]|"")+"|[\w$]+)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[\w$]+))*`

/**
 * What a maintenance statement (maintenanceOnly) works on, for checking before it runs outside a transaction
 * (where the guard cannot take it back): the relation names it names, or `all` and what it would touch when it
 * names none of them (every table of the database, a whole schema).
 */
export function maintenanceTargets(st: string): { names: string[] } | { all: string } {
  const s = st.trim().replace(/\s+/g, ' ')
  if (/^checkpoint$/i.test(s)) return { names: [] }
  let m = /^(vacuum|analy[sz]e)\b\s*(?:\([^)]*\))?((?:\s*\b(?:full|freeze|verbose|analy[sz]e|skip_locked)\b)*)\s*([\s\S]*)$/i.exec(s)
  if (m) {
    const rest = m[3].trim()
    if (!rest) return { all: `${m[1].toLowerCase()}s every table of the database` }
    const names: string[] = []
    let depth = 0
    let cur = ''
    for (const ch of rest) {
      if (ch === '(') depth++
      if (ch === ')') depth--
      if (ch === ',' && depth === 0) {
        names.push(cur)
        cur = ''
      } else cur += ch
    }
    names.push(cur)
    return { names: names.map((x) => x.replace(/\([\s\S]*\)\s*$/, '').trim()) }
  }
  m = new RegExp(String.raw`^create (?:unique )?index concurrently (?:if not exists )?(?:${NAME} )?on (?:only )?(${NAME})`, 'i').exec(s)
  if (m) return { names: [m[1]] }
  m = new RegExp(String.raw`^reindex (?:\([^)]*\) )?(index|table|schema|database|system) concurrently (${NAME})?`, 'i').exec(s)
  if (m) return /^(index|table)$/i.test(m[1]) && m[2] ? { names: [m[2]] } : { all: `reindexes a whole ${m[1].toLowerCase()}` }
  m = /^drop index concurrently (?:if exists )?([\s\S]*?)(?: (?:cascade|restrict))?$/i.exec(s)
  if (m) return { names: m[1].split(',').map((x) => x.trim()) }
  return { all: `runs '${s.split(' ').slice(0, 3).join(' ')}'` }
}
