// --oracle serial, the part that talks to the database: the run's tables read after a trial (and between the
// sessions of a serial run), the serial orders run before the race (one trial each, chosen step by step so that
// each session's whole work runs after the one before), and each trial of the race judged against them
// (engine/serial.ts compares). engine/run.ts calls it; docs/oracle.md says what it decides and what it cannot.
import { RunError, UsageError } from '../errors.js'
import type { Driver } from '../db/driver.js'
import { documentedFor, type Plan } from '../plan.js'
import type { Documented, Params, Scenario } from '../scenario.js'
import type { RunConfig } from './runner.js'
import {
  canonicalRows,
  distinct,
  endingOf,
  judgeSerial,
  mayBeAbsent,
  orderText,
  permutations,
  prefixOutcomes,
  SERIAL_MAX_SESSIONS,
  type SerialOutcome,
  type SessionEnding,
  type TableRows,
} from './serial.js'
import type { Chooser, Moment, SessionReport, TrialFacts } from './types.js'

/** The oracles race knows. */
export const ORACLES = ['serial'] as const
export type OracleName = (typeof ORACLES)[number]

/** --oracle as given: one of ORACLES, else one line (exit 2). */
export function parseOracle(raw: unknown, flag = '--oracle'): OracleName | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined
  const v = String(raw).trim().toLowerCase()
  if ((ORACLES as readonly string[]).includes(v)) return v as OracleName
  throw new UsageError(`${flag} is ${JSON.stringify(raw)}: race knows ${ORACLES.join(', ')} (every outcome must be one some serial order of the sessions gives)`)
}

/**
 * The same scenario judged by the serial oracle too (beside its invariant, or alone where it has none). Every
 * trial of a run of it is compared with every serial order's outcome (engine/run.ts).
 */
export function withOracle(s: Scenario, oracle: OracleName | undefined): Scenario {
  if (!oracle) return s
  const own = s.invariant.description
  const serial = 'the outcome is one a serial order of the sessions gives (--oracle serial)'
  const description = s.noInvariant ? serial : typeof own === 'function' ? (p: Params) => `${own(p)}; and ${serial}` : `${own}; and ${serial}`
  return { ...s, oracle, invariant: { ...s.invariant, description } }
}

/** A scenario with no invariant of its own, run with no oracle: nothing would judge it (one line, exit 2). */
export function refuseUnjudged(s: Scenario): void {
  if (s.noInvariant === 'required' && !s.oracle) {
    throw new UsageError(`${s.source.section}: it has no invariant: give --oracle serial (every outcome judged against the serial orders of its sessions, docs/oracle.md) or write one`)
  }
}

/** Refuses a number of sessions whose serial orders are too many to run before the race. */
export function refuseTooMany(n: number): void {
  if (n > SERIAL_MAX_SESSIONS) {
    throw new UsageError(`--oracle serial runs every serial order of the sessions first (n! of them): ${n} sessions are ${factorial(n)} orders; give --n ${SERIAL_MAX_SESSIONS} or fewer (${factorial(SERIAL_MAX_SESSIONS)} orders)`)
  }
}

function factorial(n: number): number {
  return n <= 1 ? 1 : n * factorial(n - 1)
}

/** The run's tables (its schema, or its database on MySQL), each one's rows canonical: what a trial left. */
export async function readTables(lab: Driver, space: string, user?: string): Promise<TableRows> {
  const mysql = lab.engine === 'mysql'
  const cols = await lab.query(
    mysql
      ? `select table_name as t, column_name as c, (extra like '%auto_increment%' or extra like '%DEFAULT_GENERATED%' or extra like '%GENERATED%') as gen from information_schema.columns where table_schema = ? and table_name in (select table_name from information_schema.tables where table_schema = ? and table_type = 'BASE TABLE') order by table_name, ordinal_position`
      : `select c.table_name as t, c.column_name as c, (c.is_identity = 'YES' or c.is_generated = 'ALWAYS' or c.column_default ~ '\\(' or c.column_default ~* '^(current_|localtime)') as gen from information_schema.columns c join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name and t.table_type = 'BASE TABLE' where c.table_schema = $1 order by c.table_name, c.ordinal_position`,
    mysql ? [space, space] : [space],
  )
  const tables = new Map<string, Set<string>>()
  for (const r of cols) {
    const t = String(r.t ?? r.T ?? r.TABLE_NAME)
    if (mysql && t === 'race_mark') continue
    const skip = tables.get(t) ?? new Set<string>()
    const gen = r.gen
    if (gen === true || gen === 1 || gen === '1' || gen === 1n) skip.add(String(r.c ?? r.C ?? r.COLUMN_NAME))
    tables.set(t, skip)
  }
  const out: TableRows = {}
  for (const [t, skip] of [...tables].sort(([a], [b]) => a.localeCompare(b))) {
    const rows = await lab.query(mysql ? `select * from \`${space}\`.\`${t.replace(/`/g, '``')}\`` : `select * from "${space}"."${t.replace(/"/g, '""')}"`)
    out[t] = canonicalRows(rows, skip, user)
  }
  return out
}

/** A session's ending, with an application session's return value. */
export function sessionEnding(s: SessionReport): SessionEnding {
  return { name: s.name, ending: endingOf(s), ...(s.returned !== undefined && s.outcome === 'committed' ? { returned: s.returned } : {}) }
}

/**
 * A chooser that runs the sessions one after another in `order`: at every moment, the first session of the order
 * that has not ended goes on. Each time another session has ended (and before the first step), `between` is told how
 * many have (the tables are read there: the outcome of that prefix of the order).
 */
export function serialChooser(order: readonly string[], between: (ended: number) => Promise<void>): Chooser {
  let seen = -1
  return async (m: Moment) => {
    if (m.done.length > seen) {
      seen = m.done.length
      await between(seen)
    }
    for (const name of order) {
      const i = m.ready.findIndex((r) => r.session === name)
      if (i >= 0) return i
      if (!m.done.includes(name) && m.blocked.some((b) => b.session === name)) continue
    }
    return 0
  }
}

/** The serial outcomes of a run's plan: what run() needs from the serial orders, run before the race. */
export interface SerialSet {
  outcomes: SerialOutcome[]
  /** Orders that could not be run to an outcome (a session lost, timed out, or its code threw): the oracle cannot decide. */
  undecided?: string
  /** How many serial orders were run. */
  orders: number
  /**
   * The SQLSTATEs the race declares (its prevention, a spec's `prevented by`, the codes its documented outcomes
   * name, a session's retry codes): a session that failed with one may stand for one that did not run.
   */
  declared: Set<string>
}

/** The SQLSTATEs a plan's scenario declares, as the judge reads them (run/judge.ts declaredCodes). */
function declaredOf(p: Plan): Set<string> {
  const out = new Set<string>(p.scenario.prevention ?? [])
  for (const schedule of ['lockstep', 'serial', 'barrier'] as const) {
    let docs: Documented[] = []
    try {
      docs = documentedFor(p.scenario, { ...p.variant, schedule, windowMs: 0 })
    } catch {
      /* not documented on this engine, or at this level */
    }
    for (const d of docs) for (const [k, v] of Object.entries(d.who)) for (const x of [k, v]) if (typeof x === 'string' && /^[0-9A-Z]{5}(\/\d+)?$/.test(x)) out.add(x)
  }
  for (const s of p.sessions) for (const c of s.spec.retry?.on ?? []) out.add(c)
  return out
}

type RunFn = (lab: Driver, cfg: RunConfig) => Promise<unknown>

/**
 * Runs every serial order of the sessions (n! trials, each from the setup again) and collects their outcomes and
 * those of every prefix. `run` is engine/run.ts's, with `serial` set: it reads the tables between sessions.
 */
export function serialSet(lab: Driver, cfg: RunConfig, run: RunFn): Promise<SerialSet> {
  // The runs of one plan share its serial orders (race explore --jobs: one run a job).
  let p = done.get(cfg.plan)
  if (!p) {
    p = runSerial(lab, cfg, run)
    done.set(cfg.plan, p)
    p.catch(() => done.delete(cfg.plan))
  }
  return p
}

const done = new WeakMap<Plan, Promise<SerialSet>>()

async function runSerial(lab: Driver, cfg: RunConfig, run: RunFn): Promise<SerialSet> {
  const names = cfg.plan.sessions.map((s) => s.name)
  refuseTooMany(names.length)
  const orders = permutations(names)
  const outcomes: SerialOutcome[] = []
  const prefixes: (TableRows | undefined)[][] = orders.map(() => [])
  let undecided: string | undefined
  let k = 0
  // A serial order that cannot run (a session waits for a lock an ended one still holds: a leaked session lock)
  // fails the run as its own error, said to be the oracle's.
  const said = (e: unknown) => {
    if (e instanceof RunError || e instanceof UsageError) e.message = `--oracle serial: the serial order ${orderText(orders[Math.min(k, orders.length - 1)])} could not be run: ${e.message}`
    throw e
  }
  await run(lab, {
    context: cfg.context,
    plan: cfg.plan,
    schedule: 'lockstep',
    trials: orders.length,
    ownSql: cfg.ownSql,
    stepTimeoutMs: cfg.stepTimeoutMs,
    connectTimeoutMs: cfg.connectTimeoutMs,
    keep: false,
    ...(cfg.user ? { user: cfg.user } : {}),
    ...(cfg.word ? { word: cfg.word } : {}),
    serial: {
      orders,
      prefix: (k, ended, tables) => void (prefixes[k][ended] = tables),
    },
    onTrial: (done, facts) => {
      k = done
      const bad = facts.sessions.find((s) => s.outcome === 'lost' || s.outcome === 'timeout' || s.thrown)
      if (bad && !undecided) undecided = `the serial order ${orderText(orders[done - 1])} could not be run to its end (${bad.name} ${bad.thrown ?? bad.outcome})`
      const i = done - 1
      if (facts.tables) prefixes[i][orders[i].length] = facts.tables
      outcomes.push(...prefixOutcomes(orders[i], prefixes[i], facts.sessions.map(sessionEnding)))
    },
  }).catch(said)
  return { outcomes: distinct(outcomes), orders: orders.length, declared: declaredOf(cfg.plan), ...(undecided ? { undecided } : {}) }
}

/**
 * Judges one trial of the race by the serial outcomes, beside its invariant: violated when either is; the oracle's
 * answer is `facts.oracle`, and its line is added to what the invariant observed.
 */
export function judgeTrialSerially(facts: TrialFacts, set: SerialSet, scenario: Scenario): void {
  const tables = facts.tables ?? {}
  const trial = { tables, sessions: facts.sessions.map(sessionEnding) }
  const absent = (name: string) => {
    const s = facts.sessions.find((x) => x.name === name)
    return s ? mayBeAbsent(s, set.declared) : false
  }
  const undecidedTrial = facts.sessions.find((s) => s.outcome === 'lost' || s.outcome === 'timeout' || s.thrown)
  const verdict = set.undecided
    ? { held: null, note: set.undecided }
    : undecidedTrial
      ? { held: null, note: `${undecidedTrial.name} did not end (${undecidedTrial.thrown ?? undecidedTrial.outcome}): its outcome is not known` }
      : judgeSerial(trial, set.outcomes, absent)
  facts.oracle = { name: 'serial', held: verdict.held, note: verdict.note, orders: set.orders, ...('closest' in verdict && verdict.closest ? { closest: verdict.closest } : {}) }
  const inv = facts.invariant
  const alone = scenario.noInvariant !== undefined
  const held = inv.held === false || verdict.held === false ? false : inv.held === null || verdict.held === null ? null : true
  const said = verdict.held === null ? `could not be decided: ${verdict.note}` : verdict.note
  const line = alone ? said : `serial: ${said}`
  facts.invariant = {
    ...inv,
    observed: alone || !inv.observed ? line : `${inv.observed}; ${line}`,
    held,
    ...(held === null && !inv.error ? { error: `the serial oracle could not decide: ${verdict.note}` } : {}),
  }
}
