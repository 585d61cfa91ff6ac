// The package's public entry: what a user's own scenario module imports (`import { defineScenario } from 'racelab'`).
// The same contract the built-in scenarios use; `race run ./my-race.mjs` loads it and checks it first.
export {
  defineScenario,
  step,
  replicate,
  anomaly,
  prevented,
  serialized,
  clean,
  keyBind,
  advisoryKey,
  defaultParams,
  levelParam,
} from './scenario.js'
export { LEVELS } from './levels.js'
export type { Level } from './levels.js'
export type {
  Scenario,
  SessionSpec,
  StepDef,
  Step,
  Invariant,
  Documented,
  DocEntry,
  EngineDoc,
  Params,
  ParamSpec,
  Bind,
  BindCtx,
  Seen,
  Who,
  Verdict,
  Schedule,
  Source,
  Row,
  Rows,
} from './scenario.js'
export { checkScenario } from './plan.js'
// Running a race from a test runner (node:test, vitest, jest): run() resolves to `race run --json`'s document.
export { run, RaceError } from './api.js'
export type { RunOptions, RunResult, ScenarioRef } from './api.js'
// Every interleaving of a race's steps, each judged (race explore).
export { explore } from './api.js'
export type { ExploreOptions } from './api.js'
export type { ExploreResult, Interleaving, Group } from './explore/result.js'
// A counterexample file (race explore --save, race run --save) run again (race replay).
export { replay } from './api.js'
export type { ReplayResult } from './api.js'
export type { ReplayOptions, ReplayOutcome } from './evidence/replay.js'
export type { Counterexample, Judged } from './evidence/format.js'
// Races of the application's own code: its function, unchanged, on N real connections, every query a step.
export { defineAppRace, isAppRace } from './app/index.js'
export type { AppRace, AppCtx, AppDriver, AppCtxBase, AppDriverCtx, AppDriverType, AppDriverTypes, AppOpenCtx, Chooser, Moment, PoolLike, ReadyStep } from './app/index.js'
