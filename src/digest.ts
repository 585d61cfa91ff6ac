// Which text a race was read from: the SHA-256 of a spec's or module's file, as loaded (load.ts, registry.ts). A sharded
// search's parts carry it in their --json, so explore:merge joins only parts of one race (explore/one-search.ts).
import { createHash } from 'node:crypto'
import type { Scenario } from './scenario.js'

const files = new WeakMap<Scenario, string>()

export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex')
}

/** Records the bytes `s` was read from (once, when its file is loaded). */
export function recordFile(s: Scenario, bytes: Buffer): Scenario {
  files.set(s, sha256(bytes))
  return s
}

/** `to`, a copy of `from` (judged by an oracle too), was read from the same file. */
export function carryDigest(from: Scenario, to: Scenario): void {
  const d = files.get(from)
  if (d) files.set(to, d)
}

/** The SHA-256 of the file `s` was loaded from, if it was loaded from a file. */
export function fileDigest(s: Scenario): string | undefined {
  return files.get(s)
}
