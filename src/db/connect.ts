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
  /**
   * false: no query of postgres.js's own after login (its array types), so the first statement sent is race's.
   */
  fetchTypes?: boolean
  /**
   * The array types this connection (the run's own PostgresLab's control connection, which fetched them at login) holds,
   * and those created since, read by one small query sent with the caller's first (no round trip of its own): arrays
   * are parsed as with postgres.js's own fetch. Given by the run that owns the source, never looked up process-wide
   * (an earlier or another run's control connection). Without it, or when it has fetched none, postgres.js fetches them.
   */
  typesFrom?: Sql
  /**
   * With typesFrom: the query for the array types created since the source connected is not sent by itself but with
   * the caller's first statement, which the caller sends through firstQuery (one round trip for both: postgres.js
   * sends what is asked before login one statement at a time).
   */
  typesWithFirst?: boolean
  /** Called with the SQLSTATE of the FATAL error the server sends as it ends the connection (see fatal.ts). */
  onFatal?: (e: ServerFatal) => void
  /** With onFatal: also every ReadyForQuery's transaction status and the WARNINGs the server sends (see fatal.ts). */
  also?: AlsoRead
}

/** The parts of postgres.js's parsed options that hold its type handling (not in its public types). */
interface TypeOptions {
  parsers: Record<number, unknown>
  serializers: Record<number, unknown>
  shared: { typeArrayMap: Record<number, number> }
}

/** PostgreSQL's text[]: the array type whose parsing (no element parser, ',' between elements) every array type created after the source connected has. */
const TEXT_ARRAY = 1009
/** Array types created after initdb (FirstNormalObjectId): the only ones the source may not know. */
const NEW_ARRAY_TYPES = `select b.oid, b.typarray from pg_catalog.pg_type a left join pg_catalog.pg_type b on b.oid = a.typelem
 where a.typcategory = 'A' and a.oid >= 16384 group by b.oid, b.typarray order by b.oid`

/**
 * The source's array types, if it has fetched them, and what postgres.js's fetch would register for an array type
 * created after the source connected: text[]'s parser and serializer (its element is a type created after initdb
 * too, which has no parser of its own, and only box[], a built-in, uses ';' between elements).
 */
function typesOf(source: Sql | undefined): { from: TypeOptions; parse: unknown; serialize: unknown } | undefined {
  const from = source?.options as unknown as TypeOptions | undefined
  const parse = from?.parsers[TEXT_ARRAY]
  const serialize = from?.serializers[TEXT_ARRAY]
  if (!from || !parse || !serialize || !Object.keys(from.shared.typeArrayMap).length) return undefined
  return { from, parse, serialize }
}

/**
 * Gives `sql` the source's array types, and queues (before anything else on it) the query for those created since.
 * The source's tables become the prototypes of this connection's own (postgres.js only looks them up, by key and
 * with `in`), so nothing is copied; what this connection registers stays its own.
 */
function copyTypes(sql: Sql, { from, parse, serialize }: NonNullable<ReturnType<typeof typesOf>>, withFirst: boolean): void {
  const to = sql.options as unknown as TypeOptions
  Object.setPrototypeOf(to.parsers, from.parsers)
  Object.setPrototypeOf(to.serializers, from.serializers)
  Object.setPrototypeOf(to.shared.typeArrayMap, from.shared.typeArrayMap)
  const register = (rows: readonly Record<string, unknown>[]) => {
    for (const { oid, typarray } of rows as unknown as { oid: number; typarray: number }[]) {
      if (to.parsers[typarray] && to.serializers[typarray]) continue
      to.shared.typeArrayMap[oid] = typarray
      to.parsers[typarray] = parse
      to.serializers[typarray] = serialize
    }
  }
  if (withFirst) return void typesPending.set(sql, register)
  sql.unsafe(NEW_ARRAY_TYPES).then(register, () => {
    /* the connection failed: the caller's own first query reports it */
  })
}

/** Connections opened with typesWithFirst whose first statement has not gone yet: what registers the types. */
const typesPending = new WeakMap<Sql, (rows: readonly Record<string, unknown>[]) => void>()

/**
 * A connection's first statement (`text`: no parameters), carrying the query for its array types when it was opened
 * with typesWithFirst: one simple-protocol message, one round trip. Its rows.
 */
export async function firstQuery(sql: Sql, text: string): Promise<Record<string, unknown>[]> {
  const register = typesPending.get(sql)
  if (!register) return (await sql.unsafe(text)) as unknown as Record<string, unknown>[]
  typesPending.delete(sql)
  const [types, rows] = (await sql.unsafe(`${NEW_ARRAY_TYPES}; ${text}`)) as unknown as Record<string, unknown>[][]
  register(types)
  return rows
}

/** Per target: whether race can read the FATAL a server sends as it ends a connection (see fatal.ts), decided once. */
const fatalsReadable = new Map<string, boolean>()

/**
 * The startup parameters of the connection that runs a run's own SQL (setup, invariant: 'race setup'): its commits
 * do not wait for the WAL to reach the disk. The run's schema is made again and its setup run before every trial;
 * what they commit is seen by everyone as soon as it returns all the same, and only a crash of the server, which a
 * run does not outlive, could lose it. The same in every trial of a run (the first included), so every trial's
 * setup sees what the first's did. Sessions' connections keep the server's own.
 */
export const RUN_SQL_PARAMS: Readonly<Record<string, string>> = { synchronous_commit: 'off' }

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
  }
  const { url, socket } = unixSocket(target.url)
  if (socket) options.path = socket
  const types = o.typesFrom ? typesOf(o.typesFrom) : undefined
  if (o.fetchTypes === false || types) options.fetch_types = false
  const make = (extra: postgres.Options<{}> = {}) => (url ? postgres(url, { ...options, ...extra }) : postgres({ ...options, ...extra }))
  const key = target.url ?? ''
  let sql: Sql | undefined
  if (o.onFatal && !fatalsReadable.has(key)) {
    sql = make()
    fatalsReadable.set(key, canReadFatals(sql.options as never))
  }
  if (o.onFatal && fatalsReadable.get(key)) sql = make({ socket: fatalSocket(o.onFatal, o.also) } as postgres.Options<{}>)
  sql ??= make()
  if (types) copyTypes(sql, types, Boolean(o.typesWithFirst))
  return sql
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
