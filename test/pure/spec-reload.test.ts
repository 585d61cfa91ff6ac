// A spec file edited while the process runs (a watching test runner, the API in a long-lived process) is read again:
// race loaded each file once per process and kept running the old text (issue 40, item 5).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { loadScenarioFile } from '../../src/load.js'

const spec = (rule: string) => `setup { create table t (v int) }
invariant "${rule}" { select count(*) <= 1 from t }
session s1
step a1 { insert into t values (1) }
session s2
step a2 { insert into t values (2) }
`

test('a spec file that changed is read again; one that did not is the same scenario', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-reload-'))
  try {
    const file = path.join(dir, 'edit.spec')
    fs.writeFileSync(file, spec('one row at most'))
    const first = await loadScenarioFile(file)
    assert.equal(await loadScenarioFile(file), first)
    fs.writeFileSync(file, spec('never two rows'))
    // a later modification time, as an editor's save gives (the same millisecond could not be told apart)
    const later = new Date(fs.statSync(file).mtimeMs + 2000)
    fs.utimesSync(file, later, later)
    const second = await loadScenarioFile(file)
    assert.notEqual(second, first)
    assert.match(JSON.stringify(second), /never two rows/)
    assert.doesNotMatch(JSON.stringify(first), /never two rows/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
