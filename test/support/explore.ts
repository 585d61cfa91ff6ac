// What the race explore tests share: its --json document, one call through the CLI that checks every run schema it
// made is dropped, and a file's server, control connection and folder (useExploreServer).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, schemasOf, useServer, type TestServer } from './server.js'

/** race explore --json (the fields the tests read; outcomes and diverged are there for every kind of race). */
export interface Explored {
  mode: string
  steps: string
  complete: boolean
  orders: string
  n: number
  runs: number
  interleavings: number
  violating: number
  unknown: number
  groups: { key: string; held: boolean | null; count: number; lines: string[] }[]
  shortest: { line: string; switches: number; shrunk?: { from: string; runs: number } } | null
  replay: string | null
  every: { line: string; held: boolean | null; verdict: string; switches: number; outcomes: Record<string, string> }[]
  sample?: { size: number; seed: number; depth: number; steps: number; counted: number; probability: number }
  search?: string
  /** An application race: how its sessions ran (isolated: a worker each; shared: one process). */
  sessionsRan?: { mode: string; assumes: string }
  matched: boolean
  exitCode: number
  perSecond: number
  diverged: number
}

/** race explore <args> --json against `url`: exit code, the document, stderr; every run schema it made is gone. */
export async function exploreJson(url: string, admin: Sql, args: string[]): Promise<{ code: number | null; j: Explored; stderr: string }> {
  const r = await race(['explore', ...args, '--json'], { url, timeoutMs: 300_000 })
  assert.deepEqual(await schemasOf(admin, r.pid), [], 'every run schema is dropped')
  assert.ok(r.stdout.trim().startsWith('{'), r.stdout + r.stderr)
  return { code: r.code, j: JSON.parse(r.stdout) as Explored, stderr: r.stderr }
}

/** What useExploreServer gives a test file: read its fields inside tests (they are set in its before()). */
export interface ExploreServer {
  /** The file's server. */
  readonly url: string
  /** A control connection to it, to look at what race left behind. */
  readonly admin: Sql
  /** A temporary folder of the file's own, removed after its tests. */
  readonly dir: string
  /** race explore <args> --json against the file's server (exploreJson). */
  explore(args: string[]): ReturnType<typeof exploreJson>
}

/**
 * For a race explore test file: one server of its own, a control connection and a temporary folder (named after
 * `name`), made before its tests and gone after them.
 */
export function useExploreServer(name: string): ExploreServer {
  let server: TestServer | undefined
  let admin: Sql | undefined
  let dir: string | undefined
  before(async () => {
    server = await useServer()
    admin = postgres(server.url, { max: 1, onnotice: () => {} })
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `race-${name}-`))
  })
  after(async () => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
    await admin?.end()
    await server?.stop()
  })
  const set = <T>(x: T | undefined, what: string): T => {
    if (x === undefined) throw new Error(`useExploreServer: ${what} is read before the file's before() ran`)
    return x
  }
  return {
    get url() {
      return set(server, 'the server').url
    },
    get admin() {
      return set(admin, 'the control connection')
    },
    get dir() {
      return set(dir, 'the folder')
    },
    explore(args) {
      return exploreJson(set(server, 'the server').url, set(admin, 'the control connection'), args)
    },
  }
}

/**
 * An application race whose tree is larger than its first run promised (test/app/app-explore.test.ts says how): each
 * session inserts a row, counts the rows, and only when it sees 2 sends two more queries. --exhaustive: 470
 * interleavings, a --json document of about 290 kB (test/cli/pipe-output.test.ts).
 */
export const GROW_RACE = `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (k int)'],
  session: async (db, ctx) => {
    await db.query('insert into t values (' + Number(ctx.index) + ')')
    const { rows } = await db.query('select count(*)::int as n from t')
    if (rows[0].n > 1) for (let i = 0; i < 2; i++) await db.query('show search_path')
  },
  invariant: 'select count(*) = 2 from t',
  expect: 'held',
}
`
