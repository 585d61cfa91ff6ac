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
    if (this.closedFlag || this.fatal || this.status === undefined) return false
    const sent = [...(this.status === 'I' ? [] : [this.sql.unsafe('rollback')]), this.sql.unsafe('discard all')]
    const state = this.sql.unsafe(PG_STATE_SQL)
    sent.push(state)
    const ok = await Promise.race([Promise.all(sent).then(() => true, () => false), sleep(RESET_MS).then(() => false)])
    // Kept only when it reads back the roles and settings it opened with: a reset not shown complete is not kept.
    return ok && String((await state)[0]?.state) === this.opened && this.status === 'I' && !this.closedFlag && !this.fatal
  }

  close(): Promise<void> {
    return endQuietly(this.sql, 1)
  }

  destroy(): Promise<void> {
    return endQuietly(this.sql, 0)
  }
}
