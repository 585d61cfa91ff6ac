// One spec of a `race spec` call, as pg_isolation_regress runs one test: in a database of its own (or, where the
// role may not create one, a guarded schema), its transcript written as isolationtester writes it, its backends
// ended and its database dropped (or handed to the next spec when it left it as fresh as it found it).
import type { PostgresLab, RunSchema } from '../db/postgres.js'
import { isConnectionLoss } from '../db/sqlstate.js'
import { RunError, UsageError } from '../errors.js'
import { namesRegressDatabase, REGRESS_DATABASE, type SpecDatabase } from './database.js'
import { libpqEnv, specName } from '../specfile/files.js'
import { guardedBlock } from './guarded.js'
import type { Spec } from '../specfile/parse.js'
import { runTester, type TranscriptSink } from './tester.js'

export type Status = 'ok' | 'FAILED' | 'error'

export interface Outcome {
  file: string
  name: string
  text: string
  /** ok: ran to its end; FAILED: isolationtester would exit 1 (or, with --expected, the transcript differs); error: race could not run it. */
  status: Status
  /** The exit code this spec alone would give: 0, 1 (FAILED), 2 (refused: bad input), 3 (could not run). */
  code: 0 | 1 | 2 | 3
  /** What went wrong, for status error. */
  reason?: string
  error?: unknown
  ms: number
}

export function exitCodeOf(e: unknown): 2 | 3 {
  return e instanceof UsageError ? 2 : 3
}

export function oneLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split('\n')[0]
}

/** What every spec of a call shares. */
export interface SpecPlace {
  keep: boolean
  env: ReturnType<typeof libpqEnv>
  bounds: { connectTimeoutMs: number }
  maxStepWaitMs: number
  /** The transcripts go to stdout (and stderr) as they are written. */
  streaming: boolean
  inDatabase: boolean
  own: boolean
  /** The database race was given (a server of the user's, a database per spec): see SpecRun.open. */
  given?: string
}

/** What one spec is handed besides. */
export interface SpecTurn {
  /** When given, a database the spec left as fresh as it was goes back here, for the next spec. */
  reuse?: (db: SpecDatabase) => void
  /** When given, the spec's database is dropped while the next spec runs: what the drop left comes through here. */
  later?: (drop: Promise<string | undefined>) => void
}

/** One spec, in a database (or a guarded schema) of its own; never throws but for an abort (Ctrl-C, --run-timeout). */
export async function runOne(lab: PostgresLab, spec: Spec, database: Promise<SpecDatabase> | undefined, k: SpecPlace & SpecTurn): Promise<Outcome> {
  if (lab.controlLost) throw new RunError(`${spec.file}: lost race's control connection to ${lab.target.label} before the spec started (CONNECTION_CLOSED): something ended it; nothing of this spec ran`)
  return new SpecRun(lab, spec, k).run(database)
}

class SpecRun {
  private readonly signal: AbortSignal
  private readonly name: string
  private readonly started = performance.now()
  private text = ''
  // Set when race's control connection is lost: the transcript ends there too (what the sessions say as race ends
  // them is not part of it).
  private stopped = false
  private db: SpecDatabase | undefined
  private schema: RunSchema | undefined
  private pids: number[] = []
  // Whether the spec left its database as fresh as a new one (asked on the spec's control connection at its end).
  private pristine = false

  constructor(
    private readonly lab: PostgresLab,
    private readonly spec: Spec,
    private readonly k: SpecPlace & SpecTurn,
  ) {
    this.signal = lab.context.signal
    this.name = specName(spec.file)
  }

  private done(status: Status, code: Outcome['code'], error?: unknown): Outcome {
    return {
      file: this.spec.file,
      name: this.name,
      text: this.text,
      status,
      code,
      ...(error !== undefined ? { reason: oneLine(error), error } : {}),
      ms: Math.round(performance.now() - this.started),
    }
  }

  async run(database: Promise<SpecDatabase> | undefined): Promise<Outcome> {
    const { lab, signal } = this
    try {
      await this.open(database)
    } catch (e) {
      if (this.db) {
        this.db.release()
        await this.db.drop()
      }
      if (signal.aborted) throw e
      return this.done('error', exitCodeOf(e), e instanceof UsageError || e instanceof RunError ? e : new RunError(`could not create the spec's ${this.k.inDatabase ? 'database' : 'schema'}: ${oneLine(e)}`))
    }
    const terminate = async () => {
      const { pids } = this
      if (pids.length) await lab.onControlOrFresh((sql) => sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid where pid <> pg_backend_pid()`).catch(() => {})
    }
    // On Ctrl-C or --run-timeout, end this spec's backends (a step may be waiting on a lock), then drop the database or schema.
    const release = lab.context.onCleanup('spec sessions', terminate)
    let result: { exit: 0 | 1 } | undefined
    let failure: unknown
    try {
      result = await this.test()
    } catch (e) {
      if (signal.aborted) throw e
      if (isConnectionLoss(e) && lab.controlLost) {
        const code = (e as { code?: string }).code
        failure = new RunError(`${this.spec.file}: lost race's control connection to ${lab.target.label} mid-run (${code}): something ended it; the spec stopped, its sessions were ended and its ${this.db ? 'database' : 'schema'} dropped`)
      } else failure = e
    } finally {
      release()
      if (!result) await terminate()
      const left = await this.close(result !== undefined && failure === undefined)
      if (left && failure === undefined && !signal.aborted) failure = new RunError(left)
    }
    // Without its control connection race cannot go on to another spec: the call ends with this one line.
    if (lab.controlLost && failure instanceof RunError) throw failure
    if (failure !== undefined) return this.done('error', exitCodeOf(failure), failure)
    return result!.exit ? this.done('FAILED', 1) : this.done('ok', 0)
  }

  /** The spec's database (made ahead, or handed on), or its schema. */
  private async open(database: Promise<SpecDatabase> | undefined): Promise<void> {
    const { spec, k } = this
    if (!database) {
      this.schema = await this.lab.createSchema('spec', k.keep)
      return
    }
    this.db = await database
    if (!(k.given === REGRESS_DATABASE && namesRegressDatabase(spec))) return this.db.begin(spec)
    // The database race was given is pg_regress's own, which the spec names (PostgreSQL's intra-grant-inplace-db
    // grants on it): the spec runs in it, as isolationtester runs it there, rather than in a database of its own
    // that cannot take that name. What the spec leaves there (and the roles it leaves) stay, as isolationtester's
    // do. The database made for it, never begun, goes to the next spec or is dropped.
    const unused = this.db
    this.db = undefined
    if (k.reuse) k.reuse(unused)
    else {
      unused.release()
      const left = await unused.drop()
      if (left) throw new RunError(left)
    }
    if (k.streaming && process.stderr.isTTY) process.stderr.write(`race spec: ${spec.file} names pg_regress's database ${REGRESS_DATABASE}, the database given: it runs in it, as isolationtester runs it; what it leaves there stays\n`)
  }

  /** The transcript, as isolationtester writes it; once the run is aborted (Ctrl-C, --run-timeout), it ends. */
  private sink(): TranscriptSink {
    const write = (to: NodeJS.WriteStream) => (s: string) => {
      if (this.signal.aborted || this.stopped) return
      this.text += s
      if (this.k.streaming) to.write(Buffer.from(s, 'latin1'))
    }
    return { out: write(process.stdout), err: write(process.stderr) }
  }

  private test(): Promise<{ exit: 0 | 1 }> {
    const { lab, spec, k, db, schema, signal } = this
    return Promise.race([
      runTester(
        spec,
        {
          target: lab.target,
          database: db?.name,
          connectTimeoutMs: k.bounds.connectTimeoutMs,
          params: schema ? [...k.env.params, ['search_path', schema.name]] : k.env.params,
          // pg_isolation_regress runs each test with PGAPPNAME=isolation/<test>; a PGAPPNAME of the caller's wins.
          appName: k.env.appName ?? `isolation/${this.name}`,
          maxStepWaitMs: k.maxStepWaitMs,
          block: schema
            ? (control, sql, kind, index) =>
                guardedBlock(control, sql, schema.name, kind === 'setup' ? `${spec.file}:${spec.setup[index].pos.line}: setup block ${index + 1}` : `${spec.file}:${spec.teardown!.pos.line}: teardown block`)
            : undefined,
          onBackends: (p) => (this.pids = p),
          // Beside the transcript (isolationtester's, which shows the server's FATAL error), race says which session
          // the server ended and why: a spec whose later steps meet that session fails as isolationtester's does.
          onSessionLost: (note) => {
            if (!signal.aborted && !this.stopped) process.stderr.write(`race: ${note}\n`)
          },
          atEnd: db && k.reuse ? async (control) => void (this.pristine = await db.pristine(control)) : undefined,
        },
        this.sink(),
      ),
      lab.context.whenAborted(),
      // race's own control backend marks the run's schema (or database) as this live run's: without it, the next race
      // command would take it for a killed run's and drop it under the sessions. So the whole call stops.
      lab.whenLost().catch((e: unknown) => {
        this.stopped = true
        throw e
      }),
    ])
  }

  /** Drops (or hands on, or keeps) the spec's database or schema: what the drop left, if anything. */
  private async close(passed: boolean): Promise<string | undefined> {
    const { db, schema, k, spec, signal } = this
    let left: string | undefined
    if (db) {
      // On race's own server every role the spec left is its; on a shared one, only those it is by identity (database.ts).
      const mentioned = !k.own
      const clean = k.reuse !== undefined && passed && !signal.aborted && this.pristine
      if (clean && !(await db.dropRoles(mentioned))) k.reuse!(db)
      else {
        const drop = db.drop(mentioned).finally(() => db.release())
        // In the background, unless it holds pg_regress's name, which the next spec's database is to take.
        if (k.later && passed && !signal.aborted && db.name !== REGRESS_DATABASE) k.later(drop)
        else left = await drop
      }
      if (k.keep) process.stderr.write(`race: ${spec.file}: database ${db.name} kept (--keep): drop database "${db.name}" with (force)\n`)
    } else if (schema) {
      schema.release()
      left = (await schema.drop())?.note
      if (k.keep) process.stderr.write(`race: ${spec.file}: schema ${schema.name} kept (--keep): drop schema "${schema.name}" cascade\n`)
    }
    return left
  }
}
