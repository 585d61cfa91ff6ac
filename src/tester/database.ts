// `race spec` in pg_regress's role: each spec runs in a database of its own, created as pg_isolation_regress
// creates its database (from template0, with the same ALTER DATABASE ... SET settings), and dropped afterwards
// WITH (FORCE), whatever the spec did inside it (a damaged catalog included). Roles are cluster-wide: the roles
// a spec created and its teardown did not drop are dropped after the database.
//
// On a server of the user's, the database is marked with its owner (COMMENT ON DATABASE, the same mark race
// writes on its schemas, see db/postgres.ts), so that the next run drops what a killed run left, and never a database
// whose run is still alive.
import { randomBytes } from 'node:crypto'
import type { Sql } from 'postgres'
import { literal, type PostgresLab } from '../db/postgres.js'
import { conditionName } from '../db/sqlstate.js'
import { PgConn } from './pgconn.js'
import { RunError } from '../errors.js'
import type { Spec } from '../specfile/parse.js'

/** The name pg_isolation_regress gives its database (a spec's database on race's own server, where no other run can be). */
export const REGRESS_DATABASE = 'isolation_regression'

/**
 * Whether a spec's SQL names pg_regress's database (PostgreSQL's intra-grant-inplace-db grants on it), so that it
 * can run only in a database of that name. Read from the text, as a spec's author wrote it.
 */
export function namesRegressDatabase(spec: Spec): boolean {
  const re = new RegExp(`\\b${REGRESS_DATABASE}\\b`, 'i')
  const sql = [...spec.setup.map((b) => b.sql), spec.teardown?.sql, ...spec.sessions.flatMap((s) => [s.setup, s.teardown, ...s.steps.map((st) => st.sql)])]
  return sql.some((t) => t !== undefined && re.test(t))
}

/** Where a database race spec creates on a shared server is named: race_spec_<hex>. */
const PREFIX = 'race_spec_'

/** The settings pg_regress gives the database it creates (create_database in pg_regress.c). */
export const REGRESS_DATABASE_SETTINGS: readonly [string, string][] = [
  ['lc_messages', 'C'],
  ['lc_monetary', 'C'],
  ['lc_numeric', 'C'],
  ['lc_time', 'C'],
  ['bytea_output', 'hex'],
  ['timezone_abbreviations', 'Default'],
]

/** The server settings pg_regress's temporary instance has that a spec can observe (max_prepared_transactions). */
export const REGRESS_SERVER_SETTINGS: Record<string, string> = { max_prepared_transactions: '2' }

function ident(s: string): string {
  return `"${s.replace(/"/g, '""')}"`
}

/** Whether this role may create a database (superuser or CREATEDB) on a server that has DROP DATABASE ... WITH (FORCE). */
export async function mayCreateDatabase(lab: PostgresLab): Promise<boolean> {
  if (lab.server.versionNum < 130000) return false
  const [r] = await lab.control`select rolsuper or rolcreatedb as may from pg_catalog.pg_roles where rolname = current_user`
  return Boolean(r?.may)
}

/** Whether the server runs with fsync off (race's own server does): then copying files is cheaper than WAL-logging them. */
export async function fsyncOff(lab: PostgresLab): Promise<boolean> {
  const [r] = await lab.control`select current_setting('fsync') = 'off' as off`
  return Boolean(r?.off)
}

/** The roles that exist now (name by oid). */
async function roles(control: Sql): Promise<Map<number, string>> {
  const rows = await control`select oid::int as oid, rolname from pg_catalog.pg_roles`
  return new Map(rows.map((r) => [Number(r.oid), String(r.rolname)]))
}

/**
 * The cluster's shared state, by object identity (oid, or the settings row's keys), each with a digest of its row
 * and words for it: roles, role memberships, databases, role and database settings, tablespaces, parameter grants.
 * What a spec may change beyond its database; compared before and after (SpecDatabase.clusterChanges).
 */
async function cluster(control: Sql, versionNum: number): Promise<Map<string, { d: string; what: string }>> {
  const rows = await control.unsafe(`
    select 'role:' || oid as k, md5(t::text) as d, format('role %I', rolname) as what from pg_catalog.pg_roles t
     where not (rolname like 'race\\_r\\_%' and coalesce(pg_catalog.shobj_description(oid, 'pg_authid'), '') like 'race:{%')
    union all select 'database:' || oid, md5(datname || datdba || coalesce(datacl::text, '') || datallowconn || datconnlimit), format('database %I', datname) from pg_catalog.pg_database
     where not (datname like 'race\\_spec\\_%' and coalesce(pg_catalog.shobj_description(oid, 'pg_database'), '') like 'race:{%')
    union all select 'setting:' || setdatabase || '/' || setrole, md5(t::text),
      case when setrole = 0 then format('the settings of database %I (alter database ... set)', (select datname from pg_catalog.pg_database where oid = setdatabase))
           else format('the settings of role %I%s (alter role ... set)', (select rolname from pg_catalog.pg_roles where oid = setrole),
                       case when setdatabase = 0 then '' else format(' in database %I', (select datname from pg_catalog.pg_database where oid = setdatabase)) end) end
      from pg_catalog.pg_db_role_setting t
    union all select 'member:' || roleid || '/' || member, md5(t::text), format('membership of role %I in %I', (select rolname from pg_catalog.pg_roles where oid = member), (select rolname from pg_catalog.pg_roles where oid = roleid)) from pg_catalog.pg_auth_members t
    union all select 'tablespace:' || oid, md5(t::text), format('tablespace %I', spcname) from pg_catalog.pg_tablespace t
    ${versionNum >= 150000 ? `union all select 'parameter:' || oid, md5(t::text), format('the grants on parameter %s', parname) from pg_catalog.pg_parameter_acl t` : ''}`)
  return new Map(rows.map((r) => [String(r.k), { d: String(r.d), what: String(r.what) }]))
}

/**
 * The roles created since `before` (by oid) that objects or grants in database `datname` depend on (pg_shdepend):
 * the spec's, by identity. A role another client created meanwhile has nothing in the spec's database.
 */
async function rolesOfDatabase(sql: Sql, datname: string, before: Iterable<number>): Promise<number[]> {
  const rows = await sql`
      select r.oid::int as oid from pg_catalog.pg_roles r
       where r.oid <> all(${[...before]}::oid[])
         and exists (select 1 from pg_catalog.pg_shdepend d
                      where d.refclassid = 'pg_catalog.pg_authid'::regclass and d.refobjid = r.oid
                        and d.dbid = (select oid from pg_catalog.pg_database where datname = ${datname}))`
  return rows.map((r) => Number(r.oid))
}

/** Drops a role by its oid (whatever it is called now); the name it had, or undefined if it is gone. */
async function dropRoleByOid(sql: Sql, oid: number): Promise<void> {
  await sql.unsafe(`do $race$ declare r text := (select pg_catalog.quote_ident(rolname) from pg_catalog.pg_roles where oid = ${Number(oid)});
    begin if r is not null then execute 'drop role ' || r; end if; end $race$`)
}

/** What a fresh copy of template0 holds, per server (see SpecDatabase.state). */
const baselines = new WeakMap<PostgresLab, string>()
/** The catalogs of a database, per server (the same in every copy of template0). */
const catalogs = new WeakMap<PostgresLab, string[]>()

export class SpecDatabase {
  private rolesBefore = new Map<number, string>()
  /** begin() ran: the roles before the spec are known. A database made ahead that no spec began has no roles of a spec's. */
  private began = false
  /** The cluster's shared state when the spec began (shared servers: see clusterChanges). */
  private clusterBefore?: Map<string, { d: string; what: string }>
  /** Its oid (race's own database: not a change of the spec's). */
  private oid = 0
  /** A transaction id taken once the database was made: any catalog row written later is newer. */
  private x0 = ''
  private constructor(
    private readonly lab: PostgresLab,
    /** Its name now (on race's own server it is renamed to pg_isolation_regress's name when its spec begins). */
    public name: string,
    readonly keep: boolean,
    private readonly own: boolean,
    private readonly unregister: () => void,
    /** The connection that creates and drops it (not control, so that the next spec need not wait for it). */
    private readonly sql: Sql,
  ) {}

  /**
   * Creates a database for a spec, with pg_regress's settings, marked as this run's (race_spec_<hex>); its removal
   * is registered with the lifecycle (Ctrl-C, errors). It may be created while the previous spec still runs: `begin`
   * makes it the spec's.
   */
  static async create(lab: PostgresLab, o: { own: boolean; keep: boolean; fileCopy?: boolean; sql?: Sql }): Promise<SpecDatabase> {
    const sql = o.sql ?? lab.control
    const name = `${PREFIX}${randomBytes(4).toString('hex')}`
    // On a server with fsync off (race's own), a file copy is the cheaper way to copy template0: its checkpoints sync nothing.
    const strategy = o.fileCopy && lab.server.versionNum >= 150000 ? ' strategy file_copy' : ''
    await sql.unsafe(`create database ${ident(name)} template template0${strategy}`)
    let db: SpecDatabase | undefined
    const unregister = lab.context.onCleanup(`database ${name}`, async () => {
      const left = await db?.drop()
      if (left) throw new Error(left)
    })
    db = new SpecDatabase(lab, name, o.keep, o.own, unregister, sql)
    try {
      const mark = literal('race:' + JSON.stringify(lab.mark(o.keep)))
      await sql.unsafe(
        [`comment on database ${ident(name)} is ${mark}`, ...REGRESS_DATABASE_SETTINGS.map(([k, v]) => `alter database ${ident(name)} set ${k} to ${literal(v)}`)].join(';\n'),
      )
      const [r] = await sql`select (txid_current() % 4294967296)::text as x`
      db.x0 = String(r.x)
      if (!baselines.has(lab)) baselines.set(lab, await db.state())
    } catch (e) {
      db.release()
      await db.drop()
      throw e
    }
    return db
  }

  /**
   * What the database holds, as one string: per catalog of the database, its row count and how many of its rows
   * were written after the database was made; the transactions prepared in it; its pg_database row and settings
   * (written since?). A database whose state equals a fresh copy's (no row written since, none removed, none
   * added) is, as far as anything a spec can see in its catalogs, a fresh database.
   */
  async state(on?: PgConn): Promise<string> {
    const conn = on ?? (await PgConn.connect(this.lab.target, { connectTimeoutMs: this.lab.connectTimeoutMs, params: [['application_name', 'race spec databases']], database: this.name }))
    try {
      let names = catalogs.get(this.lab)
      if (!names) {
        const list = await conn.exec(`select relname from pg_catalog.pg_class where relnamespace = 'pg_catalog'::regnamespace and relkind = 'r' and not relisshared order by relname`)
        if (list?.status !== 'TUPLES_OK') throw new Error(conn.errorMessage.trim())
        names = list.rows.map(([t]) => t ?? '')
        catalogs.set(this.lab, names)
      }
      // On the spec's own connection, after the spec ran: every function and operator named in pg_catalog.
      const x = `pg_catalog.age(${literal(this.x0)}::xid)`
      const le = 'OPERATOR(pg_catalog.<=)'
      const eq = 'OPERATOR(pg_catalog.=)'
      const parts = names.map((t) => `select ${literal(t)}::text as c, pg_catalog.count(*) as n, pg_catalog.count(*) filter (where pg_catalog.age(xmin) ${le} ${x}) as m from pg_catalog.${ident(t)}`)
      parts.push(`select 'prepared', pg_catalog.count(*), 0 from pg_catalog.pg_prepared_xacts where database ${eq} pg_catalog.current_database()`)
      parts.push(`select 'pg_database', pg_catalog.count(*), pg_catalog.count(*) filter (where pg_catalog.age(xmin) ${le} ${x}) from pg_catalog.pg_database where datname ${eq} pg_catalog.current_database()`)
      parts.push(`select 'pg_db_role_setting', pg_catalog.count(*), pg_catalog.count(*) filter (where pg_catalog.age(xmin) ${le} ${x}) from pg_catalog.pg_db_role_setting where setdatabase ${eq} (select oid from pg_catalog.pg_database where datname ${eq} pg_catalog.current_database())`)
      const cat = 'OPERATOR(pg_catalog.||)'
      const r = await conn.exec(`select pg_catalog.string_agg(c ${cat} ':' ${cat} n::text ${cat} ':' ${cat} m::text, ',' order by c) from (${parts.join('\n union all ')}) s`)
      if (r?.status !== 'TUPLES_OK') throw new Error(conn.errorMessage.trim())
      return r.rows[0][0] ?? ''
    } finally {
      if (!on) await conn.close()
    }
  }

  /**
   * Whether the spec left it as fresh as it was made (so the next spec may run in it); false when unsure. `on`: a
   * connection to it that may ask (the spec's own control connection, once its sessions are closed).
   */
  async pristine(on?: PgConn): Promise<boolean> {
    const base = baselines.get(this.lab)
    if (!base || this.keep) return false
    try {
      return (await this.state(on)) === base
    } catch {
      return false
    }
  }

  /**
   * Makes it the spec's, right before the spec runs: it takes pg_isolation_regress's name (on race's own server
   * always, the previous spec's database is gone by then; on a server of the user's when no database holds that
   * name, and a spec that names it is refused while another database holds it); the roles that exist now are noted.
   */
  async begin(spec?: Spec): Promise<void> {
    if (this.name !== REGRESS_DATABASE) {
      if (await this.takeRegressName()) {
        this.name = REGRESS_DATABASE
        // The rename wrote its pg_database row: rows written from here on are the spec's.
        const [r] = await this.lab.control`select (txid_current() % 4294967296)::text as x`
        this.x0 = String(r.x)
      } else if (spec && namesRegressDatabase(spec)) {
        // The spec's statements would act on that other database, not on the spec's own (a GRANT ON DATABASE the
        // spec's VACUUM then does not wait for): its transcript would not be what pg_regress runs. race never
        // touches a database it did not create, so this spec cannot run here now.
        throw new RunError(
          `${spec.file}: the spec names pg_regress's database ${REGRESS_DATABASE}, and another database on ${this.lab.target.label} has that name (not this run's): the spec would act on it rather than on its own; drop that database, or run on race's own server (--pg)`,
        )
      }
    }
    this.rolesBefore = await roles(this.lab.control)
    this.began = true
    const [d] = await this.lab.control`select oid::int as oid from pg_catalog.pg_database where datname = ${this.name}`
    this.oid = Number(d?.oid ?? 0)
    if (!this.own) {
      this.clusterBefore = await cluster(this.lab.control, this.lab.server.versionNum)
      // The roles before the spec, in the database's mark: the run after a killed one finds the spec's roles by them.
      const mark = literal('race:' + JSON.stringify({ ...this.lab.mark(this.keep), roles: [...this.rolesBefore.keys()] }))
      await this.lab.control.unsafe(`comment on database ${ident(this.name)} is ${mark}`)
    }
  }

  /**
   * Every cluster-wide change since the spec began that is still there, one line each (shared servers): a role,
   * database, tablespace or parameter grant created, changed or dropped, a role or database setting. race drops
   * none of them unless it is the spec's by identity (dropRoles): on a shared server another client may have made it.
   */
  private async clusterChanges(sql: Sql, skip: Set<string>): Promise<string[]> {
    const before = this.clusterBefore
    if (!before) return []
    const after = await cluster(sql, this.lab.server.versionNum)
    const out: string[] = []
    for (const [k, v] of after) {
      if (skip.has(k)) continue
      const was = before.get(k)
      if (!was) out.push(`${v.what} appeared while the spec ran and is still there (race drops only what it can tell is the spec's)`)
      else if (was.d !== v.d) out.push(`${v.what} changed while the spec ran`)
    }
    for (const [k, v] of before) if (!after.has(k) && !skip.has(k)) out.push(`${v.what} was dropped while the spec ran`)
    return out
  }

  /**
   * Renames it to pg_isolation_regress's name: on race's own server always (dropping the previous spec's database,
   * should it be left); on a server of the user's only while no other database holds that name (pg_regress's own,
   * or another race run's), since a spec may name its database (intra-grant-inplace-db grants on it). Whether it did.
   */
  private async takeRegressName(): Promise<boolean> {
    const rename = `alter database ${ident(this.name)} rename to ${ident(REGRESS_DATABASE)}`
    if (this.own) {
      await this.lab.control.unsafe(`drop database if exists ${ident(REGRESS_DATABASE)} with (force)`)
      await this.lab.control.unsafe(rename)
      return true
    }
    try {
      await this.lab.control.unsafe(rename)
      return true
    } catch (e) {
      if ((e as { code?: string }).code === '42P04') return false // taken: it keeps race_spec_<hex> (begin refuses a spec that names it)
      throw e
    }
  }

  /** Stops the lifecycle from dropping it (the caller drops it itself). */
  release(): void {
    this.unregister()
  }

  /**
   * Drops the database (unless kept) and the roles the spec created and left; returns what was left behind, with
   * the statement that removes it, or undefined. `shared`: on a server others use, a new role is the spec's only if
   * something in the spec's database depends on it (pg_shdepend, by oid: never by its name), and every other
   * cluster-wide change the spec left is reported, one line each on stderr, and left alone; without it (race's own
   * server) every new role is the spec's.
   */
  async drop(shared?: unknown): Promise<string | undefined> {
    const notes: string[] = []
    const isShared = shared !== undefined && shared !== false
    // Which new roles are the spec's is read while its database (and what depends on them there) still exists.
    const ours = isShared && this.began ? await rolesOfDatabase(this.sql, this.name, this.rolesBefore.keys()).catch(() => [] as number[]) : undefined
    const name = this.name
    if (!this.keep) {
      const left = await dropDatabase(this.lab, this.name, this.sql)
      if (left) notes.push(left)
    }
    const roleNotes = await this.dropRoles(isShared, ours, name)
    return [...notes, ...(roleNotes ? [roleNotes] : [])].join('; ') || undefined
  }

  /** Drops the roles the spec created and left (see drop); what it could not drop, or undefined. */
  async dropRoles(shared?: unknown, ours?: number[], dropped?: string): Promise<string | undefined> {
    const notes: string[] = []
    const isShared = shared !== undefined && shared !== false
    // No spec began in it (a database made ahead for a spec that never came): no role can be a spec's, and without
    // the roles before it every role of the server would look new.
    if (!this.began) return undefined
    try {
      const now = await roles(this.sql).catch(() => this.lab.onControlOrFresh((sql) => roles(sql)))
      const mine = isShared ? new Set(ours ?? (await rolesOfDatabase(this.sql, this.name, this.rolesBefore.keys()))) : undefined
      for (const [oid, name] of now) {
        if (this.rolesBefore.has(oid)) continue
        if (mine && !mine.has(oid)) continue
        try {
          await dropRoleByOid(this.sql, oid).catch(() => this.lab.onControlOrFresh((sql) => dropRoleByOid(sql, oid)))
        } catch (e) {
          const code = (e as { code?: string }).code
          notes.push(`role ${name}, which the spec created, was left behind (${code ?? (e as Error).message}${conditionName(code) ? ' ' + conditionName(code) : ''}): drop role ${ident(name)}`)
        }
      }
      if (isShared) {
        // The spec's own database (dropped, or kept) is race's, not a change to report.
        void dropped
        const skip = new Set([`database:${this.oid}`, `setting:${this.oid}/0`])
        for (const line of await this.clusterChanges(this.sql, skip)) process.stderr.write(`race: ${line}\n`)
        this.clusterBefore = await cluster(this.sql, this.lab.server.versionNum).catch(() => undefined)
      }
    } catch (e) {
      notes.push(`race could not list the roles the spec may have left: ${(e as Error).message}`)
    }
    return notes.length ? notes.join('; ') : undefined
  }
}

/**
 * DROP DATABASE ... WITH (FORCE), after rolling back the transactions prepared in it (which FORCE does not end).
 * Returns what was left, or undefined.
 */
export async function dropDatabase(lab: PostgresLab, name: string, via?: Sql): Promise<string | undefined> {
  const stmt = `drop database if exists ${ident(name)} with (force)`
  // On `via` (a connection of its own), else on control (or a fresh connection, if control is gone).
  const on = <T>(fn: (sql: Sql) => PromiseLike<T>): Promise<T> => (via ? Promise.resolve(fn(via)).catch(() => lab.onControlOrFresh(fn)) : lab.onControlOrFresh(fn))
  try {
    const prepared = await on((sql) => sql`select gid from pg_catalog.pg_prepared_xacts where database = ${name}`)
    if (prepared.length) {
      // ROLLBACK PREPARED runs in the database the transaction was prepared in.
      const conn = await PgConn.connect(lab.target, { connectTimeoutMs: lab.connectTimeoutMs, params: [['application_name', 'race cleanup']], database: name })
      try {
        for (const p of prepared) await conn.exec(`rollback prepared ${literal(String(p.gid))}`)
      } finally {
        await conn.close()
      }
    }
    await on((sql) => sql.unsafe(stmt))
    return undefined
  } catch (e) {
    const code = (e as { code?: string }).code
    return `database ${name} was left behind (${code ?? (e as Error).message}${conditionName(code) ? ' ' + conditionName(code) : ''}): drop it with: ${stmt}`
  }
}

/**
 * Drops the databases of this role that a race spec run marked and whose run is gone (its control backend no longer
 * exists). Never one marked --keep, never one whose run still lives, never another role's. Returns their names.
 */
export async function reapDatabases(lab: PostgresLab): Promise<string[]> {
  let names: { name: string; before?: number[] }[]
  try {
    const rows = await lab.control`
        select d.datname, substr(s.description, 6)::jsonb -> 'roles' as roles
          from pg_catalog.pg_database d
          join pg_catalog.pg_shdescription s on s.objoid = d.oid and s.classoid = 'pg_catalog.pg_database'::regclass
         where (d.datname like 'race\\_spec\\_%' or d.datname = ${REGRESS_DATABASE})
           and d.datdba = (select oid from pg_catalog.pg_roles where rolname = current_user)
           and s.description ~ '^race:\\{.*\\}$'
           and not coalesce((substr(s.description, 6)::jsonb ->> 'keep')::boolean, false)
           and not exists (select 1 from pg_catalog.pg_stat_activity a
                            where a.pid = (substr(s.description, 6)::jsonb ->> 'backend')::int
                              and a.backend_start::text = substr(s.description, 6)::jsonb ->> 'backendStart')`
    names = rows.map((r) => ({ name: String(r.datname), ...(Array.isArray(r.roles) ? { before: (r.roles as unknown[]).map(Number) } : {}) }))
  } catch {
    return [] // a mark this role may not read: leave everything alone
  }
  const reaped: string[] = []
  for (const { name, before } of names) {
    // The killed spec's roles, by identity: new since its mark's list, and something in its database depends on them.
    const ours = before ? await rolesOfDatabase(lab.control, name, before).catch(() => [] as number[]) : []
    if (await dropDatabase(lab, name)) continue
    reaped.push(name)
    for (const oid of ours) await dropRoleByOid(lab.control, oid).catch(() => {})
  }
  return reaped
}
