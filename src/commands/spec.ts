// race spec FILE.spec ...: PostgreSQL's isolationtester without a PostgreSQL build. Each spec runs in a
// database of its own on the target (embedded PostgreSQL 18 by default; a guarded schema when the role may not
// create databases) and prints the transcript
// isolationtester prints; --results writes DIR/<name>.out, --expected compares with DIR/<name>.out (or an
// alternate <name>_1.out ... as pg_regress accepts) and prints ok / FAILED and the differences.
import { connect, endQuietly } from '../db/connect.js'
import { Lab, type RunSchema } from '../db/lab.js'
import fs from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { RunError, UsageError } from '../errors.js'
import { isConnectionLoss } from '../db/sqlstate.js'
import type { RunContext as Context } from '../lifecycle.js'
import { parseWhole } from '../parse.js'
import { c } from '../report/color.js'
import { diffLines } from '../isolation/diff.js'
import { libpqEnv, readSpec, specName } from '../isolation/files.js'
import { fsyncOff, mayCreateDatabase, namesRegressDatabase, reapDatabases, REGRESS_DATABASE, REGRESS_SERVER_SETTINGS, SpecDatabase } from '../isolation/database.js'
import { guardedBlock } from '../isolation/guarded.js'
import { expandTemplates, hasTemplate, type Spec } from '../isolation/parse.js'
import { countPermutations, runTester } from '../isolation/tester.js'
import { addTargetOptions, eachPg, type TargetOptions } from './common.js'
import { withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'

export interface SpecOptions extends TargetOptions {
  results?: string
  expected?: string
  n?: string
  keep?: boolean
  /** Each spec in a guarded schema instead of a database of its own. */
  schema?: boolean
}

export function registerSpec(program: Command, exit: (code: number) => void, ctx: Context): Command {
  const cmd = program
    .command('spec')
    .description("run isolation-test spec files as PostgreSQL's isolationtester does, with the same transcript")
    .argument('<files...>', 'spec files (PostgreSQL isolation-test format)')
    .option('--results <dir>', 'write each transcript to DIR/<name>.out instead of printing it')
    .option('--expected <dir>', 'compare each transcript with DIR/<name>.out (or <name>_1.out ...): ok or FAILED, and the differences')
    .option('--n <n>', 'sessions each template session (session s*) becomes (default 2)')
    .option('--schema', 'each spec in a schema of its own, its setup and teardown checked to change nothing outside it, instead of a database of its own (as pg_isolation_regress runs it)')
  addTargetOptions(cmd, ctx, { stepTimeout: false, pg: true })
  const runTimeout = cmd.options.find((x) => x.long === '--run-timeout')
  if (runTimeout) runTimeout.default('30m')
  cmd.action(async (files: string[], o: SpecOptions) => exit(await eachPg(ctx, o, () => specCommand(ctx, files, o))))
  cmd.addHelpText(
    'after',
    `
Like libpq, race reads PGOPTIONS, PGDATESTYLE, PGTZ and PGAPPNAME (pg_regress runs isolation tests with
PGDATESTYLE='Postgres, MDY', PGTZ=America/Los_Angeles, PGOPTIONS='-c intervalstyle=postgres_verbose' and
PGAPPNAME=isolation/<test>, which race uses when PGAPPNAME is not set). A step is cancelled as the server's
own isolationtester would cancel it: after twice PG_TEST_TIMEOUT_DEFAULT seconds on PostgreSQL 16 and later
(default 360 s), after PGISOLATIONTIMEOUT seconds before (default 300 s).

Each spec runs as pg_isolation_regress runs it: in a database of its own (from template0, with pg_regress's
settings), dropped afterwards with the roles the spec created; race's own server has pg_regress's configuration
(max_prepared_transactions = 2). On --database-url, when the role may not create databases, each spec runs in a
schema of its own instead, and a setup or teardown block that would change anything outside it is refused.
In a call of several specs, one that is refused or fails does not stop the others: the summary says what
happened to each, and the exit code is the worst (1 failed, 2 refused, 3 could not run).

Examples:
  $ race spec orders.spec
  $ race spec specs/*.spec --results out/
  $ race spec specs/*.spec --expected expected/ --database-url postgres://postgres@127.0.0.1:5432/test`,
  )
  return cmd
}

type Status = 'ok' | 'FAILED' | 'error'

interface Outcome {
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

function exitCodeOf(e: unknown): 2 | 3 {
  return e instanceof UsageError ? 2 : 3
}

function oneLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split('\n')[0]
}

export async function specCommand(ctx: Context, files: string[], o: SpecOptions): Promise<number> {
  const n = o.n === undefined ? 2 : parseWhole('--n', o.n, 1, 1000)
  const multi = files.length > 1
  // Each spec is read first; in a call of several, a spec that cannot be read or parsed is that spec's error,
  // and the others run (as pg_regress goes on past a failed test).
  const items: { file: string; spec?: Spec; error?: unknown }[] = []
  for (const file of files) {
    try {
      const spec = expandTemplates(readSpec(file), n)
      if (!spec.permutations.length && countPermutations(spec) > 100_000) {
        throw new UsageError(`${spec.file}: without permutation lines it has ${countPermutations(spec)} interleavings to run: add permutation lines${hasTemplate(readSpec(spec.file)) ? ' or use a smaller --n' : ''}`)
      }
      items.push({ file, spec })
    } catch (e) {
      if (!multi || !(e instanceof UsageError)) throw e
      items.push({ file, error: e })
    }
  }
  for (const dir of [o.results, o.expected]) {
    if (dir !== undefined && !fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
      if (dir === o.results) fs.mkdirSync(dir, { recursive: true })
      else throw new UsageError(`--expected ${dir} is not a directory`)
    }
  }
  const bounds = parseBounds(o)
  const env = libpqEnv()
  const streaming = o.results === undefined && o.expected === undefined && !o.json
  return withLab(
    ctx,
    o.databaseUrl,
    bounds,
    async (driver, target) => {
      // isolationtester's format is PostgreSQL's: its SQL, its messages, pg_isolation_test_session_is_blocked.
      if (!(driver instanceof Lab)) throw new UsageError(`race spec runs on PostgreSQL: give a postgres:// URL (or none, for the embedded PostgreSQL 18)`)
      const lab = driver
      // pg_regress's role: a database per spec on race's own server, and on a server of the user's when this role
      // may create one; else a schema per spec, its setup and teardown blocks guarded.
      const own = target.kind === 'embedded'
      const inDatabase = !o.schema && (own || (await mayCreateDatabase(lab)))
      if (!own) {
        // Which, said: always when it is not pg_regress's conditions (a role that may not create databases), else on a
        // terminal (the JSON's "in" says it too); a line in a CI log would be one more than an error's one line.
        if (!inDatabase && !o.schema) {
          process.stderr.write(`race spec: each spec runs in a schema of its own in ${lab.target.label}, its setup and teardown checked to change nothing outside it (this role may not create databases: give it CREATEDB for pg_regress's conditions)\n`)
        } else if (inDatabase && process.stderr.isTTY) {
          process.stderr.write(`race spec: each spec runs in a database of its own on ${lab.target.label} (race_spec_*, from template0, as pg_isolation_regress creates it), dropped afterwards\n`)
        }
        if (inDatabase) {
          const reaped = await reapDatabases(lab)
          if (reaped.length) process.stderr.write(`race spec: removed ${reaped.length} database(s) left by race runs that were killed: ${reaped.join(', ')}\n`)
        }
      }
      const maxStepWaitMs = stepWait(lab.server.versionNum)
      // The database race was given, on a server of the user's: when it is pg_regress's own (isolation_regression), a
      // spec that names that database runs in it, as isolationtester runs every spec there (runOne).
      const given = inDatabase && !own ? String((await lab.control`select pg_catalog.current_database() as d`)[0].d) : undefined
      const outcomes: Outcome[] = []
      const fileCopy = inDatabase && (await fsyncOff(lab))
      // Databases are created and dropped on a connection of their own, beside the spec that runs.
      const aux = inDatabase ? connect(lab.target, { connectTimeoutMs: bounds.connectTimeoutMs, applicationName: 'race spec databases' }) : undefined
      const endAux = aux ? ctx.onCleanup('connection for the spec databases', () => endQuietly(aux, 1)) : () => {}
      // A spec that leaves its database as fresh as it found it (its teardown dropped what its setup made: race
      // compares the database's catalogs with a fresh copy's) hands it to the next spec; any other is dropped.
      let spare: SpecDatabase | undefined
      // Databases being dropped while the next spec runs (on a shared server, where each has a name of its own).
      const pending: { p: Promise<string | undefined>; i: number }[] = []
      // The next spec's database is made while a spec runs (on aux), so that a spec that needs a new one (its
      // predecessor did not leave its database fresh) does not wait for CREATE DATABASE. Not with --keep, where every
      // database made is a spec's to keep.
      let ahead: Promise<SpecDatabase> | undefined
      const make = (): Promise<SpecDatabase> => {
        const p = SpecDatabase.create(lab, { own, keep: Boolean(o.keep), fileCopy, sql: aux })
        p.catch(() => {}) // awaited by the spec that takes it, whose error it then is
        return p
      }
      for (const [i, item] of items.entries()) {
        const name = specName(item.file)
        let db: Promise<SpecDatabase> | undefined
        if (item.spec && inDatabase) {
          if (spare) db = Promise.resolve(spare)
          else {
            db = ahead ?? make()
            ahead = undefined
          }
          spare = undefined
          if (!ahead && !o.keep && items.slice(i + 1).some((x) => x.spec)) ahead = make()
        }
        const x: Outcome = item.spec
          ? await runOne(lab, item.spec, db, {
              o,
              env,
              bounds,
              maxStepWaitMs,
              streaming,
              inDatabase,
              own,
              given,
              reuse: items.slice(i + 1).some((x) => x.spec) ? (d) => (spare = d) : undefined,
              later: multi && !own ? (p) => pending.push({ p, i: outcomes.length }) : undefined,
            })
          : { file: item.file, name, text: '', status: 'error', code: exitCodeOf(item.error), reason: oneLine(item.error), error: item.error, ms: 0 }
        if (!multi && x.error !== undefined) throw x.error
        if (x.status === 'error' && x.reason !== undefined) {
          // What race says about it is part of what the spec printed (as isolationtester's stderr is, for pg_regress).
          x.text += `race: ${x.reason}\n`
          if (streaming) process.stderr.write(`race: ${item.file}: ${x.reason}\n`)
        }
        outcomes.push(x)
        if (o.results !== undefined) fs.writeFileSync(path.join(o.results, `${name}.out`), Buffer.from(x.text, 'latin1'))
      }
      for (const d of [spare, await ahead?.catch(() => undefined)]) {
        if (!d) continue
        d.release()
        const left = await d.drop()
        if (left) process.stderr.write(`race: ${left}\n`)
      }
      // What a database dropped in the background left is its spec's error.
      for (const { p, i } of pending) {
        const left = await p
        const x = outcomes[i]
        if (!left || x.status === 'error') continue
        Object.assign(x, { status: 'error', code: 3, reason: left, error: new RunError(left), text: x.text + `race: ${left}\n` })
        if (streaming) process.stderr.write(`race: ${x.file}: ${left}\n`)
        if (o.results !== undefined) fs.writeFileSync(path.join(o.results, `${x.name}.out`), Buffer.from(x.text, 'latin1'))
      }
      endAux()
      await endQuietly(aux, 1)
      const json = () => {
        const results = outcomes.map((x) => ({
          spec: x.file,
          name: x.name,
          transcript: Buffer.from(x.text, 'latin1').toString('utf8'),
          status: x.status,
          exitCode: x.code,
          ...(x.reason !== undefined ? { error: x.reason } : {}),
          ms: x.ms,
          ...(o.expected !== undefined ? { matched: x.status === 'ok' } : {}),
        }))
        process.stdout.write(JSON.stringify({ server: { version: lab.server.version }, target: lab.target.label, in: inDatabase ? 'database' : 'schema', results }, null, 2) + '\n')
      }
      const diffs: string[] = []
      if (o.expected !== undefined) {
        for (const x of outcomes) {
          if (x.status === 'error') continue
          const candidates = [`${x.name}.out`, ...Array.from({ length: 9 }, (_, i) => `${x.name}_${i + 1}.out`)]
            .map((f) => path.join(o.expected!, f))
            .filter((f) => fs.existsSync(f))
          if (!candidates.length) {
            if (!multi) throw new UsageError(`--expected ${o.expected} has no ${x.name}.out`)
            Object.assign(x, { status: 'error', code: 2, reason: `--expected ${o.expected} has no ${x.name}.out` })
            continue
          }
          const texts = candidates.map((f) => fs.readFileSync(f, 'latin1'))
          const ok = texts.includes(x.text)
          Object.assign(x, { status: ok ? 'ok' : 'FAILED', code: ok ? 0 : 1 })
          if (!ok) {
            // The closest expected file, as pg_regress shows the alternate with the fewest differing lines.
            const ranked = texts.map((t, i) => ({ i, d: diffLines(t, x.text, candidates[i], `${x.name} (race)`) })).sort((a, b) => a.d.changed - b.d.changed)
            diffs.push(ranked[0].d.text)
          }
        }
      }
      const worst = Math.max(0, ...outcomes.map((x) => x.code))
      if (o.json) {
        json()
        return worst
      }
      // The summary: one line per spec, as pg_regress's. On stdout when the transcripts are not there, else on stderr.
      const summarize = o.expected !== undefined || o.results !== undefined || multi || outcomes.some((x) => x.status === 'error')
      if (summarize) {
        const w = streaming ? process.stderr : process.stdout
        const mark = (x: Outcome) => (x.status === 'ok' ? c.green('ok') : x.status === 'FAILED' ? c.red('FAILED') : c.red('error'))
        for (const x of outcomes) {
          const why = x.status === 'error' ? `: ${x.reason}` : x.status === 'FAILED' && o.expected === undefined ? ' (isolationtester would exit 1)' : ''
          w.write(`${x.name.padEnd(24)} ... ${mark(x)}${why}  ${x.ms} ms\n`)
        }
        for (const d of diffs) w.write(Buffer.from(d, 'latin1'))
        const count = (s: Status) => outcomes.filter((x) => x.status === s).length
        const parts = [`${count('ok')} ok`, ...(count('FAILED') ? [`${count('FAILED')} FAILED`] : []), ...(count('error') ? [`${count('error')} error`] : [])]
        const line = o.expected !== undefined && !count('FAILED') && !count('error') ? `all ${outcomes.length} specs as expected` : `${outcomes.length} spec${outcomes.length === 1 ? '' : 's'}: ${parts.join(', ')}${o.expected !== undefined ? ` (compared with ${o.expected})` : ''}`
        w.write((worst ? c.red(line) : c.green(line)) + '\n')
      }
      return worst
    },
    undefined,
    { settings: REGRESS_SERVER_SETTINGS },
  )
}

interface RunContext {
  o: SpecOptions
  env: ReturnType<typeof libpqEnv>
  bounds: ReturnType<typeof parseBounds>
  maxStepWaitMs: number
  streaming: boolean
  inDatabase: boolean
  own: boolean
  /** The database race was given (a server of the user's, a database per spec): see runOne. */
  given?: string
  /** When given, a database the spec left as fresh as it was goes back here, for the next spec. */
  reuse?: (db: SpecDatabase) => void
  /** When given, the spec's database is dropped while the next spec runs: what the drop left comes through here. */
  later?: (drop: Promise<string | undefined>) => void
}

/** One spec, in a database (or a guarded schema) of its own; never throws but for an abort (Ctrl-C, --run-timeout). */
async function runOne(lab: Lab, spec: Spec, database: Promise<SpecDatabase> | undefined, k: RunContext): Promise<Outcome> {
  const { o, env, bounds, streaming } = k
  const abortSignal = lab.context.signal
  const name = specName(spec.file)
  const started = performance.now()
  if (lab.controlLost) throw new RunError(`${spec.file}: lost race's control connection to ${lab.target.label} before the spec started (CONNECTION_CLOSED): something ended it; nothing of this spec ran`)
  let text = ''
  // Set when race's control connection is lost: the transcript ends there too (what the sessions say as race ends
  // them is not part of it).
  let stopped = false
  // Once the run is aborted (Ctrl-C, --run-timeout), the transcript ends: what the ended sessions still say is not part of it.
  const sink = {
    out: (s: string) => {
      if (abortSignal.aborted || stopped) return
      text += s
      if (streaming) process.stdout.write(Buffer.from(s, 'latin1'))
    },
    err: (s: string) => {
      if (abortSignal.aborted || stopped) return
      text += s
      if (streaming) process.stderr.write(Buffer.from(s, 'latin1'))
    },
  }
  const done = (status: Status, code: Outcome['code'], error?: unknown): Outcome => ({
    file: spec.file,
    name,
    text,
    status,
    code,
    ...(error !== undefined ? { reason: oneLine(error), error } : {}),
    ms: Math.round(performance.now() - started),
  })
  let db: SpecDatabase | undefined
  let schema: RunSchema | undefined
  try {
    if (database) {
      db = await database
      if (k.given === REGRESS_DATABASE && namesRegressDatabase(spec)) {
        // The database race was given is pg_regress's own, which the spec names (PostgreSQL's intra-grant-inplace-db
        // grants on it): the spec runs in it, as isolationtester runs it there, rather than in a database of its own
        // that cannot take that name. What the spec leaves there (and the roles it leaves) stay, as isolationtester's
        // do. The database made for it, never begun, goes to the next spec or is dropped.
        const unused = db
        db = undefined
        if (k.reuse) k.reuse(unused)
        else {
          unused.release()
          const left = await unused.drop()
          if (left) throw new RunError(left)
        }
        if (streaming && process.stderr.isTTY) process.stderr.write(`race spec: ${spec.file} names pg_regress's database ${REGRESS_DATABASE}, the database given: it runs in it, as isolationtester runs it; what it leaves there stays\n`)
      } else await db.begin(spec)
    } else schema = await lab.createSchema('spec', Boolean(o.keep))
  } catch (e) {
    if (db) {
      db.release()
      await db.drop()
    }
    if (abortSignal.aborted) throw e
    return done('error', exitCodeOf(e), e instanceof UsageError || e instanceof RunError ? e : new RunError(`could not create the spec's ${k.inDatabase ? 'database' : 'schema'}: ${oneLine(e)}`))
  }
  let pids: number[] = []
  const terminate = async () => {
    if (pids.length) await lab.onControlOrFresh((sql) => sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid where pid <> pg_backend_pid()`).catch(() => {})
  }
  // On Ctrl-C or --run-timeout, end this spec's backends (a step may be waiting on a lock), then drop the database or schema.
  const release = lab.context.onCleanup('spec sessions', terminate)
  let result: { exit: 0 | 1 } | undefined
  let failure: unknown
  // Whether the spec left its database as fresh as a new one (asked on the spec's control connection at its end).
  let pristine = false
  try {
    result = await Promise.race([
      runTester(
        spec,
        {
          target: lab.target,
          database: db?.name,
          connectTimeoutMs: bounds.connectTimeoutMs,
          params: schema ? [...env.params, ['search_path', schema.name]] : env.params,
          // pg_isolation_regress runs each test with PGAPPNAME=isolation/<test>; a PGAPPNAME of the caller's wins.
          appName: env.appName ?? `isolation/${name}`,
          maxStepWaitMs: k.maxStepWaitMs,
          block: schema
            ? (control, sql, kind, index) =>
                guardedBlock(control, sql, schema!.name, kind === 'setup' ? `${spec.file}:${spec.setup[index].pos.line}: setup block ${index + 1}` : `${spec.file}:${spec.teardown!.pos.line}: teardown block`)
            : undefined,
          onBackends: (p) => (pids = p),
          // Beside the transcript (isolationtester's, which shows the server's FATAL error), race says which session
          // the server ended and why: a spec whose later steps meet that session fails as isolationtester's does.
          onSessionLost: (note) => {
            if (!abortSignal.aborted && !stopped) process.stderr.write(`race: ${note}\n`)
          },
          atEnd: db && k.reuse ? async (control) => void (pristine = await db!.pristine(control)) : undefined,
        },
        sink,
      ),
      lab.context.whenAborted(),
      // race's own control backend marks the run's schema (or database) as this live run's: without it, the next race
      // command would take it for a killed run's and drop it under the sessions. So the whole call stops.
      lab.whenLost().catch((e: unknown) => {
        stopped = true
        throw e
      }),
    ])
  } catch (e) {
    if (abortSignal.aborted) throw e
    if (isConnectionLoss(e) && lab.controlLost) {
      const code = (e as { code?: string }).code
      failure = new RunError(`${spec.file}: lost race's control connection to ${lab.target.label} mid-run (${code}): something ended it; the spec stopped, its sessions were ended and its ${db ? 'database' : 'schema'} dropped`)
    } else failure = e
  } finally {
    release()
    if (!result) await terminate()
    let left: string | undefined
    if (db) {
      // On race's own server every role the spec left is its; on a shared one, only those it is by identity (database.ts).
      const d = db
      const mentioned = !k.own
      const clean = k.reuse !== undefined && result !== undefined && failure === undefined && !abortSignal.aborted && pristine
      if (clean && !(await d.dropRoles(mentioned))) k.reuse!(d)
      else {
        const drop = d.drop(mentioned).finally(() => d.release())
        // In the background, unless it holds pg_regress's name, which the next spec's database is to take.
        if (k.later && failure === undefined && !abortSignal.aborted && d.name !== REGRESS_DATABASE) k.later(drop)
        else left = await drop
      }
      if (o.keep) process.stderr.write(`race: ${spec.file}: database ${db.name} kept (--keep): drop database "${db.name}" with (force)\n`)
    } else if (schema) {
      schema.release()
      left = (await schema.drop())?.note
      if (o.keep) process.stderr.write(`race: ${spec.file}: schema ${schema.name} kept (--keep): drop schema "${schema.name}" cascade\n`)
    }
    if (left && failure === undefined && !abortSignal.aborted) failure = new RunError(left)
  }
  // Without its control connection race cannot go on to another spec: the call ends with this one line.
  if (lab.controlLost && failure instanceof RunError) throw failure
  if (failure !== undefined) return done('error', exitCodeOf(failure), failure)
  return result!.exit ? done('FAILED', 1) : done('ok', 0)
}

/**
 * How long a step may run before isolationtester cancels it, as the isolationtester of the server's version
 * reads it: PostgreSQL 16 and later take twice PG_TEST_TIMEOUT_DEFAULT seconds (default 360 s), earlier
 * versions PGISOLATIONTIMEOUT seconds (default 300 s).
 */
export function stepWait(versionNum: number, env: NodeJS.ProcessEnv = process.env): number {
  if (versionNum >= 160000) {
    const v = env.PG_TEST_TIMEOUT_DEFAULT
    return v !== undefined ? 2 * (Number.parseInt(v, 10) || 0) * 1000 : 360_000
  }
  const v = env.PGISOLATIONTIMEOUT
  return v !== undefined ? (Number.parseInt(v, 10) || 0) * 1000 : 300_000
}
