// A run: its own schema on the target, K trials of N sessions under one schedule, each judged; the schema
// is dropped and every connection ended whatever happens.
import { randomBytes, randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Sql } from 'postgres'
import { connect, connectError, endQuietly } from '../db/connect.js'
import { conditionName, isConnectionLoss } from '../db/sqlstate.js'
import type { Target } from '../db/target.js'
import { Interrupted, RunError, UsageError } from '../errors.js'
import { judge } from '../judge/index.js'
import { abortSignal, onCleanup, setStuckDescriber, whenAborted } from '../lifecycle.js'
import type { Params, Scenario, Schedule } from '../scenario.js'
import { lockstepOrder, parsePermutation, runBarrier, runPermutation, serialOrder, type BlockProbe, type Entry } from './schedule.js'
import { Session } from './session.js'
import type { InvariantReport, TimelineEvent, TrialResult } from './types.js'

export interface RunConfig {
  scenario: Scenario
  params: Params
  n: number
  schedule: Schedule
  /** With schedule 'permutation': the order, as text ("s1.begin s2.begin ..."). */
  permutation?: string
  windowMs: number
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
  onTrial?: (done: number, result: TrialResult) => void
}

export interface ServerInfo {
  version: string
  versionNum: number
}

export interface RunOutput {
  schema: string
  server: ServerInfo
  trials: TrialResult[]
}

/** An open connection to the target for one command: control work, server facts, cleanup. */
export class Lab {
  private constructor(
    readonly target: Target,
    readonly control: Sql,
    readonly server: ServerInfo,
    readonly connectTimeoutMs: number,
    /** The control connection's backend, to cancel a statement of ours that an outside lock holds up. */
    readonly controlPid: number,
    private readonly lost: Promise<never>,
  ) {}

  /**
   * Set when the control connection closes. postgres.js (max 1) would silently reconnect on the next query,
   * to a backend without the run's search_path: so a closed control ends the run instead (see whenLost).
   */
  controlLost = false

  /** Rejects (CONNECTION_CLOSED) when the control connection closes; race every wait on control with it. */
  whenLost(): Promise<never> {
    return this.lost
  }

  /** Throws CONNECTION_CLOSED if the control connection has closed (never send on a reconnected one). */
  checkControl(): void {
    if (this.controlLost) throw Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' })
  }

  static async open(target: Target, connectTimeoutMs: number): Promise<Lab> {
    let reject: (e: Error) => void = () => {}
    let lab: Lab | undefined
    const lost = new Promise<never>((_, r) => (reject = r))
    lost.catch(() => {}) // observed by whoever races it
    const control = connect(target, {
      connectTimeoutMs,
      applicationName: 'race control',
      onclose: () => {
        if (lab) lab.controlLost = true
        reject(Object.assign(new Error('the control connection closed'), { code: 'CONNECTION_CLOSED' }))
      },
    })
    const release = onCleanup('control connection', () => endQuietly(control, 1))
    try {
      const [row] = await Promise.race([
        control`select current_setting('server_version') as version, current_setting('server_version_num')::int as num, pg_backend_pid() as pid`,
        whenAborted(),
      ])
      lab = new Lab(target, control, { version: String(row.version).split(' ')[0], versionNum: Number(row.num) }, connectTimeoutMs, Number(row.pid), lost)
      return lab
    } catch (e) {
      release()
      await endQuietly(control, 0)
      if (abortSignal.aborted) throw e
      throw connectError(e, target)
    }
  }

  /** Connections this role can still open, for refusing an impossible --n before trying. */
  async room(): Promise<{ free: number; max: number }> {
    const [r] = await this.control`
      select current_setting('max_connections')::int as max,
             current_setting('superuser_reserved_connections')::int
             + coalesce(nullif(current_setting('reserved_connections', true), ''), '0')::int as reserved,
             (select count(*)::int from pg_stat_activity where backend_type = 'client backend') as used`
    return { free: Number(r.max) - Number(r.reserved) - Number(r.used), max: Number(r.max) }
  }
}

function newSchemaName(id: string): string {
  return `race_${id.replace(/[^a-z0-9]/g, '_')}_${randomBytes(4).toString('hex')}`
}

export async function run(lab: Lab, cfg: RunConfig): Promise<RunOutput> {
  const { control, target } = lab
  const room = await lab.room()
  if (cfg.n > room.free) {
    throw new UsageError(
      `--n ${cfg.n} needs ${cfg.n} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --n ${Math.max(1, room.free)} or fewer`,
    )
  }
  const specs = Object.entries(cfg.scenario.sessions(cfg.params, cfg.n))
  const sharing = specs.filter(([, x]) => x.shares)
  for (const [name, x] of sharing) {
    const at = specs.findIndex(([m]) => m === x.shares)
    if (at < 0 || at >= specs.findIndex(([m]) => m === name)) throw new Error(`${cfg.scenario.id}: session ${name} shares '${x.shares}', which is not an earlier session`)
  }
  if (sharing.length && cfg.schedule === 'barrier') {
    throw new UsageError(
      `${cfg.scenario.id}: sessions ${sharing.map(([n, x]) => `${n} and ${x.shares}`).join(', ')} take turns on one pooled connection, which a barrier cannot start together: use --schedule lockstep, serial or a permutation`,
    )
  }
  const schema = newSchemaName(cfg.scenario.id)
  const q = `"${schema}"`
  // Statements on control before the race (create schema, setup) end early on Ctrl-C or --run-timeout; the
  // one in flight (held up by an outside lock, say) is then cancelled before cleanup uses the connection.
  let inFlight: { settled: boolean; done: Promise<void> } | undefined
  const onControl = (text: string) => {
    lab.checkControl()
    const p = control.unsafe(text)
    const f = { settled: false, done: Promise.resolve() }
    f.done = p.then(() => void (f.settled = true), () => void (f.settled = true))
    inFlight = f
    return Promise.race([p, whenAborted(), lab.whenLost()])
  }
  const dropSchema = async () => {
    if (cfg.keep) return
    const left = await dropSchemaSafely(lab, schema)
    if (left) throw new Error(left.note)
  }
  const release = onCleanup(`schema ${schema}`, dropSchema)
  const trials: TrialResult[] = []
  let failure: unknown
  try {
    try {
      await onControl(`create schema ${q}`)
    } catch (e) {
      const code = (e as { code?: string }).code
      if (abortSignal.aborted || isConnectionLoss(e)) throw e
      if (code === '42501') {
        throw new RunError(`this role may not create a schema in this database (42501 insufficient_privilege): grant it CREATE on the database, or use another role`)
      }
      throw new RunError(`could not create the run's schema ${schema}: ${(e as Error).message}`)
    }
    for (let k = 0; k < cfg.trials; k++) {
      if (abortSignal.aborted) throw abortSignal.reason
      if (k > 0) await onControl(`drop schema ${q} cascade; create schema ${q}`)
      await onControl(`set search_path to ${q}`)
      for (const stmt of cfg.scenario.setup) await onControl(stmt)
      const result = await trial(lab, cfg, schema)
      trials.push(result)
      cfg.onTrial?.(k + 1, result)
    }
  } catch (e) {
    failure = e
  } finally {
    release()
  }
  if (inFlight && !inFlight.settled) await cancelControl(lab, inFlight.done)
  // Cleanup never hides the failure it follows: what it could not do is added to that failure's one line.
  const left = cfg.keep ? undefined : await dropSchemaSafely(lab, schema)
  if (failure === undefined) {
    if (left) throw new RunError(left.note)
    return { schema, server: lab.server, trials }
  }
  if (!abortSignal.aborted && isConnectionLoss(failure)) {
    const code = (failure as { code?: string }).code
    if (left?.serverGone) {
      throw new RunError(`the server went away mid-run (lost the control connection to ${target.label}: ${code}${conditionName(code) ? ' ' + conditionName(code) : ''}, and it refuses new ones)${lab.target.kind === 'embedded' ? '' : `; ${left.note}`}`)
    }
    throw new RunError(`lost the control connection to ${target.label} mid-run (${code}${conditionName(code) ? ' ' + conditionName(code) : ''}): something ended it; ${left ? left.note : "the run's sessions were ended and its schema dropped on a fresh connection"}`)
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

/**
 * Runs cleanup on the control connection or, if control is gone (the server ended it, or the socket broke as
 * the statement was sent), on a fresh connection: killing our backends and dropping our schema must not
 * depend on the connection whose loss may be the very fault being cleaned up after.
 */
async function onControlOrFresh<T>(lab: Lab, fn: (sql: Sql) => PromiseLike<T>): Promise<T> {
  if (!lab.controlLost) {
    try {
      return await fn(lab.control)
    } catch (e) {
      if (!isConnectionLoss(e)) throw e
    }
  }
  const fresh = connect(lab.target, { connectTimeoutMs: lab.connectTimeoutMs, applicationName: 'race cleanup' })
  try {
    return await fn(fresh)
  } finally {
    await endQuietly(fresh, 0)
  }
}

/** Cancels the control connection's statement in flight, from a fresh connection; waits (bounded) for it to end. */
async function cancelControl(lab: Lab, done: Promise<void>): Promise<void> {
  if (lab.controlPid > 0) {
    const fresh = connect(lab.target, { connectTimeoutMs: lab.connectTimeoutMs, applicationName: 'race cleanup' })
    try {
      await fresh`select pg_cancel_backend(${lab.controlPid})`
    } catch {
      /* the server may be gone too: cleanup below says what was left */
    } finally {
      await endQuietly(fresh, 0)
    }
  }
  await Promise.race([done, new Promise((r) => setTimeout(r, 2000))])
}

/**
 * Drops the run's schema on the control connection, or on a fresh one if control is gone. Returns what was
 * left behind (with the statement to drop it), and whether the server itself seems gone, or nothing.
 */
/** How long the final drop waits for a lock on the run's objects before naming the leftover instead. */
export const DROP_LOCK_TIMEOUT_MS = 5000

async function dropSchemaSafely(lab: Lab, schema: string): Promise<{ note: string; serverGone: boolean } | undefined> {
  const stmt = `drop schema if exists "${schema}" cascade`
  try {
    // Bounded: a lock someone else holds on one of our tables must not hold the drop (and race) forever.
    await onControlOrFresh(lab, (sql) => sql.unsafe(`set lock_timeout = '${DROP_LOCK_TIMEOUT_MS}ms'; ${stmt}`))
    return undefined
  } catch (e) {
    const code = (e as { code?: string }).code
    const serverGone = isConnectionLoss(e) || code === 'CONNECT_TIMEOUT'
    return { note: `schema ${schema} was left behind (${code ?? (e as Error).message}): drop it with: ${stmt}`, serverGone }
  }
}

async function trial(lab: Lab, cfg: RunConfig, schema: string): Promise<TrialResult> {
  const { control } = lab
  const user = cfg.user ?? randomUUID()
  const events: TimelineEvent[] = []
  let t0 = performance.now()
  const now = () => performance.now() - t0
  const specs = Object.entries(cfg.scenario.sessions(cfg.params, cfg.n))
  const sessions: Session[] = []
  let pids: number[] = []
  const env = {
    target: lab.target,
    schema,
    scenarioId: cfg.scenario.id,
    user,
    params: cfg.params,
    // A step that waits through the hold must not be given up because of it.
    stepTimeoutMs: cfg.stepTimeoutMs + (cfg.holdMs ?? 0),
    connectTimeoutMs: cfg.connectTimeoutMs,
    now,
    record: (e: Omit<TimelineEvent, 't'>) => events.push({ t: Math.round(now() * 10) / 10, ...e }),
    cancel: async (pid: number, terminate: boolean) => {
      if (!pids.includes(pid)) return // only ever signal this run's own backends
      await (terminate ? control`select pg_terminate_backend(${pid})` : control`select pg_cancel_backend(${pid})`)
    },
    blockers: async (pid: number) => {
      const [r] = await control`select pg_blocking_pids(${pid}) as b`
      return (r.b as number[]) ?? []
    },
  }
  specs.forEach(([name, spec], i) => sessions.push(new Session(i, name, spec, env, cfg.windowMs)))
  for (const s of sessions) if (s.shares) s.lender = sessions.find((x) => x.name === s.shares)
  let held: Promise<void> | undefined
  const before = async (s: Session, step: number) => {
    if (!cfg.holdMs || step !== s.steps.length - 1) return
    held ??= (async () => {
      cfg.onHold?.([...new Set(pids)], cfg.holdMs!)
      await Promise.race([new Promise((r) => setTimeout(r, cfg.holdMs)), whenAborted()])
    })()
    await held
  }
  const order = cfg.schedule === 'barrier' ? [] : orderFor(cfg, sessions)
  setStuckDescriber(() =>
    sessions
      .filter((s) => s.busy)
      .map((s) => `${s.name} (pid ${s.pid}) in step ${s.current!.name}${s.current!.blocked ? ' (waiting)' : ''}`)
      .join(', '),
  )
  const probe: BlockProbe = {
    blocked: async (ask) => {
      const rows = await control`
        select pid from unnest(${ask}::int[]) as pid where pg_isolation_test_session_is_blocked(pid, ${pids}::int[])`
      return new Set(rows.map((r) => Number(r.pid)))
    },
    blockers: env.blockers,
  }
  const endAll = async (now: boolean) => {
    await Promise.all(sessions.map((s) => (now ? s.destroy() : s.close())))
  }
  /**
   * Ends this trial's sessions for good: first our side of every socket (so postgres.js never writes to a
   * connection the server closed), then, from control, the backends themselves, waiting for them to exit
   * (PostgreSQL 14+): a backend blocked on a lock does not notice its client is gone. Only our own pids.
   */
  const killAll = async () => {
    await endAll(true)
    const mine = [...new Set(pids.filter((p) => p > 0))]
    if (!mine.length) return
    const kill = onControlOrFresh(lab, (sql) =>
      lab.server.versionNum >= 140000
        ? sql`select pg_terminate_backend(pid, 2000) from unnest(${mine}::int[]) as pid`
        : sql`select pg_terminate_backend(pid) from unnest(${mine}::int[]) as pid`,
    )
    await Promise.race([kill.then(() => {}, () => {}), new Promise((r) => setTimeout(r, 2500 + lab.connectTimeoutMs))])
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
      throw connectError(e, lab.target)
    }
    pids = sessions.map((s) => s.pid)
    const own = sessions.filter((s) => !s.lender).map((s) => s.pid)
    if (new Set(own).size !== own.length) throw new RunError(`two sessions share a backend (pids ${pids.join(', ')}): is a pooler in between?`)

    const schedule = async () => {
      if (cfg.schedule === 'barrier') {
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
    await endAll(false)

    lab.checkControl()
    const invariant = await Promise.race([evaluate(control, cfg, user), lab.whenLost()])
    const reports = sessions.map((s) => s.report())
    const { verdict, why } = judge(reports, invariant)
    return { sessions: reports, invariant, verdict, why, events }
  } catch (e) {
    sessions.forEach((s) => s.abandon(abortSignal.aborted ? 'the run was aborted' : 'the run failed'))
    await killAll()
    throw e
  } finally {
    abortSignal.removeEventListener('abort', onAbort)
  }
}

/** The step order of a non-barrier schedule; bad permutations are refused before any connection opens. */
export function orderFor(cfg: Pick<RunConfig, 'schedule' | 'permutation' | 'scenario' | 'params' | 'n'>, sessions: readonly Session[]): Entry[] {
  if (cfg.schedule === 'serial') return serialOrder(sessions)
  if (cfg.schedule === 'permutation') return parsePermutation(cfg.permutation ?? '', sessions)
  const own = cfg.scenario.lockstep?.(cfg.params, cfg.n)
  return own ? parsePermutation(own, sessions) : lockstepOrder(sessions)
}

async function evaluate(control: Sql, cfg: RunConfig, user: string): Promise<InvariantReport> {
  const inv = cfg.scenario.invariant
  const description = inv.description(cfg.params)
  try {
    const rows = await inv.query(control, { user, params: cfg.params, n: cfg.n })
    return { description, observed: inv.observed(rows), held: inv.holds(rows, cfg.params) }
  } catch (e) {
    if (isConnectionLoss(e)) throw e
    const code = (e as { code?: string }).code
    return { description, observed: '?', held: null, error: `${code ?? ''} ${conditionName(code) ?? ''} ${(e as Error).message}`.trim() }
  }
}
