// Faults, part 2: the control connection killed mid-run, and the server going away mid-run (a fast
// shutdown of a server the test started; the embedded default's postmaster killed). Through the real CLI.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Sql } from 'postgres'
import { advisoryKey } from '../src/scenario.js'
import { useServer, type TestServer } from './helpers.js'
import { backendsOf, oneCleanLine, outside, raceSchemas, session, terminate } from './faultkit.js'
import { spawnRace, until } from './procs.js'

let server: TestServer
let sql: Sql
before(async () => {
  server = await useServer()
  sql = outside(server.url)
})
after(async () => {
  await sql?.end({ timeout: 1 })
  await server?.stop()
})

test('the control connection killed mid-run: exit 3, one line; sessions ended; the schema dropped on a fresh connection', async () => {
  const user = '44444444-2a1b-4c3d-8e9f-0a1b2c3d4e5f'
  const key = String(advisoryKey('setup_request', user))
  const holder = outside(server.url, 'race-test holder')
  const schemasBefore = await raceSchemas(sql)
  try {
    await holder`select pg_advisory_lock(${key}::bigint)`
    const child = spawnRace(['run', 'advisory', '--user', user, '--lock-timeout', '30s', '--step-timeout', '30s'], server.url)
    const bs = await until('both sessions waiting for the key', async () => {
      const b = await backendsOf(sql, child)
      return ['s1', 's2'].every((n) => session(b, n)?.waitEvent === 'advisory') && b.some((x) => x.name === 'race control') ? b : undefined
    })
    const control = bs.find((b) => b.name === 'race control')!
    await terminate(sql, control.pid)
    const r = await child.done
    assert.equal(r.code, 3, r.stdout + r.stderr)
    if (process.env.RACE_TEST_SHOW) console.log(r.stderr)
    oneCleanLine(r.stderr, /lost the control connection .*\(57P01 admin_shutdown|lost the control connection/)
    // Still holding the key: the sessions' backends would wait for it forever had race not ended them.
    const left = await sql`select pid from pg_stat_activity where pid = any(${bs.map((b) => b.pid)}::int[])`
    assert.deepEqual(left.map((x) => x.pid), [], 'no backend of the run is left')
    assert.deepEqual((await raceSchemas(sql)).filter((s) => !schemasBefore.includes(s)), [], 'schema dropped')
  } finally {
    await holder.end({ timeout: 1 })
  }
})
