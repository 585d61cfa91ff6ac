// Where the database comes from: --database-url, DATABASE_URL, the PG* variables, or the embedded default.
// A mysql:// or mariadb:// URL names a MySQL/MariaDB server (InnoDB); everything else is PostgreSQL.
import { UsageError } from '../errors.js'
import type { Engine } from '../scenario.js'

export interface Target {
  kind: 'url' | 'env' | 'embedded'
  /** Connection URL (with its password), or undefined to let postgres.js read the PG* variables. */
  url?: string
  /** What to print: never contains a password. */
  label: string
  /** Which engine the URL names; absent means PostgreSQL. */
  engine?: Engine
}

/** The engine a target is (PostgreSQL unless its URL says mysql:// or mariadb://). */
export function engineOf(target: Pick<Target, 'engine'>): Engine {
  return target.engine ?? 'postgres'
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
  if (u.protocol === 'mysql:' || u.protocol === 'mariadb:') return checkMysqlUrl(url, u, from)
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new UsageError(`${from} has scheme '${u.protocol.replace(/:$/, '')}', not postgres, mysql or mariadb: use ${shape} (or mysql://user:password@host:3306/dbname)`)
  }
  if (!u.hostname && !u.searchParams.get('host')) {
    throw new UsageError(`${from} '${maskUrl(url)}' names no host: use ${shape}`)
  }
  if (u.port && (!/^\d+$/.test(u.port) || Number(u.port) < 1 || Number(u.port) > 65535)) {
    throw new UsageError(`${from} has port '${u.port}': a port is a number from 1 to 65535`)
  }
  return url
}

/** A MySQL/MariaDB URL: a host, a port that is a port, and a database to connect to (race creates its own beside it). */
function checkMysqlUrl(url: string, u: URL, from: string): string {
  const shape = `${u.protocol}//user:password@host:3306/dbname`
  if (!u.hostname) throw new UsageError(`${from} '${maskUrl(url)}' names no host: use ${shape}`)
  if (u.port && (!/^\d+$/.test(u.port) || Number(u.port) < 1 || Number(u.port) > 65535)) {
    throw new UsageError(`${from} has port '${u.port}': a port is a number from 1 to 65535`)
  }
  const db = decodeURIComponent(u.pathname.replace(/^\//, ''))
  if (db.includes('/')) throw new UsageError(`${from} '${maskUrl(url)}' names the database '${db}': a MySQL database name has no '/': use ${shape}`)
  return url
}

/** The target of a checked URL. */
function urlTarget(url: string): Target {
  const scheme = url.trim().slice(0, url.trim().indexOf(':')).toLowerCase()
  return scheme === 'mysql' || scheme === 'mariadb' ? { kind: 'url', url, label: maskUrl(url), engine: 'mysql' } : { kind: 'url', url, label: maskUrl(url) }
}

export function resolveTarget(databaseUrl: string | undefined, env: NodeJS.ProcessEnv = process.env): Target {
  if (databaseUrl !== undefined) {
    return urlTarget(checkUrl(databaseUrl, '--database-url'))
  }
  if (env.DATABASE_URL !== undefined && env.DATABASE_URL !== '') {
    return urlTarget(checkUrl(env.DATABASE_URL, 'DATABASE_URL'))
  }
  if (env.PGHOST || env.PGDATABASE) {
    const host = env.PGHOST ?? 'localhost'
    const user = env.PGUSER ?? env.PGUSERNAME ?? ''
    const label = `postgres://${user ? user + '@' : ''}${host}:${env.PGPORT ?? 5432}/${env.PGDATABASE ?? user} (PG* variables)`
    return { kind: 'env', label }
  }
  return { kind: 'embedded', label: 'embedded' }
}
