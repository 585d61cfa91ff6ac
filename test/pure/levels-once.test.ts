// The isolation levels are declared once (src/levels.ts): one ordered list, one list per engine, one set of short
// names, one parser of a level's name and one refusal of READ UNCOMMITTED on PostgreSQL. The commands that take
// --isolation (run, explore, bench, matrix) read them from there; a second list or alias table in the source fails here.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { UsageError } from '../../src/errors.js'
import { LEVEL_ALIASES, LEVEL_ORDER, levelOf, levelsOn } from '../../src/levels.js'
import { parseLevels as benchLevels } from '../../src/commands/bench.js'
import { parseLevels as exploreLevels } from '../../src/explore/levels.js'
import { parseChoice } from '../../src/run/params.js'
import { sessionLevelParam, type Scenario } from '../../src/scenario.js'
import { ROOT } from '../support/conformance.js'

const withLevels = { id: 'x', params: sessionLevelParam() } as unknown as Scenario

test('the one parser: every spelling and short name of a level, and nothing else', () => {
  const cases: [string, string | undefined][] = [
    ['ru', 'read uncommitted'], ['rc', 'read committed'], ['rr', 'repeatable read'], ['s', 'serializable'], ['ser', 'serializable'],
    ['READ_COMMITTED', 'read committed'], [' repeatable-read ', 'repeatable read'], ['read  uncommitted', 'read uncommitted'], ['Serializable', 'serializable'],
    ['snapshot', undefined], ['r', undefined], ['', undefined], ['default', undefined],
  ]
  for (const [raw, want] of cases) assert.equal(levelOf(raw), want, raw)
  assert.deepEqual(Object.keys(LEVEL_ALIASES).sort(), ['rc', 'rr', 'ru', 's', 'ser'])
  assert.deepEqual(levelsOn('postgres'), ['read committed', 'repeatable read', 'serializable'])
  assert.deepEqual(levelsOn('mysql'), LEVEL_ORDER)
})

test('every command takes the same short names: bench, explore and a run flag agree on each level', () => {
  for (const [alias, level] of Object.entries(LEVEL_ALIASES)) {
    if (level === 'read uncommitted') continue
    assert.deepEqual(benchLevels(alias), [level], `bench ${alias}`)
    assert.deepEqual(exploreLevels(`${alias},${alias === 'rc' ? 'ser' : 'rc'}`, withLevels, 'postgres').includes(level), true, `explore ${alias}`)
    assert.equal(parseChoice('--isolation', alias, levelsOn('postgres')), level, `run ${alias}`)
  }
  // bench keeps what it took before: a repeat is one level, the order is RC, RR, SERIALIZABLE, empty items are skipped.
  assert.deepEqual(benchLevels('ser,rc,rc,'), ['read committed', 'serializable'])
  assert.deepEqual(benchLevels('rc,rr,serializable'), ['read committed', 'repeatable read', 'serializable'])
})

test('one refusal of READ UNCOMMITTED on PostgreSQL, in the same words from bench and explore, exit 2', () => {
  const refusal = (f: () => unknown) => {
    try {
      f()
    } catch (e) {
      assert.ok(e instanceof UsageError && e.exitCode === 2, String(e))
      return e.message
    }
    assert.fail('not refused')
  }
  const bench = refusal(() => benchLevels('rc,read_uncommitted'))
  const explore = refusal(() => exploreLevels('rc,read_uncommitted', withLevels, 'postgres'))
  assert.equal(bench, explore)
  assert.match(bench, /^--isolation 'read_uncommitted': PostgreSQL runs READ UNCOMMITTED as READ COMMITTED/)
  assert.equal(refusal(() => benchLevels('ru')), refusal(() => exploreLevels('ru,rc', withLevels, 'postgres')))
  // On InnoDB READ UNCOMMITTED is a level of its own.
  assert.deepEqual(exploreLevels('ru,rc', withLevels, 'mysql'), ['read uncommitted', 'read committed'])
})

test('no second list of levels or table of short names in the source', () => {
  const files = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name)
      return e.isDirectory() ? files(p) : e.name.endsWith('.ts') ? [p] : []
    })
  // Two levels side by side as string literals (a list), or a short name mapped to a level (an alias table).
  const list = /'read (?:un)?committed',\s*'(?:read committed|repeatable read|serializable)'/
  const aliases = /\b(?:rc|rr|ser|ru)\s*:\s*'(?:read|repeatable|serializable)/
  // src/ only: a scenario may name the few levels it checks (gap-lock's checks), or call its sessions rc and rr.
  const found = files(path.join(ROOT, 'src'))
    .filter((f) => path.relative(ROOT, f) !== path.join('src', 'levels.ts'))
    .filter((f) => {
      const text = fs.readFileSync(f, 'utf8')
      return list.test(text) || aliases.test(text)
    })
    .map((f) => path.relative(ROOT, f))
  assert.deepEqual(found, [], `level lists or alias tables outside src/levels.ts: ${found.join(', ')}`)
  // The check sees a list: src/levels.ts itself has one.
  assert.ok(list.test(fs.readFileSync(path.join(ROOT, 'src', 'levels.ts'), 'utf8')))
})
