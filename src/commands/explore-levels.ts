// race explore <scenario> --isolation all|rc,rr,ser: the exploration once per level, one row per level, and the
// weakest level at which every interleaving held (explore/levels.ts).
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import { plain } from '../report/color.js'
import { summaries } from '../registry.js'
import type { Engine, Scenario } from '../scenario.js'
import { FLAGS } from '../run/params.js'
import { checkExplore, refuseOneSession } from '../explore/request.js'
import { executeExplore } from '../explore/execute.js'
import { parseLevels } from '../explore/levels.js'
import { renderLevels } from '../report/explore-levels.js'
import { cliWords } from './words.js'
import { scenarioParams, self } from './common.js'
import { parseBounds } from '../run/params.js'
import type { CliFlags } from '../run/options.js'
import type { EXPLORE_OPTIONS } from '../explore/options.js'

/** race explore's flags (commands/explore.ts ExploreCommandOptions), typed from their one declaration. */
type ExploreCommandOptions = CliFlags<typeof EXPLORE_OPTIONS> & { [param: string]: unknown }

export async function exploreLevelsCommand(ctx: RunContext, id: string, scenario: Scenario, engine: Engine, o: ExploreCommandOptions, cmd: Command): Promise<number> {
  const levels = parseLevels(String(o.isolation), scenario, engine)
  if (o.acceptSample !== undefined) throw new UsageError('--accept-sample passes a held sample of one level: with --isolation all (or a list) a sampled level is never called safe; give one level')
  if (o.expect !== undefined) throw new UsageError('--expect judges one level: with --isolation all (or a list) the result is each level\'s row and the weakest safe level (weakestSafe in --json); leave --expect out, or give one level')
  // The other params as given; each level sets isolation.
  const params = scenarioParams(scenario, cmd, { ...o, isolation: undefined }, await summaries(), engine)
  const checked = checkExplore(scenario, o, FLAGS)
  refuseOneSession(checked.n)
  const bounds = parseBounds(o)
  const tty = process.stderr.isTTY
  let at = ''
  const onProgress = (x: { runs: number; violating: number; planned: number | null; exact: boolean; phase: 'explore' | 'shrink' }) => {
    if (!tty) return
    const of = x.planned === null ? '' : x.exact ? `/${x.planned}` : ` (of at most ${x.planned})`
    process.stderr.write(`\r\x1b[2K${at}: ${x.phase === 'shrink' ? 'shrinking' : 'exploring'}: ${x.runs}${of} runs, ${x.violating} violating`)
  }
  const onLevel = (level: string) => {
    at = level
  }
  const request = { scenario, engine, params, checked, bounds, databaseUrl: o.databaseUrl, name: id, onProgress, word: cliWords, levels, onLevel }
  return executeExplore(ctx, request, (r) => {
    if (tty) process.stderr.write('\r\x1b[2K')
    if (o.json) {
      const { explorations, ...rest } = r
      const doc = o.all ? { ...rest, explorations: explorations.map(({ every, ...x }) => ({ ...x, every })) } : rest
      process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
    } else process.stdout.write(renderLevels(ctx.style ?? plain, r, self()) + '\n')
    if (r.exitCode === 3) {
      const open = r.levels.filter((x) => x.violating === 0 && !x.complete).map((x) => x.isolation)
      for (const x of r.levels) for (const l of x.notFired ?? []) process.stderr.write(`race: at ${x.isolation}: ${l}\n`)
      process.stderr.write(`race: could not decide whether every interleaving holds at ${open.join(', ')}: run race explore --isolation <level> there to see the undecided or unrun interleavings\n`)
    }
    return r.exitCode
  })
}
