// Where the database comes from: --database-url, DATABASE_URL, the PG* variables, or the embedded default.
import { UsageError } from '../errors.js'

export interface Target {
  kind: 'url' | 'env' | 'embedded'
  /** Connection URL (with its password), or undefined to let postgres.js read the PG* variables. */
  url?: string
  /** What to print: never contains a password. */
  label: string
}

export function maskUrl(url: string): string {
  const masked = url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:)[^@/?#]*@/i, '$1***@')
  // Not in the usual shape (e.g. 'postgres//u:secret@h'): mask from the first ':' to the last '@'.
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? masked : url.replace(/:.*@/, ':***@')
}

/** Validates a PostgreSQL URL; the error names what is wrong and shows the expected shape. */
export function checkUrl(raw: string, from: string): string {
  const shape = 'postgres://user:password@host:5432/dbname'
  const url = raw.trim()
  if (!url) throw new UsageError(`${from} is empty: give a URL like ${shape}`)
  let u: URL
  try {
    u = new URL(url)
  } catch {
    throw new UsageError(
      `${from} '${maskUrl(url)}' is not a valid URL (is the port a number from 1 to 65535?): use ${shape}`,
    )
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new UsageError(`${from} has scheme '${u.protocol.replace(/:$/, '')}', not postgres: use ${shape}`)
  }
  if (!u.hostname && !u.searchParams.get('host')) {
    throw new UsageError(`${from} '${maskUrl(url)}' names no host: use ${shape}`)
  }
  if (u.port && (!/^\d+$/.test(u.port) || Number(u.port) < 1 || Number(u.port) > 65535)) {
    throw new UsageError(`${from} has port '${u.port}': a port is a number from 1 to 65535`)
  }
  return url
}

export function resolveTarget(databaseUrl: string | undefined, env: NodeJS.ProcessEnv = process.env): Target {
  if (databaseUrl !== undefined) {
    const url = checkUrl(databaseUrl, '--database-url')
    return { kind: 'url', url, label: maskUrl(url) }
  }
  if (env.DATABASE_URL !== undefined && env.DATABASE_URL !== '') {
    const url = checkUrl(env.DATABASE_URL, 'DATABASE_URL')
    return { kind: 'url', url, label: maskUrl(url) }
  }
  if (env.PGHOST || env.PGDATABASE) {
    const host = env.PGHOST ?? 'localhost'
    const user = env.PGUSER ?? env.PGUSERNAME ?? ''
    const label = `postgres://${user ? user + '@' : ''}${host}:${env.PGPORT ?? 5432}/${env.PGDATABASE ?? user} (PG* variables)`
    return { kind: 'env', label }
  }
  return { kind: 'embedded', label: 'embedded' }
}
