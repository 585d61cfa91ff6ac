// A PostgreSQL session connection: one postgres.js max:1 instance (one backend pid). A step is sent as written
// (binds as $n parameters); while its isolation level is not fixed yet, SHOW transaction_isolation goes in the
// same pipeline just before it (SHOW takes no snapshot, so SET TRANSACTION may still follow).
import { setTimeout as sleep } from 'node:timers/promises'
import type { Sql } from 'postgres'
import { connect, endQuietly } from './connect.js'
import type { QueryResult, SessionConn, SessionOptions, StepRun } from './driver.js'
import type { ServerFatal } from './fatal.js'
import type { Target } from './target.js'

export class PgSession implements SessionConn {
  pid = 0
  private closedFlag = false
  private sql!: Sql
  /** The FATAL error the server sent as it closed this connection, if it said why. */
  fatal?: ServerFatal

  get closed(): boolean {
    return this.closedFlag
  }

  static async open(target: Target, o: SessionOptions): Promise<PgSession> {
    const s = new PgSession()
    s.sql = connect(target, {
      connectTimeoutMs: o.connectTimeoutMs,
      applicationName: o.applicationName,
      schema: o.space,
      params: o.params,
      // The array types the Lab's control connection fetched at login (no fetch of its own before the first step).
      fetchTypes: 'shared',
      onclose: () => {
        s.closedFlag = true
      },
      onFatal: (e) => {
        s.fatal = e
      },
    })
    const [row] = await s.sql`select pg_backend_pid() as pid`
    s.pid = Number(row.pid)
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

  close(): Promise<void> {
    return endQuietly(this.sql, 1)
  }

  destroy(): Promise<void> {
    return endQuietly(this.sql, 0)
  }
}
