// The drivers an application race hands its function, each with every query it sends passing through the
// session's gate first. The driver package is loaded from where the user's race module is (their node_modules, so
// the ORM they pass it to sees the same classes), else from race's own.
import { AsyncLocalStorage } from 'node:async_hooks'
import { createRequire } from 'node:module'
import { UsageError } from '../errors.js'
import type { Target } from '../db/target.js'
import { unixSocket } from '../db/connect.js'
import { PG_STATE_SQL } from '../db/pg-state.js'
import type { AppSession } from './session.js'
import type { AppDriver, PoolLike } from './types.js'

export interface AppConnOptions {
  applicationName: string
  schema: string
  params: Record<string, string>
  connectTimeoutMs: number
  /** The transaction isolation level every transaction of the connection starts at (--isolation), unless it names its own. */
  isolation?: string
  /** Ends these threads/backends from the lab's side (KILL CONNECTION on MariaDB; a thread already gone is fine). */
  terminate?: (pids: number[]) => Promise<void>
}

/**
 * What a kept connection is reset with before the next trial: everything a fresh one would not have, except the
 * driver's own prepared statements (node-postgres and postgres.js remember which they prepared: DEALLOCATE ALL,
 * as DISCARD ALL does, would break them), whose plans are re-made against the new trial's tables anyway.
 */
const RESET_SQL =
  'close all; reset session authorization; reset role; reset all; unlisten *; select pg_advisory_unlock_all(); discard plans; discard temp; discard sequences'

/** Resets, then reads the state (db/pg-state.ts): true only when it is the state the connection opened with. */
async function resetTo(opened: string, run: (text: string) => Promise<string | undefined>): Promise<boolean> {
  try {
    await run(RESET_SQL)
    return (await run(PG_STATE_SQL)) === opened
  } catch {
    return false
  }
}

/** The session a connection serves now (a kept connection serves the same session of the next trial). */
export interface Holder {
  s: AppSession
  /** The connection ended or broke: it is not kept. */
  broken: boolean
}

/** A session's connection, as the function gets it. */
export interface AppConn {
  readonly holder: Holder
  /** default_transaction_isolation, read when it connected. */
  defaultLevel: string
  /** Makes it what a fresh connection would be, for the next trial (bounded); false: it could not (close it). */
  reset(): Promise<boolean>
  /** What the function receives as `db`. */
  db: unknown
  pid: number
  pool?: PoolLike
  client?: unknown
  /** Sends SQL on the connection outside the gate (race's own: --inject's RAISE); rejects with the driver's error. */
  raw(sql: string): Promise<unknown>
  /** ROLLBACK outside the gate (after the function ended with a transaction open), bounded. */
  rollback(): Promise<void>
  close(): Promise<void>
  destroy(): Promise<void>
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any

/** Loads a driver package from the user's module's folder, else race's own. */
export async function loadDriver(name: 'pg' | 'postgres' | 'mariadb', from?: string): Promise<Any> {
  if (from) {
    try {
      const req = createRequire(from)
      const resolved = req.resolve(name)
      const { pathToFileURL } = await import('node:url')
      const mod = (await import(pathToFileURL(resolved).href)) as Any
      return mod.default ?? mod
    } catch {
      /* not installed beside the module: race's own */
    }
  }
  try {
    const mod = (await import(name)) as Any
    return mod.default ?? mod
  } catch {
    throw new UsageError(`driver '${name}' is not installed: npm install ${name} next to your race module`)
  }
}

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => (globalThis.setTimeout(r, ms) as unknown as NodeJS.Timeout).unref())])

/** PostgreSQL: the connection's startup parameters, with --isolation as its default_transaction_isolation. */
const levelParams = (o: AppConnOptions): Record<string, string> => ({ ...o.params, ...(o.isolation ? { default_transaction_isolation: o.isolation } : {}) })

// ---- node-postgres: the Client's own query, wrapped on the instance -------------------------------------------

export async function openPg(pg: Any, target: Target, o: AppConnOptions, s: AppSession): Promise<AppConn> {
  const holder: Holder = { s, broken: false }
  const options = [`-c search_path=${o.schema}`, ...Object.entries(levelParams(o)).map(([k, v]) => `-c ${k}=${String(v).replace(/ /g, '\\ ')}`)].join(' ')
  const client = new pg.Client({
    ...(target.url ? { connectionString: target.url } : {}),
    application_name: o.applicationName,
    options,
    connectionTimeoutMillis: o.connectTimeoutMs,
  })
  // A connection the server ends emits 'error' on the client: it is the session's loss, never the process's crash.
  const lost = () => {
    holder.broken = true
    holder.s.lostConnection = true
  }
  client.on('error', lost)
  client.on('end', lost)
  await client.connect()
  const raw = client.query.bind(client)
  const [me] = (await raw("select pg_backend_pid() as pid, current_setting('default_transaction_isolation') as level")).rows
  const pid = Number(me.pid)
  const state = String((await raw(PG_STATE_SQL)).rows[0].state)
  client.query = wrapPgQuery(raw, holder, client)
  const release = () => {}
  const poolClient = new Proxy(client, {
    get: (t, k) => (k === 'release' ? release : Reflect.get(t, k, t)),
  })
  const pool = poolOver(client, poolClient)
  return {
    holder,
    defaultLevel: me.level,
    reset: async () =>
      !holder.broken && (await withTimeout(resetTo(state, async (t) => (await raw(t)).rows?.[0]?.state), 2000)) === true && !holder.broken,
    db: client,
    pid,
    pool,
    client,
    raw: (t) => raw(t),
    rollback: async () => {
      await withTimeout(raw('rollback').catch(() => {}), 2000)
    },
    close: async () => {
      await withTimeout(client.end().catch(() => {}), 2000)
    },
    destroy: async () => {
      try {
        client.connection?.stream?.destroy()
      } catch {
        /* already gone */
      }
      await withTimeout(client.end().catch(() => {}), 500)
    },
  }
}

/** node-postgres's query(text | config | submittable, values?, callback?), every form gated. */
function wrapPgQuery(raw: Any, holder: Holder, client: Any) {
  return function query(config: Any, values?: Any, callback?: Any): Any {
    const s = holder.s
    const cb = typeof values === 'function' ? values : typeof callback === 'function' ? callback : undefined
    const vals = typeof values === 'function' ? undefined : values
    const text: string = typeof config === 'string' ? config : (config?.text ?? '')
    const step = s.nextQuery()
    if (config && typeof config.submit === 'function') {
      // A Submittable (pg-cursor, pg-query-stream) is handed back at once and sent once released; its end is when
      // the connection is idle again.
      s.enter(step, text).then(
        () => {
          client.once('drain', () => s.ok(undefined, undefined, undefined))
          raw(config, vals)
        },
        (e: unknown) => config.handleError?.(e),
      )
      return config
    }
    const run = (async () => {
      await s.enter(step, text)
      try {
        const res = await raw(config, vals)
        const last = Array.isArray(res) ? res[res.length - 1] : res
        if (/^\s*commit\b/i.test(text) && last?.command === 'ROLLBACK') s.lastWasRollbackOfCommit = true
        s.ok(last?.command, last?.rowCount, last?.rows)
        return res
      } catch (e) {
        s.failed(e)
        throw e
      }
    })()
    // A query the function does not await (nor catch) fails in its own promise, not in race: the session's outcome
    // says what it did (the failure is recorded when it ends), never an unhandled rejection that ends the run.
    run.catch(() => {})
    if (!cb) return run
    run.then(
      (r) => cb(undefined, r),
      (e) => cb(e),
    )
    return undefined
  }
}

/** A Pool-shaped object over the session's one connection: connect() hands out that connection, release() keeps it. */
function poolOver(client: Any, poolClient: Any): PoolLike {
  const pool: PoolLike = {
    query: (...args: unknown[]) => client.query(...args),
    connect: (cb?: (err: Error | undefined, c?: unknown, release?: () => void) => void) => {
      if (cb) {
        cb(undefined, poolClient, () => {})
        return
      }
      return Promise.resolve(poolClient)
    },
    end: async () => {},
    on: () => pool,
    totalCount: 1,
    idleCount: 1,
    waitingCount: 0,
  }
  return pool
}

// ---- postgres.js: every Query's handle(), for the queries started inside a session's function -----------------

/** The session whose function is running (postgres.js queries are sent from its async context). */
export const running = new AsyncLocalStorage<AppSession>()
const GATED = Symbol('race.gated')
const patched = new WeakSet<object>()

function patchQuery(proto: Any): void {
  if (patched.has(proto)) return
  patched.add(proto)
  const handle = proto.handle
  proto.handle = function (this: Any) {
    const s = running.getStore()
    if (!s || this.executed || this[GATED]) {
      // A query started elsewhere (race's own control connection, another copy) runs as it would.
      if (this[GATED] && !this.executed) return Promise.resolve()
      return handle.call(this)
    }
    this[GATED] = true
    const text = Array.isArray(this.strings) ? this.strings.map((x: string, i: number) => (i ? `$${i}${x}` : x)).join('') : ''
    const step = s.nextQuery()
    const q = this
    return s.enter(step, text).then(
      () => {
        Promise.prototype.then.call(
          q,
          (res: Any) => {
            const cmd = res?.command
            if (/^\s*commit\b/i.test(text) && cmd === 'ROLLBACK') s.lastWasRollbackOfCommit = true
            s.ok(cmd, res?.count, Array.isArray(res) ? res : undefined)
          },
          (e: unknown) => s.failed(e),
        )
        return handle.call(q)
      },
      (e: unknown) => q.reject(e),
    )
  }
}

export async function openPostgresJs(postgres: Any, target: Target, o: AppConnOptions, s: AppSession): Promise<AppConn> {
  const holder: Holder = { s, broken: false }
  const { url, socket } = unixSocket(target.url)
  const options: Any = {
    max: 1,
    onnotice: () => {},
    idle_timeout: 0,
    max_lifetime: null,
    connect_timeout: Math.max(1, Math.ceil(o.connectTimeoutMs / 1000)),
    connection: { application_name: o.applicationName, search_path: o.schema, ...levelParams(o) },
    onclose: () => {
      holder.broken = true
      holder.s.lostConnection = true
    },
    ...(socket ? { path: socket } : {}),
  }
  const sql = url ? postgres(url, options) : postgres(options)
  const probe = sql`select pg_backend_pid() as pid, current_setting('default_transaction_isolation') as level`
  patchQuery(Object.getPrototypeOf(probe))
  const [{ pid, level }] = await probe
  const state = String((await sql.unsafe(PG_STATE_SQL))[0].state)
  return {
    holder,
    defaultLevel: level,
    reset: async () =>
      !holder.broken &&
      (await withTimeout(running.exit(() => resetTo(state, async (t) => ((await sql.unsafe(t)) as Any)?.[0]?.state)), 2000)) === true &&
      !holder.broken,
    db: sql,
    pid: Number(pid),
    raw: (t) => running.exit(() => sql.unsafe(t)),
    rollback: async () => {
      /* sql.begin rolls back itself; a bare BEGIN left open ends with the connection */
      await withTimeout(running.exit(() => sql.unsafe('rollback').then(() => {}, () => {})), 2000)
    },
    close: async () => {
      await withTimeout(sql.end({ timeout: 1 }).catch(() => {}), 2000)
    },
    destroy: async () => {
      await withTimeout(sql.end({ timeout: 0 }).catch(() => {}), 1000)
    },
  }
}

// ---- the mariadb connector (MySQL/MariaDB): the Connection's own methods, wrapped on the instance ---------------

/** The statement's first keyword as a command tag (MySQL answers none): BEGIN, COMMIT, ROLLBACK, SELECT, INSERT... */
function tagOf(text: string): string {
  const w = /^\s*(\w+)(\s+\w+)?/.exec(text)
  if (!w) return ''
  const first = w[1].toUpperCase()
  if (first === 'START' && /^\s*TRANSACTION/i.test(w[2] ?? '')) return 'BEGIN'
  if (first === 'XA') return ''
  return first
}

export async function openMariadb(mariadb: Any, target: Target, o: AppConnOptions, s: AppSession): Promise<AppConn> {
  const { connectionOptions, normalizeError } = await import('../db/mysql.js')
  const holder: Holder = { s, broken: false }
  const init = Object.entries(o.params).map(([k, v]) => {
    if (!/^[a-z_][a-z0-9_]*$/i.test(k)) throw new UsageError(`connection parameter '${k}' is not a MySQL variable name`)
    return `set session ${k} = '${String(v).replace(/'/g, "''")}'`
  })
  if (o.isolation) init.push(`set session transaction isolation level ${o.isolation}`)
  const conn = await mariadb.createConnection({
    ...connectionOptions(target, o.connectTimeoutMs, o.schema),
    connectAttributes: { program_name: o.applicationName },
    ...(init.length ? { initSql: init } : {}),
  })
  conn.on('error', () => {
    holder.broken = true
    holder.s.lostConnection = true
  })
  const raw = {
    query: conn.query.bind(conn),
    execute: conn.execute?.bind(conn),
    batch: conn.batch?.bind(conn),
    beginTransaction: conn.beginTransaction.bind(conn),
    commit: conn.commit.bind(conn),
    rollback: conn.rollback.bind(conn),
  }
  let level: string | undefined
  for (const v of ['@@transaction_isolation', '@@tx_isolation']) {
    try {
      const [r] = await raw.query(`select ${v} as level`)
      level = String(r.level).toLowerCase().replace(/-/g, ' ')
      break
    } catch {
      /* the other name */
    }
  }
  s.codeOf = (e) => normalizeError(e, holder.broken).code
  const gated =
    (method: keyof typeof raw, fixed?: string) =>
    (...args: Any[]): Any => {
      const s = holder.s
      s.codeOf = (e) => normalizeError(e, holder.broken).code
      const first = args[0]
      const text: string = fixed ?? (typeof first === 'string' ? first : (first?.sql ?? ''))
      const step = s.nextQuery()
      const run = (async () => {
        await s.enter(step, text)
        try {
          const res = await raw[method]!(...args)
          const tag = fixed ? tagOf(fixed) : tagOf(text)
          const rows = Array.isArray(res) ? res : undefined
          s.ok(tag, rows || ['BEGIN', 'COMMIT', 'ROLLBACK'].includes(tag) ? undefined : Number(res?.affectedRows ?? 0), rows)
          return res
        } catch (e) {
          s.failed(e)
          throw e
        }
      })()
      // Not awaited by the function: its failure is the session's (recorded), not an unhandled rejection of race's.
      run.catch(() => {})
      return run
    }
  conn.query = gated('query')
  if (raw.execute) conn.execute = gated('execute')
  if (raw.batch) conn.batch = gated('batch')
  conn.beginTransaction = gated('beginTransaction', 'START TRANSACTION')
  conn.commit = gated('commit', 'COMMIT')
  conn.rollback = gated('rollback', 'ROLLBACK')
  let gone = false
  conn.on('end', () => void (gone = true))
  const end = async (now: boolean) => {
    try {
      if (now && !gone && o.terminate) {
        // Not the connector's destroy() while a statement may be in flight: it KILLs the thread from a connection
        // of its own and lets that KILL's failure (1094, the thread already ended by race's cleanup) escape. race
        // ends the thread itself (where 1094 only means it is gone) and waits (bounded) for the socket to close:
        // destroy() then has nothing left to kill.
        await withTimeout(o.terminate([Number(conn.threadId)]).catch(() => {}), 3000)
        for (let i = 0; i < 100 && !gone && conn.isValid(); i++) await new Promise((r) => globalThis.setTimeout(r, 10))
      }
      await withTimeout(now ? Promise.resolve(conn.destroy()) : conn.end(), 2000)
    } catch {
      /* already gone */
    }
  }
  return {
    holder,
    defaultLevel: level ?? '',
    // Not kept across trials: the connector's own caches (prepared statements of execute()) would not survive a reset.
    reset: async () => false,
    db: conn,
    pid: Number(conn.threadId),
    raw: (t) => raw.query(t),
    rollback: async () => {
      await withTimeout(raw.query('rollback').catch(() => {}), 2000)
    },
    close: () => end(false),
    destroy: () => end(true),
  }
}

export type { AppDriver }
