// Each option of race run and race explore is declared once (src/run/options.ts RUN_OPTIONS, src/explore/options.ts
// EXPLORE_OPTIONS). These tests hold commander's options, the API's accepted names and docs/options.md to that
// declaration, and every option to a twin on the other side (or a reason it has none): an option added to commander
// by hand, to the API by hand, or to the declaration without the table regenerated fails here.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { test } from 'node:test'
import { Command, Option } from 'commander'
import { explore, run, RaceError } from '../../src/api.js'
import { registerExplore } from '../../src/commands/explore.js'
import { registerRun } from '../../src/commands/run.js'
import { registerSpec, SPEC_OWN } from '../../src/commands/spec.js'
import { registerBench, BENCH_OWN } from '../../src/commands/bench.js'
import { EXPLORE_OPTIONS } from '../../src/explore/options.js'
import { checkExplore, exploreBounds } from '../../src/explore/request.js'
import { RunContext } from '../../src/lifecycle.js'
import { UsageError } from '../../src/errors.js'
import { parseDuration } from '../../src/parse.js'
import { findScenario } from '../../src/registry.js'
import { apiNames, DATABASE_URL, CONNECT_TIMEOUT, RUN_OPTIONS, RUN_TIMEOUT, STEP_TIMEOUT, type Options } from '../../src/run/options.js'
import { NAMES } from '../../src/run/params.js'
import { OPTIONS_DOC, optionsDoc } from '../../scripts/options-doc.js'

const commands: [string, Options, (p: Command) => Command][] = [
  ['run', RUN_OPTIONS, (p) => registerRun(p, [], () => {}, new RunContext())],
  ['explore', EXPLORE_OPTIONS, (p) => registerExplore(p, [], () => {}, new RunContext())],
]

for (const [name, list, register] of commands) {
  test(`race ${name}: commander's options are the declared ones, in order, with their help and defaults (no scenario flags given)`, () => {
    const cmd = register(new Command('race'))
    const got = cmd.options.map((o) => ({ flag: o.flags, name: o.attributeName(), help: o.description, default: o.defaultValue as string | undefined }))
    const declared = list.filter((o) => o.flag).map((o) => ({ flag: o.flag!, name: o.name, help: o.help, default: o.default }))
    assert.deepEqual(got, declared)
  })

  test(`race ${name}: each declared option's name is its flag's (commander's attribute name), and names are unique`, () => {
    for (const o of list) if (o.flag) assert.equal(new Option(o.flag).attributeName(), o.name, o.flag)
    const names = list.map((o) => o.name)
    assert.deepEqual(names, [...new Set(names)])
  })

  test(`race ${name}: every option has a twin on the other side, or says why not`, () => {
    for (const o of list) {
      assert.ok(o.flag || o.apiOnly?.trim(), `${o.name}: no flag, and no apiOnly reason`)
      assert.ok(!(o.flag && o.apiOnly !== undefined), `${o.name}: a flag and apiOnly`)
      assert.ok(o.cliOnly === undefined || (o.cliOnly.trim() && o.flag && !o.alias), `${o.name}: cliOnly needs a reason and a flag, and has no API alias`)
    }
  })
}

test("race spec's and race bench's own options are the declared ones, in order, before the shared ones", () => {
  for (const [register, own] of [[(p: Command) => registerSpec(p, () => {}, new RunContext()), SPEC_OWN], [(p: Command) => registerBench(p, () => {}, new RunContext()), BENCH_OWN]] as const) {
    const cmd = register(new Command('race'))
    const got = cmd.options.slice(0, own.length + 1).map((o) => ({ flag: o.flags, name: o.attributeName(), help: o.description, default: o.defaultValue as string | undefined }))
    assert.deepEqual(got, [...(own as Options).map((o) => ({ flag: o.flag!, name: o.name, help: o.help, default: o.default })), { flag: DATABASE_URL.flag, name: DATABASE_URL.name, help: DATABASE_URL.help, default: undefined }])
  }
})

/** The names an API call says it takes, from its refusal of an unknown one. */
async function taken(call: () => Promise<unknown>): Promise<string[]> {
  const e = await call().then(
    () => assert.fail('an unknown option ran'),
    (e: unknown) => e,
  )
  assert.ok(e instanceof RaceError && e.exitCode === 2, String(e))
  const m = /unknown option 'bogus': it takes (.*)$/.exec(e.message)
  assert.ok(m, e.message)
  return m[1].split(', ')
}

test("run() and explore() take exactly the declared API names, and refuse any other (exit 2)", async () => {
  const api = (list: Options) => apiNames(list).filter((n) => !list.some((o) => o.alias === n))
  assert.deepEqual(await taken(() => run('lost-update', { bogus: 1 } as never)), api(RUN_OPTIONS))
  assert.deepEqual(await taken(() => explore('lost-update', { bogus: 1 } as never)), api(EXPLORE_OPTIONS))
})

test('docs/options.md is what scripts/options-doc.ts generates from the declarations (npm run readme rewrites it)', () => {
  assert.ok(fs.existsSync(OPTIONS_DOC), 'docs/options.md: run npm run readme')
  const committed = fs.readFileSync(OPTIONS_DOC, 'utf8').split('\n')
  const generated = optionsDoc().split('\n')
  const at = committed.findIndex((l, i) => l !== generated[i])
  assert.ok(at < 0 && committed.length === generated.length, `docs/options.md differs at line ${at + 1}:\n  committed: ${committed[at]}\n  generated: ${generated[at]}\nrun npm run readme`)
  // Every option is a row of its command's table.
  const text = generated.join('\n')
  for (const o of [...RUN_OPTIONS, ...EXPLORE_OPTIONS] as Options) assert.ok(text.includes(o.flag ? `| \`${o.flag.replace(/\|/g, '\\|')}\` |` : `| \`${o.name}\` |`), o.flag ?? o.name)
})

test("explore()'s bounds are race explore's and run()'s: the same names and defaults; the earlier Ms names still work", () => {
  const declared = { connectTimeoutMs: parseDuration('d', CONNECT_TIMEOUT.default), stepTimeoutMs: parseDuration('d', STEP_TIMEOUT.default), runTimeoutMs: parseDuration('d', RUN_TIMEOUT.default) }
  assert.deepEqual(exploreBounds({}), declared)
  assert.equal(declared.runTimeoutMs, 5 * 60_000)
  assert.deepEqual(exploreBounds({ connectTimeout: '7s', stepTimeout: 300, runTimeout: '30m' }), { connectTimeoutMs: 7000, stepTimeoutMs: 300, runTimeoutMs: 30 * 60_000 })
  assert.deepEqual(exploreBounds({ connectTimeoutMs: 7000, stepTimeoutMs: 300, runTimeoutMs: 30 * 60_000 }), { connectTimeoutMs: 7000, stepTimeoutMs: 300, runTimeoutMs: 30 * 60_000 })
  assert.throws(() => exploreBounds({ runTimeout: '1m', runTimeoutMs: 1000 }), /runTimeoutMs is the earlier name of runTimeout/)
  assert.throws(() => exploreBounds({ stepTimeout: 'soon' }), (e: unknown) => e instanceof UsageError && e.message.startsWith('stepTimeout '))
})

test("each whole option's declared range is the one race explore's check holds (its ends taken, one past refused)", async () => {
  const s = await findScenario('lost-update')
  for (const o of EXPLORE_OPTIONS) {
    if (o.kind !== 'whole' || !('min' in o)) continue
    const at = (v: number) => () => checkExplore(s, { [o.name]: v }, NAMES)
    assert.doesNotThrow(at(o.min), `${o.name} ${o.min}`)
    if (o.max < Number.MAX_SAFE_INTEGER) assert.doesNotThrow(at(o.max), `${o.name} ${o.max}`)
    const refused = (e: unknown) => e instanceof UsageError && e.message.startsWith(`${o.name} must be`)
    assert.throws(at(o.min - 1), refused, `${o.name} ${o.min - 1}`)
    if (o.max < Number.MAX_SAFE_INTEGER) assert.throws(at(o.max + 1), refused, `${o.name} ${o.max + 1}`)
  }
})
