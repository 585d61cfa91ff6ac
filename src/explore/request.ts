// What race explore is asked, by its flags or by explore()'s options, checked in one place for both: the sessions
// within the scenario's count, the search's budgets, what to expect. Errors name each option as the caller spelled
// it (--max from the CLI, max from explore()).
import os from 'node:os'
import { UsageError } from '../errors.js'
import { parseWhole } from '../parse.js'
import { NAMES, parseBounds, type Spelling } from '../run/params.js'
import { CONNECT_TIMEOUT, RUN_TIMEOUT, STEP_TIMEOUT } from '../run/options.js'
import { sessionsOf } from '../run/request.js'
import type { Bounds } from '../run/params.js'
import type { Params, Scenario } from '../scenario.js'

/**
 * Declared steps with more orders than this are sampled instead (unless --exhaustive); an application race's search
 * (reduced or exhaustive) stops after this many runs and says what it left (--max).
 */
export const DEFAULT_MAX = 1000
/** Runs in a sample when the count is above --max and no --sample is given. */
export const DEFAULT_SAMPLE = 200
/** A sample's PCT depth (--depth): violations needing this many steps in a given order (at most 2 preemptions). */
export const DEFAULT_DEPTH = 3
/** Runs spent at most on shrinking a sampled violation (--shrink). */
export const DEFAULT_SHRINK = 100
/** The most jobs (--jobs): each is a control connection, a schema and the sessions' connections on the server. */
export const MAX_JOBS = 64

/** Jobs when not told (--jobs): the machine's cores (the server's work and race's share them). */
export function defaultJobs(): number {
  return Math.max(1, Math.min(MAX_JOBS, os.availableParallelism?.() ?? os.cpus().length))
}

/**
 * How many sessions explore races when not told: the scenario's default; for an application race, 2 (or its
 * least, when it needs more). An application race's default is for race run (10 sessions at a barrier); every
 * interleaving of 10 functions is out of reach, and two sessions already show a check-then-insert race whole.
 */
export function exploreSessions(s: Scenario): number {
  const count = sessionCount(s)
  return kindOf(s).type === 'application' ? Math.min(count.default, Math.max(2, count.min)) : count.default
}
import { kindOf } from '../scenario.js'
import { sessionCount } from '../plan.js'

/** The search as asked: flags' text, or explore()'s numbers; absent: the defaults. */
export interface ExploreAsked {
  n?: string | number
  max?: string | number
  sample?: string | number
  acceptSample?: string | number
  seed?: string | number
  shrink?: string | number
  depth?: string | number
  preemptions?: string | number
  shard?: string | { index: number; count: number }
  jobs?: string | number
  expect?: string
  exhaustive?: boolean
  reduce?: boolean
}

export interface ExploreChecked {
  n: number
  max: number
  sample?: number
  /** A sample (or a search cut short) passes expect held only when it states at least this probability (--accept-sample). */
  acceptSample?: number
  seed?: number
  shrink: number
  depth: number
  preemptions?: number
  shard?: { index: number; count: number }
  /** Jobs asked for (--jobs; default the machine's cores): how many the search may run at once. */
  jobs: number
  expect?: 'held' | 'violated'
  exhaustive: boolean
  reduce: boolean
}

/** The one check of an exploration's input (race explore and explore()). */
export function checkExplore(s: Scenario, a: ExploreAsked, spell: Spelling): ExploreChecked {
  const n = sessionsOf(s, a.n, spell, exploreSessions(s))
  const whole = (o: 'max' | 'sample' | 'seed' | 'shrink' | 'depth' | 'preemptions' | 'jobs', v: string | number, min: number, max: number) => parseWhole(spell(o), String(v), min, max)
  const max = whole('max', a.max ?? DEFAULT_MAX, 1, Number.MAX_SAFE_INTEGER)
  const sample = a.sample === undefined ? undefined : whole('sample', a.sample, 1, 1_000_000)
  const seed = a.seed === undefined ? undefined : whole('seed', a.seed, 0, 2 ** 32 - 1)
  const shrink = whole('shrink', a.shrink ?? DEFAULT_SHRINK, 0, 100_000)
  const depth = whole('depth', a.depth ?? DEFAULT_DEPTH, 1, 10)
  const preemptions = a.preemptions === undefined ? undefined : whole('preemptions', a.preemptions, 0, 1000)
  if (a.jobs !== undefined && typeof a.jobs !== 'string' && typeof a.jobs !== 'number') throw new UsageError(`${spell('jobs')} takes a whole number of jobs, got ${JSON.stringify(a.jobs)}`)
  const jobs = a.jobs === undefined ? defaultJobs() : whole('jobs', a.jobs, 1, MAX_JOBS)
  if (a.expect !== undefined && a.expect !== 'held' && a.expect !== 'violated') throw new UsageError(`${spell('expect')} takes held or violated, got '${a.expect}'`)
  if (a.exhaustive !== undefined && typeof a.exhaustive !== 'boolean') throw new UsageError(`${spell('exhaustive')} takes true or false, got ${JSON.stringify(a.exhaustive)}`)
  const exhaustive = a.exhaustive === true
  if (a.reduce !== undefined && typeof a.reduce !== 'boolean') throw new UsageError(`${spell('reduce')} takes true or false, got ${JSON.stringify(a.reduce)}`)
  const reduce = a.reduce === true
  if (reduce && kindOf(s).type !== 'application') throw new UsageError(`${spell('reduce')} is for application races (their sessions may share state in JavaScript, which the server cannot see); declared SQL steps are reduced by default`)
  if (reduce && (exhaustive || sample !== undefined)) throw new UsageError(`${spell('reduce')} asks for the reduced search: leave out ${spell(exhaustive ? 'exhaustive' : 'sample')}`)
  if (exhaustive && sample !== undefined) throw new UsageError(`${spell('exhaustive')} runs every order and ${spell('sample')} a random few: give one of them`)
  let shard: { index: number; count: number } | undefined
  if (a.shard !== undefined) {
    const m = typeof a.shard === 'string' ? /^(\d{1,4})\/(\d{1,4})$/.exec(a.shard.trim()) : null
    const index = m ? Number(m[1]) : typeof a.shard === 'object' && a.shard ? a.shard.index : NaN
    const count = m ? Number(m[2]) : typeof a.shard === 'object' && a.shard ? a.shard.count : NaN
    if (!Number.isInteger(index) || !Number.isInteger(count) || count < 1 || index < 1 || index > count) {
      throw new UsageError(`${spell('shard')} takes i/n with 1 <= i <= n (this run's part of a search or sample split n ways), got ${JSON.stringify(a.shard)}`)
    }
    shard = { index, count }
    if (a.seed === undefined && sample !== undefined) throw new UsageError(`${spell('shard')} needs ${spell('seed')}: every part of a sample draws from the same seed`)
  }
  if (preemptions !== undefined && sample !== undefined) throw new UsageError(`${spell('preemptions')} runs every order within a bound and ${spell('sample')} a random few: give one of them`)
  const acceptSample = a.acceptSample === undefined ? undefined : acceptedProbability(spell, a.acceptSample)
  if (acceptSample !== undefined && (exhaustive || reduce || preemptions !== undefined)) {
    throw new UsageError(`${spell('acceptSample')} accepts a PCT sample's stated probability; ${spell(exhaustive ? 'exhaustive' : reduce ? 'reduce' : 'preemptions')} draws no sample: leave one of them out`)
  }
  return { n, max, sample, acceptSample, seed, shrink, depth, preemptions, shard, jobs, expect: a.expect, exhaustive, reduce }
}

/** --accept-sample's probability: a number above 0 and below 1 (a sample's bound is never 1). */
function acceptedProbability(spell: Spelling, v: string | number): number {
  const text = String(v).trim()
  const p = typeof v === 'number' ? v : /^(0?\.\d+|0)$/.test(text) ? Number(text) : NaN
  if (!(p > 0 && p < 1)) throw new UsageError(`${spell('acceptSample')} takes a probability above 0 and below 1 (e.g. 0.95: the least chance the sample states of finding a violation of its --depth), got ${JSON.stringify(v)}`)
  return p
}

/** One session has nothing to race with: every interleaving is its own order, and a green result would say nothing. */
export function refuseOneSession(n: number): void {
  if (n < 2) throw new UsageError(`race explore needs at least 2 sessions (--n ${n}): one session has nothing to race with; race run runs it alone`)
}

export interface ExploreOptions {
  /** postgres://... or mysql://...; default DATABASE_URL, PG* variables, else race's embedded PostgreSQL. */
  databaseUrl?: string
  /** Sessions (a template session's copies); default the scenario's. */
  n?: number
  /** The scenario's params; the rest default. */
  params?: Params
  /**
   * Declared steps with more orders than this are sampled (unless exhaustive); an application race's reduced search
   * stops after this many runs and says what it left. Default 1000. exhaustive ignores it.
   */
  max?: number
  /** Sample this many random runs (even when every interleaving would fit in --max). */
  sample?: number
  /** The sample's seed; default a random one (reported, to run the same sample again). */
  seed?: number
  /**
   * A sample that found no violation passes expect held only when it states at least this probability of finding
   * one of its depth (0 < p < 1); without it a sample that held is not known to hold (exitCode 3).
   */
  acceptSample?: number
  /**
   * Every order of the steps (today's exact enumeration, the oracle), whatever max says. Default: the reduced search,
   * which runs one order of each class of orders that differ only by swapping steps that touch nothing in common.
   */
  exhaustive?: boolean
  /**
   * An application race: the reduced search (by default its interleavings are all run, or sampled above max). It
   * assumes the sessions share no state outside the database: one that reads and writes a module-level variable, an
   * in-process cache or lock between its queries depends on the others where the server sees nothing, and orders
   * the reduction skips could end otherwise. Declared SQL steps are reduced by default.
   */
  reduce?: boolean
  /**
   * Run only this shard (index 1..count) of a sample's draws, or of an exhaustive search's tree; mergeShards joins the
   * shards' results.
   */
  shard?: { index: number; count: number }
  /**
   * Runs at once, each job in its own schema with its own connections (default the machine's cores, at most the
   * runs). An exhaustive search, a sample and the reduced search of declared steps use them (the reduced search's
   * other jobs run ahead of it, and it takes their runs in its own order: `ahead` in the result); --preemptions and
   * application races run on one job, but for the reduced search of sessions isolated in workers (the result says
   * how many it used).
   */
  jobs?: number
  /** Run every order with at most this many preemptions, fewest first (instead of the reduced search). */
  preemptions?: number
  /** A sample's PCT depth: the violations of this depth its stated probability is for. Default 3 (at most 2 preemptions). */
  depth?: number
  /** Runs spent at most on shrinking a sampled violation to a minimal one; 0: no shrinking. Default 100. */
  shrink?: number
  /** How the replay command names the scenario (the command passes what the user typed); default its id, or its file. */
  name?: string
  /** held: every interleaving must hold; violated: at least one must violate. Default: the scenario's own. */
  expect?: 'held' | 'violated'
  /** Bounds: '5s' or milliseconds. Defaults as race explore's: connect 5s, step 10s, the whole exploration 5m. */
  connectTimeout?: string | number
  stepTimeout?: string | number
  runTimeout?: string | number
  /** @deprecated connectTimeout, in milliseconds (explore()'s earlier name). */
  connectTimeoutMs?: number
  /** @deprecated stepTimeout, in milliseconds. */
  stepTimeoutMs?: number
  /** @deprecated runTimeout, in milliseconds. */
  runTimeoutMs?: number
  /**
   * After each run: how many have run (shrinking's too), how many different interleavings violated, and how many runs
   * are planned: exactly (a sample), at most (every interleaving: orders with waiting steps do not run), null while
   * shrinking.
   */
  onProgress?: (p: { runs: number; violating: number; planned: number | null; exact: boolean; phase: 'explore' | 'shrink' }) => void
}

/**
 * explore()'s bounds: race explore's names and defaults (connect 5s, step 10s, the whole exploration 5m), durations
 * or milliseconds; the earlier names connectTimeoutMs, stepTimeoutMs and runTimeoutMs (milliseconds) still taken.
 */
export function exploreBounds(o: ExploreOptions): Bounds {
  const pick = (name: 'connectTimeout' | 'stepTimeout' | 'runTimeout', fallback: string): string => {
    const alias = `${name}Ms` as const
    const v = o[alias]
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new UsageError(`${alias} is ${JSON.stringify(v) ?? String(v)}: give a positive number of milliseconds`)
    if (v !== undefined && o[name] !== undefined) throw new UsageError(`explore(): ${alias} is the earlier name of ${name}: give one of them`)
    const given = o[name] ?? v ?? fallback
    return typeof given === 'number' ? `${given}ms` : given
  }
  return parseBounds({ connectTimeout: pick('connectTimeout', CONNECT_TIMEOUT.default), stepTimeout: pick('stepTimeout', STEP_TIMEOUT.default), runTimeout: pick('runTimeout', RUN_TIMEOUT.default) }, NAMES)
}
