// An application race's session in a worker of its own (isolated mode, app/isolated.ts): the race module is imported
// here, in this worker's own module graph, so the function under test shares nothing with the other sessions but the
// database. Everything that touches the driver stays here, as in an in-process trial (app/trial.ts): the connection,
// the driver's real objects handed to the function, its gate (AppSession), the step timer, what the function returns
// or throws. The main thread keeps the control connection and the schedule: this worker says when its session is at
// its gate (and what it would send), and waits for "go" there; it is told when the control connection saw its query
// blocked, and when race gives up on it.
import { parentPort, workerData } from 'node:worker_threads'
import { TrialClock } from './engine/runner.js'
import { isConcurrencyControl, sqlstateOf } from './db/sqlstate.js'
import type { Target } from './db/target.js'
import { loadScenarioFile } from './load.js'
import { applicationOf } from './scenario.js'
import { containError, containExit, containTimers, underTest } from './app/contain.js'
import { isDeclaredRejection } from './app/describe.js'
import { loadDriver, openMariadb, openMysql2, openPg, openPostgresJs, running, type AppConn } from './app/drivers.js'
import { connectionsToServer, noteSessionSockets, reportSessionSockets, startedMark } from './app/foreign.js'
import type { FromHost, ToHost } from './app/messages.js'
import { AppSession } from './app/session.js'
import { MAX_QUERIES, openApp } from './app/trial.js'
import type { AppRace } from './app/types.js'

interface HostData {
  file: string
  name: string
  index: number
  n: number
  scenarioId: string
}

const data = workerData as HostData
const port = parentPort!
const post = (m: FromHost) => port.postMessage(m)

let race: AppRace
let driver: unknown
let conn: AppConn | undefined
let s: AppSession | undefined
let clock = new TrialClock()
let seq = 0
let started: () => void = () => {}
let releaseContain: (() => void) | undefined
let mark = 0
let target: Target | undefined

reportSessionSockets((p, session, open) => post({ t: 'socket', port: p, session, open }))

// What the function (or a timer or promise it started) throws past everything: this session's failure, as in-process.
process.on('uncaughtException', (e) => {
  if (!containError(e, 'uncaught exception')) post({ t: 'failed', message: `an uncaught exception in ${data.name}'s worker: ${(e as Error)?.message ?? String(e)}` })
})
process.on('unhandledRejection', (e) => {
  if (!containError(e, 'unhandled rejection')) post({ t: 'failed', message: `an unhandled rejection in ${data.name}'s worker: ${(e as Error)?.message ?? String(e)}` })
})

async function load(): Promise<void> {
  if (race) return
  const scenario = await loadScenarioFile(data.file)
  const app = applicationOf(scenario)
  if (!app) throw new Error(`${data.file} is not an application race`)
  race = app.race
  driver = await loadDriver(race.driver, app.file ?? data.file)
}

function snapshot(): void {
  if (!s) return
  post({
    t: 'state',
    seq,
    state: s.state,
    ...(s.pending ? { pending: { label: s.pending.label, sql: s.pending.sql, point: s.pending.point } } : {}),
    ...(s.current ? { current: { label: s.current.label } } : {}),
    errors: s.errors.length,
    ...(s.lastLabel ? { lastLabel: s.lastLabel } : {}),
    ...(s.parked ? { parked: true } : {}),
  })
}

async function trial(m: Extract<ToHost, { t: 'trial' }>): Promise<void> {
  await load()
  target = m.target
  clock = new TrialClock()
  seq = 0
  const session = new AppSession(data.name, data.index, {
    record: clock.record,
    recordLateWait: clock.recordLateWait,
    now: clock.now,
    notify: snapshot,
    released: (label) => post({ t: 'released', label }),
    timeQuery: () => {
      const t = running.exit(() => underTest.exit(() => setTimeout(() => post({ t: 'timeout', reason: `no result within ${m.stepTimeoutMs}ms` }), m.stepTimeoutMs)))
      return () => clearTimeout(t)
    },
  })
  s = session
  session.declared = (e) => isDeclaredRejection(race, e)
  const prevention = new Set(race.prevention ?? [])
  session.expectedCode = (code) => isConcurrencyControl(code) || prevention.has(code) || prevention.has(sqlstateOf(code))
  session.maxQueries = race.maxQueries ?? MAX_QUERIES
  if (m.split) {
    session.splitAt = () => true
    session.splitStringAt = () => true
    session.snapshotAt = () => true
  }
  let c = m.fresh ? undefined : conn
  conn = undefined
  if (c && !(await c.reset())) {
    await c.destroy()
    c = undefined
  }
  if (c) c.holder.s = session
  if (!c) {
    const open = race.driver === 'pg' ? openPg : race.driver === 'mariadb' ? openMariadb : race.driver === 'mysql2' ? openMysql2 : openPostgresJs
    c = await open(driver, m.target, { applicationName: `race ${data.scenarioId} ${data.name}`, schema: m.schema, params: race.connection ?? {}, ...(m.isolation ? { isolation: m.isolation } : {}), connectTimeoutMs: m.connectTimeoutMs }, session)
    if (race.open) await openApp({ race, scenarioId: data.scenarioId, n: data.n, schema: m.schema, stepTimeoutMs: m.stepTimeoutMs }, c, session, data.index)
  }
  conn = c
  session.pid = c.pid
  session.defaultLevel = c.defaultLevel
  session.raw = c.raw
  post({ t: 'opened', pid: c.pid })
  // The main thread says when every session is connected: the functions start together.
  await new Promise<void>((r) => (started = r))
  releaseContain = (() => {
    const a = containExit()
    const b = containTimers()
    return () => {
      a()
      b()
    }
  })()
  clock.restart()
  session.markStart(0)
  noteSessionSockets()
  mark = startedMark()
  const ctx = {
    session: session.name,
    index: data.index,
    n: data.n,
    user: m.user,
    schema: m.schema,
    point: (name: string) => session.enter(session.nextPoint(String(name)), '', true),
    ...(c.pool ? { pool: c.pool, client: c.client, pg: c.pg } : c.client ? { client: c.client } : {}),
  }
  const db = c.app ? c.app.value : c.db
  session.state = 'app'
  session.appSince = clock.now()
  snapshot()
  const call = () => underTest.run(session, () => Promise.resolve().then(() => race.session(db, ctx)))
  const p = race.driver === 'postgres' ? running.run(session, call) : call()
  await p
    .then(
      (v) => () => session.returned(v),
      (e) => () => session.threw(e),
    )
    .then(async (settle) => {
      await session.drained()
      settle()
    })
  snapshot()
  post({ t: 'ended' })
}

async function finish(m: Extract<ToHost, { t: 'finish' }>): Promise<void> {
  const session = s!
  const c = conn
  const bound = Math.min(m.lateMs, 1000)
  await Promise.race([session.timersDue(Date.now() + bound), new Promise((r) => setTimeout(r, bound).unref())])
  await new Promise<void>((r) => setImmediate(r))
  const own = target ? connectionsToServer(target, mark) : []
  releaseContain?.()
  releaseContain = undefined
  let destroyed = false
  if (c) {
    if (m.rollback) await c.rollback()
    if (c.holder.broken || m.destroy || !m.keep) {
      destroyed = true
      await (c.holder.broken || m.destroy ? c.destroy() : c.close())
      conn = undefined
    } else if (session.inTx || session.parked) {
      await c.close()
      conn = undefined
    } else if (!c.app) c.sweep?.()
  }
  post({ t: 'finished', report: session.report(), events: clock.events, ...(session.outcome ? { outcome: session.outcome } : {}), crashed: Boolean(session.crashed), sent: session.sent, inTx: session.inTx, parked: Boolean(session.parked), lostConnection: session.lostConnection, own, destroyed })
}

port.on('message', (m: ToHost) => {
  const fail = (e: unknown) => post({ t: 'failed', message: (e as Error)?.message ?? String(e), ...((e as { code?: string })?.code ? { code: (e as { code: string }).code } : {}) })
  switch (m.t) {
    case 'trial':
      void trial(m).catch(fail)
      return
    case 'start':
      started()
      return
    case 'go':
      seq = m.seq
      if (m.fault) s!.faultNow = m.fault
      // The step's own snapshot comes when it has changed (its query ended, the next gate): the main thread has
      // marked it running itself.
      s?.release()
      return
    case 'blocked':
      s?.markBlocked(m.label)
      return
    case 'unblocked':
      s?.unblocked(m.label)
      return
    case 'end':
      if (s && !s.finished) {
        const step = s.current?.label ?? s.pending?.label ?? s.lastLabel ?? 'start'
        const inJs = s.state === 'app'
        if (m.record) s.record(step, m.outcome, m.reason)
        s.end(m.outcome, step, { reason: m.reason })
        // A function that waited in JavaScript past the step timeout: its connection goes, as in-process (boundApp).
        // A query past it is cancelled from the control connection by the main thread (giveUp).
        if (m.outcome === 'timeout' && inJs) void conn?.destroy()
        snapshot()
      }
      return
    case 'finish':
      void finish(m).catch(fail)
      return
    case 'close':
      void (async () => {
        await conn?.close().catch(() => {})
        conn = undefined
        post({ t: 'closed' })
      })()
      return
  }
})
