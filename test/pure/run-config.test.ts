// run/config.ts: the one builder of a run's RunConfig (race run, race check and matrix, explore). What it decides
// for every caller: whose SQL the run is (a built-in's runs as race's own role, a user's file as the run's own), the
// bounds, and the defaults of one lockstep trial with nothing kept, which a caller's own fields replace.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RunContext } from '../../src/lifecycle.js'
import { plan } from '../../src/plan.js'
import { findScenario } from '../../src/registry.js'
import { runConfig } from '../../src/run/config.js'
import { defaultParams } from '../../src/scenario.js'
import { loadScenarioFile } from '../../src/load.js'
import { ROOT } from '../support/conformance.js'
import path from 'node:path'

const bounds = { stepTimeoutMs: 1234, connectTimeoutMs: 567 }

test('a built-in scenario runs as race own SQL; defaults: one lockstep trial, nothing kept', async () => {
  const s = await findScenario('advisory')
  const p = plan(s, { params: defaultParams(s), n: s.sessionCount.default, engine: 'postgres' })
  const ctx = new RunContext()
  const cfg = runConfig(ctx, p, bounds)
  assert.equal(cfg.ownSql, true)
  assert.equal(cfg.context, ctx)
  assert.equal(cfg.plan, p)
  assert.deepEqual([cfg.schedule, cfg.trials, cfg.keep, cfg.stepTimeoutMs, cfg.connectTimeoutMs], ['lockstep', 1, false, 1234, 567])
})

test("a user's spec file runs as the run's own role; the caller's schedule, trials and keep replace the defaults", async () => {
  const s = await loadScenarioFile(path.join(ROOT, 'examples', 'orders.spec'))
  const p = plan(s, { params: defaultParams(s), n: s.sessionCount.default, engine: 'postgres' })
  const cfg = runConfig(new RunContext(), p, bounds, { schedule: 'barrier', trials: 7, keep: true, user: 'u' })
  assert.equal(cfg.ownSql, false)
  assert.deepEqual([cfg.schedule, cfg.trials, cfg.keep, cfg.user], ['barrier', 7, true, 'u'])
})
