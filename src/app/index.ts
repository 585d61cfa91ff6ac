// Racing the application's own code: the helper a race module's default export is made with, and what an
// explorer needs to drive one trial step by step (a chooser).
export { defineAppRace, isAppRace } from './scenario.js'
export type { AppCtx, AppDriver, AppCtxBase, AppDriverCtx, AppDriverType, AppDriverTypes, AppOpenCtx, AppRace, Chooser, Moment, PoolLike, ReadyStep } from './types.js'
