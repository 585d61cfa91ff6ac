// What a run refuses, or could not do, as facts: which bound, how many, which capability. The engine says what
// happened in its own plain words; the caller (a command, the API) may word it with its own options' names
// (RunConfig.word; the CLI's are commands/words.ts), since only it knows what the user typed.
import type { Engine, Scenario } from '../scenario.js'
import { RunError, UsageError } from '../errors.js'

export type Refusal =
  /** A scenario that runs only on a server race starts for it (Scenario.ownServer), given another server. */
  | { kind: 'own-server'; scenario: Pick<Scenario, 'id' | 'ownServer'> }
  /** More sessions than the server has room for: `n` asked, `free` connections left of `max`. */
  | { kind: 'room'; n: number; free: number; max: number }
  /** A barrier cannot start together sessions that take turns on one pooled connection (`pairs`: borrower, lender). */
  | { kind: 'barrier-shares'; scenario: string; pairs: [string, string][] }
  /** The server refused a session's connection: too many connections (53300); `message` is the server's. */
  | { kind: 'too-many-connections'; message: string }
  /** Two sessions came back on one backend: something in between pools them. */
  | { kind: 'shared-backend'; pids: number[]; engine: Engine }
  /** An application race cannot do this: launch step by step, sleep in a window, hold its locks, go through a pooler. */
  | { kind: 'application'; scenario: string; cannot: 'step' | 'window' | 'hold' | 'pool' }

/** The caller's words for a refusal; undefined: the engine's own. */
export type Words = (r: Refusal) => string | undefined

/** The error a refusal ends the run with: bad input (exit 2), or a run that could not be carried out (exit 3). */
export function refused(r: Refusal, words?: Words): UsageError | RunError {
  const message = words?.(r) ?? plainWords(r)
  return r.kind === 'too-many-connections' || r.kind === 'shared-backend' ? new RunError(message) : new UsageError(message)
}

/** What happened, naming no option of any caller. */
export function plainWords(r: Refusal): string {
  switch (r.kind) {
    case 'own-server':
      return `${r.scenario.id} ${r.scenario.ownServer?.why ?? 'needs a server of its own'}, so it runs only on race's own embedded server`
    case 'room':
      return `${r.n} sessions need ${r.n} connections, but the server has room for ${Math.max(0, r.free)} more (max_connections ${r.max})`
    case 'barrier-shares':
      return `${r.scenario}: sessions ${r.pairs.map(([a, b]) => `${a} and ${b}`).join(', ')} take turns on one pooled connection, which a barrier cannot start together`
    case 'too-many-connections':
      return `the server refused a connection: ${r.message} (53300 too_many_connections)`
    case 'shared-backend':
      return `two sessions share a backend (pids ${r.pids.join(', ')}): is a pooler in between?`
    case 'application':
      return `${r.scenario} is an application race: ${APPLICATION[r.cannot]}`
  }
}

const APPLICATION = {
  step: 'it cannot be run step by step (its steps are known only as the function sends them)',
  window: "it has no race point to sleep at; mark one in your code with ctx.point('check') and stand the barrier there (barrier: 'check')",
  hold: 'it cannot hold its locks for a look from outside',
  pool: "its sessions are the driver's own connections, not a pooler's clients",
} as const
