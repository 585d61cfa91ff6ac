// A run: its own schema on the target, K trials of N sessions under one schedule. The engine records facts
// (who did what, what the invariant query said); the commands judge them. The schema is dropped and every
// connection ended whatever happens.
//
// Between trials the schema is dropped and created again (same name) and the setup runs again on control, so
// every trial starts from exactly what the first did. The trials themselves are run by a trial runner (runner.ts):
// the engine's own for declared statements (statements.ts), or the one an application race brings (src/app), named
// by the scenario's kind.
import { randomUUID } from 'node:crypto'
import { parseBinds } from '../binds.js'
import { spaceName, type Driver, type RunSpace, type ServerInfo } from '../db/driver.js'
import { conditionName, isConnectionLoss } from '../db/sqlstate.js'
import { Interrupted, RunError, UsageError } from '../errors.js'
import { tooOldFor } from '../plan.js'
import { kindOf, type BindCtx, type Row, type Scenario } from '../scenario.js'
import { DEFINES_CODE, sharesDatabase } from './footprint.js'
import { refused } from './refusals.js'
import { canonicalJson } from './serial.js'
import { judgeTrialSerially, readTables, refuseUnjudged, serialChooser, serialSet, type SerialSet } from './oracle.js'
import type { RunConfig, SeenBy, TrialContext, TrialRunner } from './runner.js'
import { statementTrials } from './statements.js'

export type { RunConfig } from './runner.js'
import type { InvariantReport, TrialFacts } from './types.js'


export interface RunOutput {
  schema: string
  server: ServerInfo
  trials: TrialFacts[]
  /** Session connections opened, and handed from one trial to the next (0 with freshConnections). */
  connections: { opened: number; kept: number }
}

/** A run's first trials, on one lane before the second is made (see laneOf in run). */
export const ONE_LANE_TRIALS = 8

export async function run(lab: Driver, cfg: RunConfig): Promise<RunOutput> {
  const { target } = lab
  const { plan } = cfg
  const scenario = plan.scenario
  const n = plan.variant.n
  if (scenario.ownServer && lab.target.kind !== 'embedded') throw refused({ kind: 'own-server', scenario }, cfg.word)
  const old = tooOldFor(scenario, lab.server, lab.engine)
  if (old) throw new UsageError(old)
  // A race module with no invariant is judged by an oracle or not run (one line, exit 2).
  refuseUnjudged(scenario)
  const room = await lab.room()
  if (n > room.free) throw refused({ kind: 'room', n, free: room.free, max: room.max }, cfg.word)
  const sharing = plan.sessions.filter((x) => x.spec.shares)
  if (sharing.length && cfg.schedule === 'barrier') {
    throw refused({ kind: 'barrier-shares', scenario: scenario.id, pairs: sharing.map((x) => [x.name, x.spec.shares!]) }, cfg.word)
  }
  // The run's abort signal and where it says what is in flight (the run's context): given to the trial runner.
  const signal = cfg.context.signal
  const aborted = cfg.context.whenAborted()
  // --oracle serial: every serial order of the sessions runs first (its own schema and trials); the serial runs
  // themselves, and a run with no oracle, read no tables.
  const oracle: SerialSet | undefined = scenario.oracle === 'serial' && !cfg.serial ? await serialSet(lab, cfg, run) : undefined
  const reading = Boolean(oracle || cfg.serial)
  let tables: Record<string, string[]> | undefined
  const ctx: TrialContext = {
    lab,
    cfg,
    signal,
    whenAborted: () => aborted,
    describeStuck: (f) => cfg.context.setStuckDescriber(f),
    evaluate: async (user, seen) => {
      // No invariant of its own (the oracle judges): held, as far as the invariant goes.
      const own = scenario.invariant.description
      const report = scenario.noInvariant === 'required' ? { description: typeof own === 'function' ? own(plan.variant.params) : own, observed: '', held: true } : await evaluate(lab, cfg, user, seen, current?.name)
      if (reading && current) tables = await readTables(lab, current.name, user)
      return report
    },
  }
  // Declared statements run on the engine's own runner; an application race brings its own (it refuses here, before
  // any schema or connection exists, what it cannot do).
  const kind = kindOf(scenario)
  const runner = (kind.type === 'application' ? kind.runner : statementTrials)(ctx)
  // Statements on control before the race (create schema, setup) end early on Ctrl-C or --run-timeout; the
  // one in flight (held up by an outside lock, say) is then cancelled before cleanup uses the connection.
  let inFlight: { settled: boolean; done: Promise<void> } | undefined
  // `space`: the run's own SQL (setup), run with the sessions' rights (Driver.runQuery).
  const onControl = (text: string, args: unknown[] = [], space?: string) => {
    lab.checkControl()
    const p = space && lab.runQuery ? lab.runQuery(space, text, args) : lab.query(text, args)
    const f = { settled: false, done: Promise.resolve() }
    f.done = p.then(() => void (f.settled = true), () => void (f.settled = true))
    inFlight = f
    return Promise.race([p, aborted, lab.whenLost()])
  }
  let schema: RunSpace | undefined
  /** The namespace of the trial running now (the first lane's, or the second's: see lanes below). */
  let current: RunSpace | undefined
  const trials: TrialFacts[] = []
  // The setup's statements as sent, parsed once for every trial (a spec's guarded block is some ten thousand characters).
  const parses = new Map<string, ReturnType<typeof parseBinds>>()
  const parsed = (stmt: string) => {
    let p = parses.get(stmt)
    if (!p) parses.set(stmt, (p = parseBinds(stmt, lab.placeholders)))
    return p
  }
  // Lanes: where the driver has a second control-role connection (prepareQuery: PostgreSQL, direct), a run of many
  // trials has two namespaces, each with its own run role, sessions' connections and setup, and its trials take them
  // in turn. While trial k runs in one, the other is made again and its setup run for trial k+1 on that connection,
  // so that between two trials nothing waits for a schema to be dropped, created and set up. The trials themselves
  // still run one after another, each in a namespace exactly as the first trial's was made. One lane only where
  // something could tell the two apart: what the whole database shares (advisory keys, pg_locks, settings; code the
  // setup defines may reach it without naming it), the sessions' own namespace read back (an oracle's tables),
  // --keep, fresh connections, --step, an application race (its own runner), or room for fewer than twice the
  // connections. RACE_LANES=1 keeps one (to measure one beside the other).
  type Lane = { name: string; runner: TrialRunner; space?: RunSpace; ready?: Promise<void>; readyFor?: number; served?: boolean }
  const lanes: Lane[] = [{ name: '', runner }]
  const twoLanes =
    process.env.RACE_LANES !== '1' &&
    cfg.trials > ONE_LANE_TRIALS &&
    !!lab.prepareQuery &&
    !!lab.earlySessions &&
    kind.type !== 'application' &&
    !cfg.keep &&
    !cfg.freshConnections &&
    !cfg.beforeStep &&
    !reading &&
    // Room for the second lane (its sessions, its run-role connection, the prepare connection) and to spare.
    room.free >= 2 * (n + 2) + 8 &&
    !sharesDatabase(plan.invariantSql) &&
    // A spec's guarded block is judged by the block as written (its guard reads the catalogs and settings itself).
    !plan.setup.map((sql) => scenario.plainSetup?.(sql) ?? sql).some((sql) => sharesDatabase(sql) || DEFINES_CODE.test(sql)) &&
    !plan.sessions.some((x) => x.steps.some((st) => sharesDatabase(st.def.sql)))
  if (twoLanes) lanes.push({ name: spaceName(scenario.id), runner: statementTrials(ctx) })
  /**
   * The lane of trial k: the first ONE_LANE_TRIALS trials on the first lane, then the two in turn. A second lane costs
   * its role, its connections and its drop (some 40 ms a run on a 2-core machine) and saves some 2 ms a trial: a run
   * of a few trials is quicker on one, and most explored races and test runs are of a few.
   */
  const laneOf = (k: number): Lane => (lanes.length === 1 || k < ONE_LANE_TRIALS ? lanes[0] : lanes[(k - ONE_LANE_TRIALS) % 2 === 0 ? 1 : 0])
  /** Every lane the run made (a second lane that could not open stays here, for the cleanup). */
  const made = [...lanes]
  // What runs beside a trial (the other lane being made ready): settled before cleanup, cancelled on a failure.
  const beside = new Set<Promise<unknown>>()
  const track = <T>(p: Promise<T>): Promise<T> => {
    beside.add(p)
    p.then(
      () => beside.delete(p),
      () => beside.delete(p),
    )
    return p
  }
  // Each trial's user, made when first asked: a lane's setup may run before its trial starts.
  const users = new Map<number, string>()
  const userOf = (k: number) => {
    let u = users.get(k)
    if (u === undefined) users.set(k, (u = cfg.user ?? randomUUID()))
    return u
  }
  /** The setup's statements for trial k in `space`, each sent by `send` (control's way, or beside a trial). */
  const runSetup = async (k: number, space: string, send: (text: string, args: unknown[], space: string) => Promise<unknown>) => {
    const user = userOf(k)
    for (const stmt of plan.setup) {
      const { text, names } = parsed(stmt)
      const args = values(names, cfg, user, 'setup')
      // After the run's first trial (its setup guarded, and passed), a plain setup runs as written (Scenario.plainSetup).
      const plain = k > 0 ? plainOf(lab, scenario, stmt) : undefined
      if (plain !== undefined) {
        await send(plain, [], space)
        continue
      }
      // A quicker statement in its place where the scenario has one (a spec's guarded block: its check made quick).
      // Failing, it left nothing (one transaction): the statement itself runs, and its own outcome is the one seen.
      const quick = quickOf(lab, scenario, stmt)
      if (quick) {
        const q = parsed(quick)
        if (q.names.join('\0') === names.join('\0')) {
          const ok = await send(q.text, args, space).then(
            () => true,
            (e) => {
              if (signal.aborted || isConnectionLoss(e)) throw e
              return false
            },
          )
          if (ok) continue
        }
      }
      await send(text, args, space)
    }
  }
  // The second lane's SQL: race's own on the prepare connection, the setup on the lane's run-role connection.
  const besideSql = (text: string, args: unknown[] = [], space?: string) =>
    Promise.race([space && lab.runQuery ? lab.runQuery(space, text, args) : lab.prepareQuery!(text), aborted, lab.whenLost()])
  /** Makes lane `l` ready for trial k beside the trial running now: its namespace made (again), its setup run. */
  const prepare = (l: Lane, k: number): Promise<void> => {
    l.readyFor = k
    return track(
      (async () => {
        if (!l.space) {
          if (cfg.ownSql) lab.trustSpace?.(l.name)
          l.runner.open(l.name)
          l.space = await lab.createSpace(scenario.id, cfg.keep, (text) => besideSql(text), l.name)
          if (l.space.name !== l.name) throw new Error(`the driver made the run's schema as ${l.space.name}, not ${l.name}`)
          await runSetup(k, l.space.name, besideSql)
          // Its sessions' connections open before it serves: where the server has no room left for them (others took
          // it since the run began), the run goes on one lane (below), rather than fail a trial.
          await l.runner.whenOpen?.()
          return
        }
        await besideSql(lab.recreateSql(l.space.name, cfg.keep))
        l.runner.open(l.space.name)
        await runSetup(k, l.space.name, besideSql)
      })(),
    )
  }
  /** Trial k on one lane after all: control makes its schema again and runs the setup, as a run of one lane does. */
  const remake = async (k: number, space: string) => {
    // The same schema (name, mark) again, empty, and control working in it: one round trip.
    if (k > 0) await onControl(`${lab.recreateSql(space, cfg.keep)}; ${lab.useSql(space)}`)
    // The sessions connect (those not kept from the last trial) while control runs the setup.
    runner.open(space)
    await runSetup(k, space, onControl)
  }
  /** The lane's preparation for trial `k`, awaited (its failure, a setup's error say, is this trial's). */
  const readied = async (l: Lane, k: number) => {
    const ready = l.ready!
    l.ready = undefined
    // Made for a later trial (a lane given up in between): its user is this trial's.
    if (l.readyFor !== k && cfg.user === undefined) {
      users.set(k, userOf(l.readyFor!))
      users.delete(l.readyFor!)
    }
    await Promise.race([ready, aborted])
  }
  let failure: unknown
  // An abort ends at once what the runner holds for a next trial (a trial in flight ends its own sessions).
  const onAbort = () => made.forEach((l) => l.runner.abort())
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    // Where sessions can connect before the schema exists, the first trial's connect while control creates it.
    // The run's schema is named here, so that the driver knows before anything connects whose SQL it runs.
    const name = spaceName(scenario.id)
    if (cfg.ownSql) lab.trustSpace?.(name)
    const early = runner.connectsAhead && lab.earlySessions ? name : undefined
    if (early) runner.open(early)
    // Control enters the schema in the statement list that creates it (one round trip, and never in a schema that
    // failed to be made: the list stops at its first error).
    schema = await lab.createSpace(scenario.id, cfg.keep, (text) => onControl(`${text}; ${lab.useSql(name)}`), name)
    lanes[0].name = name
    lanes[0].space = schema
    const space = schema.name
    if (space !== name) throw new Error(`the driver made the run's schema as ${space}, not ${name}`)
    for (let k = 0; k < cfg.trials; k++) {
      if (signal.aborted) throw signal.reason
      // An explorer's next order may wait for other runs (race explore --jobs: a branch found by another job's trial).
      const chosen = await cfg.choose?.(k)
      if (signal.aborted) throw signal.reason
      if (cfg.choose && !chosen) break
      let lane = laneOf(k)
      if (!lane.ready) await remake(k, space)
      else {
        // Made ready beside the trial before.
        try {
          await readied(lane, k)
        } catch (e) {
          if (lane === lanes[0] || lane.served || signal.aborted || !/^53/.test(String((e as { code?: string }).code ?? ''))) throw e
          // The second lane's first making found no room for its connections: one lane from here on (it is closed
          // and dropped with the others at the end).
          lanes.pop()
          lane = lanes[0]
          if (lane.ready) await readied(lane, k)
          else await remake(k, space)
        }
      }
      lane.served = true
      const user = userOf(k)
      current = lane.space
      // The other lane is made ready for the next trial while this one runs (the first time: created).
      const other = laneOf(k + 1)
      if (other !== lane && k + 1 < cfg.trials && !other.space && !other.ready) other.ready = prepare(other, k + 1)
      tables = undefined
      const serial = cfg.serial ? serialChooser(cfg.serial.orders[k], async (ended) => cfg.serial!.prefix(k, ended, await readTables(lab, space, user))) : undefined
      const { facts, ran } = await lane.runner.run({ k, space: lane.space!.name, user, chooser: serial ?? cfg.chooser?.(k) ?? chosen })
      // This lane again, for the trial after the next one (once the lanes take turns).
      if (k + 2 < cfg.trials && laneOf(k + 1) !== lane && laneOf(k + 2) === lane) lane.ready = prepare(lane, k + 2)
      if (tables) facts.tables = tables
      // What an application's function returned: written down for the oracle, else not kept.
      for (const s of facts.sessions) {
        if ('value' in s && (oracle || cfg.serial)) s.returned = canonicalJson(s.value)
        delete s.value
      }
      if (oracle) judgeTrialSerially(facts, oracle, scenario)
      trials.push(facts)
      cfg.onTrial?.(k + 1, facts)
      if (ran) cfg.onOrder?.(k, ran)
    }
  } catch (e) {
    failure = e
  } finally {
    for (const l of made) l.space?.release()
    signal.removeEventListener('abort', onAbort)
  }
  // What runs beside (the other lane made ready for a trial that will not come) ends before anything is dropped:
  // cancelled after a failure, else awaited.
  const besides = Promise.allSettled([...beside]).then(() => {})
  if ((inFlight && !inFlight.settled) || (beside.size && failure !== undefined)) await lab.cancelControl(Promise.all([inFlight?.done, besides]).then(() => {}))
  await besides
  // A lane whose namespace was being created when the run ended: created or not, it is settled now.
  // The runner ends what it holds for a next trial around the schema's drop. Cleanup never hides the failure it
  // follows: what it could not do is added to that failure's one line.
  const lefts = await Promise.all(made.map((l) => l.runner.close(failure !== undefined, async () => l.space?.drop())))
  const notes = lefts.filter((x) => x !== undefined)
  const left = notes.length ? { note: notes.map((x) => x!.note).join('; '), serverGone: notes.some((x) => x!.serverGone) } : undefined
  if (failure === undefined && schema) {
    if (left) throw new RunError(left.note)
    const counts = made.map((l) => l.runner.connections)
    return { schema: schema.name, server: lab.server, trials, connections: { opened: counts.reduce((a, c) => a + c.opened, 0), kept: counts.reduce((a, c) => a + c.kept, 0) } }
  }
  if (!signal.aborted && isConnectionLoss(failure)) {
    const code = (failure as { code?: string }).code
    const name = `${code}${conditionName(code) ? ' ' + conditionName(code) : ''}`
    if (left?.serverGone) {
      throw new RunError(`the server went away mid-run (lost the control connection to ${target.label}: ${name}, and it refuses new ones)${lab.target.kind === 'embedded' ? '' : `; ${left.note}`}`)
    }
    throw new RunError(`lost the control connection to ${target.label} mid-run (${name}): something ended it; ${left ? left.note : "the run's sessions were ended and its schema dropped on a fresh connection"}`)
  }
  throw left ? withNote(signal.aborted ? signal.reason : failure, left.note) : failure
}

/** The quicker statement the scenario runs in place of a setup statement (Scenario.quickSetup), where it may. */
function quickOf(lab: Driver, scenario: Scenario, stmt: string): string | undefined {
  if (!scenario.quickSetup || lab.engine !== 'postgres' || lab.server.versionNum < 110000) return undefined
  return scenario.quickSetup(stmt)
}

/**
 * The setup statement's plain text (Scenario.plainSetup), where the scenario has one and the driver runs the run's SQL
 * on a connection whose search_path is the run's schema (runQuery; control's is pg_catalog).
 */
function plainOf(lab: Driver, scenario: Scenario, stmt: string): string | undefined {
  if (!scenario.plainSetup || lab.engine !== 'postgres' || !lab.runQuery) return undefined
  return scenario.plainSetup(stmt)
}

/** Adds what cleanup left behind to the error the user will see (one line). */
function withNote(err: unknown, note: string): unknown {
  if (err instanceof Interrupted) {
    err.leftover = note
    return err
  }
  if (err instanceof RunError || err instanceof UsageError) {
    err.message = `${err.message}; ${note}`
    return err
  }
  return new RunError(`${(err as Error)?.message ?? err}; ${note}`)
}

/**
 * Values of the binds of setup and invariant SQL (no session: the user, n, params and scenario binds); the
 * invariant's `:session.step.column` is that column of the first row the step returned, NULL if none.
 */
function values(names: string[], cfg: RunConfig, user: string, where: string, seen?: SeenBy): unknown[] {
  const { params, n } = cfg.plan.variant
  const ctx: BindCtx = { user, session: where, index: -1, params, n }
  return names.map((name) => {
    const parts = name.split('.')
    if (parts.length === 3 && seen) return seen(parts[0], parts[1])?.[0]?.[parts[2]] ?? null
    const bind = cfg.plan.scenario.binds?.[name]
    if (bind) return bind.value(ctx)
    if (name === 'user') return user
    if (name === 'n') return n
    if (name in params) return params[name]
    throw new UsageError(`${cfg.plan.scenario.id}: the ${where} SQL uses :${name}, which has no value there`)
  })
}

/** PostgreSQL's boolean type. */
const BOOL_OID = 16

/** A PostgreSQL type's name, for a message (its oid when the catalog cannot say). */
async function typeName(lab: Driver, oid: number): Promise<string> {
  try {
    const [r] = await lab.query(`select format_type($1::oid, null) as t`, [oid])
    return String(r?.t ?? `type oid ${oid}`)
  } catch (e) {
    if (isConnectionLoss(e)) throw e
    return `type oid ${oid}`
  }
}

/** The invariant's SQL on the control connection: `held` true, false, or NULL (could not be decided). */
async function evaluate(lab: Driver, cfg: RunConfig, user: string, seen: SeenBy, space?: string): Promise<InvariantReport> {
  const inv = cfg.plan.scenario.invariant
  const description = typeof inv.description === 'function' ? inv.description(cfg.plan.variant.params) : inv.description
  try {
    const { text, names } = parseBinds(cfg.plan.invariantSql, lab.placeholders)
    const args = values(names, cfg, user, 'invariant', seen)
    const rows = await (space && lab.runQuery ? lab.runQuery(space, text, args) : lab.query(text, args))
    if (kindOf(cfg.plan.scenario).type === 'application') return await decideFromResult(lab, rows, description)
    const row = rows[0] as Row | undefined
    if (!row) return { description, observed: 'no row', held: null, error: 'the invariant query returned no row' }
    const observed = inv.observed ? inv.observed(row) : defaultObserved(row)
    // Only a SQL boolean decides (PostgreSQL's bool, type oid 16): postgres.js also turns a json or jsonb `true`
    // into a JavaScript true, which must not count as held. MySQL has no boolean type: its `held` is 1 or 0.
    const type = (rows as { columns?: { name: string; type: number }[] }).columns?.find((x) => x.name === 'held')?.type
    if (lab.engine === 'postgres' && type !== undefined && type !== BOOL_OID) {
      return { description, observed, held: null, error: `the invariant's held column is not a boolean (${await typeName(lab, type)}): make it a SQL boolean expression (e.g. count(*) <= 1), not json or text` }
    }
    const held = typeof row.held === 'boolean' ? row.held : lab.engine === 'mysql' && (row.held === 1 || row.held === 0) ? row.held === 1 : null
    return held === null ? { description, observed, held, error: 'the invariant said NULL: something it needs is missing' } : { description, observed, held }
  } catch (e) {
    if (isConnectionLoss(e)) throw e
    if (e instanceof UsageError) throw e
    const code = (e as { code?: string }).code
    return { description, observed: '?', held: null, error: `${code ?? ''} ${conditionName(code) ?? ''} ${(e as Error).message}`.trim() }
  }
}

/**
 * An application race's invariant, decided from its result alone (its text is the user's SQL, as written): exactly
 * one row; its column named `held` decides, else its one boolean column (on MySQL, which has no boolean type: its
 * one column). Anything else is undecided, in one line saying what the result was.
 */
async function decideFromResult(lab: Driver, rows: Row[], description: string): Promise<InvariantReport> {
  if (rows.length !== 1) {
    return { description, observed: `${rows.length} rows`, held: null, error: `the invariant query returned ${rows.length} rows: it must return exactly one (with a held column, or one boolean column)` }
  }
  const row = rows[0]
  const names = Object.keys(row)
  const columns = (rows as { columns?: { name: string; type: number }[] }).columns
  const typeOf = (name: string) => columns?.find((x) => x.name === name)?.type
  let column: string | undefined
  if (names.includes('held')) column = 'held'
  else if (lab.engine === 'postgres' && columns) {
    const bools = names.filter((k) => typeOf(k) === BOOL_OID)
    if (bools.length > 1) return { description, observed: defaultObserved(row), held: null, error: `the invariant's row has ${bools.length} boolean columns (${bools.join(', ')}): name the one that decides held` }
    column = bools[0] ?? (names.length === 1 ? names[0] : undefined)
  } else if (names.length === 1) column = names[0]
  if (!column) return { description, observed: defaultObserved(row), held: null, error: `the invariant's row has no boolean column (${names.join(', ') || 'no columns'}): return one, or name the deciding one held` }
  const observed = defaultObserved(row, column)
  const type = typeOf(column)
  if (lab.engine === 'postgres' && type !== undefined && type !== BOOL_OID) {
    return { description, observed, held: null, error: `the invariant's ${column} column is not a boolean (${await typeName(lab, type)}): make it a SQL boolean expression (e.g. count(*) <= 1), not json or text` }
  }
  const v = row[column]
  const held = typeof v === 'boolean' ? v : lab.engine === 'mysql' && (v === 1 || v === 0 || v === '1' || v === '0' || v === 1n || v === 0n) ? String(v) === '1' : null
  return held === null ? { description, observed, held, error: `the invariant said ${v === null ? 'NULL' : String(v)}: something it needs is missing` } : { description, observed, held }
}

function defaultObserved(row: Row, decides = 'held'): string {
  return Object.entries(row)
    .filter(([k]) => k !== decides)
    .map(([k, v]) => `${k}=${v === null ? 'null' : String(v)}`)
    .join(' ')
}
