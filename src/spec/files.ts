// Reading spec files, the environment libpq would read, and the statement-level checks on setup blocks.
import fs from 'node:fs'
import path from 'node:path'
import { UsageError } from '../errors.js'
import { parseSpec, type Spec } from './parse.js'

/** Reads and parses a spec file; a missing file or a bad spec is bad input (exit 2, one line). */
export function readSpec(file: string): Spec {
  let text: string
  try {
    text = fs.readFileSync(file, 'latin1')
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    throw new UsageError(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (e as Error).message}`)
  }
  return parseSpec(text, file)
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

/** Splits SQL into statements (outside quotes, dollar quotes and comments); used to read what a block does. */
export function statements(sql: string): string[] {
  const out: string[] = []
  let cur = ''
  let i = 0
  while (i < sql.length) {
    const ch = sql[i]
    if (ch === '-' && sql[i + 1] === '-') {
      const e = sql.indexOf('\n', i)
      i = e < 0 ? sql.length : e
      continue
    }
    if (ch === '/' && sql[i + 1] === '*') {
      const e = sql.indexOf('*/', i + 2)
      i = e < 0 ? sql.length : e + 2
      cur += ' '
      continue
    }
    if (ch === "'" || ch === '"') {
      let k = i + 1
      while (k < sql.length && !(sql[k] === ch && sql[k + 1] !== ch)) k += sql[k] === ch ? 2 : 1
      cur += sql.slice(i, k + 1)
      i = k + 1
      continue
    }
    if (ch === '$') {
      const m = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))
      if (m) {
        const e = sql.indexOf(m[0], i + m[0].length)
        const stop = e < 0 ? sql.length : e + m[0].length
        cur += sql.slice(i, stop)
        i = stop
        continue
      }
    }
    if (ch === ';') {
      if (cur.trim()) out.push(cur.trim())
      cur = ''
      i++
      continue
    }
    cur += ch
    i++
  }
  if (cur.trim()) out.push(cur.trim())
  return out
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
