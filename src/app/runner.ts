// An application race's trial runner (engine/runner.ts): the engine's run makes the schema and runs the setup on
// control; each trial here is src/app's (trial.ts), the user's functions raced query by query on connections of their
// own driver. The scenario made from a race module names this runner (scenario.ts, ScenarioKind), so the engine never
// imports src/app.
import type { TrialRunnerFactory } from '../engine/runner.js'
import { refused } from '../engine/refusals.js'
import { UsageError } from '../errors.js'
import { DEFAULT_LEVEL } from '../scenario.js'
import type { AppConn } from './drivers.js'
import { parseAppPermutation, type Fault } from './labels.js'
import { appTrial, closeKept, orderEntries } from './trial.js'
import { Host, isolatedTrial } from './isolated.js'
import type { AppRace } from './types.js'

/**
 * o.isolated: every session's function runs in a worker thread of its own (app/isolated.ts), for trials driven by a
 * chooser (race explore); a trial without one (race run's schedules) runs in race's own process, as without it.
 */
export function appTrials(race: AppRace, file?: string, o: { inject?: readonly Fault[]; isolated?: boolean } = {}): TrialRunnerFactory {
  return (ctx) => {
    const { lab, cfg } = ctx
    const { plan } = cfg
    const scenario = plan.scenario
    const n = plan.variant.n
    const cannot = cfg.beforeStep ? 'step' : plan.windowMs ? 'window' : cfg.holdMs ? 'hold' : plan.variant.pool ? 'pool' : undefined
    if (cannot) throw refused({ kind: 'application', scenario: scenario.id, cannot }, cfg.word)
    // A bound that is no bound (run() from code: the CLI's --step-timeout is parsed before): refused, not ignored.
    for (const k of ['stepTimeoutMs', 'connectTimeoutMs'] as const) {
      const v = cfg[k]
      if (!(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new UsageError(`${k} is ${JSON.stringify(v) ?? String(v)}: give a positive number of milliseconds`)
    }
    const names = plan.sessions.map((s) => s.name)
    const level = String(plan.variant.params.isolation ?? DEFAULT_LEVEL)
    const isolation = level === DEFAULT_LEVEL ? undefined : level
    const own = Object.keys(race.connection ?? {}).find((k) => /^(default_transaction_isolation|transaction_isolation|tx_isolation)$/i.test(k))
    if (isolation && own) throw new UsageError(`${scenario.id}: its race module's connection sets ${own}, and --isolation asks for ${isolation}: leave one of them out`)
    // A bad permutation is refused before any schema or connection exists.
    if (cfg.schedule === 'permutation') parseAppPermutation(cfg.permutation ?? '', names)
    // The sessions' connections are kept across trials (reset between them) unless told not to.
    const kept = cfg.freshConnections ? undefined : ([] as AppConn[])
    let opened = 0
    let hosts: Host[] | undefined
    return {
      // A trial opens (or takes back) its sessions' connections itself, once control has run the setup.
      connectsAhead: false,
      open: () => {},
      async run({ space, user, chooser }) {
        if (o.isolated && chooser && file) {
          hosts ??= names.map((name, i) => new Host(file, name, i, n, scenario.id))
          const facts = await isolatedTrial(lab, {
            hosts,
            n,
            chooser,
            scenarioId: scenario.id,
            file,
            schema: space,
            user,
            stepTimeoutMs: cfg.stepTimeoutMs,
            connectTimeoutMs: cfg.connectTimeoutMs,
            fresh: Boolean(cfg.freshConnections),
            evaluate: () => ctx.evaluate(user, () => undefined),
            signal: ctx.signal,
            whenAborted: ctx.whenAborted,
            describeStuck: ctx.describeStuck,
            ...(isolation ? { isolation } : {}),
            ...(o.inject?.length ? { inject: o.inject } : {}),
          })
          opened += n
          return { facts, ran: orderEntries(facts.order, names) }
        }
        const facts = await appTrial(lab, {
          race,
          file,
          n,
          schedule: cfg.schedule,
          permutation: cfg.permutation,
          chooser,
          scenarioId: scenario.id,
          schema: space,
          user,
          stepTimeoutMs: cfg.stepTimeoutMs,
          connectTimeoutMs: cfg.connectTimeoutMs,
          evaluate: () => ctx.evaluate(user, () => undefined),
          signal: ctx.signal,
          whenAborted: ctx.whenAborted,
          describeStuck: ctx.describeStuck,
          ...(kept ? { kept } : {}),
          ...(isolation ? { isolation } : {}),
          ...(o.inject?.length && chooser ? { inject: o.inject } : {}),
        })
        opened += n
        // With a chooser, the order back as entries (s1.q3: session 0, step 2).
        return { facts, ...(chooser ? { ran: orderEntries(facts.order, names) } : {}) }
      },
      // Between trials the kept connections are idle: they are closed when the run ends, aborted or not.
      abort: () => {},
      async close(_failed, drop) {
        if (kept) await closeKept(kept)
        if (hosts) await Promise.all(hosts.map((h) => h.close()))
        return drop()
      },
      get connections() {
        return { opened, kept: 0 }
      },
    }
  }
}
