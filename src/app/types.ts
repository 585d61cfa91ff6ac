// An application race: the user's own function (imported from their code, unchanged), run by N sessions, each on
// one real connection of the driver the function already uses. Every query the function sends is a step that race
// sees before it is sent and releases when the schedule says so; a point the code marks (ctx.point('check')) is a
// step that sends nothing.

/** The drivers a session can hand the function: node-postgres (a connected Client), postgres.js (a `sql`), the mariadb connector (a connected Connection), or mysql2 (its promise-API Connection; ctx.client the callback one), the last two on MySQL/MariaDB. */
export type AppDriver = 'pg' | 'postgres' | 'mariadb' | 'mysql2'

// The drivers' own types, for what a session's function receives (`db`, ctx.pool, ctx.client, ctx.pg). Each is an
// inline import under a @ts-ignore kept in the published .d.ts: pg (its types are @types/pg) and mysql2 are optional
// peer dependencies, and a project that has not installed one still compiles racelab's types (that import is then
// `any`, and ctx.pool falls back to race's own PoolLike).
/** @ts-ignore node-postgres (pg, @types/pg): an optional peer dependency; not installed, this is `any` */
export type PgClient = import('pg').Client
/** @ts-ignore node-postgres (pg, @types/pg): an optional peer dependency; not installed, this is `any` */
export type PgPool = import('pg').Pool
/** @ts-ignore node-postgres (pg, @types/pg): an optional peer dependency; not installed, this is `any` */
export type PgModule = typeof import('pg')
/** @ts-ignore postgres.js: a dependency of racelab; unresolved, this is `any` */
export type PostgresSql = import('postgres').Sql<{}> // eslint-disable-line @typescript-eslint/no-empty-object-type
/** @ts-ignore the mariadb connector: a dependency of racelab; unresolved, this is `any` */
export type MariadbConnection = import('mariadb').Connection
/** @ts-ignore mysql2: an optional peer dependency; not installed, this is `any` */
export type Mysql2Connection = import('mysql2/promise').Connection
/** @ts-ignore mysql2: an optional peer dependency; not installed, this is `any` */
export type Mysql2CallbackConnection = import('mysql2').Connection

/** `F` where `T` is `any` (a driver's types that are not installed), else `T`. */
type Installed<T, F> = 0 extends 1 & T ? F : T

/**
 * What each driver hands a session: `db` (its first argument without open()), and what ctx carries for it: with
 * node-postgres, `pool`, `client` and `pg` (always there); with mysql2, `client`; the others, none of them.
 */
export interface AppDriverTypes {
  pg: { db: PgClient; ctx: { pool: Installed<PgPool, PoolLike>; client: PgClient; pg: PgModule } }
  postgres: { db: PostgresSql; ctx: { pool?: undefined; client?: undefined; pg?: undefined } }
  mariadb: { db: MariadbConnection; ctx: { pool?: undefined; client?: undefined; pg?: undefined } }
  mysql2: { db: Mysql2Connection; ctx: { pool?: undefined; client: Mysql2CallbackConnection; pg?: undefined } }
}

/** One driver's `db`; with no one driver named (AppDriver itself, what race's own code sees), `any`. */
export type AppDriverType<D extends AppDriver> = AppDriver extends D ? any : AppDriverTypes[D]['db'] // eslint-disable-line @typescript-eslint/no-explicit-any

/** What ctx carries for one driver; with no one driver named, each field optional and loose. */
export type AppDriverCtx<D extends AppDriver> = AppDriver extends D
  ? {
      /**
       * node-postgres only: a Pool-shaped object over the session's one connection, for code that takes a pool
       * (`query`, `connect()` handing out the same connection, `release()` a no-op, `end()` a no-op); typed as a
       * `pg.Pool` for `driver: 'pg'` where pg's types are installed.
       */
      pool?: PoolLike
      /** node-postgres: the connected Client (the same object the function gets as `db`); mysql2: the callback-API Connection. */
      client?: unknown
      /**
       * node-postgres only: a pg module whose `Client` and `Pool` hand out the session's connection, whatever options
       * they are given (TypeORM's `driver`, Sequelize's `dialectModule`, pg-pool's `Client`, `new ctx.pg.Pool()` for
       * Prisma's PrismaPg or knex's `connectionPool`).
       */
      pg?: any // eslint-disable-line @typescript-eslint/no-explicit-any
    }
  : AppDriverTypes[D]['ctx']

/** What a session's function receives besides its driver object, whatever the driver. */
export interface AppCtxBase {
  /** The session's name: s1, s2, ... */
  session: string
  /** 0-based index of the session. */
  index: number
  /** The number of sessions. */
  n: number
  /** The user every session of this trial acts for (a fresh uuid per trial, as for built-in scenarios). */
  user: string
  /** The run's schema (already the connection's search_path). */
  schema: string
  /**
   * Marks a point in the application's code: a step that sends nothing (its label is the name). A barrier may stand
   * there (`barrier: 'check'`) and a permutation may name it (`s1.check`); elsewhere it passes at once.
   */
  point(name: string): Promise<void>
}

/**
 * What a session's function receives besides its driver object, typed by the race's `driver`: for 'pg', ctx.pool
 * (a `pg.Pool`), ctx.client (the `Client`) and ctx.pg (the `pg` module); for 'mysql2', ctx.client (its callback API).
 */
export type AppCtx<D extends AppDriver = AppDriver> = AppCtxBase & AppDriverCtx<D>

/** What open() receives: the session's connection and its ctx.pg, before any trial (no user, no points). */
export type AppOpenCtx<D extends AppDriver = AppDriver> = Pick<AppCtxBase, 'session' | 'index' | 'n' | 'schema'> & AppDriverCtx<D>

/** The Pool-shaped object over one connection (node-postgres). */
export interface PoolLike {
  query(...args: unknown[]): unknown
  connect(cb?: (err: Error | undefined, client?: unknown, release?: () => void) => void): Promise<unknown> | void
  end(): Promise<void>
  on(event: string, listener: (...a: unknown[]) => void): PoolLike
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
}

/**
 * What `export default defineAppRace({...})` declares. `D` is its driver (what `db` and ctx are typed as); `O` what
 * `session` receives first: what `open` returns (awaited), else the driver's `db`.
 */
export interface AppRace<D extends AppDriver = AppDriver, O = AppDriverType<D>> {
  /** kebab-case id (default: the file's name without .race.mjs). */
  id?: string
  title?: string
  /** A few lines for race show. */
  story?: string[]
  driver: D
  /** Sessions: the default for --n, or { default, min, max }. */
  sessions?: number | { default: number; min?: number; max?: number }
  /** SQL run on the control connection, in the run's own schema, before each trial. */
  setup?: readonly string[]
  /**
   * The function under test: one session's work (for example `(db, ctx) => createOrder(db, ctx.user, 42)`).
   * Returning is the session's success; throwing an error that `rejects` declares is the application's rejection
   * (its message is the reason); a driver error ends the session failed with its SQLSTATE; any other throw (a
   * TypeError, a ReferenceError, an error class not declared) is a failure of the code under test: the trial cannot
   * be decided.
   */
  session(db: NoInferHere<O>, ctx: AppCtx<D>): unknown
  /**
   * Optional: what the application builds once at start-up (an ORM's DataSource, a Prisma client, a knex instance),
   * built for each session's connection once, before its first trial, from the driver object and ctx.pg. Its queries
   * (an ORM's version check, its SETs) are not steps. What it returns is what `session` receives as its first
   * argument; the connection is kept across trials, and so is this.
   */
  open?(db: AppDriverType<D>, ctx: AppOpenCtx<D>): O | PromiseLike<O>
  /** Optional: undoes open() when the connection closes (`(orm) => orm.destroy()`), given at most 2 s (or the step timeout if shorter). */
  close?(opened: NoInferHere<O>): unknown
  /**
   * The errors the application throws on purpose to say no (a 409, a validation error): error classes (matched by
   * instanceof, or by class name when the module's copy of the class differs), or one predicate `(err) => boolean`.
   * A session that throws one of them is rejected; absent, every throw that is not the driver's is a failure.
   */
  rejects?: readonly (abstract new (...args: any[]) => unknown)[] | ((err: unknown) => boolean) // eslint-disable-line @typescript-eslint/no-explicit-any
  /**
   * SQLSTATEs with which a failing session is the server's (or the schema's) prevention of the race, as a spec's
   * `prevented by` line (e.g. ['23505'] for a unique index); MySQL's 'SQLSTATE/errno' is covered by its SQLSTATE.
   */
  prevention?: readonly string[]
  /**
   * SQL run on the control connection after every session has ended: its first row's first boolean column (or a
   * column named `held`) says whether the invariant held; NULL: it could not be decided. `:user` and `:n` binds.
   * Optional with --oracle serial (every outcome judged against the serial orders of the sessions): without one,
   * the race runs only under that oracle.
   */
  invariant?: string | { sql: string; description?: string }
  /** What the application's documentation says of the invariant under this race: held, or violated. */
  expect: 'held' | 'violated'
  /**
   * Where the barrier schedule holds every session until all are there: before a session's k-th query (a number,
   * default 2: after its first query, usually its BEGIN), or at a point the code marks (its name).
   */
  barrier?: number | string
  /**
   * The queries one call of the function may send at most (default 100): a session past it is stopped as a retry
   * loop that never ends (failed, the trial undecided), its function left waiting for good.
   */
  maxQueries?: number
  /** Startup parameters of every session's connection (e.g. { default_transaction_isolation: 'serializable' }). */
  connection?: Record<string, string>
  /**
   * true: every session must complete (code meant to retry, to serve every request). A session that ends with an
   * error (a 40001 or a declared prevention too), loses the connection race ended (--inject lost), or returns or is
   * rejected after a server error it did not retry, makes the trial a failure (exit 1), whatever the invariant says.
   * A rejection the module declares (`rejects`), with no such error left, is the application's answer: complete.
   */
  mustComplete?: boolean
  /**
   * true: the sessions' code shares state in the process that the server never sees (an in-memory cache, a
   * module-level counter). race explore then runs every session in race's own process and every interleaving (unless
   * --reduce). Absent: explore runs each session in a worker thread of its own (a module graph of its own), where
   * they share nothing but the database, and reduces the search to one order of each class of orders the server
   * cannot tell apart.
   */
  sharedState?: boolean
}

/** `T`, from which TypeScript infers nothing (what `session` takes is what `open` returned, not the other way round). */
type NoInferHere<T> = [T][T extends unknown ? 0 : never]

// The chooser an explorer drives a trial with is the engine's, for statement scenarios and application races alike.
export type { Chooser, Moment, ReadyStep } from '../engine/types.js'
