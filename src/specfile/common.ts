// What race run and race check need to know of a scenario from a user's file (a spec or a module), apart from
// specfile/scenario.ts so that running a built-in scenario does not load the spec parser.
import type { Scenario } from '../scenario.js'
import { RunError, UsageError } from '../errors.js'
import { conditionName } from '../db/sqlstate.js'

/** SQLSTATE the guard of a spec's setup block raises (class RX: race; see guard.ts). */
export const GUARD_SQLSTATE = 'RX001'

/** Whether a scenario came from a user's file (a spec or a module). */
export function isFileScenario(s: Scenario): boolean {
  return s.source.article === 'file'
}

/**
 * An error that escaped the engine for a spec scenario (only the control connection's statements can: the
 * setup blocks), as one line: a refused block is bad input, any other failure could not run.
 */
export function specFailure(s: Scenario, e: unknown): unknown {
  if (!isFileScenario(s)) return e
  const code = (e as { code?: string })?.code
  const message = (e as Error)?.message ?? String(e)
  if (code === GUARD_SQLSTATE) return new UsageError(message)
  // 25001: VACUUM, CREATE INDEX CONCURRENTLY, ALTER SYSTEM... cannot run in the one transaction race checks a block in.
  if (code === '25001') return new UsageError(`${s.source.section}: a setup block runs what cannot run inside a transaction (${message}): race run checks each setup block in one transaction; leave it out (race spec runs it, when it names only race's own tables); nothing was changed`)
  // 42501 from the server: the run role (db/run-role.ts) may not do it, which outside race's schema is the rule.
  if (code === '42501') return new UsageError(`${s.source.section}: a setup block was refused by the server: ${message} (42501 insufficient_privilege): the spec's SQL runs as a role that owns only race's schema, and a spec may change only what it creates there (see docs/spec-setup-rules.md); nothing outside it was changed`)
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return new RunError(`${s.source.section}: a setup block failed: ${message} (${code})`)
  // MySQL/MariaDB: 'SQLSTATE/errno' (db/mysql.ts), the statement named (runQuery). Access denied (a table, a
  // database, a column, a privilege): the run user (db/mysql.ts) may not do it, which outside the run's database is the rule.
  const my = typeof code === 'string' ? /^[0-9A-Z]{5}\/(\d+)$/.exec(code) : null
  if (my) {
    const stmt = (e as { statement?: unknown }).statement
    const what = `${message} (${code}${conditionName(code) ? ' ' + conditionName(code) : ''})${typeof stmt === 'string' ? `, in: ${oneLine(stmt)}` : ''}`
    if (['1142', '1143', '1044', '1227'].includes(my[1])) {
      return new UsageError(`${s.source.section}: a setup statement was refused by the server: ${what}: the run's SQL runs as a user granted only on the run's database (see docs/mysql.md)`)
    }
    return new RunError(`${s.source.section}: a setup statement failed: ${what}`)
  }
  return e
}

/** What a scenario's `expects` makes of --expect when the user gives none. */
export function expectsOverride(s: Scenario): 'held' | 'violated' | undefined {
  return s.expects === 'held' || s.expects === 'violated' ? s.expects : undefined
}

/**
 * A permutation written as a spec writes one (step names only, `rx1 wy1 c1`) made into race's session.step
 * form, when every name is the step of exactly one session; any other text is returned unchanged.
 */
export function qualifyPermutation(p: { sessions: readonly { name: string; steps: readonly { name: string }[] }[] }, text: string): string {
  const toks = text.split(/[\s,]+/).filter(Boolean)
  if (!toks.length || toks.some((t) => t.includes('.')) || ['barrier', 'lockstep', 'serial'].includes(text)) return text
  const owners = (name: string) => p.sessions.filter((s) => s.steps.some((x) => x.name === name))
  if (!toks.every((t) => owners(t.replace(/\(.*\)$/, '')).length === 1)) return text
  const body = toks.map((t) => `${owners(t.replace(/\(.*\)$/, ''))[0].name}.${t.replace(/\(\*\)$/, '')}`)
  // A spec session's setup and teardown blocks are steps here: first and last, as isolationtester runs them.
  const named = new Set(toks)
  const head = p.sessions.filter((s) => s.steps[0]?.name === 'setup' && !named.has('setup')).map((s) => `${s.name}.setup`)
  const tail = p.sessions.filter((s) => s.steps.length > 1 && s.steps[s.steps.length - 1].name === 'teardown' && !named.has('teardown')).map((s) => `${s.name}.teardown`)
  return [...head, ...body, ...tail].join(' ')
}

/** A statement on one line, cut at 200 characters. */
function oneLine(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim()
  return t.length > 200 ? `${t.slice(0, 199)}…` : t
}
