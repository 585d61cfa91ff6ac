// What the race explore tests share: its --json document, and one call through the CLI that checks every run
// schema it made is dropped.
import assert from 'node:assert/strict'
import type { Sql } from 'postgres'
import { race, schemasOf } from './server.js'

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
