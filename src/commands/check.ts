// race check [ids...]: every scenario (and its documented variants) in lockstep, one summary table.
// Exit 0 only if every one behaved exactly as documented: the CI smoke check.
import type { Command } from 'commander'
import type { RunContext } from '../lifecycle.js'
import { plain } from '../report/color.js'
import { printCheck } from '../report/check.js'
import { checkWritable } from '../report/ci.js'
import { caseName, casesFor, placeCases, runChecks, type Case, type CheckRequest } from '../run/check.js'
import { engineFor, withLab } from '../run/lab.js'
import { parseBounds } from '../run/params.js'
import { requirePooler } from '../run/pooler.js'
import { addCiOptions, addTargetOptions, eachPg, type CiOptions, type TargetOptions } from './common.js'
import { addPoolerOptions, parsePool, type PoolerOptions } from './pool-options.js'
import { cliWords } from './words.js'

export function registerCheck(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('check')
    .description('every scenario in lockstep against one database: exit 0 only if each behaves exactly as documented')
    .argument('[scenarios...]', 'scenario ids (default: all), .spec files or .mjs modules')
  addTargetOptions(cmd, ctx, { keep: false, pg: true })
  addCiOptions(cmd, 'case')
  addPoolerOptions(cmd, { config: false })
  cmd.action(async (ids: string[], o: TargetOptions & CiOptions & PoolerOptions, self: Command) => exit(await eachPg(ctx, o, () => checkCommand(ctx, ids, o, self))))
  cmd.addHelpText(
    'after',
    `
Each case compares the whole documented outcome: the verdict, how every session
ended (committed, rejected with its reason, or failed with which SQLSTATE), and
the isolation level each session really ran at.

Examples:
  $ race check
  $ race check --database-url postgres://app@db:5432/app --json
  $ race check --junit race-junit.xml      (CI: one testcase per case)
  $ race check advisory unique-index
  $ race check --pooler pgbouncer          (each case through a PgBouncer of its own)`,
  )
  return cmd
}

export async function checkCommand(ctx: RunContext, ids: string[], o: TargetOptions & CiOptions & PoolerOptions, cmd?: Command): Promise<number> {
  const engine = engineFor(o.databaseUrl)
  const through = cmd ? parsePool(o, cmd, engine) : undefined
  requirePooler(through)
  const request: CheckRequest = { ids, engine, through, databaseUrl: o.databaseUrl }
  const cases = await casesFor(request)
  const bounds = parseBounds(o)
  const junit = o.junit === undefined ? undefined : checkWritable('--junit', o.junit)
  const placed = placeCases(request, cases)
  const progress = !o.json && process.stderr.isTTY
  return withLab(ctx, o.databaseUrl, bounds, async (lab, target, via) => {
    const onCase = progress ? (k: Case) => process.stderr.write(`\r\x1b[2Kchecking ${k.scenario.id} (${caseName(k)})...`) : undefined
    const result = await runChecks(ctx, lab, via, request, placed, { bounds, word: cliWords, onCase })
    if (progress) process.stderr.write('\r\x1b[2K')
    return printCheck(result, { lab, target, json: o.json, junit, github: o.github, through, style: ctx.style ?? plain })
  }, undefined, { pooled: through?.kind === 'external' })
}
