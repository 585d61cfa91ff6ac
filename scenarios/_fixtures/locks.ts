// What the advisory-lock scenarios of §2-§9 share: keys per trial, lock steps, and an `observations` table
// where a session writes down what only it can see (a try that returned false, the locks its backend holds),
// so that the invariant, which runs on the control connection afterwards, reads what really happened.
import { createHash } from 'node:crypto'
import { advisoryKey, type Rows, type StepCtx, type StepDef } from '../../src/scenario.js'

export const observations = `create table observations (
  seq     bigserial primary key,
  session text   not null,
  what    text   not null,
  n       bigint not null
)`

/** The trial's key in a namespace, as a SQL literal (a bigint: safe to inline). */
export function key(ns: string, ctx: Pick<StepCtx, 'user'>): string {
  return String(advisoryKey(ns, ctx.user))
}

/** A distinct, stable user id per session, for races between different users (§4: other-users). */
export function userOf(ctx: Pick<StepCtx, 'user' | 'session'>): string {
  const h = createHash('sha256').update(`${ctx.user}:${ctx.session}`).digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** `select <fn>(<key>)` on the trial's key in `ns`, shown with :key. */
export function lockStep(fn: string, ns: string, as?: string): StepDef {
  return {
    sql: `select ${fn}(:key) -- key = sha256('${ns}:' || :user)[0:8]`,
    run: (sql, ctx) => `select ${fn}(${key(ns, ctx)}::bigint)${as ? ` as ${as}` : ''}`,
  }
}

/** Writes `n` under `what` for this session; `expr` is SQL evaluated in the session (inside its transaction). */
export function observe(what: string, expr: (ctx: StepCtx) => string, display: string, as = 'n'): StepDef {
  return {
    sql: `insert into observations (session, what, n) values (:session, '${what}', ${display})`,
    run: (sql, ctx) =>
      `with ins as (insert into observations (session, what, n) select '${ctx.session}', '${what}', (${expr(ctx)}) returning n)
       select n as ${as} from ins`,
  }
}

/** Advisory locks this backend holds right now, per pg_locks. */
export const heldByMe = `select count(*) from pg_locks where locktype = 'advisory' and pid = pg_backend_pid() and granted`

/** Another connection asks: can I have the key? pg_try_advisory_lock, released again at once if it was granted. */
export function probe(what: string, ns: string): StepDef {
  return {
    sql: `select pg_try_advisory_lock(:key) -- free: got it (and unlocked it again at once)`,
    run: (sql, ctx) =>
      `with ins as (insert into observations (session, what, n)
         select '${ctx.session}', '${what}', a::int from (select pg_try_advisory_lock(${key(ns, ctx)}::bigint) as a) t returning n)
       select case when n = 1 then pg_advisory_unlock(${key(ns, ctx)}::bigint) else false end as free from ins`,
  }
}

/** Observations of a trial by `what`, the latest value of each. */
export function byWhat(rows: Rows): Record<string, number> {
  return Object.fromEntries(rows.map((r) => [String(r.what), Number(r.n)]))
}
