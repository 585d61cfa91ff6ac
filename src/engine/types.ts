// Facts the engine records; judge/ and report/ read them and never touch the database.

export type Outcome = 'committed' | 'rejected' | 'failed' | 'lost' | 'timeout'

export type EventKind = 'run' | 'wait' | 'woke' | 'ok' | 'error' | 'reject' | 'retry' | 'timeout' | 'lost'

export interface TimelineEvent {
  /** Milliseconds since the barrier (or, for step-by-step schedules, since the first step). */
  t: number
  session: string
  step: string
  kind: EventKind
  detail?: string
  /** The step is set-up (begin, SET ..., set_config): shown only with --timeline all. */
  setup?: boolean
  /** Through a pooler: the server backend that ran the step, when known (see SessionReport.steps). */
  backend?: number
}

/** Through a pooler: the backend a step ran on (null: an autocommit statement race did not see linked). */
export interface StepBackend {
  step: string
  backend: number | null
}

export interface SessionReport {
  name: string
  pid: number
  outcome: Outcome
  /** For rejected: the application's reason; for failed/lost/timeout: what happened. */
  reason: string | null
  sqlstate: string | null
  condition: string | null
  /** The step the session ended in (failed, lost, timeout) or was rejected at. */
  step: string | null
  /** The isolation level the session's transaction ran at, read from the server (SHOW transaction_isolation). */
  isolation: string | null
  /** The command tag of the session's COMMIT (or ROLLBACK): COMMIT of a failed transaction answers ROLLBACK. */
  commitTag: string | null
  /** Time spent in steps that were seen blocked by another session. */
  waitedMs: number
  /** From the barrier to the session's end. */
  ms: number
  retries: number
  /** SQLSTATEs raised along the way, including those a retry recovered from. */
  errors: string[]
  /** For timeout: the backends this session was waiting for when it was given up. */
  blockedBy?: number[]
  /**
   * An application race's session that failed because its function threw an error that is neither the driver's nor
   * one the race module declares as a rejection: that error's class and message ("TypeError: x is not a function").
   * A failure of the code under test: the trial cannot be decided.
   */
  thrown?: string
  /**
   * An application race explored with --inject: the faults race made the server raise in this session
   * (40001@q5, lost@q3). A session lost this way lost its connection before its step was sent: what committed is known.
   */
  injected?: string[]
  /**
   * An application race's session that returned or was rejected after a server error nothing recovered from (its
   * transaction failed, and it began none after): the error and where ("40001 serialization_failure in q4"). A race
   * whose every session must complete counts it as a session that did not.
   */
  unrecovered?: string
  /**
   * race explore: steps that ran outside a transaction as one point although the search splits such statements into
   * a run and a commit point, because PostgreSQL refuses them inside a transaction block (25001: VACUUM...).
   */
  indivisible?: string[]
  /**
   * race explore of an application race: strings of several statements race ran as one point, where real sessions'
   * statements run between them (a driver whose result race cannot rebuild, a shape it cannot keep exact): no proof.
   */
  whole?: string[]
  /**
   * race explore: statements that lock rows without waiting (NOWAIT, SKIP LOCKED) at SERIALIZABLE: which transaction
   * SSI cancels can depend on when, inside one statement, its reads and writes meet another's, which no order of
   * points gives: no proof.
   */
  unordered?: string[]
  /** Through a pooler: where each step ran (pid is then the backend of its last known step). */
  steps?: StepBackend[]
  /**
   * --oracle serial, an application race's session that committed: what its function returned, as canonical JSON
   * (engine/serial.ts), compared with what it returned in the serial orders. Absent: undefined, or no oracle.
   */
  returned?: string
  /** An application session: what its function returned, as it was; the run turns it into `returned` for an oracle, else drops it. */
  value?: unknown
}

export interface InvariantReport {
  description: string
  observed: string
  /** null: could not be decided (the query failed, or it said NULL: something it needs is missing). */
  held: boolean | null
  error?: string
}

/** What one trial did: facts only. The commands judge them. */
export interface TrialFacts {
  sessions: SessionReport[]
  invariant: InvariantReport
  events: TimelineEvent[]
  /** An application race: the steps' labels (s1.q1, s2.q1, ...) in the order they were released. */
  order?: string[]
  /**
   * An application race explored with --inject: each fault as given, in the order given, whether the trial offered it
   * (a session's next query was its site) and where it was injected (s1.q4), if it was.
   */
  injections?: { fault: string; offered: boolean; at?: string }[]
  /**
   * An application race's barrier run: the first two queries that were on the server at once (the second sent
   * before the first answered). No permutation runs them so: `order` is the order they were sent, not a replay.
   */
  overlap?: [string, string]
  /** A replay (--schedule) whose named steps never came: which, and where their sessions ended. */
  unfollowed?: string
  /** --oracle serial: the run's tables after the trial, each one's rows canonical (engine/oracle.ts readTables). */
  tables?: Record<string, string[]>
  /**
   * --oracle serial: whether the trial's outcome is one a serial order of the sessions gives (null: not known), in
   * one line; `closest`, when not, the serial order whose outcome differs least; `orders`, how many were run.
   */
  oracle?: { name: 'serial'; held: boolean | null; note: string; orders: number; closest?: string[] }
}

/** Where a session stands while a step-by-step run waits before its next step (race run --step). */
export interface SessionState {
  name: string
  pid: number
  state: 'not started' | 'idle' | 'idle in transaction' | 'running' | 'waiting' | 'done'
  /** The step in flight (running, waiting), or the step it ended in (done). */
  step: string | null
  /** For waiting: the sessions (or, outside this run, backend pids) it waits for, from pg_blocking_pids. */
  waitingFor: string[]
  /** For done: committed, rejected: <reason>, failed <SQLSTATE>, lost, timeout. */
  outcome: string | null
}

/** The moment before a step is launched, in a step-by-step schedule. */
export interface StepPause {
  /** Steps launched so far. */
  done: number
  /** Steps still to launch, this one included (a session that has ended skips its own). */
  left: number
  session: string
  step: string
  sessions: SessionState[]
  /** The events recorded so far (the same array, growing). */
  events: readonly TimelineEvent[]
  /** Reads the sessions' states again (a waiting session may end while the run waits: a deadlock, a lock_timeout). */
  refresh(): Promise<SessionState[]>
}

/**
 * A session waiting to launch its next step: a statement scenario's next declared step, or the query (or point) an
 * application race's function is about to send, held at its gate.
 */
export interface ReadyStep {
  session: string
  index: number
  /** The step's label: s1.begin (a declared step), s1.q3 (an application's query), s1.check (its point). */
  label: string
  /** The SQL it is about to send ('' for a point, or a step that sends none). */
  sql: string
  /**
   * A declared step's index in its session; `part`: the point is a later point of that step split into points (its
   * statements, a snapshot point: `s1.a1/2`, `s1.a1:snapshot`) or its commit point, not the step's launch.
   */
  step?: number
  part?: boolean
  /** An application race: the same step with this fault injected instead (--inject; index then names the choice, not the session). */
  inject?: string
}

/**
 * What a chooser sees at a quiet moment: every session is ready to launch its next step, blocked on the server (seen
 * by the control connection waiting for another backend), or done. Nothing is in flight but blocked steps.
 */
export interface Moment {
  ready: ReadyStep[]
  /** Sessions whose step in flight waits for a lock, with that step's label. */
  blocked: { session: string; index: number; label: string }[]
  /** Sessions that have ended. */
  done: string[]
  /** The labels launched (released) so far, in order. */
  order: readonly string[]
  /** Each session's backend pid, by session index (0: none known, e.g. a pooler's client between backends). */
  pids?: readonly number[]
  /** Each session's count of statements that raised an error so far, by session index. */
  errors?: readonly number[]
}

/**
 * Decides which ready session's step goes next: its index in `moment.ready` (a number), or the session's name.
 * Called only when at least one session is ready.
 */
export type Chooser = ((moment: Moment) => number | string | Promise<number | string>) & {
  /** Called once when every session has ended, with the last moment (nothing ready): an explorer learns what the last steps did. */
  settled?: (moment: Moment) => Promise<void>
  /**
   * Whether step `step` of session `index`, when it would commit by itself (its session is in no transaction), runs
   * in a transaction race opens for it with its commit as a point of its own (`s1.ins:commit`): race explore's model
   * of statements that overlap. Default: never (one indivisible point).
   */
  split?: (index: number, step: number) => boolean
}
