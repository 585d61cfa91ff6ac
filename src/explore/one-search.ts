// explore:merge joins the parts of one search only: the same race (its text, not only its name: two files named
// alike are two races), run by the same racelab against the same server version. A part that differs, or that does
// not say (its --json made by a racelab before the parts said), is bad input: one line naming what differs.
import { UsageError } from '../errors.js'

/** What a part of a search says about what searched what (ExploreResult's fields). */
interface Part {
  scenario: string
  digest?: string
  racelab?: string
  server?: { version?: string; product?: string }
}

export function assertOneSearch(parts: readonly Part[], names?: readonly string[]): void {
  const name = (i: number) => names?.[i] ?? `part ${i + 1}`
  const what: { label: string; of: (p: Part) => string | undefined; show: (v: string) => string }[] = [
    { label: "the race's text (SHA-256 of its file)", of: (p) => p.digest, show: (v) => v.slice(0, 12) },
    { label: 'the racelab version', of: (p) => p.racelab, show: (v) => v },
    { label: 'the server version', of: (p) => (p.server?.version === undefined ? undefined : `${p.server.product ?? 'PostgreSQL'} ${p.server.version}`), show: (v) => v },
  ]
  for (const w of what) {
    const missing = parts.findIndex((p) => typeof w.of(p) !== 'string')
    if (missing >= 0) throw new UsageError(`merge: ${name(missing)} does not say ${w.label} (made by an older racelab?): run every part again with this one`)
  }
  const first = parts[0]
  for (const w of what) {
    const i = parts.findIndex((p) => w.of(p) !== w.of(first))
    if (i < 0) continue
    const same = first.scenario === parts[i].scenario ? `both ${first.scenario}` : `${first.scenario} and ${parts[i].scenario}`
    throw new UsageError(`merge: ${name(i)} is not a part of the same search as ${name(0)}: ${w.label} ${w.show(w.of(parts[i])!)} against ${w.show(w.of(first)!)} (${same})`)
  }
}
