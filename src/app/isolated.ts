// An application race's trial with every session isolated (race explore's default): each session's function runs in
// a worker thread of its own (session-host.ts), which imported the race module into its own module graph, so two sessions
// share nothing but the database: what the server sees is all they share, and a search may take two steps that touch
// nothing in common on the server as independent. This side keeps what a trial's schedule needs: the control
// connection (blocking seen by each session's backend pid), the chooser, the order, the invariant. Each worker says
// when its session is at its gate and what it would send, and waits there until told to go.
import { Worker } from 'node:worker_threads'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Driver } from '../db/driver.js'
import { abortable, TrialClock } from '../engine/runner.js'
import { pickedOf, POLL_MS } from '../engine/schedule.js'
import type { Chooser, InvariantReport, SessionReport, TimelineEvent } from '../engine/types.js'
import { RunError, UsageError } from '../errors.js'
import { SRC } from '../home.js'
import { foreignBackends, noteElsewhere } from './foreign.js'
import { FaultOffers, momentOf } from './faults.js'
import type { Fault } from './labels.js'
import type { FromHost, HostState, ToHost } from './messages.js'
import { quietWait } from './quiet.js'
import type { AppState } from './session.js'
import type { AppTrialFacts } from './trial.js'

/** A session's worker, kept across a run's trials (its connection with it, reset between them). */
export class Host {
  readonly worker: Worker
  private listeners = new Set<(m: FromHost) => void>()
  /** Set when the worker died: every trial after fails with it. */
  dead?: Error
  constructor(
    file: string,
    readonly name: string,
    readonly index: number,
    n: number,
    scenarioId: string,
  ) {
    this.worker = new Worker(new URL('session-host.js', SRC), { workerData: { file, name, index, n, scenarioId } })
    this.worker.on('message', (m: FromHost) => {
      if (m.t === 'socket') return noteElsewhere(m.port, m.session, m.open)
      for (const l of [...this.listeners]) l(m)
    })
    const died = (e: Error) => {
      this.dead ??= e
      for (const l of [...this.listeners]) l({ t: 'failed', message: e.message })
    }
    this.worker.on('error', died)
    this.worker.on('exit', (code) => died(new Error(`${name}'s worker exited (code ${code})`)))
  }
  post(m: ToHost): void {
    if (!this.dead) this.worker.postMessage(m)
  }
  on(l: (m: FromHost) => void): () => void {
    this.listeners.add(l)
    return () => this.listeners.delete(l)
  }
  /** The next message of kind `t` (or the worker's failure). */
  next<K extends FromHost['t']>(t: K): Promise<Extract<FromHost, { t: K }>> {
    return new Promise((resolve, reject) => {
      if (this.dead) return reject(new RunError(`${this.name}: ${this.dead.message}`))
      const off = this.on((m) => {
        if (m.t === t) {
          off()
          resolve(m as Extract<FromHost, { t: K }>)
        } else if (m.t === 'failed') {
          off()
          reject(Object.assign(new RunError(`${this.name}: ${m.message}`), m.code ? { code: m.code } : {}))
        }
      })
    })
  }
  async close(): Promise<void> {
    if (!this.dead) {
      this.post({ t: 'close' })
      await Promise.race([this.next('closed').catch(() => {}), sleep(2000, undefined, { ref: false })])
    }
    this.dead ??= new Error('closed')
    await this.worker.terminate()
  }
}

/** A session as this side sees it: what its worker last said, and what this side decided since (go, blocked). */
class Remote {
  state: AppState = 'starting'
  pending?: { label: string; sql: string; point: boolean }
  current?: { label: string; blocked: boolean }
  pid = 0
  errors = 0
  appSince = 0
  lastLabel?: string
  /** Stopped at maxQueries: never ends (not waited for once the trial is over, as in-process). */
  parked = false
  /** The releases sent: a state the worker posted before it had the last of them is stale. */
  seq = 0
  /** The releases the worker has said it made (its step's label is in the order). */
  releasedCount = 0
  constructor(
    readonly host: Host,
    readonly name: string,
    readonly index: number,
  ) {}
  get finished(): boolean {
    return this.state === 'done'
  }
}

export interface IsolatedTrialConfig {
  hosts: Host[]
  n: number
  chooser: Chooser
  scenarioId: string
  file: string
  schema: string
  user: string
  stepTimeoutMs: number
  connectTimeoutMs: number
  isolation?: string
  fresh: boolean
  /** Faults the explorer may inject (--inject): offered beside a session's query at their site, as in-process (trial.ts). */
  inject?: readonly Fault[]
  evaluate(): Promise<InvariantReport>
  signal: AbortSignal
  whenAborted(): Promise<never>
  describeStuck(describe: () => string): void
}

export async function isolatedTrial(lab: Driver, cfg: IsolatedTrialConfig): Promise<AppTrialFacts> {
  const { signal, whenAborted } = cfg
  const clock = new TrialClock()
  const { now } = clock
  const order: string[] = []
  let wake: () => void = () => {}
  let tick = new Promise<void>((r) => (wake = r))
  let changes = 0
  const notify = () => {
    changes++
    const w = wake
    tick = new Promise<void>((r) => (wake = r))
    w()
  }
  const sessions = cfg.hosts.map((h, i) => new Remote(h, h.name, i))
  // --inject: the faults not yet used in this trial, and what became of each (the trial's facts: injections).
  const faults = new FaultOffers(cfg.n, cfg.inject)
  const ours = () => sessions.map((s) => s.pid).filter((p) => p > 0)
  const signalled = new Set<number>()
  const ended = new Map<Remote, Promise<void>>()
  let failure: Error | undefined
  const offs = sessions.map((s) =>
    s.host.on((m) => {
      if (m.t === 'state') applyState(s, m)
      else if (m.t === 'released') {
        order.push(m.label)
        s.releasedCount++
      }
      else if (m.t === 'timeout') void giveUp(s, m.reason)
      else if (m.t === 'failed') failure ??= new RunError(`${s.name}: ${m.message}`)
      else return
      notify()
    }),
  )
  const applyState = (s: Remote, m: HostState) => {
    if (m.seq < s.seq && m.state !== 'done') return
    const wasApp = s.state === 'app'
    s.state = m.state
    s.pending = m.pending
    // Running with no query on the server yet (between its release and its send): the step released stays current.
    if (m.state !== 'running' || m.current) s.current = m.current ? { label: m.current.label, blocked: s.current?.label === m.current.label ? s.current.blocked : false } : undefined
    s.errors = m.errors
    s.lastLabel = m.lastLabel
    s.parked = Boolean(m.parked)
    if (m.state === 'app' && !wasApp) s.appSince = now()
  }
  const giveUp = async (s: Remote, why: string) => {
    if (s.finished) return
    const pid = s.pid
    const by = await lab.blockers(pid).catch(() => [] as number[])
    s.host.post({ t: 'end', outcome: 'timeout', reason: `${why}${by.length ? `, waiting for pid ${by.join(', ')}` : ''}`, record: true })
    signalled.add(pid)
    await lab.cancel(pid, false).catch(() => {})
    await sleep(200)
    await lab.cancel(pid, true).catch(() => {})
  }
  const killAll = async () => {
    for (const s of sessions) s.host.post({ t: 'end', outcome: 'lost', reason: 'the run was aborted' })
    await lab.terminate(ours()).catch(() => {})
  }
  cfg.describeStuck(() =>
    sessions
      .filter((s) => s.state === 'running')
      .map((s) => `${s.name} (pid ${s.pid}) in ${s.current?.label ?? '?'}${s.current?.blocked ? ' (waiting)' : ''}`)
      .join(', '),
  )
  const guard = {
    onAbort: () => void killAll(),
    abandon: (why: string) => {
      for (const s of sessions) s.host.post({ t: 'end', outcome: 'lost', reason: why })
    },
    kill: killAll,
  }
  try {
    return await abortable(signal, guard, async () => {
      // ---- every session's worker connects (or resets its kept connection) ----
      const target = (await lab.sessionTarget?.(cfg.schema)) ?? lab.target
      try {
        await Promise.race([
          Promise.all(
            sessions.map(async (s) => {
              const opened = s.host.next('opened')
              s.host.post({ t: 'trial', schema: cfg.schema, user: cfg.user, target, split: Boolean(cfg.chooser.split), stepTimeoutMs: cfg.stepTimeoutMs, connectTimeoutMs: cfg.connectTimeoutMs, fresh: cfg.fresh, ...(cfg.isolation ? { isolation: cfg.isolation } : {}) })
              s.pid = (await opened).pid
            }),
          ),
          whenAborted(),
        ])
      } catch (e) {
        if (signal.aborted) throw signal.reason
        const code = (e as { code?: string }).code
        throw new RunError(`a session of ${cfg.scenarioId} could not connect: ${(e as Error).message}${code ? ` (${code})` : ''}`)
      }
      clock.restart()
      // A session parked at maxQueries never ends: its wait is bounded below, and a failure is the trial's (failure).
      for (const s of sessions) ended.set(s, s.host.next('ended').then(() => undefined, () => undefined))
      for (const s of sessions) s.host.post({ t: 'start' })
      const chooser = cfg.chooser
      const foreign = new Map<number, string>()
      const lookForeign = async () => {
        for (const f of await foreignBackends(lab, cfg.schema, ours()).catch(() => [])) foreign.set(f.pid, `${f.session ? `${f.session}'s own connection, ` : ''}pid ${f.pid} ${f.how}`)
      }
      const watcher = setInterval(() => void lookForeign(), 250)
      const probe = async (ask: Remote[]) => (ask.length ? lab.blocked(ask, ours()) : new Set<Remote>())
      const boundApp = () => {
        for (const s of sessions) {
          if (s.state === 'app' && now() - s.appSince > cfg.stepTimeoutMs) {
            const held = sessions.filter((x) => x !== s && x.state === 'ready' && x.pending)
            const reason = held.length
              ? `${s.name} waited in JavaScript (no query pending) for ${cfg.stepTimeoutMs}ms while race held ${held.map((x) => `${x.name} at ${x.name}.${x.pending!.label}`).join(', ')}: it waits outside the database on ${held.length > 1 ? 'those sessions' : held[0].name}, which race cannot schedule (and in isolated mode the sessions share no JavaScript: what it waits for is in its own worker)`
              : `the function neither sent a query nor returned within ${cfg.stepTimeoutMs}ms`
            s.appSince = Infinity
            s.host.post({ t: 'end', outcome: 'timeout', reason })
          }
        }
      }
      const quiet = quietWait({
        signal,
        sessions,
        failure: () => failure,
        boundApp,
        changes: () => changes,
        tick: () => tick,
        probe,
        unblocked: (s) => {
          if (!s.current) return
          s.current.blocked = false
          s.host.post({ t: 'unblocked', label: s.current.label })
        },
        blocked: (s) => {
          if (!s.current || s.current.blocked || s.state !== 'running') return
          s.current.blocked = true
          s.host.post({ t: 'blocked', label: s.current.label })
        },
        firstQuiet: lookForeign,
      })
      const drive = async () => {
        for (;;) {
          await quiet()
          if (sessions.every((s) => s.finished)) {
            await chooser.settled?.({ ready: [], blocked: [], done: sessions.map((s) => s.name), order: [...order], pids: sessions.map((s) => s.pid), errors: sessions.map((s) => s.errors) })
            return
          }
          const ready = sessions.filter((s) => s.state === 'ready' && s.pending)
          if (!ready.length) {
            await Promise.race([tick, sleep(50, undefined, { ref: false })])
            continue
          }
          // A ready session whose next query is a fault's site is offered again with the fault (faults.ts).
          const offered = faults.offer(ready.map((s) => ({ name: s.name, index: s.index, pending: s.pending! })))
          const moment = momentOf(offered, sessions, (x) => x.errors, order)
          const picked = offered[pickedOf(moment, await chooser(moment))]
          const s = sessions[faults.sessionOf(picked)]
          const fault = faults.take(picked)
          const p = s.pending!
          s.seq++
          s.state = p.point ? 'app' : 'running'
          if (p.point) s.appSince = now()
          s.current = p.point ? undefined : { label: p.label, blocked: false }
          s.pending = undefined
          // The worker's 'released' for this step is waited for: the order is this side's, in the order chosen.
          const before = s.releasedCount
          // lost: the session's backend is ended from the control connection before its query is sent (in-process,
          // the session does it itself through its kill: app/session.ts inject); the worker then sends it on the
          // ended connection, which fails as any lost connection does.
          if (fault === 'lost') {
            signalled.add(s.pid)
            await lab.terminate([s.pid]).catch(() => {})
          }
          s.host.post({ t: 'go', seq: s.seq, ...(fault ? { fault } : {}) })
          while (s.releasedCount === before && !s.finished && !failure && !signal.aborted) await Promise.race([tick, sleep(POLL_MS)])
          await Promise.race([tick, sleep(0)])
        }
      }
      try {
        await Promise.race([drive(), whenAborted(), lab.whenLost()])
        // A session stopped at maxQueries is left parked: its function never resumes, and is not waited for.
        await Promise.race([Promise.all(sessions.filter((s) => !s.parked).map((s) => ended.get(s))), sleep(2000, undefined, { ref: false })])
        await lookForeign()
      } finally {
        clearInterval(watcher)
      }
      const fix = 'so this race cannot be decided; query through the connection race gives each session (the db argument, or ctx.pool/ctx.client)'
      if (foreign.size) throw new RunError(`a connection race did not hand out queried the run's tables (${[...foreign.values()].join('; ')}): its queries were never scheduled, ${fix}`)
      const finished = await Promise.all(
        sessions.map((s) => {
          const f = s.host.next('finished')
          s.host.post({ t: 'finish', rollback: !signalled.has(s.pid), keep: !cfg.fresh, destroy: signalled.has(s.pid), lateMs: cfg.stepTimeoutMs })
          return f
        }),
      )
      const own = finished.flatMap((f) => f.own)
      if (own.length) {
        const which = [...new Set(own.map((c) => `${c.session} connected to the server's ${c.to} itself`))].join('; ')
        throw new RunError(`a connection race did not hand out reached the run's server (${which}): whatever it sent was never scheduled, ${fix}`)
      }
      const byThemselves = finished.every((f) => f.outcome === 'committed' || f.outcome === 'rejected' || (f.outcome === 'failed' && !f.crashed))
      if (byThemselves && finished.every((f) => f.sent === 0)) {
        throw new UsageError(`${cfg.file}: no session's function sent a query through the connection race gave it (the db argument): there is nothing to race (does it use its own connection or pool?)`)
      }
      if (signalled.size) await lab.terminate([...signalled]).catch(() => {})
      lab.checkControl()
      const invariant = await Promise.race([cfg.evaluate(), lab.whenLost()])
      const events: TimelineEvent[] = finished.flatMap((f) => f.events).sort((a, b) => a.t - b.t)
      const reports: SessionReport[] = finished.map((f) => f.report)
      return { sessions: reports, invariant, events, order, ...(faults.injections.length ? { injections: faults.injections } : {}) }
    })
  } finally {
    for (const off of offs) off()
  }
}
