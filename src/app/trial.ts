// One trial of an application race: N sessions, each the user's function on its own connection, every query held
// at its gate until the schedule lets it go. Barrier (all reach the barrier step, then all go at once and run free),
// or step by step under a chooser: lockstep, serial, a permutation of query labels, or an explorer's own. Blocking
// is seen from the control connection by each session's backend pid, never guessed from time.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Driver } from '../db/driver.js'
import { pickedOf, POLL_MS } from '../engine/schedule.js'
import { abortable, settleAll, TrialClock } from '../engine/runner.js'
import type { Chooser, InvariantReport, TrialFacts } from '../engine/types.js'
import { RunError, UsageError } from '../errors.js'
import { isConcurrencyControl, sqlstateOf } from '../db/sqlstate.js'
import type { Schedule } from '../scenario.js'
import { loadDriver, openMariadb, openMysql2, openPg, openPostgresJs, running, type AppConn } from './drivers.js'
import { describeThrown, isDeclaredRejection } from './describe.js'
import { AppSession } from './session.js'
import { containExit, containTimers, underTest } from './contain.js'
import { connectionsToServer, foreignBackends, noteSessionSockets, startedMark } from './foreign.js'

/** How often the server is asked for connections race did not hand out while a trial's functions run. */
const FOREIGN_MS = 250
import type { AppRace } from './types.js'
import { parseAppPermutation, type Fault } from './labels.js'
import { FaultOffers, momentOf } from './faults.js'
import { quietWait } from './quiet.js'

/** The queries one call of a session's function may send at most, unless its race module says (maxQueries). */
export const MAX_QUERIES = 100

/** How far ahead a timer a session's function left pending is waited for once the function returned (app/contain.ts). */
const LATE_TIMER_MS = 1000

export interface AppTrialConfig {
  race: AppRace
  /** Where the race module is (its driver package is loaded from there). */
  file?: string
  n: number
  schedule: Schedule
  permutation?: string
  /** An explorer's chooser: replaces the schedule's (step by step, its decision at every quiet moment). */
  chooser?: Chooser
  scenarioId: string
  schema: string
  user: string
  stepTimeoutMs: number
  connectTimeoutMs: number
  /**
   * Connections kept from the last trial of the same run, by session index (and left here for the next); absent:
   * every trial opens its own and closes them. The run closes what is left (closeKept).
   */
  kept?: (AppConn | undefined)[]
  /** The level race sets on every session's connection (--isolation); absent: the connection's own default. */
  isolation?: string
  /**
   * Faults an explorer may inject (--inject): at each quiet moment, a ready session whose next query is a fault's
   * site is offered twice, as it is and with the fault; each fault at most once per trial.
   */
  inject?: readonly Fault[]
  /** The invariant, evaluated on the control connection once every session has ended and its connection is idle. */
  evaluate(): Promise<InvariantReport>
  /** The run's abort signal, and what the engine's run gives every trial runner with it (engine/runner.ts). */
  signal: AbortSignal
  whenAborted(): Promise<never>
  describeStuck(describe: () => string): void
}

/** The facts of an application trial: the engine's, plus the labels in the order they were released. */
export type AppTrialFacts = TrialFacts & { order: string[] }

export async function appTrial(lab: Driver, cfg: AppTrialConfig): Promise<AppTrialFacts> {
  const { signal, whenAborted } = cfg
  const wants = cfg.race.driver === 'mariadb' || cfg.race.driver === 'mysql2' ? 'mysql' : 'postgres'
  if (lab.engine !== wants) throw new UsageError(`${cfg.scenarioId}: driver ${cfg.race.driver} runs on ${wants === 'mysql' ? 'MySQL/MariaDB' : 'PostgreSQL'}`)
  const driver = await loadDriver(cfg.race.driver, cfg.file)
  const clock = new TrialClock()
  const { events, now } = clock
  const order: string[] = []
  // A barrier run: the first query sent while another session's was on the server (types.ts TrialFacts.overlap).
  let free = false
  let overlap: [string, string] | undefined
  let wake: () => void = () => {}
  let tick = new Promise<void>((r) => (wake = r))
  // Counts changes (a session at its gate, a query ended, a session ended): a probe of the server taken across one
  // may be stale (a session seen blocked whose blocker has just rolled back).
  let changes = 0
  const notify = () => {
    changes++
    const w = wake
    tick = new Promise<void>((r) => (wake = r))
    w()
  }
  const sessions: AppSession[] = []
  const conns: (AppConn | undefined)[] = []
  const signalled = new Set<number>()
  const ours = () => sessions.map((s) => s.pid).filter((p) => p > 0)
  const giveUp = async (s: AppSession, why: string) => {
    if (s.finished) return
    const pid = s.pid
    s.blockedBy = await lab.blockers(pid).catch(() => [])
    const by = s.blockedBy.length ? `, waiting for pid ${s.blockedBy.join(', ')}` : ''
    s.record(s.current?.label ?? s.pending?.label ?? 'start', 'timeout', why)
    s.end('timeout', s.current?.label ?? s.pending?.label ?? 'start', { reason: `${why}${by}` })
    signalled.add(pid)
    await lab.cancel(pid, false).catch(() => {})
    await sleep(200)
    await lab.cancel(pid, true).catch(() => {})
  }
  const env = {
    record: clock.record,
    now,
    notify,
    released: (label: string) => {
      if (free && !overlap) overlap = overlapping(label, sessions)
      order.push(label)
    },
    // Timers start outside the session's async context: what they send on the control connection is never gated.
    timeQuery: (s: AppSession) =>
      exitSessions(() => {
        const t = setTimeout(() => void giveUp(s, `no result within ${cfg.stepTimeoutMs}ms`), cfg.stepTimeoutMs)
        return () => clearTimeout(t)
      }),
  }
  for (let i = 0; i < cfg.n; i++) sessions.push(new AppSession(`s${i + 1}`, i, env))
  for (const s of sessions) {
    s.declared = (e) => isDeclaredRejection(cfg.race, e)
    const prevention = new Set(cfg.race.prevention ?? [])
    s.expectedCode = (code) => isConcurrencyControl(code) || prevention.has(code) || prevention.has(sqlstateOf(code))
    s.maxQueries = cfg.race.maxQueries ?? MAX_QUERIES
  }
  // --inject: the faults not yet used in this trial and what became of each; a permutation's own (s1.q5!40001, a replay).
  const faults = new FaultOffers(cfg.n, cfg.inject, cfg.permutation ? { text: cfg.permutation, names: sessions.map((s) => s.name) } : undefined)
  const injections = faults.injections
  const killAll = async () => {
    await Promise.all(conns.map((c) => c?.destroy()))
    // A connection whose session never got its pid (its open() failed) is race's too.
    const pids = new Set([...ours(), ...conns.map((c) => c?.pid ?? 0)].filter((p) => p > 0))
    await lab.terminate([...pids]).catch(() => {})
  }
  const abandon = (why: string) => {
    for (const s of sessions) s.end('lost', s.current?.label ?? 'start', { reason: why })
  }
  // If the run is aborted (Ctrl-C, run timeout), every session ends lost at once and its connection with it.
  const guard = {
    onAbort: () => {
      abandon('the run was aborted')
      void killAll()
    },
    abandon,
    kill: killAll,
  }
  cfg.describeStuck(() =>
    sessions
      .filter((s) => s.state === 'running')
      .map((s) => `${s.name} (pid ${s.pid}) in ${s.current?.label ?? '?'}${s.current?.blocked ? ' (waiting)' : ''}`)
      .join(', '),
  )
  // While the functions run, process.exit from their code is contained (app/contain.ts); restored when the trial ends.
  const releaseExit = containExit()
  // Timers the functions start are noted on their session (a query sent from one after the function returned is late).
  const releaseTimers = containTimers()
  const release = () => {
    releaseExit()
    releaseTimers()
  }
  let watcher: ReturnType<typeof setInterval> | undefined
  return abortable(signal, guard, async () => {
    // ---- connect every session (its driver, its pid, the run's schema as search_path) ----
    const open = cfg.race.driver === 'pg' ? openPg : cfg.race.driver === 'mariadb' ? openMariadb : cfg.race.driver === 'mysql2' ? openMysql2 : openPostgresJs
    // Every session's connect settles (each is bounded: the connect timeout, open()'s step timeout) before a failure
    // ends the trial: a session still connecting when another failed would otherwise open its connection after the
    // trial's cleanup had run, and keep it (seen: its login then failed inside race's own first query, the run's role
    // being dropped, and nothing closed it).
    try {
      await Promise.race([
        settleAll(
          sessions.map(async (s, i) => {
            let c = cfg.kept?.[i]
            if (cfg.kept) cfg.kept[i] = undefined
            if (c && !(await c.reset())) {
              await c.destroy()
              await lab.terminate([c.pid]).catch(() => {})
              c = undefined
            }
            // Only a connection kept for this trial serves its session: one that could not be reset is ended, and
            // its end (an 'error' or 'end' event, perhaps later) must not mark this trial's session as lost.
            if (c) c.holder.s = s
            if (!c) {
              c = await open(driver, (await lab.sessionTarget?.(cfg.schema)) ?? lab.target, { applicationName: `race ${cfg.scenarioId} ${s.name}`, schema: cfg.schema, params: cfg.race.connection ?? {}, ...(cfg.isolation ? { isolation: cfg.isolation } : {}), connectTimeoutMs: cfg.connectTimeoutMs, terminate: (pids) => lab.terminate(pids) }, s)
              conns[i] = c
              // Aborted while it connected: the abort's cleanup has already run, this connection ends here.
              if (signal.aborted) {
                await c.destroy()
                await lab.terminate([c.pid]).catch(() => {})
                throw signal.reason
              }
              if (cfg.race.open) await openApp(cfg, c, s, i)
            }
            conns[i] = c
            s.pid = c.pid
            s.defaultLevel = c.defaultLevel
            s.raw = c.raw
            s.kill = async () => {
              signalled.add(c!.pid)
              await lab.terminate([c!.pid])
            }
          }),
        ),
        whenAborted(),
      ])
    } catch (e) {
      if (signal.aborted) throw signal.reason
      const code = (e as { code?: string }).code
      throw new RunError(`a session of ${cfg.scenarioId} could not connect: ${(e as Error).message}${code ? ` (${code})` : ''}`)
    }
    // ---- the schedule's gates, then every function starts ----
    const chooser = cfg.chooser ?? chooserFor(cfg, sessions)
    const barrier = !cfg.chooser && cfg.schedule === 'barrier'
    const at = cfg.race.barrier ?? 2
    if (barrier) {
      free = true
      for (const s of sessions) {
        s.free = true
        s.holdAt = (step, point) => (typeof at === 'number' ? !point && step === `q${at}` : point && step === at)
      }
    } else if (cfg.permutation && !cfg.chooser) {
      const named = new Set(cfg.permutation.split(/[\s,]+/).filter(Boolean).map((t) => t.replace(/!\w+$/, '')))
      for (const s of sessions) {
        s.holdsPoint = (step) => named.has(`${s.name}.${step}`)
        // A query whose commit point the line names runs, then commits at that point (as race explore ran it).
        s.splitAt = (step) => named.has(`${s.name}.${step}:commit`)
        // A string whose second statement the line names runs statement by statement; a query whose snapshot point it
        // names takes its transaction's snapshot there first (as race explore ran them).
        s.splitStringAt = (step) => named.has(`${s.name}.${step}/2`)
        s.snapshotAt = (step) => named.has(`${s.name}.${step}:snapshot`)
      }
    }
    // race explore: every query that would commit by itself runs, then commits, at two points of the search; a string
    // of several statements runs statement by statement; a query that locks rows without waiting at REPEATABLE READ or
    // SERIALIZABLE has its snapshot point.
    if (cfg.chooser?.split) {
      for (const s of sessions) {
        s.splitAt = () => true
        s.splitStringAt = () => true
        s.snapshotAt = () => true
      }
    }
    clock.restart()
    sessions.forEach((s) => s.markStart(0))
    noteSessionSockets()
    const mark = startedMark()
    const foreign = new Map<number, string>()
    const lookForeign = async () => {
      for (const f of await foreignBackends(lab, cfg.schema, ours()).catch(() => [])) foreign.set(f.pid, `${f.session ? `${f.session}'s own connection, ` : ''}pid ${f.pid} ${f.how}`)
    }
    // While the functions run, the server is asked now and then (a short-lived connection of their own is gone at the end).
    watcher = exitSessions(() => setInterval(() => void lookForeign(), FOREIGN_MS))
    const checkForeign = async () => {
      clearInterval(watcher)
      await lookForeign()
      const own = connectionsToServer(lab.target, mark)
      if (!foreign.size && !own.length) return
      const fix = 'so this race cannot be decided; query through the connection race gives each session (the db argument, or ctx.pool/ctx.client)'
      if (foreign.size) throw new RunError(`a connection race did not hand out queried the run's tables (${[...foreign.values()].join('; ')}): its queries were never scheduled, ${fix}`)
      const which = [...new Set(own.map((c) => `${c.session} connected to the server's ${c.to} itself`))].join('; ')
      throw new RunError(`a connection race did not hand out reached the run's server (${which}): whatever it sent was never scheduled, ${fix}`)
    }
    const ended = sessions.map((s, i) => {
      const c = conns[i]!
      const ctx = {
        session: s.name,
        index: i,
        n: cfg.n,
        user: cfg.user,
        schema: cfg.schema,
        point: (name: string) => s.enter(s.nextPoint(String(name)), '', true),
        ...(c.pool ? { pool: c.pool, client: c.client, pg: c.pg } : c.client ? { client: c.client } : {}),
      }
      const db = c.app ? c.app.value : c.db
      s.state = 'app'
      s.appSince = now()
      // The function runs in the session's async context (underTest): a process.exit, an uncaught exception or an
      // unhandled rejection that comes from it (or from a timer or promise it started) is this session's failure.
      const call = () => underTest.run(s, () => Promise.resolve().then(() => cfg.race.session(db, ctx)))
      const p = cfg.race.driver === 'postgres' ? running.run(s, call) : call()
      // The session ends when its function has and every query it sent has too (one it did not await is released by
      // the schedule and waited for, never dropped).
      return p
        .then(
          (v) => () => s.returned(v),
          (e) => () => s.threw(e),
        )
        .then(async (settle) => {
          await s.drained()
          settle()
        })
        .finally(notify)
    })

    const probe = async (ask: AppSession[]) => {
      if (!ask.length) return new Set<AppSession>()
      return lab.blocked(ask, ours())
    }
    /** Sessions running JavaScript too long without reaching a gate or returning are given up on. */
    const boundApp = () => {
      for (const s of sessions) {
        if (s.state === 'app' && now() - s.appSince > cfg.stepTimeoutMs) {
          // Others held at their gate by race while this one waits in JavaScript: it waits on them outside the
          // database (an in-process lock, a shared promise), which no schedule that holds them lets go on.
          const held = sessions.filter((x) => x !== s && x.state === 'ready' && x.pending)
          const reason = held.length
            ? `${s.name} waited in JavaScript (no query pending) for ${cfg.stepTimeoutMs}ms while race held ${held.map((x) => `${x.name} at ${x.name}.${x.pending!.label}`).join(', ')}: it waits outside the database on ${held.length > 1 ? 'those sessions' : held[0].name} (an in-process lock or a shared promise), which race cannot schedule`
            : `the function neither sent a query nor returned within ${cfg.stepTimeoutMs}ms`
          s.end('timeout', s.lastLabel ?? 'start', { reason })
          void conns[s.index]?.destroy()
        }
      }
    }
    const quiet = quietWait({
      signal,
      sessions,
      boundApp,
      changes: () => changes,
      tick: () => tick,
      probe,
      unblocked: (s) => s.unblocked(),
      blocked: (s) => s.markBlocked(),
      firstQuiet: lookForeign,
    })

    const drive = async () => {
      if (barrier) {
        // Every session runs until it is at the barrier (or has ended, or waits for a lock); then all go at once.
        await quiet()
        // The steps before the barrier stay in the order (each session's first queries): the order replays as a
        // permutation. The timeline starts at the barrier.
        events.length = 0
        clock.restart()
        sessions.forEach((s) => s.markStart(0))
        const there = sessions.filter((s) => s.state === 'ready')
        for (const s of sessions) {
          s.free = true
          s.holdAt = undefined
        }
        for (const s of there) s.release()
        // Run free; a watcher marks queries seen blocked (the waited column and the timeline). It asks every
        // POLL_MS, as the engine's barrier does, not at every query's end (which would double the server's work).
        const all = Promise.all(ended)
        while (!sessions.every((s) => s.finished)) {
          if (signal.aborted) throw signal.reason
          boundApp()
          const runningFree = sessions.filter((s) => s.state === 'running' && s.current && !s.current.blocked)
          if (runningFree.length) for (const s of await probe(runningFree)) s.markBlocked()
          await Promise.race([all, sleep(POLL_MS)])
        }
        return
      }
      for (;;) {
        await quiet()
        if (sessions.every((s) => s.finished)) {
          await chooser.settled?.({ ready: [], blocked: [], done: sessions.map((s) => s.name), order: [...order], pids: sessions.map((s) => s.pid), errors: sessions.map((s) => s.errors.length) })
          return
        }
        const ready = sessions.filter((s) => s.state === 'ready')
        if (!ready.length) {
          // Only waits are left: they end by themselves (a deadlock, a lock timeout) or by the step timeout.
          await Promise.race([tick, sleep(50, undefined, { ref: false })])
          continue
        }
        // A ready session whose next query is a fault's site is offered again with the fault (index beyond the
        // sessions': the explorer's choice between the two is a branch like any other).
        const offered = faults.offer(ready.map((s) => ({ name: s.name, index: s.index, pending: s.pending! })))
        const moment = momentOf(offered, sessions, (x) => x.errors.length, order)
        const picked = offered[pickedOf(moment, await chooser(moment))]
        const s = sessions[faults.sessionOf(picked)]
        const fault = faults.take(picked)
        if (fault) s.faultNow = fault
        s.release()
        // The released query runs until it ends or is seen blocked (quiet, at the top of the loop).
        await Promise.race([tick, sleep(0)])
      }
    }
    await Promise.race([drive(), whenAborted(), lab.whenLost()])
    // Every function has returned or thrown (bounded: a session given up on is not awaited further).
    // A session stopped at maxQueries is left parked: its function never resumes, and is not waited for.
    // (An unreferenced timer: once every function has ended it must not keep a test runner's process alive for 2 s.)
    await Promise.race([Promise.all(ended.map((p, i) => (sessions[i].parked ? undefined : p))), sleep(2000, undefined, { ref: false })])
    // A timer a function started and left (a query sent from it would come after the function returned) is waited
    // for while it is due within LATE_TIMER_MS: its query is then this trial's late query, not the next one's step.
    // One due later (a pool's idle timer, 10 s) is not waited for: a query it sends during a later trial of the run is
    // that trial's undecided (sessionFor), one after the run's last trial is not seen.
    const bound = Math.min(LATE_TIMER_MS, cfg.stepTimeoutMs)
    await Promise.race([Promise.all(sessions.map((s) => s.timersDue(Date.now() + bound))), sleep(bound, undefined, { ref: false })])
    await new Promise<void>((r) => setImmediate(r))
    // A query on a connection race did not hand out was never gated: whatever this trial shows, no schedule reached
    // it. Seen from the server (app/foreign.ts); the run cannot be decided. Checked while the functions' own
    // connections may still be open (a module-level Pool keeps them), and during the trial (onForeign).
    await checkForeign()
    // What was given but never used is said, not ignored: a permutation's step that never came (unless a session was
    // cut short by race, which says so itself), and a race whose functions sent nothing to race.
    const byThemselves = sessions.every((s) => s.outcome === 'committed' || s.outcome === 'rejected' || (s.outcome === 'failed' && !s.crashed))
    let unfollowed: string | undefined
    if (byThemselves && cfg.schedule === 'permutation' && cfg.permutation && !cfg.chooser) {
      const ran = new Set(order.map((l) => l.replace(/!\w+$/, '')))
      const missing = parseAppPermutation(cfg.permutation, sessions.map((s) => s.name)).filter((e) => !ran.has(e.label))
      if (missing.length) {
        const last = (name: string) => [...order].reverse().find((l) => l.startsWith(`${name}.`))
        const ended = [...new Set(missing.map((e) => e.session))].map((x) => `${x} ended after ${last(x) ?? 'no step'}`)
        unfollowed = `--schedule was not followed: ${missing.map((e) => e.label).join(', ')} never came (${ended.join('; ')})`
      }
    }
    if (byThemselves && sessions.every((s) => s.sent === 0)) {
      throw new UsageError(`${cfg.file ?? cfg.scenarioId}: no session's function sent a query through the connection race gave it (the db argument): there is nothing to race (does it use its own connection or pool?)`)
    }
    // Nothing a session left open (a transaction) is there when the invariant runs, nor when the next trial drops
    // the schema (an open transaction's locks would hold that up). Every kept connection is rolled back (bounded):
    // one that began its transaction inside a string of several statements that then failed is in a transaction
    // its command tags never said.
    await Promise.all(
      sessions.map(async (s, i) => {
        if (!s.lostConnection && !signalled.has(s.pid)) await conns[i]?.rollback()
      }),
    )
    // A connection race signalled, or that broke, ends; the others are kept for the next trial when the run keeps them.
    await Promise.all(
      conns.map((c, i) => {
        if (!c) return undefined
        if (signalled.has(sessions[i].pid) || c.holder.broken) return c.destroy()
        // It ended inside a transaction (rolled back above, as far as race can tell): a fresh one next time, not a guess.
        if (sessions[i].inTx || sessions[i].parked) return c.close()
        if (cfg.kept) {
          // An ORM the trial's code built over ctx.pg is gone with the trial: its listeners on the connection go too.
          // What open() built stays with the connection, listeners and all.
          if (!c.app) c.sweep?.()
          cfg.kept[i] = c
          return undefined
        }
        return c.close()
      }),
    )
    if (signalled.size) await lab.terminate([...signalled]).catch(() => {})
    lab.checkControl()
    const invariant = await Promise.race([cfg.evaluate(), lab.whenLost()])
    return { sessions: sessions.map((s) => s.report()), invariant, events, order, ...(injections.length ? { injections } : {}), ...(unfollowed ? { unfollowed } : {}), ...(overlap ? { overlap } : {}) }
  }).finally(() => {
    clearInterval(watcher)
    release()
  })
}

/**
 * The race module's open(): what the application builds once at start-up (an ORM over ctx.pg), built for this
 * connection before its first trial. Its queries are not steps (the gate lets them through); bounded by the step
 * timeout. Its close() runs before the connection closes, whichever way it closes.
 */
export async function openApp(cfg: Pick<AppTrialConfig, 'race' | 'scenarioId' | 'n' | 'schema' | 'stepTimeoutMs'>, c: AppConn, s: AppSession, i: number): Promise<void> {
  const race = cfg.race
  const ctx = { session: s.name, index: i, n: cfg.n, schema: cfg.schema, ...(c.pool ? { pool: c.pool, client: c.client, pg: c.pg } : c.client ? { client: c.client } : {}) }
  c.holder.ungated = true
  let value: unknown
  try {
    const opened = exitSessions(() => Promise.resolve().then(() => race.open!(c.db, ctx)))
    const timeout = new Promise<never>((_, reject) => {
      const t = setTimeout(() => reject(new RunError(`${cfg.scenarioId}: open() of ${s.name} did not return within ${cfg.stepTimeoutMs}ms`)), cfg.stepTimeoutMs)
      t.unref()
      void opened.finally(() => clearTimeout(t)).catch(() => {})
    })
    value = await Promise.race([opened, timeout])
  } catch (e) {
    await c.destroy()
    if (e instanceof RunError) throw e
    throw new RunError(`${cfg.scenarioId}: open() of ${s.name} threw ${describeThrown(e)}`)
  } finally {
    c.holder.ungated = false
  }
  try {
    await c.opened?.()
  } catch (e) {
    await c.destroy()
    throw new RunError(`${cfg.scenarioId}: the state open() left on ${s.name}'s connection could not be read: ${(e as Error).message}`)
  }
  const close = race.close
  c.app = { value, ...(close ? { close: async () => void (await Promise.resolve().then(() => close(value))) } : {}) }
  if (close) {
    const bounded = async () => {
      const app = c.app
      c.app = undefined
      if (!app?.close) return
      c.holder.ungated = true
      await Promise.race([app.close().catch(() => {}), sleep(Math.min(cfg.stepTimeoutMs, 2000), undefined, { ref: false })])
    }
    const [closeConn, destroyConn] = [c.close, c.destroy]
    c.close = async () => {
      await bounded()
      return closeConn()
    }
    c.destroy = async () => {
      await bounded()
      return destroyConn()
    }
  }
}

/** Runs race's own work (a step timer) outside any session's async context: nothing it does is the code under test's. */
function exitSessions<T>(f: () => T): T {
  return running.exit(() => underTest.exit(f))
}

/** Closes the connections a run kept for a next trial that will not come. */
export async function closeKept(kept: (AppConn | undefined)[]): Promise<void> {
  await Promise.all(kept.map((c) => c?.close()))
  kept.length = 0
}

/** The schedule's chooser: lockstep (query k of every session before k+1), serial, or a permutation of labels. */
export function chooserFor(cfg: Pick<AppTrialConfig, 'schedule' | 'permutation'>, sessions: readonly { name: string }[]): Chooser {
  const released = new Map<string, number>()
  const count = (name: string) => released.get(name) ?? 0
  const lockstep: Chooser = (m) => {
    let best = 0
    for (let i = 1; i < m.ready.length; i++) {
      const a = m.ready[i]
      const b = m.ready[best]
      if (count(a.session) < count(b.session) || (count(a.session) === count(b.session) && a.index < b.index)) best = i
    }
    released.set(m.ready[best].session, count(m.ready[best].session) + 1)
    return best
  }
  if (cfg.schedule === 'serial') {
    return (m) => m.ready.reduce((best, r, i) => (r.index < m.ready[best].index ? i : best), 0)
  }
  if (cfg.schedule !== 'permutation' || !cfg.permutation) return lockstep
  const entries = parseAppPermutation(cfg.permutation, sessions.map((s) => s.name))
  return (m) => {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]
      if (m.done.includes(e.session)) {
        entries.splice(i--, 1)
        continue
      }
      const r = m.ready.findIndex((x) => x.session === e.session)
      if (r < 0) continue // its session waits for a lock: the next entry of another session goes (isolationtester's rule)
      if (m.ready[r].label !== e.label) {
        throw new UsageError(`the permutation says ${e.label} next, but ${e.session}'s next step is ${m.ready[r].label} (${m.ready[r].sql.trim().slice(0, 60) || 'a point'}): list every query of a session in its order`)
      }
      entries.splice(i, 1)
      // s1.q5!40001: the same query with the fault injected (offered beside it, app/trial.ts).
      if (e.inject) {
        const v = m.ready.findIndex((x) => x.label === `${e.label}!${e.inject}`)
        if (v >= 0) return v
      }
      return r
    }
    // Past the permutation's end (or only waiting sessions left in it): the rest in lockstep order.
    return lockstep(m)
  }
}


/** The labels an application trial ran (s1.q3) as engine entries (session 0, step 2); points have no step number and are left out. */
/**
 * In a barrier run, where the sessions run free: the query of another session on the server (or just let go) as
 * `label` is sent, with `label`; undefined when none. Such queries overlapped, and no permutation replays that.
 */
function overlapping(label: string, sessions: readonly AppSession[]): [string, string] | undefined {
  const me = label.slice(0, label.indexOf('.'))
  const other = sessions.find((s) => s.name !== me && s.state === 'running')
  const step = other && (other.pending?.label ?? other.current?.label)
  return other && step ? [`${other.name}.${step}`, label] : undefined
}

export function orderEntries(order: readonly string[], names: readonly string[]): { session: number; step: number }[] {
  const out: { session: number; step: number }[] = []
  for (const label of order) {
    const m = /^([^.]+)\.q(\d+)(!\w+)?$/.exec(label)
    if (m && names.includes(m[1])) out.push({ session: names.indexOf(m[1]), step: Number(m[2]) - 1 })
  }
  return out
}
