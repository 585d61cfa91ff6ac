// The engine's trial runner: statement scenarios (built-in, .spec files, .mjs scenario modules), their sessions'
// declared steps run under a schedule (barrier, lockstep, serial, a permutation) or a chooser (race explore).
//
// The sessions' connections are opened while control runs the setup (PostgreSQL: the first trial's already while
// control creates the schema), and where the driver can reset one (PostgreSQL, direct: SessionConn.reset, conns.ts)
// a session's connection is kept for the next trial instead of being closed and opened again. `freshConnections`
// (race run --fresh-connections) opens them after the setup and closes them at the end of every trial instead.
import { connectError } from '../db/connect.js'
import type { SessionOptions } from '../db/driver.js'
import { orderFor } from '../plan.js'
import type { Entry } from '../permutation.js'
import { fitToKeep, SessionConns } from './conns.js'
import { sharesDatabase } from './footprint.js'
import { refused } from './refusals.js'
import { abortable, settleAll, TrialClock, type TrialContext, type SeenBy, type TrialRunner, type TrialRunnerFactory } from './runner.js'
import { runBarrier, runChosen, runPermutation, type BlockProbe } from './schedule.js'
import { Session, sessionOptions } from './session.js'
import type { Chooser, SessionState, StepPause, TrialFacts } from './types.js'

export const statementTrials: TrialRunnerFactory = (ctx) => {
  const { lab, cfg } = ctx
  const { plan } = cfg
  // Bad permutations are refused before any schema or connection exists.
  const order = cfg.schedule === 'barrier' || cfg.choose ? [] : (cfg.order ?? orderFor(plan, cfg.schedule, cfg.permutation))
  // The connections the sessions of the next trial will use (none held between trials with freshConnections).
  const conns = new SessionConns(lab)
  let opened = 0
  const fresh = Boolean(cfg.freshConnections)
  const runner: TrialRunner = {
    connectsAhead: !fresh,
    open(space) {
      if (fresh) return
      const env = { scenarioId: plan.scenario.id, schema: space, connectTimeoutMs: cfg.connectTimeoutMs, stepTimeoutMs: cfg.stepTimeoutMs + (cfg.holdMs ?? 0) }
      conns.prepare(plan.sessions.flatMap((p, index) => (p.spec.shares ? [] : [{ index, options: sessionOptions(p, env) }])))
    },
    whenOpen: () => conns.whenOpen(),
    async run({ space, user, chooser }) {
      const { facts, connections, ran } = await trial(ctx, space, order, user, fresh ? undefined : conns, chooser)
      opened += connections
      return { facts, ran }
    },
    abort: () => void conns.kill(),
    async close(failed, drop) {
      // Connections held for a next trial that will not come: their sockets closed at once (their backends are idle).
      if (failed) await conns.kill()
      // After the last trial they end while the schema is dropped: reset, they hold nothing the drop waits for.
      const closing = conns.close()
      const left = await drop()
      await closing
      return left
    },
    get connections() {
      return { opened: fresh ? opened : conns.counts.opened, kept: conns.counts.kept }
    },
  }
  return runner
}

/**
 * One trial. `conns`: where its sessions take their connections and give them back when they can serve the next
 * trial; absent (freshConnections): each session opens its own and closes it at the end.
 */
async function trial(
  ctx: TrialContext,
  schema: string,
  order: Entry[],
  user: string,
  conns?: SessionConns,
  chooser?: Chooser,
): Promise<{ facts: TrialFacts; connections: number; ran?: Entry[] }> {
  const { lab, cfg, signal, whenAborted } = ctx
  const { plan } = cfg
  const clock = new TrialClock(cfg.onEvent)
  const { events, now } = clock
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
    record: clock.record,
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
        clock.restart()
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
  ctx.describeStuck(() =>
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
          // The state read that shows the reset complete is waited for only when the connection serves again (the
          // next trial's take): the invariant and the next trial's schema and setup need only what the reset cleared.
          if (c.resetInTwo) {
            const r = c.resetInTwo()
            if (await r.cleared) return conns.give(s.index, c, r.complete)
          } else if (await c.reset!()) return conns.give(s.index, c)
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
  // If the run is aborted (Ctrl-C, run timeout), this trial's backends are ended so nothing waits on them.
  const guard = { onAbort: () => void killAll(), abandon: (why: string) => sessions.forEach((s) => s.abandon(why)), kill: killAll }
  return abortable(signal, guard, async () => {
    try {
      // Every connect settles before a failure ends the trial: one still being opened would arrive after the cleanup.
      await Promise.race([settleAll(sessions.map((s) => s.open())), whenAborted()])
    } catch (e) {
      if (signal.aborted) throw signal.reason
      const code = (e as { code?: string }).code
      if (code === '53300') throw refused({ kind: 'too-many-connections', message: (e as Error).message }, cfg.word)
      throw lab.engine === 'postgres' ? connectError(e, lab.target) : e
    }
    pids = sessions.map((s) => s.pid)
    // A pooler's client connects with its first step and owns no backend (pid 0 until one is lent to it).
    const own = sessions.filter((s) => !s.lender && s.pid > 0).map((s) => s.pid)
    if (new Set(own).size !== own.length) {
      throw refused({ kind: 'shared-backend', pids, engine: lab.engine }, cfg.word)
    }

    let ran: Entry[] | undefined
    const schedule = async () => {
      if (chooser) {
        clock.restart()
        sessions.forEach((s) => s.markStart(0))
        ran = await runChosen(sessions, chooser, probe, before)
      } else if (cfg.schedule === 'barrier') {
        // Connect and begin, then wait at the barrier; the clock starts when all are through.
        await Promise.all(sessions.map((s) => s.start(0)))
        events.length = 0
        clock.restart()
        sessions.forEach((s) => s.markStart(0))
        await runBarrier(sessions, probe, before)
      } else {
        clock.restart()
        sessions.forEach((s) => s.markStart(0))
        await runPermutation(sessions, order, probe, before)
      }
    }
    await Promise.race([schedule(), whenAborted(), lab.whenLost()])
    const seen: SeenBy = (name, step) => sessions.find((s) => s.name === name)?.rowsOf(step)
    const evaluate = () => {
      lab.checkControl()
      return Promise.race([ctx.evaluate(user, seen), lab.whenLost()])
    }
    let invariant: Awaited<ReturnType<typeof evaluate>>
    if (conns && lab.engine === 'postgres' && !lab.afterTrial && !sharesDatabase(plan.invariantSql) && sessions.every((s) => !s.busy && s.outcome !== 'timeout' && s.outcome !== 'lost' && (!s.ownConnection || s.ownConnection.status === 'I'))) {
      // Every session ended by itself (none timed out, was lost or still runs a statement) and its connection is idle,
      // out of any transaction (the server's last ReadyForQuery said so): its
      // reset changes nothing another connection can read (what it leaves is its own: settings, temporary tables,
      // prepared statements; session-level advisory keys only the lock views or the keys' functions show, which this
      // invariant does not name). The invariant runs beside the resets instead of after them.
      const [, got] = await Promise.all([Promise.race([settle(), whenAborted()]), evaluate()])
      invariant = got
    } else {
      await Promise.race([settle(), whenAborted()])
      invariant = await evaluate()
    }
    // Connections that outlive the trial (a pooler's) are reset: what it left on them must not reach the next.
    if (lab.afterTrial) await Promise.race([lab.afterTrial(), whenAborted()])
    return { facts: { sessions: sessions.map((s) => s.report()), invariant, events }, connections, ran }
  })
}
