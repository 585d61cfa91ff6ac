// The simplest order of a class of equivalent orders (fewest switches between sessions): how a violation found by
// the reduced search is shown. Pure (test/pure/reduce.test.ts).
import { conflicts, type Footprint } from './reduce.js'

/**
 * The order with the fewest switches between sessions among those equivalent to `launched` (the same steps, each pair
 * of conflicting steps the same way round, each session's own order kept): it ends as `launched` did, so a violation
 * found by the reduced search is shown as the simplest order of its class. A search over how far each session has
 * got, fewest switches first; undefined when that is more than `limit` states. `sessionOf`: as Reduced's (a step
 * with an injected fault is its session's: ordered with its other steps).
 */
export function fewestSwitches(launched: readonly number[], footprints: readonly (Footprint | undefined)[], dependent: (a: Footprint, b: Footprint) => boolean = conflicts, limit = 200_000, sessionOf: (choice: number) => number = (x) => x): number[] | undefined {
  const n = launched.length
  const sessions = [...new Set(launched)].sort((a, b) => a - b)
  const slot = new Map(sessions.map((s, i) => [s, i]))
  const fp = (i: number): Footprint => footprints[i] ?? 'all'
  // Each session's steps (indices into launched), and for each step how many steps of every session must come first.
  const own = sessions.map((s) => launched.flatMap((x, i) => (x === s ? [i] : [])))
  const need = launched.map((_, j) => {
    const row = sessions.map(() => 0)
    for (let i = 0; i < j; i++) if (sessionOf(launched[i]) === sessionOf(launched[j]) || dependent(fp(i), fp(j))) row[slot.get(launched[i])!] = Math.max(row[slot.get(launched[i])!], own[slot.get(launched[i])!].indexOf(i) + 1)
    return row
  })
  // Transitive needs follow: a step can go once its direct needs are met, and those were met under the same rule.
  const key = (c: number[], last: number) => `${c.join(',')}|${last}`
  type State = { c: number[]; last: number; order: number[]; cost: number }
  // 0-1 breadth first: staying with the session costs nothing, switching costs one; a state is settled when first taken out.
  const deque: State[] = [{ c: sessions.map(() => 0), last: -1, order: [], cost: 0 }]
  const settled = new Set<string>()
  while (deque.length) {
    const st = deque.shift()!
    const id = key(st.c, st.last)
    if (settled.has(id)) continue
    settled.add(id)
    if (settled.size > limit) return undefined
    if (st.order.length === n) return st.order
    for (let k = 0; k < sessions.length; k++) {
      const at = st.c[k]
      if (at >= own[k].length) continue
      const j = own[k][at]
      if (!need[j].every((m, q) => st.c[q] >= m)) continue
      const c = [...st.c]
      c[k]++
      if (settled.has(key(c, k))) continue
      const free = k === st.last || st.last < 0
      const s2 = { c, last: k, order: [...st.order, sessions[k]], cost: st.cost + (free ? 0 : 1) }
      if (free) deque.unshift(s2)
      else deque.push(s2)
    }
  }
  return undefined
}
