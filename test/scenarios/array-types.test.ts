// A session's connection does not fetch the server's array types itself: it takes the ones the PostgresLab's control
// connection fetched at login, and asks only for those created since (connect.ts typesFrom). What a step returns
// and what it sends must be exactly what a connection that fetched them itself (postgres.js's default) sees,
// including an array of a type the run's own setup created after control connected.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import postgres from 'postgres'
import { openLab, useLab } from '../support/server.js'

const ctx = useLab()

test("a session parses and sends arrays as a connection that fetched its own types does, also of a type created after control connected", async () => {
  const lab = ctx.lab
  const schema = await lab.createSchema('array-types', false)
  const own = postgres(ctx.server.url, { max: 1, onnotice: () => {}, connection: { search_path: schema.name } })
  try {
    // Created after the PostgresLab's control connection logged in (and fetched its types): only the small query knows it.
    await lab.control.unsafe(`create type ${schema.quoted}.mood as enum ('calm', 'tense'); create table ${schema.quoted}.t (id int primary key, m ${schema.quoted}.mood)`)
    const session = await lab.openSession({ applicationName: 'race array-types test', space: schema.name, params: {}, connectTimeoutMs: 5000, stepTimeoutMs: 10_000 })
    try {
      const reads = [
        [`select array[1, 2, null]::int[] as i, '{t,f}'::bool[] as b, array['x y', null, '"q"']::text[] as s, '{{1,2},{3,4}}'::int[] as nested`, []],
        [`select '{calm,tense}'::mood[] as moods, array[row(1, 'calm')::t] as rows, '{"(1,calm)"}'::t[] as typed`, []],
        [`select $1::int[] as i, $2::text[] as s, $3::mood[] as m`, [[3, 4], ['a', 'b c'], ['tense']]],
        [`select '{"2024-01-02 03:04:05+00"}'::timestamptz[] as at, '{1.5,2}'::float8[] as f, '{"{\\"a\\":1}"}'::jsonb[] as j`, []],
      ] as const
      for (const [sql, args] of reads) {
        const mine = await session.step(sql, [...args], false).result
        const theirs = await own.unsafe(sql, [...args] as never[])
        assert.deepEqual([...mine].map((r) => ({ ...r })), [...theirs].map((r) => ({ ...r })), sql)
      }
      // Not a string: parsed as an array, as postgres.js's own fetch parses it.
      const [row] = await session.step(`select '{calm,tense}'::mood[] as moods`, [], false).result
      assert.deepEqual(row.moods, ['calm', 'tense'])
    } finally {
      await session.close()
    }
  } finally {
    await own.end({ timeout: 1 })
    schema.release()
    assert.equal(await schema.drop(), undefined)
  }
})

/** The parsers table a postgres.js connection reads (not in its public types): a shared one's prototype is its source's. */
const parsersOf = (sql: unknown) => (sql as { options: { parsers: object } }).options.parsers

test("a run's sessions take their array types from that run's own control connection, not from another run's opened (or ended) since", async () => {
  const lab = ctx.lab
  const schema = await lab.createSchema('array-types-owner', false)
  // A built-in scenario's schema: no run role, so its sessions connect to the PostgresLab's own target (as most runs do).
  lab.trustSpace(schema.name)
  // Another run in the same process, on the same server, opened after this one: its control connection is its own.
  const other = await openLab(ctx.server.url)
  const source = async () => {
    const session = await lab.openSession({ applicationName: 'race array-types test', space: schema.name, params: {}, connectTimeoutMs: 5000, stepTimeoutMs: 10_000 })
    try {
      await session.step('select 1', [], false).result
      return Object.getPrototypeOf(parsersOf((session as unknown as { sql: unknown }).sql))
    } finally {
      await session.close()
    }
  }
  try {
    assert.ok(Object.keys(parsersOf(lab.control)).length, 'the control connection fetched its array types')
    assert.equal(await source(), parsersOf(lab.control), "while the other run is open: this run's control")
    await other.close()
    assert.equal(await source(), parsersOf(lab.control), "after the other run ended: this run's control, not the other's closed one")
  } finally {
    await other.close().catch(() => {})
    schema.release()
    assert.equal(await schema.drop(), undefined)
  }
})
