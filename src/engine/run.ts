// A run: its own schema on the target, K trials of N sessions under one schedule. The engine records facts
// (who did what, what the invariant query said); the commands judge them. The schema is dropped and every
// connection ended whatever happens.
//
// Between trials the schema is dropped and created again (same name) and the setup runs again on control, so
// every trial starts from exactly what the first did. The sessions' connections are opened while control runs the
// setup (PostgreSQL: the first trial's already while control creates the schema), and where the driver can reset
// one (PostgreSQL, direct: SessionConn.reset, conns.ts) a session's connection is kept for the next trial instead
// of being closed and opened again. `freshConnections` (race run --fresh-connections) opens them after the setup
// and closes them at the end of every trial instead.
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { parseBinds } from '../binds.js'
import { connectError } from '../db/connect.js'
import { spaceName, type Driver, type RunSpace, type ServerInfo, type SessionOptions } from '../db/driver.js'
import { conditionName, isConnectionLoss } from '../db/sqlstate.js'
import { Interrupted, RunError, UsageError } from '../errors.js'
import { abortSignal, setStuckDescriber, whenAborted } from '../lifecycle.js'
import { orderFor, ownServerRefusal, tooOldFor, type Plan } from '../plan.js'
import type { Entry } from '../permutation.js'
import type { BindCtx, Row, Rows, Schedule } from '../scenario.js'
import { fitToKeep, SessionConns } from './conns.js'
import { runBarrier, runChosen, runPermutation, type BlockProbe, type Chooser } from './schedule.js'
import { Session, sessionOptions } from './session.js'
import type { InvariantReport, SessionState, StepPause, TimelineEvent, TrialFacts } from './types.js'

export interface RunConfig {
  plan: Plan
  schedule: Schedule
  /** With schedule 'permutation': the order, as text ("s1.begin s2.begin ..."). */
  permutation?: string
  trials: number
  stepTimeoutMs: number
  connectTimeoutMs: number
  keep: boolean
  /** The user every session acts for; default a fresh uuid per trial (so no two runs share advisory keys). */
  user?: string
  /**
   * --hold: before the first session runs its last step (commit or rollback), keep everything as it is for
   * this long, so `race locks` in another terminal sees the race's locks held and awaited. 0: no hold.
   */
  holdMs?: number
  /** Called when the hold starts, with the backends of the trial. */
  onHold?: (pids: number[], ms: number) => void
  onTrial?: (done: number, facts: TrialFacts) => void
  /**
   * --step: called before each step of a step-by-step schedule (not barrier) is launched, with where every
   * session stands; the step waits until it resolves. A rejection ends the run like an abort.
   */
  beforeStep?: (pause: StepPause) => Promise<void>
  /** Every event as the engine records it (a presenter redraws while it waits). */
  onEvent?: (e: TimelineEvent) => void
  /**
   * --fresh-connections: every trial opens its sessions' connections after its setup and closes them when it ends.
   * Default: they are opened while control runs the setup, and kept across trials where the driver can reset them.
   */
  freshConnections?: boolean
  /**
   * An application race only (plan.scenario.app): the chooser of trial k (0-based), which decides at every quiet
   * moment which ready session's query goes next (src/app/types.ts, Chooser); it replaces the schedule. The trial's
   * facts then carry `order`, the labels as they were released. For an explorer.
   */
  chooser?: (trial: number) => import('../app/types.js').Chooser
  /**
   * race explore: trial k's order is chosen while it runs, step by step, by what this returns for k (schedule.ts
   * runChosen); the run ends, whatever `trials` says, at the first k it returns undefined for. Called after
   * onTrial of trial k-1, so a trial's order may depend on what the trials before it did.
   */
  choose?: (trial: number) => Chooser | undefined
  /** With choose: the order each trial's steps were launched in, after its onTrial. */
  onOrder?: (trial: number, order: Entry[]) => void
}

export interface RunOutput {
  schema: string
  server: ServerInfo
  trials: TrialFacts[]
  /** Session connections opened, and handed from one trial to the next (0 with freshConnections). */
  connections: { opened: number; kept: number }
}

export async function run(lab: Driver, cfg: RunConfig): Promise<RunOutput> {
  const { target } = lab
  const { plan } = cfg
  const scenario = plan.scenario
  const n = plan.variant.n
  if (scenario.ownServer && lab.target.kind !== 'embedded') throw new UsageError(ownServerRefusal(scenario))
  const old = tooOldFor(scenario, lab.server, lab.engine)
  if (old) throw new UsageError(old)
  const room = await lab.room()
  if (n > room.free) {
    throw new UsageError(
      `--n ${n} needs ${n} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --n ${Math.max(1, room.free)} or fewer`,
    )
  }
  const sharing = plan.sessions.filter((x) => x.spec.shares)
  if (sharing.length && cfg.schedule === 'barrier') {
    throw new UsageError(
      `${scenario.id}: sessions ${sharing.map((x) => `${x.name} and ${x.spec.shares}`).join(', ')} take turns on one pooled connection, which a barrier cannot start together: use --schedule lockstep, serial or a permutation`,
    )
  }
  const app = scenario.app
  if (app && cfg.beforeStep) throw new UsageError(`${scenario.id} is an application race: --step is not available for it (its steps are known only as the function sends them)`)
  if (app && plan.windowMs) throw new UsageError(`${scenario.id} is an application race: --window has no race point to sleep at; mark one in your code with ctx.point('check') and stand the barrier there (barrier: 'check')`)
  if (app && cfg.holdMs) throw new UsageError(`${scenario.id} is an application race: --hold is not available for it`)
  if (app && plan.variant.pool) throw new UsageError(`${scenario.id} is an application race: its sessions are the driver's own connections, not a pooler's clients (leave out --pooler/--pooled)`)
  // Bad permutations are refused before any schema or connection exists (an application race's by src/app).
  const order = cfg.schedule === 'barrier' || cfg.choose || app ? [] : orderFor(plan, cfg.schedule, cfg.permutation)
  const appTrial = app ? (await import('../app/trial.js')).appTrial : undefined
  // An application race keeps its sessions' connections across trials (reset between them) unless told not to.
  const appKept = app && !cfg.freshConnections ? ([] as import('../app/drivers.js').AppConn[]) : undefined
  if (app && cfg.schedule === 'permutation') (await import('../app/trial.js')).parseAppPermutation(cfg.permutation ?? '', plan.sessions.map((s) => s.name))
  // Statements on control before the race (create schema, setup) end early on Ctrl-C or --run-timeout; the
  // one in flight (held up by an outside lock, say) is then cancelled before cleanup uses the connection.
  let inFlight: { settled: boolean; done: Promise<void> } | undefined
  const onControl = (text: string, args: unknown[] = []) => {
    lab.checkControl()
    const p = lab.query(text, args)
    const f = { settled: false, done: Promise.resolve() }
    f.done = p.then(() => void (f.settled = true), () => void (f.settled = true))
    inFlight = f
    return Promise.race([p, whenAborted(), lab.whenLost()])
  }
  let schema: RunSpace | undefined
  const trials: TrialFacts[] = []
  let failure: unknown
  // The connections the sessions of the next trial will use (none held between trials with freshConnections).
  const conns = new SessionConns(lab)
  let opened = 0
  const onAbort = () => void conns.kill()
  abortSignal.addEventListener('abort', onAbort, { once: true })
  const prepare = (space: string) => {
    const env = { scenarioId: scenario.id, schema: space, connectTimeoutMs: cfg.connectTimeoutMs, stepTimeoutMs: cfg.stepTimeoutMs + (cfg.holdMs ?? 0) }
    conns.prepare(plan.sessions.flatMap((p, index) => (p.spec.shares ? [] : [{ index, options: sessionOptions(p, env) }])))
  }
  try {
    // Where sessions can connect before the schema exists, the first trial's connect while control creates it.
    const early = !cfg.freshConnections && lab.earlySessions && !app ? spaceName(scenario.id) : undefined
    if (early) prepare(early)
    schema = await lab.createSpace(scenario.id, cfg.keep, onControl, early)
    const space = schema.name
    for (let k = 0; k < cfg.trials; k++) {
      if (abortSignal.aborted) throw abortSignal.reason
      const chooser = cfg.choose?.(k)
      if (cfg.choose && !chooser) break
      // The same schema (name, mark) again, empty, and control working in it: one round trip.
      await onControl(k > 0 ? `${lab.recreateSql(space, cfg.keep)}; ${lab.useSql(space)}` : lab.useSql(space))
      const user = cfg.user ?? randomUUID()
      // The sessions connect (those not kept from the last trial) while control runs the setup.
      if (!cfg.freshConnections && !app) prepare(space)
      for (const stmt of plan.setup) {
        const { text, names } = parseBinds(stmt, lab.placeholders)
        await onControl(text, values(names, cfg, user, 'setup'))
      }
      let ran: Entry[] | undefined
      let facts: TrialFacts
      let connections: number
      if (appTrial) {
        // race explore's chooser (engine Sessions) drives an application race through src/app's: the same ready
        // sessions (index, name), and the order back as entries (s1.q3: session 0, step 2).
        const appChooser = cfg.chooser?.(k) ?? (chooser ? (await import('../app/trial.js')).fromEngineChooser(chooser) : undefined)
        const f = await appTrial(lab, {
          race: app!.race,
          file: app!.file,
          n,
          schedule: cfg.schedule,
          permutation: cfg.permutation,
          chooser: appChooser,
          scenarioId: scenario.id,
          schema: space,
          user,
          stepTimeoutMs: cfg.stepTimeoutMs,
          connectTimeoutMs: cfg.connectTimeoutMs,
          evaluate: () => evaluate(lab, cfg, user, () => undefined),
          ...(appKept ? { kept: appKept } : {}),
        })
        facts = f
        connections = n
        if (chooser) ran = (await import('../app/trial.js')).orderEntries(f.order, plan.sessions.map((x) => x.name))
      } else ({ facts, connections, ran } = await trial(lab, cfg, space, order, user, cfg.freshConnections ? undefined : conns, chooser))
      opened += connections
      trials.push(facts)
      cfg.onTrial?.(k + 1, facts)
      if (ran) cfg.onOrder?.(k, ran)
    }
  } catch (e) {
    failure = e
  } finally {
    schema?.release()
    abortSignal.removeEventListener('abort', onAbort)
  }
  if (inFlight && !inFlight.settled) await lab.cancelControl(inFlight.done)
  // Connections held for a next trial that will not come: their sockets closed at once (their backends are idle).
  if (failure !== undefined) await conns.kill()
  if (appKept) await (await import('../app/trial.js')).closeKept(appKept)
  // After the last trial they end while the schema is dropped: reset, they hold nothing the drop waits for.
  const closing = conns.close()
  // Cleanup never hides the failure it follows: what it could not do is added to that failure's one line.
  const left = await schema?.drop()
  await closing
  if (failure === undefined && schema) {
    if (left) throw new RunError(left.note)
    return { schema: schema.name, server: lab.server, trials, connections: { opened: cfg.freshConnections || app ? opened : conns.counts.opened, kept: conns.counts.kept } }
  }
  if (!abortSignal.aborted && isConnectionLoss(failure)) {
    const code = (failure as { code?: string }).code
    const name = `${code}${conditionName(code) ? ' ' + conditionName(code) : ''}`
    if (left?.serverGone) {
      throw new RunError(`the server went away mid-run (lost the control connection to ${target.label}: ${name}, and it refuses new ones)${lab.target.kind === 'embedded' ? '' : `; ${left.note}`}`)
    }
    throw new RunError(`lost the control connection to ${target.label} mid-run (${name}): something ended it; ${left ? left.note : "the run's sessions were ended and its schema dropped on a fresh connection"}`)
  }
  throw left ? withNote(abortSignal.aborted ? abortSignal.reason : failure, left.note) : failure
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

/** What a session's step returned, for the invariant's `:session.step.column` binds. */
type SeenBy = (session: string, step: string) => Rows | undefined

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

/**
 * One trial. `conns`: where its sessions take their connections and give them back when they can serve the next
 * trial; absent (freshConnections): each session opens its own and closes it at the end.
 */
async function trial(
  lab: Driver,
  cfg: RunConfig,
  schema: string,
  order: Entry[],
  user: string,
  conns?: SessionConns,
  chooser?: Chooser,
): Promise<{ facts: TrialFacts; connections: number; ran?: Entry[] }> {
  const { plan } = cfg
  const events: TimelineEvent[] = []
  let t0 = performance.now()
  const now = () => performance.now() - t0
  const sessions: Session[] = []
  let pids: number[] = []
  let connections = 0
  /** Backends race cancelled or terminated in this trial: their connections are not kept (a cancel can land late). */
  const signalled = new Set<number>()
  const env = {
    open: (o: SessionOptions, index: number) => (conns ? conns.take(index, o) : (connections++, lab.openSession(o))),
    placeholders: lab.placeholders,
    schema,
    scenarioId: plan.scenario.id,
    user,
    params: plan.variant.params,
    n: plan.variant.n,
    binds: plan.scenario.binds ?? {},
    // A step that waits through the hold must not be given up because of it.
    stepTimeoutMs: cfg.stepTimeoutMs + (cfg.holdMs ?? 0),
    connectTimeoutMs: cfg.connectTimeoutMs,
    now,
    record: (e: Omit<TimelineEvent, 't'>) => {
      const ev: TimelineEvent = { t: Math.round(now() * 10) / 10, ...e }
      events.push(ev)
      cfg.onEvent?.(ev)
      return ev
    },
    cancel: async (pid: number, terminate: boolean) => {
      if (!ours().includes(pid)) return // only ever signal this run's own backends
      signalled.add(pid)
      await lab.cancel(pid, terminate)
    },
    blockers: (pid: number) => lab.blockers(pid),
  }
  /**
   * This run's backends: each session's own, and (a pooler's clients own none) the ones lent to them right now.
   */
  const ours = () => [...new Set([...pids, ...sessions.map((s) => s.pid)].filter((p) => p > 0))]
  plan.sessions.forEach((p, i) => sessions.push(new Session(i, p, env)))
  for (const s of sessions) if (s.shares) s.lender = sessions.find((x) => x.name === s.shares)
  let held: Promise<void> | undefined
  const launched = new Set<string>()
  const before = async (s: Session, step: number) => {
    if (cfg.beforeStep && cfg.schedule !== 'barrier') {
      const left = order.filter((e) => !launched.has(`${e.session}.${e.step}`) && !sessions[e.session].finished).length
      const pause: StepPause = { done: launched.size, left, session: s.name, step: s.steps[step].name, sessions: await states(), events, refresh: states }
      await Promise.race([cfg.beforeStep(pause), whenAborted()])
      // The clock starts at the first step, not while the room reads the first screen (issue 23).
      if (!launched.size) {
        t0 = performance.now()
        sessions.forEach((x) => x.markStart(0))
      }
      launched.add(`${s.index}.${step}`)
    }
    if (!cfg.holdMs || step !== s.steps.length - 1) return
    held ??= (async () => {
      cfg.onHold?.(ours(), cfg.holdMs!)
      await Promise.race([new Promise((r) => setTimeout(r, cfg.holdMs)), whenAborted()])
    })()
    await held
  }
  /** Where every session stands (for --step): waiting sessions name whom they wait for, from pg_blocking_pids. */
  const states = async (): Promise<SessionState[]> => {
    const byPid = new Map(sessions.filter((x) => !x.lender).map((x) => [x.pid, x.name]))
    return Promise.all(
      sessions.map(async (x): Promise<SessionState> => {
        const base = { name: x.name, pid: x.pid, step: x.current?.name ?? null, waitingFor: [] as string[], outcome: null }
        if (x.finished) {
          const r = x.report()
          const outcome = r.outcome === 'rejected' ? `rejected: ${r.reason ?? ''}` : r.outcome === 'failed' ? `failed ${r.sqlstate ?? ''}`.trim() : r.outcome
          return { ...base, state: 'done', step: r.step, outcome }
        }
        if (x.current?.blocked) {
          const by = await env.blockers(x.pid).catch(() => [] as number[])
          return { ...base, state: 'waiting', waitingFor: by.map((p) => byPid.get(p) ?? `pid ${p}`) }
        }
        if (x.current) return { ...base, state: 'running' }
        return { ...base, state: x.inTransaction ? 'idle in transaction' : x.started ? 'idle' : 'not started' }
      }),
    )
  }
  setStuckDescriber(() =>
    sessions
      .filter((s) => s.busy)
      .map((s) => `${s.name} (pid ${s.pid}) in step ${s.current!.name}${s.current!.blocked ? ' (waiting)' : ''}`)
      .join(', '),
  )
  const probe: BlockProbe = {
    blocked: async (ask) => {
      const got = await lab.blocked(ask.map((s) => s.connection), pids)
      return new Set(ask.filter((s) => got.has(s.connection)))
    },
    blockers: env.blockers,
  }
  const endAll = async (now: boolean) => {
    await Promise.all(sessions.map((s) => (now ? s.destroy() : s.close())))
  }
  /**
   * The trial is over: each session's connection is reset and kept for the next trial when it can be (conns.ts,
   * fitToKeep), else closed as with fresh connections. Before the invariant, as closing was: nothing a session
   * held or left open (a transaction, a session-level lock) is there when the invariant runs.
   */
  const settle = async () => {
    if (!conns) return endAll(false)
    await Promise.all(
      sessions.map(async (s) => {
        const c = s.ownConnection
        if (!c) return
        const users = sessions.filter((x) => x === s || x.lender === s)
        if (fitToKeep(users, c, signalled)) {
          if (await c.reset!()) return conns.give(s.index, c)
          // It did not come back idle in time: end it for good, backend included.
          await c.destroy()
          return lab.terminate([c.pid])
        }
        await s.close()
      }),
    )
  }
  /**
   * Ends this trial's sessions for good: first our side of every socket (so the driver never writes to a
   * connection the server closed), then, from control, the backends themselves, waiting for them to exit
   * (a backend blocked on a lock does not notice its client is gone). Only our own pids.
   */
  const killAll = async () => {
    const mine = ours()
    await endAll(true)
    await lab.terminate(mine)
  }
  // If the run is aborted (Ctrl-C, run timeout), end this trial's backends so nothing waits on them.
  const onAbort = () => void killAll()
  abortSignal.addEventListener('abort', onAbort, { once: true })
  try {
    try {
      await Promise.race([Promise.all(sessions.map((s) => s.open())), whenAborted()])
    } catch (e) {
      if (abortSignal.aborted) throw abortSignal.reason
      const code = (e as { code?: string }).code
      if (code === '53300') {
        throw new RunError(`the server refused a connection: ${(e as Error).message} (53300 too_many_connections): use a smaller --n, or raise the limit`)
      }
      throw lab.engine === 'postgres' ? connectError(e, lab.target) : e
    }
    pids = sessions.map((s) => s.pid)
    // A pooler's client connects with its first step and owns no backend (pid 0 until one is lent to it).
    const own = sessions.filter((s) => !s.lender && s.pid > 0).map((s) => s.pid)
    if (new Set(own).size !== own.length) {
      throw new RunError(`two sessions share a backend (pids ${pids.join(', ')}): is a pooler in between?${lab.engine === 'postgres' ? ' Say so with --pooled' : ''}`)
    }

    let ran: Entry[] | undefined
    const schedule = async () => {
      if (chooser) {
        t0 = performance.now()
        sessions.forEach((s) => s.markStart(0))
        ran = await runChosen(sessions, chooser, probe, before)
      } else if (cfg.schedule === 'barrier') {
        // Connect and begin, then wait at the barrier; the clock starts when all are through.
        await Promise.all(sessions.map((s) => s.start(0)))
        events.length = 0
        t0 = performance.now()
        sessions.forEach((s) => s.markStart(0))
        await runBarrier(sessions, probe, before)
      } else {
        t0 = performance.now()
        sessions.forEach((s) => s.markStart(0))
        await runPermutation(sessions, order, probe, before)
      }
    }
    await Promise.race([schedule(), whenAborted(), lab.whenLost()])
    await Promise.race([settle(), whenAborted()])

    lab.checkControl()
    const seen: SeenBy = (name, step) => sessions.find((s) => s.name === name)?.rowsOf(step)
    const invariant = await Promise.race([evaluate(lab, cfg, user, seen), lab.whenLost()])
    // Connections that outlive the trial (a pooler's) are reset: what it left on them must not reach the next.
    if (lab.afterTrial) await Promise.race([lab.afterTrial(), whenAborted()])
    return { facts: { sessions: sessions.map((s) => s.report()), invariant, events }, connections, ran }
  } catch (e) {
    sessions.forEach((s) => s.abandon(abortSignal.aborted ? 'the run was aborted' : 'the run failed'))
    await killAll()
    throw e
  } finally {
    abortSignal.removeEventListener('abort', onAbort)
  }
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
async function evaluate(lab: Driver, cfg: RunConfig, user: string, seen: SeenBy): Promise<InvariantReport> {
  const inv = cfg.plan.scenario.invariant
  const description = typeof inv.description === 'function' ? inv.description(cfg.plan.variant.params) : inv.description
  try {
    const { text, names } = parseBinds(cfg.plan.invariantSql, lab.placeholders)
    const rows = await lab.query(text, values(names, cfg, user, 'invariant', seen))
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

function defaultObserved(row: Row): string {
  return Object.entries(row)
    .filter(([k]) => k !== 'held')
    .map(([k, v]) => `${k}=${v === null ? 'null' : String(v)}`)
    .join(' ')
}
