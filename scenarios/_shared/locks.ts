// What the advisory-lock scenarios of §2-§9 share: lock steps, and an `observations` table where a session
// writes down what only it can see (a try that returned false, the locks its backend holds), so that the
// invariant, which runs on the control connection afterwards, reads what really happened.
import { createHash } from 'node:crypto'
import type { BindCtx } from '../../src/scenario.js'

export const observations = `create table observations (
  seq     bigserial primary key,
  session text   not null,
  what    text   not null,
  n       bigint not null
)`

/** A distinct, stable user id per session, for races between different users (§4: other-users). */
export function userOf(ctx: Pick<BindCtx, 'user' | 'session'>): string {
  const h = createHash('sha256').update(`${ctx.user}:${ctx.session}`).digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** Writes the value of `expr` (SQL, evaluated in the session, inside its transaction) under `what`; returns it as `as`. */
export function observe(what: string, expr: string, as = 'n'): string {
  return `with ins as (insert into observations (session, what, n) select :session, '${what}', (${expr}) returning n)
select n as ${as} from ins`
}

/** Advisory locks this backend holds right now, per pg_locks. */
export const heldByMe = `select count(*) from pg_locks where locktype = 'advisory' and pid = pg_backend_pid() and granted`

/** Another connection asks: can I have the key? pg_try_advisory_lock, released again at once if it was granted. */
export function probe(what: string): string {
  return `with ins as (insert into observations (session, what, n)
             select :session, '${what}', got::int from (select pg_try_advisory_lock(:key) as got) t returning n)
select case when n = 1 then pg_advisory_unlock(:key) else false end as free from ins`
}
