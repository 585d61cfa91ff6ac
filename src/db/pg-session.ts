// A PostgreSQL session connection: one postgres.js max:1 instance (one backend pid). A step is sent as written
// (binds as $n parameters); while its isolation level is not fixed yet, SHOW transaction_isolation goes in the
// same pipeline just before it (SHOW takes no snapshot, so SET TRANSACTION may still follow).
// The server's messages are read on the same socket (db/fatal.ts): the FATAL it may end the connection with,
// and every ReadyForQuery's transaction status, which says whether a kept connection needs a ROLLBACK.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Sql } from 'postgres'
import { connect, endQuietly, firstQuery } from './connect.js'
import type { QueryResult, SessionConn, SessionOptions, StepRun } from './driver.js'
import type { ServerFatal, TxStatus } from './fatal.js'
import type { Target } from './target.js'
import { PG_STATE, PG_STATE_SQL } from './pg-state.js'

/** How long a reset between trials may take before the connection is given up (and a fresh one opened). */
const RESET_MS = 2000

export class PgSession implements SessionConn {
  pid = 0
  private closedFlag = false
  private sql!: Sql
  /** The FATAL error the server sent as it closed this connection, if it said why. */
  fatal?: ServerFatal
  /**
   * The transaction status of the last ReadyForQuery: I idle, T in a transaction, E in a failed one. Undefined
   * when the server's messages cannot be read (TLS, several hosts): then the connection is never kept.
   */
  status?: TxStatus
  /** WARNINGs the server sent on this connection, by SQLSTATE (25P01: a ROLLBACK outside a transaction). */
  readonly warnings = new Map<string, number>()
  /** The connection's roles and settings when it opened (db/pg-state.ts): what a reset must bring it back to. */
  private opened = ''

  get closed(): boolean {
    return this.closedFlag
  }

  /** `typesFrom`: the run's own control connection, whose array types the session takes (connect.ts typesFrom). */
  static async open(target: Target, o: SessionOptions, typesFrom?: Sql): Promise<PgSession> {
    const s = new PgSession()
    s.sql = connect(target, {
      connectTimeoutMs: o.connectTimeoutMs,
      applicationName: o.applicationName,
      schema: o.space,
      params: o.params,
      // The array types the PostgresLab's control connection fetched at login (no fetch of its own before the first step).
      typesFrom,
      typesWithFirst: true,
      onclose: () => {
        s.closedFlag = true
      },
      onFatal: (e) => {
        s.fatal = e
      },
      also: {
        onReady: (st) => {
          s.status = st
        },
        onWarning: (code) => {
          s.warnings.set(code, (s.warnings.get(code) ?? 0) + 1)
        },
      },
    })
    const [row] = await firstQuery(s.sql, `select pg_backend_pid() as pid, ${PG_STATE} as state`)
    s.pid = Number(row.pid)
    s.opened = String(row.state)
    return s
  }

  step(text: string, args: unknown[], readLevel: boolean): StepRun {
    let level: Promise<string | undefined> | undefined
    if (readLevel) {
      const q = this.sql.unsafe('show transaction_isolation')
      q.execute()
      level = q.then(
        (r) => String(r[0]?.transaction_isolation ?? ''),
        () => undefined,
      )
    }
    const q = (args.length ? this.sql.unsafe(text, args as never[]) : this.sql.unsafe(text)) as unknown as PromiseLike<QueryResult> & { execute(): unknown }
    q.execute()
    return { result: Promise.resolve(q), level }
  }

  async rollback(): Promise<QueryResult | undefined> {
    return (await Promise.race([this.sql.unsafe('rollback'), sleep(2000)])) as QueryResult | undefined
  }

  /**
   * ROLLBACK only when the server's last word was "in a transaction" (T or E), then DISCARD ALL (which cannot run
   * inside one): close cursors, RESET ALL (back to the startup parameters, search_path and application_name
   * included), DEALLOCATE ALL, UNLISTEN *, pg_advisory_unlock_all(), discard plans, temporary tables and sequence
   * state; SET SESSION AUTHORIZATION DEFAULT, which ends a SET ROLE too. Then the roles and settings are read
   * (db/pg-state.ts). All in one pipeline; kept only if the server then says idle and they read as when it opened.
   */
  async reset(): Promise<boolean> {
    const r = this.resetInTwo()
    return (await r.cleared) && (await r.complete)
  }

  /**
   * The reset (see reset) in its two parts, sent in one pipeline: `cleared` once the server has run the ROLLBACK and
   * DISCARD ALL and says idle (nothing the session held or left open is there for anyone else to see); `complete` once
   * the roles and settings also read back as when it opened (reading every setting costs the server a few
   * milliseconds: the engine waits for it only before the connection serves again, SessionConns.give). Both false
   * when the connection cannot be reset, or not within RESET_MS.
   */
  resetInTwo(): { cleared: Promise<boolean>; complete: Promise<boolean> } {
    if (this.closedFlag || this.fatal || this.status === undefined) return { cleared: Promise.resolve(false), complete: Promise.resolve(false) }
    const sent = [...(this.status === 'I' ? [] : [this.sql.unsafe('rollback')]), this.sql.unsafe('discard all')]
    const state = this.sql.unsafe(PG_STATE_SQL)
    // Sent in this order now (a postgres.js query goes out when first awaited: Promise.all would await these a tick late).
    for (const q of [...sent, state]) q.execute()
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), RESET_MS)))
    const fit = () => this.status === 'I' && !this.closedFlag && !this.fatal
    const cleared = Promise.race([Promise.all(sent).then(fit, () => false), late])
    const read = state.then((rows) => String(rows[0]?.state) === this.opened, () => false)
    // Kept only when it reads back the roles and settings it opened with: a reset not shown complete is not kept.
    const complete = Promise.race([Promise.all([cleared, read]).then(([c, same]) => c && same && fit()), late]).finally(() => clearTimeout(timer))
    return { cleared, complete }
  }

  close(): Promise<void> {
    return endQuietly(this.sql, 1)
  }

  destroy(): Promise<void> {
    return endQuietly(this.sql, 0)
  }
}
