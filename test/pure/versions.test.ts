// --pg: which major versions of race's embedded PostgreSQL a command runs on; and race matrix's comparison of
// the grids of several versions (the cells that happened differently).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UsageError } from '../../src/errors.js'
import { BUILDS, BUNDLED, parsePg, SUPPORTED } from '../../src/servers/versions.js'
import { versionDifferences } from '../../src/commands/matrix.js'

test('--pg: one version, ranges and lists, ascending and each once', () => {
  assert.deepEqual(parsePg('16'), [16])
  assert.deepEqual(parsePg('13-18'), [13, 14, 15, 16, 17, 18])
  assert.deepEqual(parsePg('18,15'), [15, 18])
  assert.deepEqual(parsePg('13-15, 18,14'), [13, 14, 15, 18])
  assert.deepEqual(parsePg('17-17'), [17])
})

test('--pg: anything but majors 13 to 18 is a UsageError naming what is wrong and what race runs', () => {
  for (const [bad, why] of [
    ['12', /no embedded PostgreSQL 12/],
    ['19', /no embedded PostgreSQL 19/],
    ['13-19', /no embedded PostgreSQL 19/],
    ['18-13', /runs backwards/],
    ['16.2', /not a major version/],
    ['', /empty item/],
    ['15,', /empty item/],
    ['latest', /not a major version/],
    ['1e1', /not a major version/],
  ] as const) {
    assert.throws(
      () => parsePg(bad),
      (e: unknown) => e instanceof UsageError && why.test(e.message) && /13 to 18/.test(e.message),
      bad,
    )
  }
})

test('--pg: every supported major but the installed one has a pinned build of that major', () => {
  for (const v of SUPPORTED) {
    if (v === BUNDLED) assert.equal(BUILDS[v], undefined)
    else assert.equal(Number(BUILDS[v].split('.')[0]), v, `the build pinned for ${v} is ${BUILDS[v]}`)
  }
})

test('race matrix --pg: the cells whose outcome differs between versions, and only those', () => {
  const grid = (pg: number, ws: string, lu: string) => ({
    pg,
    rows: [
      { scenario: { id: 'write-skew' }, cells: [{ level: 'serializable' as const, cell: { happened: ws } }] },
      { scenario: { id: 'lost-update' }, cells: [{ level: 'repeatable read' as const, cell: { happened: lu } }] },
    ],
  })
  assert.deepEqual(versionDifferences([grid(13, 'anomaly', 'prevented 40001'), grid(14, 'anomaly', 'prevented 40001')]), [])
  assert.deepEqual(versionDifferences([grid(13, 'anomaly', 'prevented 40001'), grid(16, 'prevented 40001', 'prevented 40001')]), [
    { scenario: 'write-skew', level: 'serializable', happened: { '13': 'anomaly', '16': 'prevented 40001' } },
  ])
})
