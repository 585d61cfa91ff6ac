// The soundness harness in npm test (issue 38, item 5), second half: every kept case (test/soundness/cases/: each a
// race that once broke a property), checked as soundness.test.ts checks the slice, with more free-running trials so
// that a (b) break it once showed shows again.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { useServer, type TestServer } from '../support/server.js'
import { ROOT } from './check.js'
import { caseOfFile } from './generate.js'
import { check, sliceCases } from './shared.js'

const KEPT_TRIALS = 6
const KEPT = path.join(ROOT, 'test', 'soundness', 'cases')

let server: TestServer
let dir: string
before(async () => {
  server = await useServer()
  dir = await mkdtemp(path.join(ROOT, '.soundness-kept-'))
})
after(async () => {
  await rm(dir, { recursive: true, force: true })
  await server?.stop()
})

test('soundness: the kept cases (test/soundness/cases/)', { timeout: 15 * 60_000 }, async (t) => {
  const files = (await readdir(KEPT).catch(() => [] as string[])).filter((f) => f.endsWith('.spec') || f.endsWith('.race.mjs')).sort()
  // a kept case that is one of the slice's, as the generator draws it today, runs in soundness.test.ts
  const slice = new Map(sliceCases().map((c) => [c.text, c.file]))
  for (const f of files) {
    const c = caseOfFile(f, await readFile(path.join(KEPT, f), 'utf8'))
    const same = slice.get(withoutBreakLines(c.text))
    await t.test(`${c.file} (${c.features.join(', ')})`, same ? { skip: `the slice's ${same}, run in soundness.test.ts` } : {}, () => check(c, { url: server.url, trials: KEPT_TRIALS, dir }))
  }
})

/** A kept file's text without the lines that say what it broke (check.ts keptText): the case as generated. */
function withoutBreakLines(text: string): string {
  return text
    .split('\n')
    .filter((l) => !/^(#|\/\/) broke \((a|b)\): /.test(l))
    .join('\n')
}
