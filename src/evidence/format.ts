// A counterexample file (race explore --save, race run --save; race replay reads it): one failing schedule and what
// its outcome depends on, as JSON, versioned by its "format" line. docs/counterexamples.md describes every field.
import fs from 'node:fs'
import path from 'node:path'
import { UsageError } from '../errors.js'
import type { Params, Verdict } from '../scenario.js'

export const FORMAT = 'racelab-counterexample/1'

/** How a schedule ended, in the terms replay compares: the same for a run and an explored interleaving. */
export interface Judged {
  /** The invariant held (true), was violated (false), or could not be read (null). */
  held: boolean | null
  verdict: Verdict
  /** What the invariant's query saw. */
  observed: string
  /** How each session ended: committed, rejected: <reason>, a SQLSTATE, lost, timeout. */
  outcomes: Record<string, string>
  /** The code under test failed (judge/failure.ts), or a session did not complete where every one must. */
  failure?: string
}

export interface Counterexample {
  format: typeof FORMAT
  /** The command that found it: explore (its shortest violating interleaving, else the shortest failure) or run. */
  from: 'explore' | 'run'
  /** When it was written (ISO 8601, UTC). */
  saved: string
  race: {
    /** The scenario's id. */
    id: string
    /** A built-in scenario's id, or the race file's path relative to this file's folder ('/' separated). */
    ref: string
    builtIn: boolean
    /** application (a function's queries), or declared (a spec's or scenario's SQL steps). */
    kind: 'application' | 'declared'
    /** SHA-256 of the race file's bytes (a built-in's: of racelab's compiled scenario module). */
    sha256: string
  }
  /** The local modules the race file imports, transitively (evidence/modules.ts), relative to this file's folder. */
  modules: { path: string; sha256: string }[]
  /** racelab's version that saved it. */
  racelab: string
  /** The server it ran on, as race read it, and how race reached it (embedded, or the URL with its password masked). */
  server: { product: string; version: string; versionNum: number | null; target: string }
  /** The level asked for (the race's isolation param, if it has one) and the level each session's transaction ran at. */
  isolation: { asked: string | null; sessions: Record<string, string | null> }
  /** --inject as given (explore), and the faults injected in this schedule (also marked in it: s1.q4!40001). */
  faults: { inject: string | null; injected: { fault: string; at: string }[] }
  /** Sessions. */
  n: number
  /** The race's params, every one (defaults included), as the run used them. */
  params: Params
  /** The permutation `race run --schedule` takes: the order to replay. */
  schedule: string
  /** The line that runs it again by hand. */
  replay: string
  judged: Judged
  /** What --json gave for it: the explored interleaving's entry, or race run --json's document for this trial. */
  outcome: Record<string, unknown>
}

const bad = (file: string, why: string) => new UsageError(`${file}: not a counterexample file race can replay (${why})`)

/** Reads and checks a counterexample file; anything that is not one is a UsageError of one line (exit 2). */
export function readCounterexample(file: string): Counterexample {
  let text: string
  try {
    const st = fs.statSync(file)
    if (!st.isFile()) throw bad(file, 'not a regular file')
    if (st.size > 64 * 1024 * 1024) throw bad(file, 'larger than 64 MB')
    text = fs.readFileSync(file, 'utf8')
  } catch (e) {
    if (e instanceof UsageError) throw e
    throw new UsageError(`${file}: no such file (race replay takes a file race explore --save or race run --save wrote)`)
  }
  let x: unknown
  try {
    x = JSON.parse(text)
  } catch (e) {
    throw bad(file, `not JSON: ${(e as Error).message.split('\n')[0]}`)
  }
  if (typeof x !== 'object' || x === null || Array.isArray(x)) throw bad(file, 'not a JSON object')
  const o = x as Record<string, unknown>
  if (typeof o.format !== 'string') throw bad(file, 'no "format" field')
  if (o.format !== FORMAT) {
    const newer = /^racelab-counterexample\/\d+$/.test(o.format)
    throw bad(file, `its format is ${JSON.stringify(o.format).slice(0, 60)}, this racelab reads ${FORMAT}${newer ? ': a newer racelab wrote it' : ''}`)
  }
  const need = (cond: boolean, field: string) => {
    if (!cond) throw bad(file, `"${field}" is missing or malformed`)
  }
  const obj = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v)
  const race = o.race as Record<string, unknown>
  need(obj(race), 'race')
  need(typeof race.id === 'string' && typeof race.ref === 'string' && race.ref !== '' && typeof race.builtIn === 'boolean' && typeof race.sha256 === 'string', 'race')
  need(race.kind === 'application' || race.kind === 'declared', 'race.kind')
  need(Array.isArray(o.modules) && (o.modules as unknown[]).every((m) => obj(m) && typeof (m as Record<string, unknown>).path === 'string' && typeof (m as Record<string, unknown>).sha256 === 'string'), 'modules')
  need(typeof o.schedule === 'string' && o.schedule.trim() !== '', 'schedule')
  need(Number.isInteger(o.n) && (o.n as number) >= 1, 'n')
  need(obj(o.params), 'params')
  need(o.from === 'explore' || o.from === 'run', 'from')
  const j = o.judged as Record<string, unknown>
  need(obj(j) && (j.held === true || j.held === false || j.held === null) && typeof j.verdict === 'string' && typeof j.observed === 'string' && obj(j.outcomes), 'judged')
  need(obj(o.server) && typeof (o.server as Record<string, unknown>).version === 'string', 'server')
  need(obj(o.faults) && Array.isArray((o.faults as Record<string, unknown>).injected), 'faults')
  need(obj(o.isolation), 'isolation')
  need(typeof o.racelab === 'string', 'racelab')
  return o as unknown as Counterexample
}

/** A path as the file records it: relative to the counterexample's folder, '/' separated. */
export function recorded(cxFile: string, abs: string): string {
  return path.relative(path.dirname(path.resolve(cxFile)), abs).split(path.sep).join('/')
}

/** A recorded path back to an absolute one. */
export function located(cxFile: string, rel: string): string {
  return path.resolve(path.dirname(path.resolve(cxFile)), ...rel.split('/'))
}

/** Writes it (a new file, or over an old one), pretty-printed, with a final newline. */
export function writeCounterexample(file: string, cx: Counterexample): void {
  fs.writeFileSync(file, JSON.stringify(cx, null, 2) + '\n')
}

/** --save's file, checked before anything runs: its folder exists, and it is not a folder itself. */
export function checkSavePath(file: unknown, flag = '--save'): string {
  if (typeof file !== 'string' || file.trim() === '') throw new UsageError(`${flag} takes a file name, e.g. ${flag} cx.json`)
  const dir = path.dirname(path.resolve(file))
  let ok = false
  try {
    ok = fs.statSync(dir).isDirectory()
  } catch {
    /* no such folder */
  }
  if (!ok) throw new UsageError(`${flag} ${file}: no folder ${dir} to write it in`)
  try {
    if (fs.statSync(file).isDirectory()) throw new UsageError(`${flag} ${file} is a folder: give a file name, e.g. ${path.join(file, 'cx.json')}`)
  } catch (e) {
    if (e instanceof UsageError) throw e
  }
  return file
}
