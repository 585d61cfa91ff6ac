// The run role: on PostgreSQL a run's own SQL (its setup, its sessions, its invariant) runs as a role race creates
// for the run and drops after it, which owns the run's schema and nothing else: LOGIN, and none of SUPERUSER,
// CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS, nor membership in any role. What a scenario, a spec or an
// application race may then do outside its schema is what PostgreSQL lets PUBLIC do, whatever its SQL is spelled
// like: the text guard (specfile/guard.ts) stays as the first line, with the clearer message.
// Sessions and the run's control-side connection log in as the role (not SET ROLE, which the user's SQL could
// RESET). The role is marked (COMMENT ON ROLE, which only its creator may write) with the run's control backend,
// so that the run after a killed one drops it by its oid (PostgresLab.reap). Where the server refuses the role (no
// CREATEROLE, pg_hba), the PostgresLab says so in one line and runs as before.
import { randomBytes } from 'node:crypto'
import type { Sql } from 'postgres'
import { connect, endQuietly, firstQuery, RUN_SQL_PARAMS } from './connect.js'
import type { Target } from './target.js'

export interface RunRole {
  name: string
  oid: number
  /** The target as the role (its URL carries the role and its password). */
  target: Target
  /** The run's control-side connection as the role: setup and invariant run here. */
  sql: Sql
  /** Its backend, to cancel a setup statement held up. */
  pid: number
}

/** What the PostgresLab gives makeRunRole. */
interface Maker {
  target: Target
  control: Sql
  connectTimeoutMs: number
  roleMark(keep: boolean): object
}

/** Drops a run role by its oid with everything it owns in this database (its schema first of all): statements. */
export function dropRoleSql(oid: number): string {
  return `do $race_drop$ declare r text := (select pg_catalog.quote_ident(rolname) from pg_catalog.pg_roles where oid = ${Number(oid)}); begin if r is not null then execute 'drop owned by ' || r || ' cascade'; execute 'drop role ' || r; end if; end $race_drop$`
}

/** A SQL string literal. */
function lit(s: string): string {
  return `'${s.replace(/'/g, "''")}'`
}

/** The target's URL with another user and password. */
function asRole(target: Target, name: string, password: string): Target | undefined {
  if (!target.url) return undefined
  try {
    const u = new URL(target.url)
    u.username = encodeURIComponent(name)
    u.password = encodeURIComponent(password)
    return { ...target, url: u.toString(), label: `${target.label} (as ${name})` }
  } catch {
    return undefined
  }
}

/** Creates the run role of the run in `space`, marked, and logs in as it; or says why there is none. */
export async function makeRunRole(lab: Maker, space: string): Promise<RunRole | { why: string } | undefined> {
  if (process.env.RACE_RUN_ROLE === '0') return { why: 'RACE_RUN_ROLE=0' }
  const name = `race_r_${randomBytes(6).toString('hex')}`
  const password = randomBytes(24).toString('base64url')
  const target = asRole(lab.target, name, password)
  if (!target) return { why: 'the target names no URL race could log in to as a run role (PG* variables)' }
  let oid: number
  try {
    // One transaction: never a role without its mark. Its oid is read by the list's last statement (one round trip).
    // Reading: what race's control role may read, the run may read ("reading other schemas is fine"): a superuser's
    // run role is a member of pg_read_all_data (PostgreSQL 14+), which reads and writes nothing else.
    const made = lab.control.unsafe(`create role "${name}" login nosuperuser nocreaterole nocreatedb noreplication nobypassrls inherit password ${lit(password)};
      comment on role "${name}" is ${lit('race:' + JSON.stringify(lab.roleMark(false)))};
      do $race_settings$ declare s record; begin
        -- The control role's own settings (ALTER ROLE ... SET: a lock_timeout, a default isolation level) are what
        -- the run is about: its run role gets them, in this database and everywhere, as the server would apply them.
        for s in select pg_catalog.split_part(c, '=', 1) as k, pg_catalog.substr(c, pg_catalog.strpos(c, '=') + 1) as v, d.setdatabase <> 0 as here
                   from pg_catalog.pg_db_role_setting d, pg_catalog.unnest(d.setconfig) c
                  where d.setrole = (select oid from pg_catalog.pg_roles where rolname = current_user)
                    and d.setdatabase in (0, (select oid from pg_catalog.pg_database where datname = pg_catalog.current_database()))
                  order by d.setdatabase loop
          execute pg_catalog.format('alter role %I %s set %I = %L', '${name}', case when s.here then pg_catalog.format('in database %I', pg_catalog.current_database()) else '' end, s.k, s.v);
        end loop; end $race_settings$;
      do $race_read$ begin
        if (select rolsuper from pg_catalog.pg_roles where rolname = current_user) and pg_catalog.current_setting('server_version_num')::int >= 140000
        then execute 'grant pg_read_all_data to ${name}'; end if; end $race_read$;
      select oid::int as oid from pg_catalog.pg_roles where rolname = ${lit(name)}`)
    const results = (await made) as unknown as Record<string, unknown>[][]
    const [r] = results[results.length - 1]
    oid = Number(r.oid)
  } catch (e) {
    const code = (e as { code?: string }).code
    if (code === '42501') return { why: 'this role may not create the run role race runs as (no CREATEROLE)' }
    throw e
  }
  // Its array types (those made since control fetched them) are asked with its first statement: one round trip.
  const sql = connect(target, { connectTimeoutMs: lab.connectTimeoutMs, applicationName: 'race setup', schema: space, params: RUN_SQL_PARAMS, typesFrom: lab.control, typesWithFirst: true })
  try {
    const [r] = await firstQuery(sql, 'select pg_catalog.pg_backend_pid() as pid')
    return { name, oid, target, sql, pid: Number(r.pid) }
  } catch (e) {
    await endQuietly(sql, 0)
    await lab.control.unsafe(dropRoleSql(oid)).catch(() => {})
    const code = (e as { code?: string }).code
    return { why: `the server refused a login as the run role ${name} (${code ?? ''} ${(e as Error).message}; pg_hba.conf?)` }
  }
}
