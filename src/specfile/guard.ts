// Nothing outside race's schema: a spec's setup (and teardown) block runs in one REPEATABLE READ transaction
// that race checks before it commits. Three checks, all read from the server in that transaction:
//  - a fingerprint (oid and xmin, or the row itself for shared catalogs) of every catalog row that is not in
//    race's schema, taken before and after the block: any object created, altered or dropped elsewhere
//    (a table or function in public, a schema, an extension, a role, a database setting) changes it, and the
//    snapshot keeps other sessions' concurrent changes out of the comparison;
//  - the relation locks the transaction holds for writing on relations outside the schema: INSERT, UPDATE,
//    DELETE, TRUNCATE, nextval, ALTER, CREATE INDEX or a trigger on someone else's table;
//  - temporary objects the block created (they would shadow the schema's tables on the control connection).
// If any finds something, the transaction is rolled back: the database is as it was, and the run fails
// with one line naming what the block would have changed. Comments (pg_description, pg_shdescription) are
// part of the fingerprint. What no catalog shows (COPY to a file or a program, functions acting outside the
// database) is refused from the block's text before it runs (files.ts outsideReach). After every block the
// connection's session state is put back as race left it (restoreSql). The rule: docs/spec-setup-rules.md.

/** A SQL string literal. */
function lit(s: string): string {
  return `'${s.replace(/'/g, "''")}'`
}

const KIND = `case c.relkind when 'r' then 'table' when 'p' then 'table' when 'i' then 'index' when 'I' then 'index' when 'S' then 'sequence'
  when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' when 'c' then 'type' else 'relation' end`

/** Namespaces the check leaves alone: race's schema (a SQL expression), TOAST, and temporary schemas (they vanish with the session). */
function excluded(schema: string): string {
  return `(select oid from pg_catalog.pg_namespace where nspname = ${schema} or nspname = 'pg_toast' or nspname ~ '^pg_(toast_)?temp_')`
}

/** The schema's name as a SQL literal, for fingerprintSql and locksSql. */
export const schemaLiteral = lit

/**
 * One kind of catalog row the fingerprint covers: `k` its identity and version as text, `d` what it is in words,
 * `from` where the rows come from (the FROM and WHERE clauses), `h` a number from its identity and version alone
 * (an int8 SQL expression over `$seed`), for the quick check's digest (digestSql).
 */
interface Part {
  k: string
  d: string
  from: string
  h: string
  /**
   * Where the digest reads its rows, when `from` joins what only `d` needs (the schema's name): the same rows, the
   * catalog alone (every row's namespace exists, so the join drops none), a scan where there was a join.
   */
  hfrom?: string
  /** Its columns named (`as k`, `as d`), FROM on a line of its own. */
  aliased?: boolean
  /** FROM on a line of its own, the columns unnamed. */
  broken?: boolean
}

/** An object's oid and its row's version (xmin) as one int8, hashed with a seed. */
const oidXmin = (t: string) => `pg_catalog.hashint8extended((${t}.oid::int8 << 32) | ${t}.xmin::text::int8, $seed)`

function parts(schema: string): Part[] {
  const x = excluded(schema)
  const ns = (table: string, col: string, name: string, what: string): Part => ({
    k: `'${table}:' || t.oid || ':' || t.xmin`,
    d: `format('${what} %I.%I', n.nspname, t.${name})`,
    from: `from pg_catalog.${table} t join pg_catalog.pg_namespace n on n.oid = t.${col} where t.${col} not in ${x}`,
    hfrom: `from pg_catalog.${table} t where t.${col} not in ${x}`,
    h: oidXmin('t'),
    aliased: true,
  })
  const any = (table: string, what: string): Part => ({ k: `'${table}:' || t.oid || ':' || t.xmin`, d: what, from: `from pg_catalog.${table} t`, h: oidXmin('t') })
  /** The row's k, hashed as text: the few rows whose identity is not an oid and an xmin. */
  const text = (p: Omit<Part, 'h'>): Part => ({ ...p, h: `pg_catalog.hashtextextended(${p.k}, $seed)` })
  return [
    {
      k: `'pg_class:' || c.oid || ':' || c.xmin`,
      d: `format('%s %I.%I', ${KIND}, n.nspname, c.relname)`,
      from: `from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.relnamespace not in ${x}`,
      hfrom: `from pg_catalog.pg_class c where c.relnamespace not in ${x}`,
      h: oidXmin('c'),
      aliased: true,
    },
    ns('pg_type', 'typnamespace', 'typname', 'type'),
    ns('pg_proc', 'pronamespace', 'proname', 'function'),
    ns('pg_operator', 'oprnamespace', 'oprname', 'operator'),
    ns('pg_collation', 'collnamespace', 'collname', 'collation'),
    ns('pg_conversion', 'connamespace', 'conname', 'conversion'),
    ns('pg_opclass', 'opcnamespace', 'opcname', 'operator class'),
    ns('pg_opfamily', 'opfnamespace', 'opfname', 'operator family'),
    ns('pg_ts_config', 'cfgnamespace', 'cfgname', 'text search configuration'),
    ns('pg_ts_dict', 'dictnamespace', 'dictname', 'text search dictionary'),
    ns('pg_ts_parser', 'prsnamespace', 'prsname', 'text search parser'),
    ns('pg_ts_template', 'tmplnamespace', 'tmplname', 'text search template'),
    ns('pg_statistic_ext', 'stxnamespace', 'stxname', 'statistics object'),
    ns('pg_constraint', 'connamespace', 'conname', 'constraint'),
    { k: `'pg_namespace:' || t.oid || ':' || t.xmin`, d: `format('schema %I', t.nspname)`, from: `from pg_catalog.pg_namespace t where t.oid not in ${x}`, h: oidXmin('t') },
    any('pg_extension', `format('extension %I', t.extname)`),
    any('pg_event_trigger', `format('event trigger %I', t.evtname)`),
    any('pg_publication', `format('publication %I', t.pubname)`),
    any('pg_foreign_data_wrapper', `format('foreign-data wrapper %I', t.fdwname)`),
    any('pg_foreign_server', `format('server %I', t.srvname)`),
    any('pg_language', `format('language %I', t.lanname)`),
    any('pg_cast', `'a cast'`),
    any('pg_default_acl', `'default privileges'`),
    any('pg_am', `format('access method %I', t.amname)`),
    any('pg_transform', `'a transform'`),
    any('pg_largeobject_metadata', `format('large object %s', t.oid)`),
    any('pg_database', `format('database %I', t.datname)`),
    any('pg_tablespace', `format('tablespace %I', t.spcname)`),
    text({ k: `'pg_roles:' || t.oid || ':' || md5(t::text)`, d: `format('role %I', t.rolname)`, from: `from pg_catalog.pg_roles t` }),
    text({ k: `'pg_auth_members:' || md5(t::text) || ':0'`, d: `'a role membership'`, from: `from pg_catalog.pg_auth_members t` }),
    text({ k: `'pg_db_role_setting:' || t.setdatabase || '/' || t.setrole || ':' || md5(t::text)`, d: `'a role or database setting'`, from: `from pg_catalog.pg_db_role_setting t` }),
    // Comments: on anything outside the schema (a schema, a function, a database, a role) and on the schema itself
    // (race's mark). Built-in objects' comments are never in the schema, so only user objects are identified. Their
    // words come from words() only for what changed: describing all five thousand costs a third of a second.
    {
      k: `'pg_description:' || t.classoid || '/' || t.objoid || '/' || t.objsubid || ':' || t.xmin`,
      d: `'comment ' || t.classoid || ' ' || t.objoid || ' ' || t.objsubid`,
      from: `from pg_catalog.pg_description t
      where t.objoid < 16384 or coalesce((pg_catalog.pg_identify_object(t.classoid, t.objoid, t.objsubid)).schema not in (select nspname from pg_catalog.pg_namespace where oid in ${x}), true)`,
      h: `pg_catalog.hashint8extended((t.objoid::int8 << 32) | t.xmin::text::int8, $seed) # pg_catalog.hashint8extended((t.classoid::int8 << 32) | (t.objsubid::int8 & 4294967295), $seed + 100)`,
      broken: true,
    },
    {
      k: `'pg_shdescription:' || t.classoid || '/' || t.objoid || ':' || t.xmin`,
      d: `'comment ' || t.classoid || ' ' || t.objoid || ' 0'`,
      from: `from pg_catalog.pg_shdescription t`,
      h: `pg_catalog.hashint8extended((t.objoid::int8 << 32) | t.xmin::text::int8, $seed) # pg_catalog.hashint8extended(t.classoid::int8, $seed + 100)`,
    },
  ]
}

/** Rows (k: identity and version, d: what it is) of every catalog entry outside the schema (a SQL expression). */
export function fingerprintSql(schema: string): string {
  return parts(schema)
    .map((p) => (p.aliased ? `select ${p.k} as k, ${p.d} as d\n       ${p.from}` : `select ${p.k}, ${p.d}${p.broken ? '\n       ' : ' '}${p.from}`))
    .join('\n union all ')
}
/**
 * The fingerprint's rows as one value (a SQL expression of text): how many, and the sum of a 64-bit hash of each
 * row's identity and version (seeded apart for each kind of row). Two reads of it differ when the rows differ (but
 * for a chance of about 2^-64), without building a string for each of the ten thousand rows. PostgreSQL 11+
 * (hashint8extended). Read it inside a statement that calls set_config (parallel unsafe): a parallel plan's workers
 * cost more to start than the read itself.
 */
export function digestSql(schema: string): string {
  const rows = parts(schema)
    .map((p, i) => `select ${p.h.split('$seed').join(String(i))} as h ${p.hfrom ?? p.from}`)
    .join('\n union all ')
  return `(select pg_catalog.count(*)::text || '/' || coalesce(pg_catalog.sum(h), 0)::text from (${rows}) race_digest)`
}

/** A change in words (a SQL expression of one): 'changes comment 2615 2200 0' becomes 'changes the comment on schema public'. */
export function words(change: string): string {
  const part = (n: number) => `pg_catalog.split_part(${change}, ' ', ${n})`
  return `case when ${change} ~ '^(creates|changes|drops) comment [0-9]+ [0-9]+ -?[0-9]+$'
    then ${part(1)} || ' the comment on ' || coalesce(pg_catalog.pg_describe_object(${part(3)}::oid, ${part(4)}::oid, ${part(5)}::int), 'a dropped object')
    else ${change} end`
}

/** The guard's own temporary table (race run): left out of the check of temporary objects. */
const GUARD_TEMP = 'race_guard_before'

/**
 * Temporary objects of this session (a SQL expression, rows d): a setup block must create none. They would live
 * on race's control connection only, where the invariant would read a temporary table in place of the schema's
 * table of the same name (pg_temp comes first in every search_path), and the sessions never see them.
 */
export function tempSql(own = true): string {
  return `select format('creates temporary %s %I', ${KIND}, c.relname) as d from pg_catalog.pg_class c
     where c.relnamespace = pg_catalog.pg_my_temp_schema()${own ? ` and c.relname <> '${GUARD_TEMP}'` : ''}
   union all select format('creates temporary function %I', p.proname) from pg_catalog.pg_proc p where p.pronamespace = pg_catalog.pg_my_temp_schema()
   union all select format('creates temporary type %I', t.typname) from pg_catalog.pg_type t
     where t.typnamespace = pg_catalog.pg_my_temp_schema() and t.typrelid = 0 and t.typelem = 0`
}

/**
 * Back to the session state race gave the connection (its startup parameters and the role it logged in as), after a
 * setup or teardown block: what a block SETs (search_path, default_transaction_read_only, a role...), the session
 * advisory locks it takes, the cursors it keeps open and the channels it listens to end with it, so that the
 * next block, the guard and the invariant work in race's schema as race left them. Statements (no result rows);
 * `search_path`: a SQL expression of the search_path to set again (race run's control sets it after login).
 */
export function restoreSql(searchPath?: string): string {
  return `do $race_restore$
declare path text := ${searchPath ?? 'null'};
begin
  set session authorization default;
  reset all;
  if path is not null then perform pg_catalog.set_config('search_path', path, false); end if;
  perform pg_catalog.pg_advisory_unlock_all();
end
$race_restore$;
close all;
unlisten *`
}

/** What this transaction holds for writing outside the schema (a SQL expression): relation locks stronger than reading. */
export function locksSql(schema: string): string {
  return `select format('%s %s', case l.mode when 'RowExclusiveLock' then 'writes to' else 'locks or alters' end, l.relation::regclass) as d
    from pg_catalog.pg_locks l join pg_catalog.pg_class c on c.oid = l.relation
   where l.pid = pg_backend_pid() and l.locktype = 'relation' and l.granted
     and l.database = (select oid from pg_catalog.pg_database where datname = current_database())
     and l.mode not in ('AccessShareLock', 'RowShareLock')
     and c.relnamespace not in ${excluded(schema)} and c.relnamespace <> 'pg_catalog'::regnamespace`
}

/** The differences between two fingerprints, in words: 'creates table public.x', 'drops function public.f'. */
export function diff(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  const out: string[] = []
  const byIdentity = (m: ReadonlyMap<string, string>) => new Map([...m].map(([k, d]) => [k.replace(/:[^:]*$/, ''), { k, d }]))
  const b = byIdentity(before)
  const a = byIdentity(after)
  for (const [id, { k, d }] of a) {
    const was = b.get(id)
    if (!was) out.push(`creates ${d}`)
    else if (was.k !== k) out.push(`changes ${d}`)
  }
  for (const [id, { d }] of b) if (!a.has(id)) out.push(`drops ${d}`)
  return out
}

/** The one line a refused block fails with. */
export function refusal(where: string, schema: string, changes: readonly string[]): string {
  const shown = changes.slice(0, 3).join(', ')
  const more = changes.length > 3 ? ` (and ${changes.length - 3} more)` : ''
  return `${where} ${shown}${more}, outside race's schema ${schema}: a spec may change only what it creates in its own schema (name objects without a schema); nothing was changed`
}

/** SQLSTATE the in-SQL form raises (class RX: race); defined in common.ts, which run and check load without this file. */
import { GUARD_SQLSTATE } from './common.js'
import { RECHECK_SQLSTATE } from '../scenario.js'

/** Marks around the spec's own block inside guardedSql, so `race show` can show the block itself. */
export const BLOCK_BEGINS = '-- race: the spec block begins'
export const BLOCK_ENDS = '-- race: the spec block ends'

/**
 * Whether a schema (a SQL expression of its name) is the one race marked for this connection: its comment is race's
 * mark naming this backend (PostgresLab.createSchemaSql), or, on the run role's connection, the run role's own schema (the mark
 * names the role that logged in, and owns it: db/run-role.ts). race's own record of where the run works, which the block cannot
 * move: the mark is a comment on the schema, which the fingerprint covers.
 */
function marked(schema: string): string {
  return `exists (select 1 from pg_catalog.pg_namespace n join pg_catalog.pg_description d
     on d.objoid = n.oid and d.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass and d.objsubid = 0
   where n.nspname = ${schema} and d.description like 'race:{%' and (pg_catalog.strpos(d.description, '"backend":' || pg_catalog.pg_backend_pid() || ',') > 0
      or pg_catalog.strpos(d.description, '"runner":' || pg_catalog.pg_backend_pid() || ',') > 0
      or (n.nspowner = (select r.oid from pg_catalog.pg_roles r where r.rolname = session_user)
          and pg_catalog.strpos(d.description, '"role":' || n.nspowner || '}') > 0)))`
}

/**
 * One statement list that runs `block` in a single implicit transaction (race run's setup): REPEATABLE READ,
 * the schema noted (search_path is the run's schema here: the engine sets it, and each block ends by setting it
 * again) and checked against race's mark, a fingerprint, the block, then a check that raises GUARD_SQLSTATE
 * (rolling all of it back) naming what it found, and the session state put back as race left it (restoreSql).
 */
export function guardedSql(block: string, where: string): string {
  const schema = `pg_catalog.current_setting('race.guard_schema')`
  const tail = `', outside race''s schema ' || ${schema} || ': a spec may change only what it creates in its own schema (name objects without a schema); nothing was changed'`
  // The guard's own statements resolve names in pg_catalog only (GUARD_PATH, local to the block's transaction), so
  // that a function or operator an earlier block made in the run's schema is never the guard's; the block itself
  // runs under the search_path it was given (race.guard_path).
  return `set transaction isolation level repeatable read;
select pg_catalog.set_config('race.guard_schema', pg_catalog.current_schema(), true), pg_catalog.set_config('race.guard_path', pg_catalog.current_setting('search_path'), true);
select pg_catalog.set_config('search_path', '${GUARD_PATH}', true);
do $race_guard_own$
begin
  if not ${marked(schema)} then
    raise exception using errcode = '${GUARD_SQLSTATE}', message = ${lit(where + " would run outside race's schema (search_path ")} || pg_catalog.current_setting('race.guard_path') || '): nothing was changed';
  end if;
end
$race_guard_own$;
create temp table ${GUARD_TEMP} on commit drop as ${fingerprintSql(schema)};
select pg_catalog.set_config('search_path', pg_catalog.current_setting('race.guard_path'), true);
${BLOCK_BEGINS}
${block}
${BLOCK_ENDS}
;
do $race_guard$
declare found text;
begin
  perform pg_catalog.set_config('search_path', '${GUARD_PATH}', true);
  -- The check reads its own table as the role race logged in as, whatever role the block set.
  set session authorization default;
  reset role;
  if not ${marked(schema)} then
    raise exception using errcode = '${GUARD_SQLSTATE}', message = ${lit(where + " sets race.guard_schema, which race's guard keeps: leave it alone; nothing was changed")};
  end if;
  with after as (${fingerprintSql(schema)}),
       a as (select regexp_replace(k, ':[^:]*$', '') as id, k, d from after),
       b as (select regexp_replace(k, ':[^:]*$', '') as id, k, d from race_guard_before),
       changes as (
         select 'creates ' || a.d as d from a left join b using (id) where b.id is null
         union all select 'changes ' || a.d from a join b using (id) where a.k <> b.k
         union all select 'drops ' || b.d from b left join a using (id) where a.id is null
         union all select d from (${locksSql(schema)}) l
         union all select d from (${tempSql()}) t)
  select string_agg(${words('d')}, ', ') into found from (select d from changes limit 3) s;
  if found is not null then
    raise exception using errcode = '${GUARD_SQLSTATE}', message = ${lit(where + ' ')} || found || ${tail};
  end if;
end
$race_guard$;
${restoreSql(`pg_catalog.quote_ident(pg_catalog.current_setting('race.guard_schema'))`)}`
}


/**
 * guardedSql's check, made quick for a block that changes nothing outside race's schema (every trial of a run runs
 * its setup again): the fingerprint is read before and after the block as one value (digestSql), not kept row by
 * row in a temporary table and compared in words. It passes only where guardedSql would: the value reads the same
 * only when the rows do, and the same locks and temporary objects are looked for (its own temporary table is none
 * here, so none is left out). Anything else (a value that differs, a lock, a temporary object, the mark gone)
 * raises RECHECK_SQLSTATE, rolling all of it back; the caller then runs guardedSql, whose words (or pass) decide.
 * PostgreSQL 11+. Undefined for a block that PREPAREs a statement: a prepared statement outlives the transaction
 * that failed, and would make the block's second run fail otherwise than its first.
 */
export function quickGuardedSql(block: string): string | undefined {
  if (/\bprepare\b/i.test(block)) return undefined
  const schema = `pg_catalog.current_setting('race.guard_schema')`
  return `set transaction isolation level repeatable read;
select pg_catalog.set_config('race.guard_schema', pg_catalog.current_schema(), true), pg_catalog.set_config('race.guard_path', pg_catalog.current_setting('search_path'), true);
select pg_catalog.set_config('search_path', '${GUARD_PATH}', true);
do $race_guard_own$
begin
  if not ${marked(schema)} then
    raise exception using errcode = '${RECHECK_SQLSTATE}', message = 'race: look again';
  end if;
end
$race_guard_own$;
select pg_catalog.set_config('race.guard_digest', ${digestSql(schema)}, true);
select pg_catalog.set_config('search_path', pg_catalog.current_setting('race.guard_path'), true);
${BLOCK_BEGINS}
${block}
${BLOCK_ENDS}
;
do $race_guard$
declare before text := pg_catalog.current_setting('race.guard_digest');
begin
  perform pg_catalog.set_config('search_path', '${GUARD_PATH}', true);
  set session authorization default;
  reset role;
  if not ${marked(schema)} or pg_catalog.set_config('race.guard_digest', ${digestSql(schema)}, true) is distinct from before
     or exists (${locksSql(schema)}) or exists (${tempSql(false)}) then
    raise exception using errcode = '${RECHECK_SQLSTATE}', message = 'race: look again';
  end if;
end
$race_guard$;
${restoreSql(`pg_catalog.quote_ident(pg_catalog.current_setting('race.guard_schema'))`)}`
}

/**
 * The search_path of race's own statements on a connection that runs a spec's SQL (the guard): pg_catalog, and
 * pg_temp last (the guard's own temporary table; never a function or an operator).
 */
export const GUARD_PATH = 'pg_catalog, pg_temp'

/** The spec's own block inside a guardedSql text (for race show); other text unchanged. */
export function shownBlock(sql: string): string {
  const a = sql.indexOf(BLOCK_BEGINS)
  const b = sql.indexOf(BLOCK_ENDS)
  return a >= 0 && b > a ? sql.slice(a + BLOCK_BEGINS.length, b).trim() : sql
}
