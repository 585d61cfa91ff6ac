// The contract between the engine and scenarios/: a scenario is data plus a few small functions.
// Scenario modules import only this file; they never open connections (only the engine does).
import { createHash } from 'node:crypto'
import type { Sql } from 'postgres'

export type Row = Record<string, unknown>
export type Rows = Row[]

/** How a whole run ended (DESIGN.md "Words"). */
export type Verdict = 'anomaly' | 'prevented' | 'serialized' | 'clean' | 'unknown'
/**
 * barrier: all begin, then run free. lockstep: step k of every session before step k+1 (or the scenario's own
 * deterministic interleaving). serial: one session after another. permutation: an explicit order from the user.
 */
export type Schedule = 'barrier' | 'lockstep' | 'serial' | 'permutation'

/** What a step function may hand back: rows (or a query that yields them), SQL to run, or the application's "no". */
export type StepResult = PromiseLike<Rows> | Rows | Reject | string

export interface Reject {
  readonly reject: string
}

export type ParamValue = number | boolean | string
export type Params = Record<string, ParamValue>

export interface StepCtx {
  /** 's1', 's2', ... */
  readonly session: string
  /** 0-based index of the session. */
  readonly index: number
  /** The user every session of this trial acts for (a fresh uuid per trial, so keys never collide across runs). */
  readonly user: string
  readonly params: Params
  /** Rows returned by this session's earlier steps, by step name. */
  readonly prior: Record<string, Rows>
  /** The application's own rule says no (the article's 409): the session rolls back and ends `rejected`. */
  reject(reason: string): Reject
}

export interface StepDef {
  /** The SQL as a reader should see it (race show, timeline). Run as-is when `run` is absent. */
  sql: string
  /** Runs the step with bound parameters, or decides to reject. */
  run?: (sql: Sql, ctx: StepCtx) => StepResult
}
export type Step = string | StepDef

export interface SessionSpec {
  /** Steps in order. The first one is the session's `begin`; with the barrier schedule, sessions wait after it. */
  steps: Record<string, Step>
  /** The step after which `--window` sleeps (between check and write). */
  racePoint?: string
  /** Startup parameters of this session's connection (e.g. default_transaction_isolation). */
  connection?: Record<string, string>
  /** On serialization_failure, retry the whole transaction up to this many times (exponential backoff, jitter). */
  retries?: number
  /**
   * The name of an earlier session whose connection (backend) this one borrows, as the next borrower of a
   * pooled connection does: same pid, same session-level state. Such runs need a step-by-step schedule.
   */
  shares?: string
}

export interface ParamSpec {
  /** Commander flag, e.g. '--max-pending <n>' or '--no-guard'. */
  flag: string
  description: string
  kind: 'whole' | 'duration' | 'boolean' | 'choice'
  default: ParamValue
  min?: number
  /** For kind 'choice': the accepted values (e.g. isolation levels). */
  choices?: readonly string[]
}

export interface Invariant {
  description: (params: Params) => string
  /** Runs on the control connection after every session has ended. */
  query: (sql: Sql, ctx: { user: string; params: Params; n: number }) => PromiseLike<Rows>
  /** A short observed value, e.g. '3 pending'. */
  observed: (rows: Rows) => string
  holds: (rows: Rows, params: Params) => boolean
}

export interface ExpectCtx {
  params: Params
  schedule: Schedule
  n: number
  windowMs: number
}

/** A named configuration `race check` runs, besides the defaults. */
export interface CheckCase {
  label: string
  n?: number
  params?: Params
}

export interface Scenario {
  id: string
  title: string
  /** Which section of which article this comes from, e.g. 'advisory §4'. */
  source: string
  /** What happens, in a few lines, for `race show`. */
  story: string[]
  params: Record<string, ParamSpec>
  /** Default number of sessions for --n. */
  defaultN: number
  /** Allowed --n, inclusive (default 1 .. 10000). Two-session anomalies fix it at [2, 2]. */
  nRange?: [number, number]
  /** Human-readable isolation level the sessions run at. */
  isolation: (params: Params) => string
  /** Run on the control connection inside the run's own schema before each trial. */
  setup: string[]
  /** The sessions by name, in order. `replicate(n, spec)` makes s1..sN from one template. */
  sessions: (params: Params, n: number) => Record<string, SessionSpec>
  /**
   * The deterministic interleaving `--schedule lockstep` runs, written as PostgreSQL's isolation tests
   * write permutations ("s1.read s2.read s1.write ..."). Without it, lockstep is round-robin by step.
   * A step marked `(wait)`, e.g. "s1.lock(wait)", is awaited even when seen blocked: for waits that end by
   * themselves (lock_timeout, deadlock detection) and must end before the next step is launched.
   */
  lockstep?: (params: Params, n: number) => string
  /** The schedule `race run` uses when --schedule is not given (default barrier). */
  defaultSchedule?: Schedule
  invariant: Invariant
  /** The verdict(s) PostgreSQL is documented to give. Several when the interleaving decides. */
  expect: (ctx: ExpectCtx) => Verdict[]
  checks?: CheckCase[]
}

export function defineScenario(s: Scenario): Scenario {
  return s
}

/** One session template replicated as s1..sN (the N-way races of the design card). */
export function replicate(n: number, spec: SessionSpec): Record<string, SessionSpec> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`s${i + 1}`, spec]))
}

/** Defaults of a scenario's params, overridden by `over`. */
export function defaultParams(s: Scenario, over: Params = {}): Params {
  return { ...Object.fromEntries(Object.entries(s.params).map(([k, p]) => [k, p.default])), ...over }
}

/** §8.1: first 8 bytes of sha256("namespace:id"), big-endian, signed. */
export function advisoryKey(namespace: string, id: string): bigint {
  return createHash('sha256').update(`${namespace}:${id}`).digest().readBigInt64BE(0)
}

export function isReject(x: unknown): x is Reject {
  return typeof x === 'object' && x !== null && typeof (x as Reject).reject === 'string'
}

/**
 * The usual shape of an expectation: what lockstep gives; barrier adds `clean` (the sessions may happen not
 * to overlap) unless said otherwise; a --window makes the race as certain as lockstep; serial (one session
 * after another) must hold with nobody waiting; an explicit permutation has no documented verdict.
 */
export function expectBy(o: { lockstep: Verdict[]; barrier?: Verdict[]; window?: Verdict[]; serial?: Verdict[] }): (ctx: ExpectCtx) => Verdict[] {
  return ({ schedule, windowMs }) => {
    switch (schedule) {
      case 'lockstep':
        return o.lockstep
      case 'serial':
        return o.serial ?? ['clean']
      case 'permutation':
        return []
      default:
        return windowMs > 0 ? (o.window ?? o.lockstep) : (o.barrier ?? [...new Set<Verdict>([...o.lockstep, 'clean'])])
    }
  }
}
