// The model world the reduced search's pure tests stand in for the server with (test/pure/reduce.test.ts,
// reduce-jobs.test.ts): sessions read and write shared cells into their own registers, take and release a lock (a
// step that waits, or that wakes a waiter, is 'all', as the engine says for a real server); each step's footprint is
// what it read and wrote.
import assert from 'node:assert/strict'
import type { Pick } from '../../src/explore/enumerate.js'
import type { Footprint } from '../../src/explore/reduce.js'

/** r:x (read cell x into the register), w:x (write register + 1 into x), lock, unlock, nop. */
export type Op = string

/** One run of the world under `pick`: the sessions launched in order, each step's footprint, the final state. */
export function runWorld(pick: Pick, sessions: Op[][], step: (fp: Footprint) => void): { launched: number[]; fps: Footprint[]; final: string } {
  const cells = new Map<string, number>()
  const reg = sessions.map(() => 0)
  const next = sessions.map(() => 0)
  let holder = -1
  const waiting: number[] = []
  const launched: number[] = []
  const fps: Footprint[] = []
  for (;;) {
    const ready = sessions.map((_, i) => i).filter((i) => !waiting.includes(i) && next[i] < sessions[i].length)
    if (!ready.length) break
    const i = pick(ready)
    assert.ok(ready.includes(i))
    launched.push(i)
    const [kind, x] = sessions[i][next[i]++].split(':')
    let fp: Footprint = { reads: [], writes: [] }
    if (kind === 'r') {
      reg[i] = reg[i] * 10 + (cells.get(x) ?? 0)
      fp = { reads: [x], writes: [] }
    } else if (kind === 'w') {
      cells.set(x, reg[i] + 1)
      fp = { reads: [], writes: [x] }
    } else if (kind === 'lock') {
      if (holder < 0) {
        holder = i
        fp = { reads: [], writes: ['lock'] }
      } else {
        waiting.push(i)
        fp = 'all'
      }
    } else if (kind === 'unlock') {
      fp = { reads: [], writes: ['lock'] }
      holder = -1
      const w = waiting.shift()
      if (w !== undefined) {
        holder = w
        fp = 'all'
      }
    }
    fps.push(fp)
    step(fp)
  }
  return { launched, fps, final: `${[...cells].sort().join(',')} | ${reg.join(',')}` }
}
