// docs/scenarios.md, the scenario reference, is generated from the scenario files by scripts/scenarios-doc.ts:
// the committed file must be exactly what the script writes today, so that a scenario edited (its story, a flag,
// a documented outcome) without regenerating the reference fails here. npm run readme rewrites it.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { test } from 'node:test'
import { SCENARIOS_DOC, scenariosDoc } from '../../scripts/scenarios-doc.js'
import { scenarioIds, scenarios } from '../../src/registry.js'

test('docs/scenarios.md is what scripts/scenarios-doc.ts generates from the scenario files (npm run readme rewrites it)', async () => {
  assert.ok(fs.existsSync(SCENARIOS_DOC), 'docs/scenarios.md: run npm run readme')
  const committed = fs.readFileSync(SCENARIOS_DOC, 'utf8')
  const generated = await scenariosDoc()
  if (committed !== generated) {
    const a = committed.split('\n')
    const b = generated.split('\n')
    const at = a.findIndex((l, i) => l !== b[i])
    assert.fail(`docs/scenarios.md differs from the scenario files at line ${at + 1}:\n  committed: ${a[at] ?? '(nothing)'}\n  generated: ${b[at] ?? '(nothing)'}\nrun npm run readme`)
  }
})

test('the reference has a section for every built-in scenario, with its story and where it runs', async () => {
  const text = await scenariosDoc()
  const ids = scenarioIds()
  assert.ok(ids.length > 10)
  for (const s of await scenarios()) {
    const at = text.indexOf(`### \`${s.id}\`\n`)
    assert.ok(at >= 0, `${s.id} has a section`)
    const next = text.indexOf('\n### ', at + 1)
    const body = text.slice(at, next < 0 ? undefined : next)
    assert.ok(body.includes(s.story[0]), `${s.id}: its story`)
    assert.match(body, /PostgreSQL/, `${s.id}: PostgreSQL, run or not`)
    assert.match(body, /MySQL\/MariaDB \(InnoDB\)/, `${s.id}: InnoDB, run or not`)
    for (const p of Object.values(s.params)) assert.ok(body.includes(`\`${p.flag.replace(/\|/g, '\\|')}\``), `${s.id}: its flag ${p.flag}`)
  }
})
