// The contract between race and a scenario: one file that is the whole truth. What runs (SQL with named
// binds), what `race show` prints (the same SQL), the application's decisions beside it (small functions,
// shown as their own source), and what the database is documented to do, session by session.
// Scenario modules import only this file; they never open connections (only the engine does).
import { createHash } from 'node:crypto'
import { levelsOn, type Level } from './levels.js'

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows are whatever the SQL returns
export type Row = Record<string, any>
export type Rows = Row[]

/** How a whole run ended. */
export type Verdict = 'anomaly' | 'prevented' | 'serialized' | 'clean' | 'unknown'
/**
 * barrier: all begin, then run free. lockstep: the scenario's own deterministic interleaving (or step k of
 * every session before step k+1). serial: one session after another. permutation: an order from the user.
 */
export type Schedule = 'barrier' | 'lockstep' | 'serial' | 'permutation'

/** The database engines race can drive: PostgreSQL, and MySQL/MariaDB with InnoDB. */
export type Engine = 'postgres' | 'mysql'
export const ENGINES: readonly Engine[] = ['postgres', 'mysql']


export type ParamValue = number | boolean | string
export type Params = Record<string, ParamValue>

export interface ParamSpec {
  /** Commander flag, e.g. '--max-pending <n>' or '--no-guard'. */
  flag: string
  description: string
  kind: 'whole' | 'duration' | 'boolean' | 'choice'
  default: ParamValue
  min?: number
  max?: number
  /** For kind 'choice': the accepted values (e.g. isolation levels). */
  choices?: readonly string[]
  /** For kind 'choice': the accepted values on another engine, when they differ (READ UNCOMMITTED on InnoDB). */
  choicesOn?: Partial<Record<Engine, readonly string[]>>
  /**
   * A duration that bounds a wait in the scenario's own SQL (a lock_timeout kept as a safety net): `--hold`
   * extends it by the hold, so that holding the race still leaves every waiter waiting and every outcome as it
   * would be without the hold. Not for a timeout that is the story itself (lock-timeout).
   */
  holdExtends?: boolean
}

/** How a connection pooler lends server connections: per transaction, per client session, or per statement. */
export type PoolMode = 'transaction' | 'session' | 'statement'
export const POOL_MODES: readonly PoolMode[] = ['transaction', 'session', 'statement']

/**
 * The connection pooler between the sessions and the server: each session is then a client of the pooler, and
 * its statements run on whichever server connection (backend) the pooler lends it. Absent: every session has a
 * backend of its own.
 */
export interface Pool {
  /** pgbouncer: the PgBouncer race starts itself (--pooler pgbouncer); external: one the user runs (--pooled). */
  kind: 'pgbouncer' | 'external'
  /** external: assumed transaction (sessions may share server connections). */
  mode: PoolMode
  /** Server connections the pool may open; null when unknown (external). */
  size: number | null
  /** PgBouncer's server_reset_query_always: the reset query runs after every transaction, in every mode. */
  resetAlways: boolean
}

/** Which variant of a scenario runs: its params, how many sessions, on which engine, through which pooler. */
export interface Variant {
  params: Params
  n: number
  engine: Engine
  /** The pooler the sessions go through (absent: direct). */
  pool?: Pool
}

/** What the application has seen when it decides: rows of this session's earlier steps. */
export interface Seen {
  session: string
  params: Params
  n: number
  /** The first row of each earlier step, by step name (undefined at run time when it returned none). */
  prior: Record<string, Row>
  /** Every row of each earlier step. */
  rows: Record<string, Rows>
}

/** A value computed for a named bind (`:key`), with how it is computed, for `race show`. */
export interface Bind {
  describe: string
  value: (ctx: BindCtx) => ParamValue | bigint
}

export interface BindCtx {
  /** The user every session of this trial acts for (a fresh uuid per trial, so keys never collide across runs). */
  user: string
  session: string
  /** 0-based index of the session. */
  index: number
  params: Params
  n: number
}

/**
 * A step: SQL with named binds, run exactly as written. Binds are `:user`, `:session`, `:n`, `:attempt`,
 * any param (`:maxPending`), a bind the scenario or session declares (`:key`), or a column of an earlier step
 * of the same session (`:check.pending`). They are sent as bind parameters, never spliced into the text.
 */
export interface StepDef {
  sql: string
  /**
   * The application's own rule, decided before the SQL runs: a reason says no (the article's 409), and the
   * session rolls back and ends `rejected`. Shown by `race show` as its own source.
   */
  rejectIf?: (seen: Seen) => string | false | null | undefined | 0
  /**
   * The application's retry loop, decided after the SQL ran (e.g. an optimistic UPDATE matched 0 rows): a
   * reason rolls back and runs the whole transaction again, up to the session's `retry.max` times; when no try
   * is left the session ends `rejected` with this reason.
   */
  retryIf?: (seen: Seen & { result: Rows & { count?: number } }) => string | false | null | undefined | 0
  /**
   * Application code that is not SQL (its `sql` is empty): the client waits as long as the param `param` says
   * (milliseconds), with its transaction and locks held, e.g. a slow external API call. It models what the
   * application does and is never used to synchronise sessions; `race show` prints it as application code.
   */
  appWait?: { param: string; what: string }
}
export type Step = string | StepDef

export interface SessionSpec {
  /** Steps in order. With the barrier schedule, sessions wait after the first one (their `begin`). */
  steps: Record<string, Step>
  /** The step after which `--window` sleeps (between check and write). */
  racePoint?: string
  /** Startup parameters of this session's connection (e.g. default_transaction_isolation). */
  connection?: Record<string, string>
  /**
   * The application's retry loop around the whole transaction: on one of these SQLSTATEs (or a step's
   * `retryIf`), roll back and run every step again, at most `max` more times; `backoff` waits an exponential
   * backoff with full jitter first (the isolation article's pattern).
   */
  retry?: { max: number; on?: readonly string[]; backoff?: boolean }
  /**
   * The name of an earlier session whose connection (backend) this one borrows, as the next borrower of a
   * pooled connection does: same pid, same session-level state. Such runs need a step-by-step schedule.
   */
  shares?: string
  /** Binds only this session has (e.g. a different user per session). */
  binds?: Record<string, Bind>
  /**
   * The application's `finally`: SQL it runs after the session was rejected or failed with a SQL error, after the
   * rollback (MySQL's RELEASE_LOCK: a session-scoped lock outlives the transaction that took it).
   */
  release?: string
}

export interface Invariant {
  description: string | ((params: Params) => string)
  /**
   * SQL (with binds) run on the control connection after every session has ended. Its first row has a
   * boolean column `held`: true held, false violated, NULL could not be decided (a read that is missing).
   * MySQL has no boolean type: there `held` is 1, 0 or NULL. A function gives each engine its own SQL.
   */
  sql: string | ((v: Variant) => string)
  /** A short observed value from the same row, e.g. '3 pending'. Default: its other columns as k=v. */
  observed?: (row: Row) => string
}
// Besides the binds of setup SQL, the invariant may name `:session.step.column`: that column of the first row
// the session's step returned (NULL when it returned none or never ran). It is how a value only a session saw
// (the count it reached before it rolled back, the locks it held before it failed) reaches the invariant.

/** One label per session: 'committed', 'rejected', 'rejected: <reason>', a SQLSTATE (failed with it), 'failed', 'lost', 'timeout'. */
export type Label = string
/**
 * Who ends how: by session name (`{ t1: 'committed', t2: '40001' }`), or counts by label for replicated
 * sessions (`{ committed: 3, rejected: 2 }`, a count may be a range `[2, 5]`). Together they cover every session.
 */
export type Who = Record<string, Label | number | readonly [number, number]>

/** One documented outcome of a run: the verdict and who ends how. */
export interface Documented {
  verdict: Exclude<Verdict, 'unknown'>
  who: Who
  /** Where the documentation says so, in a few words. */
  why: string
  /** The least each named session is documented to wait, in ms (a deadlock victim waits deadlock_timeout first). */
  waited?: Record<string, number>
}

export interface DocCtx extends Variant {
  schedule: Schedule
  windowMs: number
}

/** A documented outcome, several legitimate ones (any may happen), or a function of the variant. */
export type DocEntry = Documented | readonly Documented[] | ((v: DocCtx) => Documented | readonly Documented[])

/**
 * What one engine is documented to do. `lockstep` is the scenario's deterministic interleaving; a `levels`
 * table documents it per isolation level instead (and makes the scenario a row of `race matrix`). `serial`
 * is one session after another. `barrier` (all start together, run free) defaults to lockstep or serial
 * (the race may or may not overlap); `window` (a sleep at the race point) defaults to lockstep.
 */
export interface EngineDoc {
  lockstep?: DocEntry
  levels?: Partial<Record<Level, DocEntry>>
  serial: DocEntry
  barrier?: DocEntry
  window?: DocEntry
}

/** Which section of which article a scenario shows. */
export interface Source {
  /** One of the two articles, or 'file': a user's own scenario (a spec file or a .mjs module). */
  article: 'advisory-locks' | 'isolation-levels' | 'file'
  /** The section's number (advisory-locks) or heading (isolation-levels), e.g. '4.1' or 'Write skew'; for 'file', the path. */
  section: string
}

/** A named configuration `race check` runs, besides the defaults. */
export interface CheckCase {
  label: string
  n?: number
  params?: Params
  /** Only on these engines (default: every engine the scenario documents). */
  engines?: readonly Engine[]
  /** Only through a pooler (race check --pooler), with this pool (the rest from the scenario's `pooled`). */
  pool?: Partial<Pick<Pool, 'mode' | 'size' | 'resetAlways'>>
}

/**
 * A scenario that uses up something the whole server shares (its lock table): race runs it only on a server it
 * starts for it (embedded, with these settings, small so that it is quick). A server you gave (--database-url,
 * DATABASE_URL, PG*) is refused with exit 2: other people's transactions would fail there.
 */
export interface OwnServer {
  /** What it uses up, for the refusal and `race show`, e.g. "fills the server's shared lock table". */
  why: string
  /** Server settings (postgres -c name=value). */
  settings: Record<string, string>
}

/** What a scenario documents through a connection pooler (Scenario.pooled). */
export interface Pooled {
  /** The pool size its documentation assumes (default: one server connection per session). */
  size?: number
  /** The pool modes it documents (default: transaction). Through another mode the run is not documented. */
  modes?: readonly PoolMode[]
}

export interface Scenario {
  id: string
  title: string
  source: Source
  /** What happens, in a few lines, for `race show`. */
  story: string[]
  params: Record<string, ParamSpec>
  /** Number of sessions: the default for --n, and the allowed range (a fixed count when min = max). */
  sessionCount: { default: number; min?: number; max?: number }
  /**
   * The isolation level the documentation assumes, per session when they differ (null: no assumption). Each
   * session's real level is read from the server and compared with it.
   */
  isolation: Level | ((v: Variant) => Level | Record<string, Level | null>)
  /** Run on the control connection inside the run's own schema before each trial. */
  setup: readonly string[] | ((v: Variant) => readonly string[])
  /**
   * A quicker statement to run in place of a setup statement (PostgreSQL 11+), or undefined: the first is run, and
   * when it fails for any reason (RECHECK_SQLSTATE: it could not show the statement's check passes) the statement
   * itself runs after it, as if the quick one had never run (it failed in one transaction: nothing of it is left).
   * A spec's guarded setup blocks (specfile/guard.ts quickGuardedSql).
   */
  quickSetup?: (statement: string) => string | undefined
  /**
   * The text to run in place of a setup statement in every trial after a run's first (PostgreSQL), or undefined:
   * a spec's guarded block whose whole setup is plain (specfile/plain.ts), the block itself, without the guard.
   */
  plainSetup?: (statement: string) => string | undefined
  /** Binds every session may use, e.g. `:key`. */
  binds?: Record<string, Bind>
  /** The sessions by name, in order. `replicate(n, spec)` makes s1..sN from one template. */
  sessions: (v: Variant) => Record<string, SessionSpec>
  /**
   * The deterministic interleaving `--schedule lockstep` runs, written as PostgreSQL's isolation tests write
   * permutations ("s1.read s2.read s1.write ..."). Without it, lockstep is round-robin by step. A step marked
   * `(wait)`, e.g. "s1.lock(wait)", is awaited even when seen blocked: for waits that end by themselves
   * (lock_timeout, deadlock detection) and must end before the next step is launched.
   */
  permutation?: string | ((v: Variant) => string)
  /** The schedule `race run` uses when --schedule is not given (default barrier). */
  defaultSchedule?: Schedule
  invariant: Invariant
  /** What each engine is documented to do. An engine without an entry does not run this scenario. */
  documented: Partial<Record<Engine, EngineDoc>>
  /** Why the scenario cannot exist on an engine it does not document (one line, for race list and exit 2). */
  unavailable?: Partial<Record<Engine, string>>
  /**
   * The oldest PostgreSQL major version the scenario runs on, and what it uses that older ones lack (one line):
   * race run refuses an older server (exit 2), race check lists it as not run there.
   */
  postgresSince?: { major: number; why: string }
  checks?: CheckCase[]
  /**
   * Documented through a connection pooler too (race run/check --pooler): `sessions`, `isolation`,
   * `permutation` and `documented` then see `pool` in the variant. Absent: not documented through a pooler.
   */
  pooled?: Pooled
  /**
   * For a scenario that documents no per-session outcome (a spec file says only what its invariant does):
   * 'held' or 'violated' is judged as `--expect` is (every trial held / some trial violated), and 'reported'
   * (no expect line) reports what happened, exit 0 unless it could not be decided. Its `documented` entries
   * are then empty: race claims nothing about who ends how.
   */
  expects?: 'held' | 'violated' | 'reported'
  /** Runs only on a server race starts for it (see OwnServer). */
  ownServer?: OwnServer
  /** How its trials are run (see ScenarioKind); absent: statements, the engine's own. */
  kind?: ScenarioKind
  /**
   * SQLSTATEs (MySQL: 'SQLSTATE/errno') by which the server keeps the invariant, besides those the documented
   * outcomes name: a spec file's `prevented by` line. An integrity error (class 23) counts as a prevention only when
   * it is named here, in the documented outcomes or in a session's `retry.on` (docs/verdicts.md).
   */
  prevention?: readonly string[]
  /**
   * Every session must complete (a race module's `mustComplete: true`, a spec's `every session completes` line): a
   * session that fails (with any error, the server's prevention included), or gives up after one, makes the trial
   * a failure whatever the invariant says (judge/index.ts notCompleted; docs/verdicts.md).
   */
  mustComplete?: boolean
  /**
   * It declares no invariant: 'required' (an application race module without one) runs only with an oracle; true
   * (a spec file without an invariant line) runs and reports, its invariant `select true as held`.
   */
  noInvariant?: 'required' | true
  /**
   * --oracle serial: every trial is also judged against the outcomes of every serial order of its sessions
   * (engine/oracle.ts); violated when either the invariant or the oracle says so.
   */
  oracle?: 'serial'
}

/**
 * How a scenario's trials are run. Statements (a built-in scenario, a .spec file, a .mjs scenario module): the engine
 * runs its sessions' declared steps. An application race (src/app): the user's own function is each session, its
 * queries the steps; its `sessions` stand for the functions (one placeholder step each), and its trials are run by
 * the runner it brings (engine/runner.ts): the engine knows nothing else of it.
 */
export type ScenarioKind = { type: 'statements' } | ApplicationKind

/**
 * An application race, as this contract knows it. src/app adds what it brings (by declaration merging in
 * app/scenario.ts): `runner`, the TrialRunnerFactory that runs its trials, and `race`, the module's declaration
 * (race show reads it); so this file, on which the engine and src/app build, imports nothing of either.
 */
export interface ApplicationKind {
  type: 'application'
  /** The race module's path (its driver is loaded from beside it). */
  file?: string
  /**
   * How many faults its trials may inject (--inject): each is offered as another choice of the session whose query it
   * fails, searched as one more step of that session (explore/reduce.ts sessionOf).
   */
  faults?: number
  /**
   * Its trials driven by a chooser (race explore) run every session in a worker thread of its own (app/isolated.ts):
   * the sessions share nothing but the database, so explore reduces them by default. False (absent): they run in one
   * process (the race module's `sharedState: true`, or a race object, not its file), where they may share JavaScript state the
   * server never sees, and every interleaving is run unless --reduce.
   */
  isolated?: boolean
}

/** A scenario's kind: statements unless it says otherwise. */
export function kindOf(s: Pick<Scenario, 'kind'>): ScenarioKind {
  return s.kind ?? { type: 'statements' }
}

/** The application race a scenario is, if it is one. */
export function applicationOf(s: Pick<Scenario, 'kind'>): ApplicationKind | undefined {
  return s.kind?.type === 'application' ? s.kind : undefined
}

/** Identity, for type checking: `export default defineScenario({...})`. */
export function defineScenario(scenario: Scenario): Scenario {
  return scenario
}

/** A step with the application's decision beside its SQL. */
export function step(sql: string, o: Omit<StepDef, 'sql'> = {}): StepDef {
  return { sql, ...o }
}

/** Application code between SQL steps: the client waits `param` milliseconds (`what` it is doing), holding what it holds. */
export function appWait(param: string, what: string, o: Pick<StepDef, 'rejectIf'> = {}): StepDef {
  return { sql: '', appWait: { param, what }, ...o }
}

/** One session template replicated as s1..sN (the N-way races). */
export function replicate(n: number, spec: SessionSpec): Record<string, SessionSpec> {
  if (!Number.isInteger(n) || n < 1) {
    const got = n === undefined ? 'nothing' : typeof n === 'object' ? 'an object (the session first? write replicate(v.n, { steps: {...} }))' : `${typeof n} ${String(n)}`
    throw new TypeError(`replicate(n, session): n is how many sessions (v.n), got ${got}`)
  }
  if (!spec || typeof spec !== 'object' || !spec.steps || typeof spec.steps !== 'object') throw new TypeError(`replicate(n, session): session must be { steps: { name: 'sql', ... } }`)
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`s${i + 1}`, spec]))
}

export const anomaly = (why: string, who: Who): Documented => ({ verdict: 'anomaly', who, why })
export const prevented = (why: string, who: Who): Documented => ({ verdict: 'prevented', who, why })
export const serialized = (why: string, who: Who): Documented => ({ verdict: 'serialized', who, why })
export const clean = (why: string, who: Who): Documented => ({ verdict: 'clean', who, why })

/** Defaults of a scenario's params, overridden by `over`. */
export function defaultParams(s: Pick<Scenario, 'params'>, over: Params = {}): Params {
  return { ...Object.fromEntries(Object.entries(s.params).map(([k, p]) => [k, p.default])), ...over }
}

/** advisory-locks §8.1: first 8 bytes of sha256("namespace:id"), big-endian, signed. */
export function advisoryKey(namespace: string, id: string): bigint {
  return createHash('sha256').update(`${namespace}:${id}`).digest().readBigInt64BE(0)
}

/** The bind `:key` of the advisory-locks article: the trial user's key in a namespace (§8.1). */
export function keyBind(namespace: string, who: (ctx: BindCtx) => string = (ctx) => ctx.user): Bind {
  return { describe: `sha256('${namespace}:' || user), first 8 bytes, signed`, value: (ctx) => advisoryKey(namespace, who(ctx)) }
}

/** The isolation level of a variant's `isolation` param (the isolation-levels family). */
export const levelParam = (v: { params: Params }): Level => String(v.params.isolation) as Level

/** The value of a session-level `--isolation` that leaves every session at its connection's own default level. */
export const DEFAULT_LEVEL = 'default'

/**
 * The `--isolation` of a race whose sessions' SQL is the user's (an application race, a spec file): the level race
 * sets on each session's connection (its default transaction isolation) before the user's code runs. A transaction
 * that names its own level (BEGIN ISOLATION LEVEL ..., SET TRANSACTION ...) still runs at that one: each session's
 * level is read back and a difference is reported, never overridden.
 */
export function sessionLevelParam(): { isolation: ParamSpec } {
  return {
    isolation: {
      flag: '--isolation <level>',
      description: 'isolation level of every session: "read committed", "repeatable read" or serializable',
      kind: 'choice',
      default: DEFAULT_LEVEL,
      choices: [DEFAULT_LEVEL, ...levelsOn('postgres')],
      choicesOn: { mysql: [DEFAULT_LEVEL, ...levelsOn('mysql')] },
    },
  }
}

/** SQLSTATE a quick setup statement (Scenario.quickSetup) raises when the statement itself must run (class RX: race). */
export const RECHECK_SQLSTATE = 'RX002'
