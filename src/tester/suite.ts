// A `race spec` call, as pg_regress runs an isolation schedule: the specs read (in a call of several, one that cannot
// be read is that spec's error and the others run), each run in turn (one-spec.ts) in a database of its own where the
// role may create one (made ahead while the spec before it runs, handed on when left fresh, dropped in the
// background), else in a guarded schema; each transcript compared with the expected files as pg_regress compares.
// What is printed here is the transcripts as they are written and the notes on stderr; the summary is the command's.
import fs from 'node:fs'
import path from 'node:path'
import { connect, endQuietly } from '../db/connect.js'
import type { PostgresLab } from '../db/postgres.js'
import { RunError, UsageError } from '../errors.js'
import { fsyncOff, mayCreateDatabase, reapDatabases, SpecDatabase } from './database.js'
import { diffLines } from './diff.js'
import { libpqEnv, readSpec, specName } from '../specfile/files.js'
import { exitCodeOf, oneLine, runOne, type Outcome, type SpecPlace } from './one-spec.js'
import { expandTemplates, hasTemplate, type Spec } from '../specfile/parse.js'
import { countPermutations } from './tester.js'

/** A spec file of the call: read, or the error reading it gave. */
export interface SpecItem {
  file: string
  spec?: Spec
  error?: unknown
}

/** Reads every spec (templates expanded to `n` sessions); alone, a spec that cannot be read is the call's error. */
export function readSpecs(files: string[], n: number): SpecItem[] {
  const multi = files.length > 1
  // Each spec is read first; in a call of several, a spec that cannot be read or parsed is that spec's error,
  // and the others run (as pg_regress goes on past a failed test).
  const items: SpecItem[] = []
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
  return items
}

/** How the call runs: the options that shape it. */
export interface SuiteOptions {
  keep: boolean
  /** Each spec in a guarded schema even where a database could be made (--schema). */
  schema: boolean
  /** --results: each transcript written to DIR/<name>.out. */
  results?: string
  connectTimeoutMs: number
  streaming: boolean
}

/**
 * Where the specs run: a database per spec on race's own server, and on a server of the user's when this role may
 * create one; else a schema per spec, its setup and teardown blocks guarded. Said on stderr when it is not pg_regress's
 * conditions, and on a terminal.
 */
async function placeOf(lab: PostgresLab, own: boolean, o: SuiteOptions): Promise<boolean> {
  const inDatabase = !o.schema && (own || (await mayCreateDatabase(lab)))
  if (own) return inDatabase
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
  return inDatabase
}

/** Every spec of the call on the open server (`own`: race's embedded one): each one's outcome, and where they ran. */
export async function runSpecs(lab: PostgresLab, own: boolean, items: SpecItem[], o: SuiteOptions): Promise<{ outcomes: Outcome[]; inDatabase: boolean }> {
  const multi = items.length > 1
  const inDatabase = await placeOf(lab, own, o)
  // The database race was given, on a server of the user's: when it is pg_regress's own (isolation_regression), a
  // spec that names that database runs in it, as isolationtester runs every spec there (one-spec.ts).
  const given = inDatabase && !own ? String((await lab.control`select pg_catalog.current_database() as d`)[0].d) : undefined
  const place: SpecPlace = { keep: o.keep, env: libpqEnv(), bounds: o, maxStepWaitMs: stepWait(lab.server.versionNum), streaming: o.streaming, inDatabase, own, given }
  const outcomes: Outcome[] = []
  const dbs = inDatabase ? await Databases.open(lab, own, o) : undefined
  // Databases being dropped while the next spec runs (on a shared server, where each has a name of its own).
  const pending: { p: Promise<string | undefined>; i: number }[] = []
  const write = (x: Outcome) => o.results !== undefined && fs.writeFileSync(path.join(o.results, `${x.name}.out`), Buffer.from(x.text, 'latin1'))
  for (const [i, item] of items.entries()) {
    const more = items.slice(i + 1).some((x) => x.spec)
    const x: Outcome = item.spec
      ? await runOne(lab, item.spec, dbs?.take(more), {
          ...place,
          reuse: more ? (d) => dbs?.handBack(d) : undefined,
          later: multi && !own ? (p) => pending.push({ p, i: outcomes.length }) : undefined,
        })
      : { file: item.file, name: specName(item.file), text: '', status: 'error', code: exitCodeOf(item.error), reason: oneLine(item.error), error: item.error, ms: 0 }
    if (!multi && x.error !== undefined) throw x.error
    if (x.status === 'error' && x.reason !== undefined) {
      // What race says about it is part of what the spec printed (as isolationtester's stderr is, for pg_regress).
      x.text += `race: ${x.reason}\n`
      if (o.streaming) process.stderr.write(`race: ${item.file}: ${x.reason}\n`)
    }
    outcomes.push(x)
    write(x)
  }
  await dbs?.dropSpare()
  // What a database dropped in the background left is its spec's error.
  for (const { p, i } of pending) {
    const left = await p
    const x = outcomes[i]
    if (!left || x.status === 'error') continue
    Object.assign(x, { status: 'error', code: 3, reason: left, error: new RunError(left), text: x.text + `race: ${left}\n` })
    if (o.streaming) process.stderr.write(`race: ${x.file}: ${left}\n`)
    write(x)
  }
  await dbs?.end()
  return { outcomes, inDatabase }
}

/** The specs' databases: made on a connection of their own beside the spec that runs, handed on when left fresh. */
class Databases {
  // A spec that leaves its database as fresh as it found it (its teardown dropped what its setup made: race
  // compares the database's catalogs with a fresh copy's) hands it to the next spec; any other is dropped.
  private spare: SpecDatabase | undefined
  // The next spec's database is made while a spec runs (on aux), so that a spec that needs a new one (its
  // predecessor did not leave its database fresh) does not wait for CREATE DATABASE. Not with --keep, where every
  // database made is a spec's to keep.
  private ahead: Promise<SpecDatabase> | undefined

  private constructor(
    private readonly lab: PostgresLab,
    private readonly own: boolean,
    private readonly keep: boolean,
    private readonly fileCopy: boolean,
    private readonly aux: ReturnType<typeof connect>,
    private readonly endAux: () => void,
  ) {}

  static async open(lab: PostgresLab, own: boolean, o: SuiteOptions): Promise<Databases> {
    const fileCopy = await fsyncOff(lab)
    // Databases are created and dropped on a connection of their own, beside the spec that runs.
    const aux = connect(lab.target, { connectTimeoutMs: o.connectTimeoutMs, applicationName: 'race spec databases' })
    const endAux = lab.context.onCleanup('connection for the spec databases', () => endQuietly(aux, 1))
    return new Databases(lab, own, o.keep, fileCopy, aux, endAux)
  }

  private make(): Promise<SpecDatabase> {
    const p = SpecDatabase.create(this.lab, { own: this.own, keep: this.keep, fileCopy: this.fileCopy, sql: this.aux })
    p.catch(() => {}) // awaited by the spec that takes it, whose error it then is
    return p
  }

  /** The database for the next spec (the spare, or one made ahead); `more`: a spec with a database of its own follows. */
  take(more: boolean): Promise<SpecDatabase> {
    let db: Promise<SpecDatabase>
    if (this.spare) db = Promise.resolve(this.spare)
    else {
      db = this.ahead ?? this.make()
      this.ahead = undefined
    }
    this.spare = undefined
    if (!this.ahead && !this.keep && more) this.ahead = this.make()
    return db
  }

  handBack(db: SpecDatabase): void {
    this.spare = db
  }

  /** Drops the spare and the database made ahead that no spec took. */
  async dropSpare(): Promise<void> {
    for (const d of [this.spare, await this.ahead?.catch(() => undefined)]) {
      if (!d) continue
      d.release()
      const left = await d.drop()
      if (left) process.stderr.write(`race: ${left}\n`)
    }
  }

  async end(): Promise<void> {
    this.endAux()
    await endQuietly(this.aux, 1)
  }
}

/**
 * --expected: each transcript compared with DIR/<name>.out or an alternate <name>_1.out ... (as pg_regress accepts):
 * ok or FAILED, and for each FAILED the differences from the closest expected file. Alone, a spec with no expected
 * file is bad input; in a call of several, that spec's error.
 */
export function compareExpected(outcomes: Outcome[], dir: string, multi: boolean): string[] {
  const diffs: string[] = []
  for (const x of outcomes) {
    if (x.status === 'error') continue
    const candidates = [`${x.name}.out`, ...Array.from({ length: 9 }, (_, i) => `${x.name}_${i + 1}.out`)].map((f) => path.join(dir, f)).filter((f) => fs.existsSync(f))
    if (!candidates.length) {
      if (!multi) throw new UsageError(`--expected ${dir} has no ${x.name}.out`)
      Object.assign(x, { status: 'error', code: 2, reason: `--expected ${dir} has no ${x.name}.out` })
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
  return diffs
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
