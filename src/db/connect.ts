// Opening connections with postgres.js: one max:1 instance per session (a dedicated backend each) and
// one for control. Every connection is bounded by connect_timeout and never prints notices.
import postgres, { type Sql } from 'postgres'
import { RunError } from '../errors.js'
import { canReadFatals, fatalSocket, type AlsoRead, type ServerFatal } from './fatal.js'
import { conditionName } from './sqlstate.js'
import type { Target } from './target.js'

export interface ConnectOptions {
  connectTimeoutMs: number
  applicationName: string
  schema?: string
  /** Extra startup parameters (GUCs), e.g. default_transaction_isolation. */
  params?: Record<string, string>
  onclose?: () => void
  /** false: unnamed statements only (a transaction-mode pooler lends another server connection per transaction). */
  prepare?: boolean
  /** false: no query of postgres.js's own after login (its array types), so the first statement sent is race's. */
  fetchTypes?: boolean
  /** Called with the SQLSTATE of the FATAL error the server sends as it ends the connection (see fatal.ts). */
  onFatal?: (e: ServerFatal) => void
  /** With onFatal: also every ReadyForQuery's transaction status and the WARNINGs the server sends (see fatal.ts). */
  also?: AlsoRead
}

export function connect(target: Target, o: ConnectOptions): Sql {
  const options: postgres.Options<{}> = {
    max: 1,
    onnotice: () => {},
    connect_timeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
    idle_timeout: 0,
    max_lifetime: null,
    connection: {
      application_name: o.applicationName,
      ...(o.schema ? { search_path: o.schema } : {}),
      ...(o.params ?? {}),
    },
    onclose: o.onclose,
    ...(o.prepare === false ? { prepare: false } : {}),
    ...(o.fetchTypes === false ? { fetch_types: false } : {}),
  }
  const { url, socket } = unixSocket(target.url)
  if (socket) options.path = socket
  const make = (extra: postgres.Options<{}> = {}) => (url ? postgres(url, { ...options, ...extra }) : postgres({ ...options, ...extra }))
  const sql = make()
  if (!o.onFatal || !canReadFatals(sql.options as never)) return sql
  return make({ socket: fatalSocket(o.onFatal, o.also) } as postgres.Options<{}>)
}

/**
 * libpq's Unix-socket URL, postgres://user@host:port/db?host=/folder (the embedded server's, and what pgbench and
 * PgBouncer take): postgres.js reads ?host= as a startup parameter, so the socket is given as its path option.
 */
export function unixSocket(raw: string | undefined): { url: string | undefined; socket?: string } {
  if (!raw || !/[?&]host=/.test(raw)) return { url: raw }
  const u = new URL(raw)
  const host = u.searchParams.get('host') ?? ''
  if (!host.startsWith('/')) return { url: raw }
  const port = u.searchParams.get('port') || u.port || '5432'
  u.searchParams.delete('host')
  u.searchParams.delete('port')
  return { url: u.toString(), socket: `${host}/.s.PGSQL.${port}` }
}

/** One line for a failure to connect or log in; the password never appears. */
export function connectError(err: unknown, target: Target): RunError {
  const e = err as { code?: string; message?: string }
  const code = e?.code
  const name = conditionName(code)
  let why = e?.message ?? String(err)
  if (code === 'ECONNREFUSED') why = 'connection refused (is the server running and listening there?)'
  else if (code === 'CONNECT_TIMEOUT') why = 'no answer within the connect timeout'
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') why = 'the host name does not resolve'
  else if (name) why = `${why} (${code} ${name})`
  return new RunError(`could not connect to ${target.label}: ${why}`)
}

export async function endQuietly(sql: Sql | undefined, timeoutS = 1): Promise<void> {
  if (!sql) return
  try {
    await sql.end({ timeout: timeoutS })
  } catch {
    /* the connection may already be gone: nothing to release */
  }
}
