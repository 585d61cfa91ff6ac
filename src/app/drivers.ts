// The drivers an application race hands its function, each with every query it sends passing through the
// session's gate first. The driver package is loaded from where the user's race module is (their node_modules, so
// the ORM they pass it to sees the same classes), else from race's own.
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { UsageError } from '../errors.js'
import { contained } from '../lifecycle.js'
import { underTest } from './contain.js'
import { importModule } from '../load-module.js'
import type { Target } from '../db/target.js'
import { unixSocket } from '../db/connect.js'
import { PG_STATE_SQL } from '../db/pg-state.js'
import { sessionFor, type AppSession } from './session.js'
import { stringParts, type Part } from './parts.js'
import { statements } from '../lex.js'
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
  /** The race module's open() runs on it (once per connection, before its first trial): its queries pass ungated. */
  ungated?: boolean
}

/** A session's connection, as the function gets it. */
export interface AppConn {
  readonly holder: Holder
  /** default_transaction_isolation, read when it connected. */
  defaultLevel: string
  /** Makes it what a fresh connection would be, for the next trial (bounded); false: it could not (close it). */
  reset(): Promise<boolean>
  /**
   * After the race module's open(): what it SET on the connection (an ORM's time zone, its client_min_messages) is
   * part of what the connection is, restored by every reset after RESET ALL.
   */
  opened?(): Promise<void>
  /** What the function receives as `db`. */
  db: unknown
  pid: number
  pool?: PoolLike
  client?: unknown
  /** node-postgres: a pg module whose Client and Pool hand out this connection (ctx.pg). */
  pg?: unknown
  /** Drops the listeners an ORM added through ctx.pg's handles (after a trial whose code built its ORM itself). */
  sweep?(): void
  /** What the race module's open() returned for this connection (the session's first argument), and its close. */
  app?: { value: unknown; close?: () => Promise<void> }
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
export async function loadDriver(name: 'pg' | 'postgres' | 'mariadb' | 'mysql2', from?: string): Promise<Any> {
  if (from) {
    try {
      const req = createRequire(from)
      const resolved = req.resolve(name)
      const mod = (await importModule(pathToFileURL(resolved).href)) as Any
      return mod.default ?? mod
    } catch {
      /* not installed beside the module: race's own */
    }
  }
  try {
    const mod = (await importModule(name)) as Any
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
  // A COMMIT with no transaction in progress is answered with a warning (25P01) and the tag COMMIT: the session hears it.
  client.on('notice', (n: Any) => holder.s.noticed(n?.code))
  await client.connect()
  listenInCallersContext(client)
  const raw = client.query.bind(client)
  const ending = async () => {
    try {
      client.connection?.stream?.destroy()
    } catch {
      /* already gone */
    }
    await withTimeout(client.end().catch(() => {}), 500)
  }
  // A failure once connected (the run's role dropped under a late login) ends the connection it opened.
  const [me, state0] = await closingOnFailure(ending, async () => [
    (await raw("select pg_backend_pid() as pid, current_setting('default_transaction_isolation') as level")).rows[0],
    String((await raw(PG_STATE_SQL)).rows[0].state),
  ])
  const pid = Number(me.pid)
  let state = state0
  let replay = ''
  client.query = wrapPgQuery(raw, holder, client)
  const release = () => {}
  const poolClient = new Proxy(client, {
    get: (t, k) => (k === 'release' ? release : Reflect.get(t, k, t)),
  })
  const pool = poolOver(client, poolClient)
  const module = sessionPg(pg, client)
  return {
    pg: module.pg,
    sweep: module.sweep,
    holder,
    defaultLevel: me.level,
    reset: async () =>
      !holder.broken &&
      (await withTimeout(resetTo(state, async (t) => (await raw(t === RESET_SQL && replay ? `${t}; ${replay}` : t)).rows?.[0]?.state), 2000)) === true &&
      !holder.broken,
    opened: async () => {
      const set = (await raw("select name, setting from pg_catalog.pg_settings where source = 'session' order by name")).rows as { name: string; setting: string }[]
      const lit = (x: string) => `'${x.replace(/'/g, "''")}'`
      replay = set.length ? `select ${set.map((r) => `pg_catalog.set_config(${lit(r.name)}, ${lit(r.setting)}, false)`).join(', ')}` : ''
      state = String((await raw(PG_STATE_SQL)).rows[0].state)
    },
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
    destroy: ending,
  }
}

/**
 * A listener the code under test puts on the connection (`db.on('notice', ...)`, or on a ctx.pg client) is called
 * from the connection's socket, which race opened outside the session: it runs in the context it was added in, so
 * that what it throws is that session's failure (app/contain.ts), never race's "internal error". removeListener(fn)
 * finds it (EventEmitter reads a wrapper's `listener`). Listeners added outside a session (race's own) are untouched.
 */
function listenInCallersContext(client: Any): void {
  for (const m of ['on', 'addListener', 'once', 'prependListener', 'prependOnceListener'] as const) {
    const add = client[m]
    if (typeof add !== 'function') continue
    client[m] = function (this: unknown, event: string | symbol, fn: unknown) {
      if (typeof fn !== 'function' || !underTest.getStore()) return add.call(client, event, fn)
      const scope = new AsyncResource('race.listener')
      const bound = function (this: unknown, ...a: unknown[]) {
        return scope.runInAsyncScope(() => {
          try {
            return (fn as (...x: unknown[]) => unknown).apply(this, a)
          } catch (e) {
            if (!contained(e, 'uncaught exception')) throw e
            return undefined
          }
        })
      }
      ;(bound as unknown as { listener: unknown }).listener = fn
      return add.call(client, event, bound)
    }
  }
}

/** Runs what follows a connect; if it fails, the connection is ended before the failure goes on. */
async function closingOnFailure<T>(end: () => Promise<unknown>, body: () => Promise<T>): Promise<T> {
  try {
    return await body()
  } catch (e) {
    await end().catch(() => {})
    throw e
  }
}

/**
 * Sends a released query (`send`): its failure is recorded as the session's and thrown on, after the transaction race
 * opened for a split query is rolled back; a split query PostgreSQL refuses inside a transaction block (25001) is sent
 * again as it is (AppSession.refusedInBlock).
 */
async function sent<T>(s: AppSession, send: () => Promise<T>, failedTx?: () => void): Promise<T> {
  try {
    try {
      return await send()
    } catch (e) {
      if (await s.refusedInBlock(e)) return await send()
      throw e
    }
  } catch (e) {
    s.failed(e)
    await s.abortWrapped()
    // Where the failure left the transaction (a string that began one and failed leaves it open, aborted).
    failedTx?.()
    throw e
  }
}

/** node-postgres's query(text | config | submittable, values?, callback?), every form gated. */
function wrapPgQuery(raw: Any, holder: Holder, client: Any) {
  return function query(config: Any, values?: Any, callback?: Any): Any {
    // The race module's open() (an ORM's initialisation, once per connection) is not raced.
    if (holder.ungated) return raw(config, values, callback)
    const s = sessionFor(holder.s)
    const cb = typeof values === 'function' ? values : typeof callback === 'function' ? callback : undefined
    const vals = typeof values === 'function' ? undefined : values
    const text: string = typeof config === 'string' ? config : (config?.text ?? '')
    const step = s.nextQuery()
    if (config && typeof config.submit === 'function') {
      // A Submittable (pg-cursor, pg-query-stream) is handed back at once and sent once released; its end is when
      // the connection is idle again.
      s.enter(step, text, false, false).then(
        () => {
          client.once('drain', () => s.ok(undefined, undefined, undefined))
          raw(config, vals)
        },
        (e: unknown) => config.handleError?.(e),
      )
      return config
    }
    const status = () => (typeof client.getTransactionStatus === 'function' ? client.getTransactionStatus() : undefined)
    // A simple query of several statements (no parameters, not prepared): in race explore (and a replay that names its
    // second part) its statements are points of their own, as other sessions' statements run between them in real
    // life. The function gets what node-postgres gives for the whole string (app/parts.ts).
    const simple = (typeof config === 'string' || (config && typeof config === 'object' && !config.name && !config.rows && config.queryMode !== 'extended' && !(config.values?.length > 0))) && !(vals?.length > 0)
    const plan = simple && s.splitStringAt(step) ? stringParts(text, s.inTx) : undefined
    s.snapshots = true
    const run = (async () => {
      if (plan) return await runParts(s, step, plan, (t) => raw(typeof config === 'string' ? t : { ...config, text: t }, vals), status)
      await s.enter(step, text)
      const res = await sent(s, () => raw(config, vals), () => s.serverTx(status()))
      const last = Array.isArray(res) ? res[res.length - 1] : res
      if (/^\s*commit\b/i.test(text) && last?.command === 'ROLLBACK') s.lastWasRollbackOfCommit = true
      s.ok(last?.command, last?.rowCount, last?.rows)
      s.serverTx(status())
      await s.commitPoint()
      return res
    })()
    // A query the function does not await (nor catch) fails in its own promise, not in race: the session's outcome
    // says what it did (the failure is recorded when it ends), never an unhandled rejection that ends the run.
    run.catch(() => {})
    if (!cb) return run
    // node-postgres calls back (err) or (null, result), from its socket: what the callback throws is an uncaught exception.
    run.then(
      (r) => process.nextTick(cb, null, r),
      (e) => process.nextTick(cb, e),
    )
    return undefined
  }
}

/**
 * Runs a string of several statements part by part (app/parts.ts), each released at its own point (q3, q3/2, ...),
 * and gives what the driver gives for the whole string: one Result per statement (an array of them), or the error
 * of the statement that failed (its position counted in the whole string), the later ones not run. Outside a
 * transaction the string's implicit transaction is race's, committed at its commit point (q3:commit) or rolled back
 * when a statement fails, as PostgreSQL does with the string's.
 */
async function runParts(s: AppSession, step: string, plan: { parts: Part[]; wrap: boolean }, send: (text: string) => Promise<Any>, status: () => string | undefined): Promise<Any> {
  const results: Any[] = []
  try {
    for (const [k, part] of plan.parts.entries()) {
      const label = k ? `${step}/${k + 1}` : step
      const last = k === plan.parts.length - 1
      await s.enter(label, part.text, false, false, { first: k === 0, last, wrap: plan.wrap })
      let res: Any
      try {
        res = await sent(s, () => send(part.text), () => s.serverTx(status()))
      } catch (e) {
        const pos = Number((e as { position?: string })?.position)
        if (e && typeof e === 'object' && Number.isInteger(pos) && pos > 0) (e as { position?: string }).position = String(pos + part.start)
        throw e
      }
      const got = Array.isArray(res) ? res : [res]
      results.push(...got)
      const tail = got[got.length - 1]
      if (/^\s*commit\b/i.test(statements(part.text).at(-1) ?? '') && tail?.command === 'ROLLBACK') s.lastWasRollbackOfCommit = true
      s.ok(tail?.command, tail?.rowCount, tail?.rows)
      s.serverTx(status())
    }
  } catch (e) {
    s.abortParts()
    throw e
  }
  await s.commitPoint()
  return results.length === 1 ? results[0] : results
}

/** A Pool-shaped object over the session's one connection: connect() hands out that connection, release() keeps it. */
function poolOver(client: Any, poolClient: Any): PoolLike {
  const pool: PoolLike = {
    query: (...args: unknown[]) => client.query(...args),
    // pg-pool's shapes: callback (undefined, client, release), called back later (never before connect returns).
    connect: (cb?: (err: Error | undefined, c?: unknown, release?: () => void) => void) => {
      if (typeof cb === 'function') {
        setImmediate(() => cb(undefined, poolClient, () => {}))
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

/**
 * A node-postgres module for one session (ctx.pg): the real module, except that its Client and Pool hand out the
 * session's one connection, already connected and gated, whatever options they are given. An ORM that builds its
 * clients from a pg module it is handed (TypeORM's `driver`, Sequelize's `dialectModule`, a pg-pool's `Client`, a
 * Pool for Prisma's adapter or knex's `connectionPool`) then sends every query through race's gate. `new Client()`
 * is a handle on the connection: connect() resolves at once, end() lets go of the handle (never the connection),
 * properties the library sets on it (pg-pool's release) stay on the handle. `new Pool()` is a real pg.Pool subclass
 * (an adapter's `instanceof pg.Pool` holds) whose connect() hands out such a handle and whose end() ends nothing.
 */
function sessionPg(pg: Any, client: Any): { pg: Any; sweep(): void } {
  // Listeners a library adds on a handle go on the connection. They come off when the handle is ended (a pool that
  // lets a client go), and after a trial whose code built its ORM itself (sweep: the next trial builds another);
  // an ORM the race module's open() built keeps its handles, and their listeners, with the connection.
  type Listener = { event: string | symbol; fn: (...a: unknown[]) => void; once?: boolean }
  const handles = new Set<Listener[]>()
  const sweep = () => {
    for (const mine of handles) for (const l of mine.splice(0)) client.removeListener(l.event, l.fn)
    handles.clear()
  }
  const handle = (): Any => {
    const own = new Map<PropertyKey, unknown>()
    const mine: Listener[] = []
    handles.add(mine)
    const on =
      (method: 'on' | 'once' | 'prependListener') =>
      (event: string | symbol, fn: (...a: unknown[]) => void) => {
        client[method](event, fn)
        mine.push({ event, fn, once: method === 'once' })
        return proxy
      }
    const off = (event: string | symbol, fn: (...a: unknown[]) => void) => {
      client.removeListener(event, fn)
      const i = mine.findIndex((l) => l.event === event && l.fn === fn)
      if (i >= 0) mine.splice(i, 1)
      return proxy
    }
    const letGo = () => {
      for (const l of mine.splice(0)) client.removeListener(l.event, l.fn)
      handles.delete(mine)
    }
    const later = (cb: unknown, ...args: unknown[]) => {
      if (typeof cb !== 'function') return Promise.resolve()
      setImmediate(() => (cb as (...a: unknown[]) => void)(...args))
      return undefined
    }
    const overrides: Record<PropertyKey, unknown> = {
      // node-postgres's Client#connect: callback (null, client), or a promise of the client; then its 'connect'
      // event (this handle's listeners: the connection itself connected long before).
      connect: (cb?: unknown) => {
        const done = new Promise<Any>((resolve) =>
          setImmediate(() => {
            resolve(proxy)
            if (typeof cb === 'function') cb(null, proxy)
            for (const l of mine.filter((x) => x.event === 'connect')) {
              if (l.once) off(l.event, l.fn)
              l.fn.call(proxy)
            }
          }),
        )
        return typeof cb === 'function' ? undefined : done
      },
      end: (cb?: unknown) => {
        letGo()
        return later(cb)
      },
      release: () => {},
      on: on('on'),
      addListener: on('on'),
      once: on('once'),
      prependListener: on('prependListener'),
      removeListener: off,
      off,
      removeAllListeners: (event?: string | symbol) => {
        for (const l of mine.filter((x) => event === undefined || x.event === event)) off(l.event, l.fn)
        return proxy
      },
    }
    const proxy: Any = new Proxy(client, {
      get: (t, k) => (own.has(k) ? own.get(k) : k in overrides ? overrides[k] : Reflect.get(t, k, t)),
      set: (_t, k, v) => {
        own.set(k, v)
        return true
      },
      has: (t, k) => own.has(k) || k in t,
      deleteProperty: (_t, k) => own.delete(k),
    })
    return proxy
  }
  // `new ctx.pg.Client(options)`: a handle on the session's connection (a derived constructor may return an object).
  const Client: Any = function Client() {
    return handle()
  }
  Object.setPrototypeOf(Client, pg.Client)
  Client.prototype = pg.Client.prototype
  class Pool extends pg.Pool {
    // pg-pool's connect: callback (undefined, client, release), or a promise of the client; a new client is
    // announced with 'connect', every checkout with 'acquire', and release(err) with 'release' (err, client).
    connect(cb?: (err: Error | undefined, c?: unknown, release?: (err?: unknown) => void) => void): Any {
      const h = handle()
      let released = false
      h.release = (err?: unknown) => {
        if (released) throw new Error('Release called on client which has already been released to the pool.')
        released = true
        this.emit('release', err, h)
      }
      const done = new Promise<Any>((resolve) =>
        setImmediate(() => {
          this.emit('connect', h)
          this.emit('acquire', h)
          resolve(h)
          if (typeof cb === 'function') cb(undefined, h, h.release)
        }),
      )
      return typeof cb === 'function' ? undefined : done
    }
    query(...args: unknown[]): Any {
      return client.query(...args)
    }
    end(cb?: () => void): Any {
      if (typeof cb === 'function') {
        setImmediate(cb)
        return undefined
      }
      return Promise.resolve()
    }
    get totalCount() {
      return 1
    }
    get idleCount() {
      return 1
    }
    get waitingCount() {
      return 0
    }
  }
  const mod: Any = new Proxy(pg, {
    get: (t, k) => (k === 'Client' ? Client : k === 'Pool' ? Pool : k === 'default' ? mod : Reflect.get(t, k)),
  })
  return { pg: mod, sweep }
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
    s.snapshots = true
    return s.enter(step, text).then(
      () => {
        // The query's own resolve and reject: the function gets its result only after the session's commit point
        // (a split query, AppSession.commitPoint), or its failure after race's transaction is rolled back.
        const resolve = q.resolve
        const reject = q.reject
        q.resolve = (res: Any) => {
          const cmd = res?.command
          if (/^\s*commit\b/i.test(text) && cmd === 'ROLLBACK') s.lastWasRollbackOfCommit = true
          s.ok(cmd, res?.count, Array.isArray(res) ? res : undefined)
          s.commitPoint().then(
            () => resolve(res),
            (e: unknown) => reject(e),
          )
        }
        q.reject = (e: unknown) => {
          s.failed(e)
          s.abortWrapped().then(() => reject(e))
        }
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
    onnotice: (n: Any) => holder.s.noticed(n?.code),
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
  const [{ pid, level }, state] = await closingOnFailure(
    () => withTimeout(sql.end({ timeout: 0 }).catch(() => {}), 1000),
    async () => [(await probe)[0], String((await sql.unsafe(PG_STATE_SQL))[0].state)] as const,
  )
  return {
    holder,
    defaultLevel: level,
    reset: async () =>
      !holder.broken &&
      (await withTimeout(running.exit(() => resetTo(state, async (t) => ((await sql.unsafe(t)) as Any)?.[0]?.state)), 2000)) === true &&
      !holder.broken,
    db: sql,
    pid: Number(pid),
    // Awaited inside exit(): a thenable awaited later would be handled in the session's context, and gated as its query.
    raw: (t) => running.exit(async () => await sql.unsafe(t)),
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
      if (holder.ungated) return raw[method]!(...args)
      const s = sessionFor(holder.s)
      s.codeOf = (e) => normalizeError(e, holder.broken).code
      const first = args[0]
      const text: string = fixed ?? (typeof first === 'string' ? first : (first?.sql ?? ''))
      const step = s.nextQuery()
      const run = (async () => {
        await s.enter(step, text)
        const res: Any = await sent(s, () => raw[method]!(...args))
        const tag = fixed ? tagOf(fixed) : tagOf(text)
        const rows = Array.isArray(res) ? res : undefined
        s.ok(tag, rows || ['BEGIN', 'COMMIT', 'ROLLBACK'].includes(tag) ? undefined : Number(res?.affectedRows ?? 0), rows)
        await s.commitPoint()
        return res
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

// ---- mysql2 (MySQL/MariaDB): the callback Connection's own query and execute, wrapped on the instance ------------

/**
 * mysql2: one callback-API Connection per session, its query() and execute() gated on the instance. Its promise
 * API (`conn.promise()`, what `mysql2/promise` hands out) calls these same methods, and so do beginTransaction,
 * commit and rollback (which send START TRANSACTION, COMMIT and ROLLBACK through query): every form is a step.
 * `db` is the promise-API connection; ctx.client the callback one (the same connection).
 */
export async function openMysql2(mysql: Any, target: Target, o: AppConnOptions, s: AppSession): Promise<AppConn> {
  const { connectionOptions, normalizeError } = await import('../db/mysql.js')
  const holder: Holder = { s, broken: false }
  // Checked before the connection opens (createConnection starts it): a refusal leaves nothing to close.
  for (const k of Object.keys(o.params)) {
    if (!/^[a-z_][a-z0-9_]*$/i.test(k)) throw new UsageError(`connection parameter '${k}' is not a MySQL variable name`)
  }
  const base = connectionOptions(target, o.connectTimeoutMs, o.schema)
  const conn = mysql.createConnection({
    host: base.host,
    port: base.port,
    user: base.user,
    ...(base.password ? { password: base.password } : {}),
    database: base.database,
    connectTimeout: base.connectTimeout,
    connectAttributes: { program_name: o.applicationName },
  })
  const call = <T>(f: (cb: (err: unknown, r?: T) => void) => void) =>
    new Promise<T>((resolve, reject) => f((err, r) => (err ? reject(err) : resolve(r as T))))
  conn.on('error', () => {
    holder.broken = true
    holder.s.lostConnection = true
  })
  let gone = false
  conn.on('end', () => void (gone = true))
  await call((cb) => conn.connect(cb))
  const raw = { query: conn.query.bind(conn), execute: conn.execute.bind(conn) }
  await closingOnFailure(
    async () => conn.destroy(),
    async () => {
      for (const [k, v] of Object.entries(o.params)) await call((cb) => raw.query(`set session ${k} = ?`, [String(v)], cb))
      if (o.isolation) await call((cb) => raw.query(`set session transaction isolation level ${o.isolation}`, cb))
    },
  )
  let level: string | undefined
  for (const v of ['@@transaction_isolation', '@@tx_isolation']) {
    try {
      const rows = await call<Any[]>((cb) => raw.query(`select ${v} as level`, cb))
      level = String(rows[0].level).toLowerCase().replace(/-/g, ' ')
      break
    } catch {
      /* the other name */
    }
  }
  s.codeOf = (e) => normalizeError(e, holder.broken).code
  const gated =
    (method: 'query' | 'execute') =>
    (...args: Any[]): Any => {
      if (holder.ungated) return raw[method](...args)
      const s = sessionFor(holder.s)
      s.codeOf = (e) => normalizeError(e, holder.broken).code
      const first = args[0]
      const text: string = typeof first === 'string' ? first : (first?.sql ?? '')
      const cbAt = args.findIndex((a) => typeof a === 'function')
      const cb = cbAt >= 0 ? args[cbAt] : undefined
      const rest = cbAt >= 0 ? args.slice(0, cbAt) : args
      const step = s.nextQuery()
      const run = (async () => {
        await s.enter(step, text)
        const [res, fields] = await sent(s, () => new Promise<[Any, Any]>((resolve, reject) => raw[method](...rest, (err: unknown, r: Any, f: Any) => (err ? reject(err) : resolve([r, f])))))
        const tag = tagOf(text)
        const rows = Array.isArray(res) ? res : undefined
        s.ok(tag, rows || ['BEGIN', 'COMMIT', 'ROLLBACK'].includes(tag) ? undefined : Number(res?.affectedRows ?? 0), rows)
        await s.commitPoint()
        return [res, fields]
      })()
      // Not awaited by the function: its failure is the session's (recorded), not an unhandled rejection of race's.
      run.catch(() => {})
      run.then(
        ([r, f]) => cb?.(null, r, f),
        (e) => cb?.(e),
      )
      // The callback form's Query object (an event emitter for streaming) cannot exist before race releases the query.
      return undefined
    }
  conn.query = gated('query')
  conn.execute = gated('execute')
  const promise = conn.promise()
  const end = async (now: boolean) => {
    try {
      if (now && !gone && o.terminate) await withTimeout(o.terminate([Number(conn.threadId)]).catch(() => {}), 3000)
      if (now) conn.destroy()
      else await withTimeout(call((cb) => conn.end(cb)).catch(() => conn.destroy()), 2000)
    } catch {
      /* already gone */
    }
  }
  return {
    holder,
    defaultLevel: level ?? '',
    // Not kept across trials: mysql2 caches prepared statements (execute) that a reset would not account for.
    reset: async () => false,
    db: promise,
    client: conn,
    pid: Number(conn.threadId),
    raw: (t) => call((cb) => raw.query(t, cb)),
    rollback: async () => {
      await withTimeout(call((cb) => raw.query('rollback', cb)).catch(() => {}), 2000)
    },
    close: () => end(false),
    destroy: () => end(true),
  }
}

export type { AppDriver }
