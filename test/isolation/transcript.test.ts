// race spec against the real isolationtester: every spec of conformance/specs on the test server (the embedded
// PostgreSQL 18, or DATABASE_URL), with the isolationtester of that server's version, transcripts compared byte
// for byte (stdout and stderr together).
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { conform, corpus, NATIVE, testerFor } from '../support/conformance.js'
import { useLab } from '../support/server.js'

const ctx = useLab()

test('race spec prints what isolationtester prints, for every spec of the corpus', async (t) => {
  const tester = testerFor(ctx.lab.server.versionNum)
  if (!tester) {
    t.skip(`no isolationtester for PostgreSQL ${ctx.lab.server.version} on this machine`)
    return
  }
  const names = corpus()
  assert.ok(names.length >= 40, `the corpus has ${names.length} specs`)
  const lines: string[] = []
  const r = await conform(
    { label: `test-${Math.floor(ctx.lab.server.versionNum / 10000)}`, url: ctx.server.url, tester, env: { LD_LIBRARY_PATH: path.join(NATIVE, 'lib') } },
    names,
    (l) => lines.push(l),
  )
  assert.deepEqual(r.different, [], lines.filter((l) => !l.includes(' identical')).join(''))
  assert.equal(r.same, names.length)
})
