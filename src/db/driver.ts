// The seam between the engine and a database: one interface, one implementation per engine (PostgreSQL in
// lab.ts and pg-session.ts, MySQL/MariaDB InnoDB in mysql.ts). The engine (src/engine) speaks only this: it
// opens session connections with known ids, runs the run's SQL on the control connection, asks who is
// blocked, cancels a stuck step and ends its own connections. Facts come from the server, never from time.
// Sessions through a connection pooler (db/pooled.ts) are the same seam: a driver over PostgreSQL's whose
// session connections are the pooler's clients, which own no backend (the optional members below).
import { randomBytes } from 'node:crypto'
import type { Engine, Rows } from '../scenario.js'
import type { Target } from './target.js'

export interface ServerInfo {
  version: string
  versionNum: number
  /** What to call the server in reports: PostgreSQL, MariaDB or MySQL. */
  product?: string
}

/** A statement's rows, with the command tag the server (or, for MySQL, the statement and the server's status flags) gave. */
export type QueryResult = Rows & { command?: string; count?: number }

/** What cleanup could not undo, with the statement that would. */
export interface Leftover {
  note: string
  serverGone: boolean
}

/** The namespace a run works in (PostgreSQL: a schema; MySQL: a database), marked with its owner. */
export interface RunSpace {
  readonly name: string
  readonly keep: boolean
  /** Stops the lifecycle from dropping it (the caller drops it itself). */
  release(): void
  /** Drops it (bounded) unless kept; returns what was left behind. */
  drop(): Promise<Leftover | undefined>
}

export interface SessionOptions {
  /** Names the connection on the server (application_name; MySQL: a comment on its first statement). */
  applicationName: string
  /** The run's namespace: every statement of the session works there. */
  space: string
  /** Startup parameters (PostgreSQL GUCs; MySQL session variables). */
  params: Record<string, string>
  connectTimeoutMs: number
  /** --step-timeout: also bounds what a driver waits for on a step's behalf (MySQL: reading the level before COMMIT). */
  stepTimeoutMs: number
}

/** One step in flight: its result, and (while the level is not fixed yet) the transaction's isolation level. */
export interface StepRun {
  result: Promise<QueryResult>
  /** Resolves once the level was read (undefined: the server could not say); absent when not asked. */
  level?: Promise<string | undefined>
  /**
   * A connection that owns no backend (a pooler's client): the backend the step ran on, once the step has ended
   * (null: not seen, e.g. an autocommit statement the pooler lent a server connection only while it ran).
   * Absent: the connection's own `pid` ran it.
   */
  backend?: Promise<number | null>
}

/** One dedicated connection: a PostgreSQL backend, or a MySQL thread. */
export interface SessionConn {
  /**
   * The server's id for it: pg_backend_pid(), or MySQL's CONNECTION_ID(). A pooler's client: the backend lent
   * to it right now as far as race has seen (its open transaction's, or its step's), 0 when none.
   */
  readonly pid: number
  /** The server ended it or its socket broke: nothing more may be sent on it. */
  readonly closed: boolean
  /** Why the server ended it, when it said so (PostgreSQL's last FATAL ErrorResponse; see db/fatal.ts). */
  readonly fatal?: { code: string; message: string }
  /**
   * PostgreSQL: the transaction status of the server's last ReadyForQuery on it (I idle, T in a transaction, E in a
   * failed one); undefined where it cannot be read.
   */
  readonly status?: 'I' | 'T' | 'E'
  /**
   * Sends one step's SQL (binds already in the engine's placeholder style) with its values. `readLevel`: also
   * read the isolation level the transaction runs at, without changing what the transaction does.
   */
  step(text: string, args: unknown[], readLevel: boolean): StepRun
  /**
   * ROLLBACK, bounded; its result (undefined when the connection is gone or did not answer). MySQL: with the level
   * InnoDB recorded for the transaction it ended (`level`), when it could be read: a rejected or failed session's
   * level is otherwise never read there (it is read before COMMIT).
   */
  rollback(): Promise<(QueryResult & { level?: string }) | undefined>
  /** Closes it politely (bounded). */
  close(): Promise<void>
  /** Closes the socket now. */
  destroy(): Promise<void>
  /**
   * Only a pooler's client, which owns no backend: asks the pooler which server connection it holds right now
   * (undefined: none, e.g. it waits in the pooler's queue). Absent: a dedicated connection, `pid` is its own.
   */
  lent?(): Promise<number | undefined>
  /**
   * The session has run its last step. A pooler's client disconnects then, as a finished request does (in
   * session mode that hands its server connection back to the pool). Absent: it stays open until the trial ends.
   */
  done?(): Promise<void>
  /**
   * Makes the connection what a fresh one would be, for the next trial of the same run (the engine keeps session
   * connections across trials): ends its transaction, only if one may be open (a ROLLBACK outside one makes the
   * server log a WARNING), and drops everything the session set for itself (settings, session-level locks,
   * temporary tables, prepared statements, LISTEN). Bounded. False: it could not (then it is not kept: the engine
   * closes it and opens a fresh one). Absent: never kept, a fresh connection every trial.
   */
  reset?(): Promise<boolean>
  /**
   * The same reset in two parts (PostgreSQL): `cleared` once what the session held or left open is gone (its
   * transaction ended, its session-level locks released, its temporary tables dropped...) and the server says idle;
   * `complete` once the reset is also shown complete (reset's check). A connection is used again only after both
   * said true; `cleared` is what must come before anything else reads the database (the invariant).
   */
  resetInTwo?(): { cleared: Promise<boolean>; complete: Promise<boolean> }
}

/**
 * The label part of a run's namespace name: the label in [a-z0-9_], cut to 49 characters so that the whole name
 * (race_<label>_<8 hex>) fits PostgreSQL's 63-byte identifiers (and MySQL's 64). Cut by the server instead, two runs
 * of one long label (two jobs of one search) would get one name, and the hex that tells them apart would be lost.
 */
export function spaceLabel(label: string): string {
  return label.replace(/[^a-z0-9]/g, '_').slice(0, 49)
}

/** A new namespace name for a run of `label`: race_<label>_<8 hex>, at most 63 characters. */
export function spaceName(label: string): string {
  return `race_${spaceLabel(label)}_${randomBytes(4).toString('hex')}`
}

/** Who among a run's connections is waiting for a lock another of them holds (or, for user locks, for any lock). */
export interface Watch {
  /**
   * The connections among `ask` whose statement in flight waits for one of `all` (the run's connections by
   * pid). Through a pooler the run's connections are the pool's server connections, which the watch knows.
   * A direct driver needs only each one's backend pid (an application race asks for its own sessions).
   */
  blocked<C extends Pick<SessionConn, 'pid'>>(ask: readonly C[], all: number[]): Promise<Set<C>>
  /** The connections `pid` waits for right now. */
  blockers(pid: number): Promise<number[]>
}

/** The control side of a database engine for one command: everything the engine needs besides sessions. */
export interface Driver extends Watch {
  readonly engine: Engine
  readonly target: Target
  readonly server: ServerInfo
  readonly connectTimeoutMs: number
  /** Namespaces a killed run left, dropped since this driver opened (complete once `reaping` has settled). */
  readonly reaped: string[]
  /** The reaping this driver started as it opened, when it goes on beside the run (never rejects). */
  readonly reaping?: Promise<void>
  /** Named binds become this engine's placeholders: $1 (PostgreSQL) or ? (MySQL, one per use). */
  readonly placeholders: 'dollar' | 'question'
  /** Rejects (CONNECTION_CLOSED) when the control connection closes. */
  whenLost(): Promise<never>
  /** Throws CONNECTION_CLOSED if the control connection has closed. */
  checkControl(): void
  /** Connections this role can still open. */
  room(): Promise<{ free: number; max: number }>
  /**
   * Creates the run's marked namespace; `run` sends the statement (so that a caller can cancel it). `name`: the one
   * spaceName gave (sessions already opened in it, see earlySessions); default a new one.
   */
  createSpace(label: string, keep: boolean, run?: (text: string) => Promise<unknown>, name?: string): Promise<RunSpace>
  /**
   * The run in space `name` runs race's own SQL (a built-in scenario): no run role is made for it (PostgreSQL). Said
   * before anything of the run connects.
   */
  trustSpace?(name: string): void
  /**
   * Session connections may be opened before the run's namespace exists, naming it (PostgreSQL: search_path, and a
   * schema created after the backend started is found): the first trial's sessions connect while control creates
   * it and runs the setup. Absent: they connect once it exists (MySQL's default database must exist to connect).
   */
  readonly earlySessions?: boolean
  /** The statement(s) that give a trial a fresh, marked namespace of the same name. */
  recreateSql(name: string, keep: boolean): string
  /** The statement that makes the control connection work inside the namespace. */
  useSql(name: string): string
  /**
   * Runs race's own SQL as the control role on a second connection of its own (never the control connection, which
   * a trial in flight asks about blocks and footprints): the run makes its next namespace there while a trial runs
   * in another (engine/run.ts, lanes). Absent: the run has one namespace.
   */
  prepareQuery?(text: string): Promise<unknown>
  /** Runs SQL (already in placeholder style) on the control connection. */
  /**
   * `prepared`: race's own statement, sent many times a run with other values (a catalog read at every commit of an
   * explored trial): kept prepared on the connection, so that the server plans it once, not at every call. Absent: as
   * the driver does by default.
   */
  query(text: string, args?: unknown[], prepared?: boolean): Promise<QueryResult>
  /**
   * Runs the run's own SQL (setup, invariant: the user's) with the rights the run's sessions have (PostgreSQL: as
   * the run role, db/run-role.ts). Absent: on the control connection.
   */
  runQuery?(space: string, text: string, args?: unknown[]): Promise<QueryResult>
  /**
   * race's own connections to the server besides control (MySQL: the run user's, on which setup and invariant run),
   * by server id: never taken for a connection the code under test opened. Absent: none.
   */
  ownThreads?(): number[]
  /** The target a session of the run in `space` connects to (an application race's driver too). Absent: target. */
  sessionTarget?(space: string): Promise<Target>
  /** Cancels the statement the control connection has in flight, from a fresh connection (bounded). */
  cancelControl(done: Promise<void>): Promise<void>
  /** Opens a session connection. */
  openSession(o: SessionOptions): Promise<SessionConn>
  /** Cancels the statement in flight on one of the run's connections (`terminate`: ends the connection). */
  cancel(pid: number, terminate: boolean): Promise<void>
  /** Ends the run's connections for good, from control (or a fresh connection if control is gone), bounded. */
  terminate(pids: number[]): Promise<void>
  /**
   * After each trial's invariant, where connections outlive a trial (a pooler's server connections): nothing a
   * trial left on them (a leaked lock, a SET) may reach the next. Absent: every session's connection ends with it.
   */
  afterTrial?(): Promise<void>
  /** Closes the control connection. */
  close(): Promise<void>
}
