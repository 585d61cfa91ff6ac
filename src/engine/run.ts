// A run: its own schema on the target, K trials of N sessions under one schedule. The engine records facts
// (who did what, what the invariant query said); the commands judge them. The schema is dropped and every
// connection ended whatever happens.
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Sql } from 'postgres'
import { parseBinds } from '../binds.js'
import { connectError } from '../db/connect.js'
import type { Lab, RunSchema, ServerInfo } from '../db/lab.js'
import { conditionName, isConnectionLoss } from '../db/sqlstate.js'
import { Interrupted, RunError, UsageError } from '../errors.js'
import { abortSignal, setStuckDescriber, whenAborted } from '../lifecycle.js'
import { orderFor, type Plan } from '../plan.js'
import type { Entry } from '../permutation.js'
import type { BindCtx, Row, Schedule } from '../scenario.js'
import { runBarrier, runPermutation, type BlockProbe } from './schedule.js'
import { Session } from './session.js'
import type { InvariantReport, PoolRoute, TimelineEvent, TrialFacts } from './types.js'

/** Sessions through a connection pooler: opened once the run's schema exists (the pool sets its search_path). */
export interface Pooler {
  /** The pool's server connections (null: unknown, a pooler the user runs). */
  size: number | null
  open(schema: string): Promise<PoolRoute>
}

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
  /** Route every session through this pooler (the control connection stays direct). */
  pooler?: Pooler
}

export interface RunOutput {
  schema: string
  server: ServerInfo
  trials: TrialFacts[]
  /** The pooler the sessions went through, described. */
  pooled?: string
}

export async function run(lab: Lab, cfg: RunConfig): Promise<RunOutput> {
  const { control, target } = lab
  const { plan } = cfg
  const scenario = plan.scenario
  const n = plan.variant.n
  const room = await lab.room()
  // Through a pooler the server sees the pool's connections, not one per session.
  const need = cfg.pooler?.size ?? n
  if (need > room.free) {
    throw new UsageError(
      cfg.pooler
        ? `the pool needs ${need} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --pool-size ${Math.max(1, room.free)} or fewer`
        : `--n ${n} needs ${n} connections, but the server has room for ${Math.max(0, room.free)} more (max_connections ${room.max}): use --n ${Math.max(1, room.free)} or fewer`,
    )
  }
  const sharing = plan.sessions.filter((x) => x.spec.shares)
  if (sharing.length && cfg.schedule === 'barrier') {
    throw new UsageError(
      `${scenario.id}: sessions ${sharing.map((x) => `${x.name} and ${x.spec.shares}`).join(', ')} take turns on one pooled connection, which a barrier cannot start together: use --schedule lockstep, serial or a permutation`,
    )
  }
  // Bad permutations are refused before any schema or connection exists.
  const order = cfg.schedule === 'barrier' ? [] : orderFor(plan, cfg.schedule, cfg.permutation)
  // Statements on control before the race (create schema, setup) end early on Ctrl-C or --run-timeout; the
  // one in flight (held up by an outside lock, say) is then cancelled before cleanup uses the connection.
  let inFlight: { settled: boolean; done: Promise<void> } | undefined
  const onControl = (text: string, args: unknown[] = []) => {
    lab.checkControl()
    const p = args.length ? control.unsafe(text, args as never[]) : control.unsafe(text)
    const f = { settled: false, done: Promise.resolve() }
    f.done = p.then(() => void (f.settled = true), () => void (f.settled = true))
    inFlight = f
    return Promise.race([p, whenAborted(), lab.whenLost()])
  }
  let schema: RunSchema | undefined
  let route: PoolRoute | undefined
  const trials: TrialFacts[] = []
  let failure: unknown
  try {
    schema = await lab.createSchema(scenario.id, cfg.keep, onControl)
    if (cfg.pooler) route = await Promise.race([cfg.pooler.open(schema.name), whenAborted()])
    const q = schema.quoted
    for (let k = 0; k < cfg.trials; k++) {
      if (abortSignal.aborted) throw abortSignal.reason
      if (k > 0) await onControl(`drop schema ${q} cascade; ${lab.createSchemaSql(schema.name, cfg.keep)}`)
      await onControl(`set search_path to ${q}`)
      const user = cfg.user ?? randomUUID()
      for (const stmt of plan.setup) {
        const { text, names } = parseBinds(stmt)
        await onControl(text, values(names, cfg, user, 'setup'))
      }
      const facts = await trial(lab, cfg, schema.name, order, user, route)
      trials.push(facts)
      cfg.onTrial?.(k + 1, facts)
    }
  } catch (e) {
    failure = e
  } finally {
    schema?.release()
    // The pool first: its server connections may hold what the sessions left (a leaked lock).
    await route?.close().catch(() => {})
  }
  if (inFlight && !inFlight.settled) await lab.cancelControl(inFlight.done)
  // Cleanup never hides the failure it follows: what it could not do is added to that failure's one line.
  const left = await schema?.drop()
  if (failure === undefined && schema) {
    if (left) throw new RunError(left.note)
    return { schema: schema.name, server: lab.server, trials, ...(route ? { pooled: route.describe } : {}) }
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

/** Values of the binds of setup and invariant SQL (no session: only the user, n, params and scenario binds). */
function values(names: string[], cfg: RunConfig, user: string, where: string): unknown[] {
  const { params, n } = cfg.plan.variant
  const ctx: BindCtx = { user, session: where, index: -1, params, n }
  return names.map((name) => {
    const bind = cfg.plan.scenario.binds?.[name]
    if (bind) return bind.value(ctx)
    if (name === 'user') return user
    if (name === 'n') return n
    if (name in params) return params[name]
    throw new UsageError(`${cfg.plan.scenario.id}: the ${where} SQL uses :${name}, which has no value there`)
  })
}

async function trial(lab: Lab, cfg: RunConfig, schema: string, order: Entry[], user: string, route?: PoolRoute): Promise<TrialFacts> {
  const { control } = lab
  const { plan } = cfg
  const events: TimelineEvent[] = []
  let t0 = performance.now()
  const now = () => performance.now() - t0
  const sessions: Session[] = []
  let pids: number[] = []
  const env = {
    target: lab.target,
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
      const ev = { t: Math.round(now() * 10) / 10, ...e }
      events.push(ev)
      return ev
    },
    pool: route,
    cancel: async (pid: number, terminate: boolean) => {
      // Only ever signal this run's own backends (through a pooler: its pool's).
      if (!(route ? (await route.backends()).includes(pid) : pids.includes(pid))) return
      await (terminate ? control`select pg_terminate_backend(${pid})` : control`select pg_cancel_backend(${pid})`)
    },
    blockers: async (pid: number) => {
      const [r] = await control`select pg_blocking_pids(${pid}) as b`
      return (r.b as number[]) ?? []
    },
  }
  plan.sessions.forEach((p, i) => sessions.push(new Session(i, p, env)))
  for (const s of sessions) if (s.shares) s.lender = sessions.find((x) => x.name === s.shares)
  let held: Promise<void> | undefined
  const before = async (s: Session, step: number) => {
    if (!cfg.holdMs || step !== s.steps.length - 1) return
    held ??= (async () => {
      // Through a pooler: the pool's server connections (the sessions have none of their own).
      cfg.onHold?.(route ? await route.backends().catch(() => []) : [...new Set(pids)], cfg.holdMs!)
      await Promise.race([new Promise((r) => setTimeout(r, cfg.holdMs)), whenAborted()])
    })()
    await held
  }
  setStuckDescriber(() =>
    sessions
      .filter((s) => s.busy)
      .map((s) => `${s.name} (pid ${s.pid}) in step ${s.current!.name}${s.current!.blocked ? ' (waiting)' : ''}`)
      .join(', '),
  )
  const probe: BlockProbe = route
    ? {
        // Through a pooler a session has no backend of its own: the pooler says which server connection its
        // step in flight runs on, before and after asking the server whether that backend waits for one of
        // the pool's. A session counts as blocked only if its step and its server connection stayed the same.
        // No `blockers`: a backend may be blocked by a server connection no session is using (a leaked lock).
        blocked: async (ask) => {
          const cur = new Map(ask.map((s) => [s, s.current]))
          const before = await route.links()
          const linked = ask.filter((s) => before.has(s.appName))
          for (const s of linked) s.linkedTo(cur.get(s), before.get(s.appName)!)
          if (!linked.length) return new Set()
          const pool = await route.backends()
          const rows = await control`
            select pid from unnest(${linked.map((s) => before.get(s.appName)!)}::int[]) as pid
             where pg_isolation_test_session_is_blocked(pid, ${pool}::int[])`
          const blocked = new Set(rows.map((r) => Number(r.pid)))
          const after = await route.links()
          return new Set(linked.filter((s) => s.current === cur.get(s) && blocked.has(before.get(s.appName)!) && after.get(s.appName) === before.get(s.appName)))
        },
      }
    : {
        blocked: async (ask) => {
          const rows = await control`
            select pid from unnest(${ask.map((s) => s.pid)}::int[]) as pid where pg_isolation_test_session_is_blocked(pid, ${pids}::int[])`
          const got = new Set(rows.map((r) => Number(r.pid)))
          return new Set(ask.filter((s) => got.has(s.pid)))
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
    const mine = [...new Set((route ? await route.backends().catch(() => []) : pids).filter((p) => p > 0))]
    if (!mine.length) return
    const kill = lab.onControlOrFresh((sql) =>
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
    if (!route && new Set(own).size !== own.length) throw new RunError(`two sessions share a backend (pids ${pids.join(', ')}): is a pooler in between? Say so with --pooled`)

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
    // What the trial left on the pool's server connections (a leaked lock, a SET) must not reach the next.
    if (route) await Promise.race([route.recycle(), whenAborted()])
    return { sessions: sessions.map((s) => s.report()), invariant, events }
  } catch (e) {
    sessions.forEach((s) => s.abandon(abortSignal.aborted ? 'the run was aborted' : 'the run failed'))
    await killAll()
    throw e
  } finally {
    abortSignal.removeEventListener('abort', onAbort)
  }
}

/** The invariant's SQL on the control connection: `held` true, false, or NULL (could not be decided). */
async function evaluate(control: Sql, cfg: RunConfig, user: string): Promise<InvariantReport> {
  const inv = cfg.plan.scenario.invariant
  const description = typeof inv.description === 'function' ? inv.description(cfg.plan.variant.params) : inv.description
  try {
    const { text, names } = parseBinds(inv.sql)
    const rows = await control.unsafe(text, values(names, cfg, user, 'invariant') as never[])
    const row = rows[0] as Row | undefined
    if (!row) return { description, observed: 'no row', held: null, error: 'the invariant query returned no row' }
    const observed = inv.observed ? inv.observed(row) : defaultObserved(row)
    const held = typeof row.held === 'boolean' ? row.held : null
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
