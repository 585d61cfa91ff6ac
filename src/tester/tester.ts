// `race spec`: runs a spec the way PostgreSQL's isolationtester does and prints the same transcript. The
// rules, as isolationtester applies them: one connection per session plus a control connection (whose
// notices are hidden); each permutation (the spec's, or every interleaving of the sessions' steps) runs the
// setup blocks on control, each session's setup, then the steps: a step is sent, and it either completes or,
// after 10 ms without an answer, is asked about from control with pg_isolation_test_session_is_blocked and,
// if blocked, printed as <waiting ...> while the next steps run; waiting steps are polled after every step and
// reported as <... completed> when they finish. Step markers: (*) reports the step as waiting once, (other)
// holds its completion back while that step runs, (other notices N) until that session has sent N notices.
// A step is cancelled after PGISOLATIONTIMEOUT seconds (default 300) and the run ends after twice that.
import type { Target } from '../db/target.js'
import { conditionName } from '../db/sqlstate.js'
import { RunError } from '../errors.js'
import { printResult } from './format.js'
import type { Permutation, PermutationStep, Spec, SpecStep } from '../specfile/parse.js'
import { PgConn, type PgResult } from './pgconn.js'

export interface TranscriptSink {
  out(text: string): void
  err(text: string): void
}

/** Where isolationtester would exit(1): the transcript ends here, without teardown. */
class Exit extends Error {}

/**
 * A connection the server closed (pg_terminate_backend, idle_session_timeout, a crash), in one line naming who,
 * when and why (the server's FATAL error). For a session, race goes on as isolationtester does (the transcript
 * shows the FATAL error and "server closed the connection unexpectedly"; the session's next step fails to be
 * sent, exit 1) and says this line beside the transcript. For race's control connection the spec stops there.
 */
function connectionLost(file: string, who: string, during: string, conn: PgConn): string {
  const f = conn.fatal
  const code = f?.C
  const why = f ? ` (${code ?? 'FATAL'}${conditionName(code) ? ' ' + conditionName(code) : ''}: ${Buffer.from(f.M ?? '', 'latin1').toString('utf8')})` : ''
  return `${file}: the server closed ${who}'s connection${why} ${during}`
}

interface Conn {
  conn: PgConn
  name: string
  active?: PStep
  notices: number
}

interface PStep {
  name: string
  step: SpecStep
  blockers: PermutationStep['blockers']
  /** For (other notices N): the notice count of that session to wait for, set when the step is sent. */
  targets: number[]
}

const NONBLOCK = 1
const RETRY = 2

export interface TesterOptions {
  target: Target
  /** The database the connections open (default: the target's). */
  database?: string
  connectTimeoutMs: number
  /** Startup parameters every connection sends (options, datestyle, timezone, search_path...). */
  params: [string, string][]
  /** PGAPPNAME, to which each connection appends /<session name>, as isolationtester does. */
  appName?: string
  /** PGISOLATIONTIMEOUT in ms. */
  maxStepWaitMs: number
  /**
   * Runs one global setup or teardown block on control (race checks it stays in its schema); returns what
   * PQexec would have returned. Default: plain exec.
   */
  block?: (control: PgConn, sql: string, kind: 'setup' | 'teardown', index: number) => Promise<PgResult | null>
  /** Called with the backends once connected (so an abort can end them). */
  onBackends?: (pids: number[]) => void
  /**
   * Called once the spec has run, for each session whose connection the server closed (a step that ends its own
   * backend, a session terminated by another, idle_session_timeout), with a line naming the session, the step and
   * why, but only when the spec failed (isolationtester's exit 1: a later step of that session could not be sent).
   * The run goes on as isolationtester's does and its transcript shows the server's FATAL error; a spec that ran
   * to its end (PostgreSQL's temp-schema-cleanup ends its own session in its last step) prints nothing more than
   * isolationtester prints.
   */
  onSessionLost?: (note: string) => void
  /**
   * Called once the spec has run (isolationtester's exit 0 or 1), with its sessions' connections closed and its
   * control connection still open (race asks it whether the spec left its database as fresh as it found it).
   */
  atEnd?: (control: PgConn) => Promise<void>
}

export interface TesterResult {
  /** 0: ran to its end; 1: isolationtester would have exited 1 (setup failed, a step timed out). */
  exit: 0 | 1
}

function literal(s: string): string {
  return `'${s.replace(/'/g, "''")}'`
}

export async function runTester(spec: Spec, o: TesterOptions, sink: TranscriptSink): Promise<TesterResult> {
  for (const u of spec.unused) sink.err(`unused step name: ${u}\n`)
  sink.out(`Parsed test spec with ${spec.sessions.length} sessions\n`)
  const t = new Tester(spec, o, sink)
  try {
    await t.open()
    return await t.run()
  } finally {
    await t.close()
  }
}

/** One spec's run: its connections (control first, then one per session) and isolationtester's loop over them. */
class Tester {
  private readonly conns: Conn[] = []
  private anyNewNotice = false
  private control!: PgConn
  private pidList = ''
  // A session's connection closed: noted once (not in the transcript, which stays isolationtester's), and said
  // beside it only if the spec fails (run).
  private readonly lostNotes = new Map<Conn, string>()
  private readonly stepByName = new Map<string, SpecStep>()
  private readonly block: NonNullable<TesterOptions['block']>

  constructor(
    private readonly spec: Spec,
    private readonly o: TesterOptions,
    private readonly sink: TranscriptSink,
  ) {
    for (const s of spec.sessions) for (const st of s.steps) this.stepByName.set(st.name, st)
    this.block = o.block ?? ((c: PgConn, sql: string) => c.exec(sql))
  }

  async close(): Promise<void> {
    await Promise.all(this.conns.map((c) => c.conn.close()))
  }

  /**
   * Every connection at once (isolationtester opens them one after another; nothing in a transcript depends on
   * the order), so that a spec's start costs one connection's time, not one per session.
   */
  async open(): Promise<void> {
    const { o, sink } = this
    const names = ['control connection', ...this.spec.sessions.map((s) => s.name)]
    const params: [string, string][] = [...o.params]
    if (o.appName !== undefined) params.unshift(['application_name', o.appName])
    const slots: (Conn | undefined)[] = names.map(() => undefined)
    const opened = await Promise.allSettled(
      names.map(async (name, i) => {
        let conn: PgConn
        try {
          conn = await PgConn.connect(o.target, { connectTimeoutMs: o.connectTimeoutMs, params, database: o.database })
        } catch (e) {
          throw new RunError(`could not connect to ${o.target.label} (connection ${i}): ${(e as Error).message}`)
        }
        const c: Conn = { conn, name, notices: 0 }
        slots[i] = c
        if (i > 0) {
          conn.onNotice = (m) => {
            sink.out(`${c.name}: ${m}`)
            c.notices++
            this.anyNewNotice = true
          }
        }
        // isolationtester's query, its names in pg_catalog (race's own statement on a connection that runs the spec).
        const r = await conn.exec(`SELECT pg_catalog.set_config('application_name',\n  pg_catalog.current_setting('application_name') OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) ${literal(name)},\n  false)`)
        if (r?.status !== 'TUPLES_OK') throw new RunError(`setting the application name failed: ${conn.errorMessage.trim()}`)
      }),
    )
    for (const c of slots) if (c) this.conns.push(c)
    const failed = opened.find((x): x is PromiseRejectedResult => x.status === 'rejected')
    if (failed) throw failed.reason
    o.onBackends?.(this.conns.map((c) => c.conn.pid))
    this.control = this.conns[0].conn
    this.pidList = this.conns
      .slice(1)
      .map((c) => c.conn.pid)
      .join(',')
  }

  /** Every permutation (the spec's, or every interleaving), then what the end of the run says. */
  async run(): Promise<TesterResult> {
    const { spec, o, control } = this
    const pstep = (ps: PermutationStep): PStep => ({ name: ps.name, step: this.stepByName.get(ps.name)!, blockers: ps.blockers, targets: [] })
    let exit: 0 | 1 = 0
    try {
      if (spec.permutations.length) {
        for (const perm of spec.permutations) await this.runPermutation(perm.steps.map(pstep))
      } else {
        for (const perm of allPermutations(spec)) await this.runPermutation(perm.steps.map(pstep))
      }
    } catch (e) {
      if (!(e instanceof Exit)) throw e
      exit = 1
    }
    // Control closed while no step needed it (a step that ends within isolationtester's first 10 ms wait never asks
    // it): said all the same, whatever the timing, as when a step's wait found it closed. The closed flag is only
    // set by a read; an empty query on control reads what the server sent (its FATAL, the end of the stream), which
    // under load may still be unread when the last step's answer has come.
    if (exit === 0 && !control.closed) await control.exec('')
    if (exit === 0 && control.closed) throw this.lost('after the last step')
    if (exit === 1) for (const note of this.lostNotes.values()) o.onSessionLost?.(note)
    if (o.atEnd && !control.closed) {
      await Promise.all(this.conns.slice(1).map((c) => c.conn.close()))
      await o.atEnd(control)
    }
    return { exit }
  }

  /** race's control connection closed: the spec stops there. */
  private lost(during: string): RunError {
    return new RunError(`${connectionLost(this.spec.file, "race's isolationtester control connection", during, this.control)}: the spec stopped there`)
  }

  private sessionLost(c: Conn, during: string): void {
    if (!this.lostNotes.has(c)) this.lostNotes.set(c, connectionLost(this.spec.file, `session ${c.name}`, during, c.conn))
  }

  /** A block on control that fails because control was closed (the guard's own questions included) is that loss. */
  private async onControl<T>(run: () => Promise<T>, during: string): Promise<T> {
    try {
      const r = await run()
      if (this.control.closed) throw this.lost(during)
      return r
    } catch (e) {
      if (this.control.closed && !(e instanceof RunError)) throw this.lost(during)
      throw e
    }
  }

  private stepHasBlocker(p: PStep): boolean {
    return p.blockers.some((b, i) => {
      if (b.kind === 'once') return false
      const other = this.conns[1 + this.stepByName.get(b.step)!.session]
      if (b.kind === 'step') return other.active?.step.name === b.step
      return other.notices < p.targets[i]
    })
  }

  /** Whether the step still waits; else its results are printed and its session is free. */
  private async tryComplete(p: PStep, flags: number): Promise<boolean> {
    const { sink } = this
    const ic = this.conns[1 + p.step.session]
    const conn = ic.conn
    if (!(flags & RETRY) && p.blockers.some((b) => b.kind === 'once')) {
      sink.out(`step ${p.name}: ${p.step.sql} <waiting ...>\n`)
      return true
    }
    const waits = await this.waitOn(p, ic, flags)
    if (waits) return true
    if (this.stepHasBlocker(p)) {
      if (!(flags & RETRY)) sink.out(`step ${p.name}: ${p.step.sql} <waiting ...>\n`)
      return true
    }
    sink.out(flags & RETRY ? `step ${p.name}: <... completed>\n` : `step ${p.name}: ${p.step.sql}\n`)
    for (let r = await conn.getResult(); r; r = await conn.getResult()) {
      if (r.status === 'TUPLES_OK') sink.out(printResult(r))
      else if (r.status === 'FATAL_ERROR') {
        const sev = r.err?.S
        const msg = r.err?.M
        sink.out(sev !== undefined && msg !== undefined ? `${sev}:  ${msg}\n` : `${r.errorMessage ?? ''}\n`)
      }
    }
    if (conn.closed) this.sessionLost(ic, `in step ${p.name}`)
    conn.consumeInput()
    for (let n = conn.nextNotify(); n; n = conn.nextNotify()) {
      const sender = this.conns.slice(1).find((c) => c.conn.pid === n!.pid)?.name ?? `PID ${n.pid}`
      sink.out(`${this.spec.sessions[p.step.session].name}: NOTIFY "${n.channel}" with payload "${n.payload}" from ${sender}\n`)
      conn.consumeInput()
    }
    ic.active = undefined
    return false
  }

  /**
   * Waits while the step's connection is busy: true when control says it is blocked (NONBLOCK), false once its
   * answer has come. Cancels it after the step wait, and ends the spec (exit 1) after twice that.
   */
  private async waitOn(p: PStep, ic: Conn, flags: number): Promise<boolean> {
    const { sink, control, o } = this
    const conn = ic.conn
    const start = performance.now()
    let canceled = false
    while (conn.isBusy()) {
      const readable = await conn.waitReadable(10)
      if (readable) {
        // isolationtester: "PQconsumeInput failed", exit 1. A closed socket stays readable: never loop on it.
        if (!conn.consumeInput()) {
          this.sessionLost(ic, `during step ${p.name}`)
          sink.err(`PQconsumeInput failed: ${conn.errorMessage}\n`)
          throw new Exit()
        }
        continue
      }
      if (flags & NONBLOCK) {
        const r = await control.exec(`SELECT pg_catalog.pg_isolation_test_session_is_blocked(${conn.pid}, '{${this.pidList}}')`)
        if (control.closed) throw this.lost(`while asking whether step ${p.name} waits`)
        if (r?.status !== 'TUPLES_OK' || r.rows.length !== 1) {
          sink.err(`lock wait query failed: ${control.errorMessage}`)
          throw new Exit()
        }
        if ((r.rows[0][0] ?? '')[0] === 't') {
          conn.consumeInput()
          if (!conn.isBusy()) break
          if (!(flags & RETRY)) sink.out(`step ${p.name}: ${p.step.sql} <waiting ...>\n`)
          return true
        }
      }
      const td = (performance.now() - start) * 1000
      const max = o.maxStepWaitMs * 1000
      if (td > max && !canceled) {
        if (await conn.cancel()) {
          sink.out(`isolationtester: canceling step ${p.name} after ${Math.floor(td / 1e6)} seconds\n`)
          canceled = true
        } else sink.err(`PQcancel failed: could not send the cancel request\n`)
      }
      if (td > 2 * max) {
        sink.err(`step ${p.name} timed out after ${Math.floor(td / 1e6)} seconds\n`)
        throw new Exit()
      }
    }
    return false
  }

  private async tryCompleteAll(waiting: PStep[], flags: number): Promise<PStep[]> {
    let list = waiting
    let before: number
    let haveBlocker: boolean
    do {
      this.anyNewNotice = false
      before = list.length
      haveBlocker = false
      const still: PStep[] = []
      for (const w of list) {
        if (await this.tryComplete(w, flags)) {
          if (w.blockers.length) haveBlocker = true
          still.push(w)
        }
      }
      list = still
    } while (haveBlocker && (list.length < before || this.anyNewNotice))
    return list
  }

  private async runPermutation(steps: PStep[]): Promise<void> {
    this.sink.out(`\nstarting permutation:${steps.map((s) => ` ${s.name}`).join('')}\n`)
    await this.setup()
    let waiting: PStep[] = []
    for (const p of steps) waiting = await this.step(p, waiting)
    waiting = await this.tryCompleteAll(waiting, RETRY)
    if (waiting.length) {
      this.sink.err('failed to complete permutation due to mutually-blocking steps\n')
      throw new Exit()
    }
    await this.teardown()
  }

  /** The setup blocks on control, then each session's setup. */
  private async setup(): Promise<void> {
    const { spec, sink, control } = this
    for (let i = 0; i < spec.setup.length; i++) {
      const r = await this.onControl(() => this.block(control, spec.setup[i].sql, 'setup', i), `in setup block ${i + 1}`)
      if (r?.status === 'TUPLES_OK') sink.out(printResult(r))
      else if (r?.status !== 'COMMAND_OK') {
        sink.err(`setup failed: ${control.errorMessage}`)
        throw new Exit()
      }
    }
    for (let i = 0; i < spec.sessions.length; i++) {
      const s = spec.sessions[i]
      if (s.setup === undefined) continue
      const c = this.conns[i + 1].conn
      const r = await c.exec(s.setup)
      if (c.closed) this.sessionLost(this.conns[i + 1], 'in its setup block')
      if (r?.status === 'TUPLES_OK') sink.out(printResult(r))
      else if (r?.status !== 'COMMAND_OK') {
        sink.err(`setup of session ${s.name} failed: ${c.errorMessage}`)
        throw new Exit()
      }
    }
  }

  /** One step sent, once its session's step before it completed: the steps still waiting after it. */
  private async step(p: PStep, waiting: PStep[]): Promise<PStep[]> {
    const { sink, o } = this
    const ic = this.conns[1 + p.step.session]
    if (ic.active) {
      const start = performance.now()
      while (ic.active) {
        const old = ic.active
        if (!(await this.tryComplete(old, RETRY))) waiting = waiting.filter((w) => w !== old)
        waiting = await this.tryCompleteAll(waiting, NONBLOCK | RETRY)
        if (ic.active && (performance.now() - start) * 1000 > 2 * o.maxStepWaitMs * 1000) {
          const secs = Math.floor((performance.now() - start) / 1000)
          sink.err(`step ${ic.active.name} timed out after ${secs} seconds\n`)
          sink.err(`active steps are:${this.conns.slice(1).filter((c) => c.active).map((c) => ` ${c.active!.name}`).join('')}\n`)
          throw new Exit()
        }
      }
    }
    // isolationtester: "failed to send query for step", exit 1 (a session whose connection the server closed).
    if (!ic.conn.sendQuery(p.step.sql)) {
      sink.out(`failed to send query for step ${p.name}: ${ic.conn.errorMessage}\n`)
      throw new Exit()
    }
    ic.active = p
    p.targets = p.blockers.map((b) => (b.kind === 'notices' ? b.count + this.conns[1 + this.stepByName.get(b.step)!.session].notices : -1))
    const mustWait = await this.tryComplete(p, NONBLOCK)
    waiting = await this.tryCompleteAll(waiting, NONBLOCK | RETRY)
    if (mustWait) waiting.push(p)
    return waiting
  }

  /** Each session's teardown, then the teardown block on control (a failure is printed, and the run goes on). */
  private async teardown(): Promise<void> {
    const { spec, sink, control } = this
    for (let i = 0; i < spec.sessions.length; i++) {
      const s = spec.sessions[i]
      if (s.teardown === undefined) continue
      const c = this.conns[i + 1].conn
      const r = await c.exec(s.teardown)
      if (c.closed) this.sessionLost(this.conns[i + 1], 'in its teardown block')
      if (r?.status === 'TUPLES_OK') sink.out(printResult(r))
      else if (r?.status !== 'COMMAND_OK') sink.err(`teardown of session ${s.name} failed: ${c.errorMessage}`)
    }
    if (spec.teardown) {
      const r = await this.onControl(() => this.block(control, spec.teardown!.sql, 'teardown', 0), 'in the teardown block')
      if (r?.status === 'TUPLES_OK') sink.out(printResult(r))
      else if (r?.status !== 'COMMAND_OK') sink.err(`teardown failed: ${control.errorMessage}`)
    }
  }
}

/** Every interleaving of the sessions' steps, in isolationtester's order (session 1's pile first). */
export function allPermutations(spec: Pick<Spec, 'sessions'>): Permutation[] {
  const out: Permutation[] = []
  const piles = spec.sessions.map(() => 0)
  const total = spec.sessions.reduce((a, s) => a + s.steps.length, 0)
  const chosen: string[] = []
  const recurse = () => {
    let found = false
    for (let i = 0; i < spec.sessions.length; i++) {
      if (piles[i] < spec.sessions[i].steps.length) {
        chosen.push(spec.sessions[i].steps[piles[i]].name)
        piles[i]++
        recurse()
        piles[i]--
        chosen.pop()
        found = true
      }
    }
    if (!found && chosen.length === total) out.push({ steps: chosen.map((name) => ({ name, blockers: [], pos: { line: 0, column: 0 } })), pos: { line: 0, column: 0 } })
  }
  recurse()
  return out
}

/** How many interleavings `allPermutations` would run (multinomial), without building them. */
export function countPermutations(spec: Pick<Spec, 'sessions'>): number {
  let n = 0
  let r = 1
  for (const s of spec.sessions) {
    for (let k = 1; k <= s.steps.length; k++) {
      n++
      r = (r * n) / k
    }
  }
  return Math.round(r)
}

