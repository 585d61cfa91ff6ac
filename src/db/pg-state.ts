// What a PostgreSQL connection is, as far as a session on it can change it: the session and current roles (SET
// SESSION AUTHORIZATION, SET ROLE) and every setting the server shows (search_path, a GUC set with plain SET,
// default_transaction_isolation...), hashed into one value. Read when a connection opens and again after each
// reset between trials: a kept connection must read the same, else its reset is not shown complete and it is
// closed rather than kept (the next trial opens a fresh one).

/**
 * One value, as a scalar subquery: select it beside other columns, or alone as `state`. The settings are read from
 * the function behind pg_settings (its view adds nothing read here); the hash covers every setting whose source is
 * not the built-in default, and the count every setting (a placeholder a session's SET made, RESET to its default,
 * is one more). A setting whose source is the default has its boot value: the same before and after. Two thirds of
 * hashing every row's cost (some 0.5 ms of the server's time a read, on PostgreSQL 15).
 */
export const PG_STATE =
  "(select session_user::text || '/' || current_user::text || '/' || pg_catalog.count(*)::text || '/' || pg_catalog.md5(pg_catalog.string_agg(name || '=' || coalesce(setting, ''), e'\\n' order by name) filter (where source operator(pg_catalog.<>) 'default')) from pg_catalog.pg_show_all_settings())"

export const PG_STATE_SQL = `select ${PG_STATE} as state`
