// A PostgreSQL connection that behaves, observably, as libpq does for isolationtester: the simple query
// protocol, results collected one at a time (parsing pauses while a result waits to be collected), notices
// handed to a processor the moment the input is parsed (in any state, as libpq does), error and notice texts
// built as libpq builds them at its default verbosity, and cancel requests on a separate socket. Every byte
// of SQL and every value is kept as a latin1 string (one character per byte), so the transcript is exact.
// The protocol's shared parts (start-up, SSL, authentication, framing, error fields) are db/pgwire.ts's.
import type net from 'node:net'
import { cancelRequest, connInfo, cstr, dial, errorFields, frame, md5Password, messageEnd, plainFallback, plainOnly, Scram, severity, SSL_ACCEPTED, SSL_REQUEST, startTls, startupMessage, TERMINATE, type ConnInfo } from '../db/pgwire.js'
import type { Target } from '../db/target.js'
import { formatMessage } from './format.js'

export type ResultStatus = 'COMMAND_OK' | 'TUPLES_OK' | 'EMPTY_QUERY' | 'FATAL_ERROR'

export interface PgResult {
  status: ResultStatus
  /** Column names (latin1: bytes as sent). */
  fields: string[]
  /** Values as text; null for SQL NULL. */
  rows: (string | null)[][]
  /** The command tag. */
  tag: string
  /** Error fields by their one-letter code (S severity, M message, C sqlstate, D, H, P, W, ...). */
  err?: Record<string, string>
  /** The text libpq would give as PQresultErrorMessage. */
  errorMessage?: string
}

export interface Notify {
  channel: string
  payload: string
  pid: number
}

export interface PgConnOptions {
  connectTimeoutMs: number
  /** Startup parameters, in order (user and database are added first). */
  params: [string, string][]
  /** The database to connect to, instead of the target's. */
  database?: string
}

type Async = 'idle' | 'busy' | 'ready'

const CLOSED_MESSAGE = 'server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\n'

export class ConnectError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message)
  }
}

export class PgConn {
  pid = 0
  private secret = 0
  private sock!: net.Socket
  /** Bytes received but not yet read by "libpq" (the kernel's buffer, as it were). */
  private incoming: Buffer[] = []
  /** libpq's input buffer. */
  private buf: Buffer = Buffer.alloc(0)
  private async: Async = 'idle'
  private result: PgResult | null = null
  private lastQuery = ''
  /** Errors of the current query, as PQerrorMessage accumulates them. */
  errorMessage = ''
  /** Transaction status of the last ReadyForQuery: I idle, T in a transaction, E failed. */
  txStatus = 'I'
  /** The socket has closed (what was received before may still be unread). */
  bad = false
  /**
   * The connection is gone as libpq would know it: reading found the end of the stream (or the socket broke)
   * with nothing left unread. A query can no longer be sent (PQsendQuery fails), nor input consumed.
   */
  closed = false
  /** The last FATAL error the server sent (why it ended the session: 57P01, 57P05, 25P03...). */
  fatal?: Record<string, string>
  private waiter?: () => void
  readonly notifies: Notify[] = []
  readonly parameters = new Map<string, string>()
  onNotice: (message: string) => void = () => {}

  private constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  static async connect(target: Target, o: PgConnOptions): Promise<PgConn> {
    const info = { ...connInfo(target), ...(o.database !== undefined ? { database: o.database } : {}) }
    const c = new PgConn(info.host, info.port)
    await c.open(info, o)
    return c
  }

  private open(info: ConnInfo, o: PgConnOptions): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let scram: Scram | undefined
      let done = false
      const finish = (e?: Error) => {
        if (done) return
        done = true
        clearTimeout(timer)
        this.sock.removeListener('data', onData)
        if (e) {
          this.sock.destroy()
          reject(e)
        } else {
          this.sock.on('data', (d: Buffer) => this.received(d))
          resolve()
        }
      }
      const timer = setTimeout(() => finish(new ConnectError(`no answer from ${info.host}:${info.port} within ${o.connectTimeoutMs} ms`, 'CONNECT_TIMEOUT')), o.connectTimeoutMs)
      let pending = Buffer.alloc(0)
      const write = (type: number, body: Buffer) => this.sock.write(frame(type, body))
      const onData = (d: Buffer) => {
        pending = Buffer.concat([pending, d])
        for (let e = messageEnd(pending, 0, pending.length); e >= 0; e = messageEnd(pending, 0, pending.length)) {
          const type = pending[0]
          const body = pending.subarray(5, e)
          pending = pending.subarray(e)
          if (type === 0x52) {
            const kind = body.readInt32BE(0)
            if (kind === 0) continue
            if (kind === 3) write(0x70, cstr(info.password))
            else if (kind === 5) write(0x70, cstr(md5Password(info.user, info.password, body.subarray(4, 8))))
            else if (kind === 10) {
              scram = new Scram(info.password)
              const first = Buffer.from(scram.clientFirst())
              const len4 = Buffer.alloc(4)
              len4.writeInt32BE(first.length)
              write(0x70, Buffer.concat([cstr('SCRAM-SHA-256'), len4, first]))
            } else if (kind === 11) {
              try {
                write(0x70, Buffer.from(scram!.clientFinal(body.toString('utf8', 4))))
              } catch (e) {
                return finish(new ConnectError((e as Error).message, 'AUTH'))
              }
            } else if (kind !== 12) return finish(new ConnectError(`unsupported authentication method ${kind}`, 'AUTH'))
          } else if (type === 0x45) {
            const f = errorFields(body, 0, body.length, 'latin1')
            return finish(new ConnectError(f.M ?? 'the server refused the connection', f.C))
          } else if (type === 0x4b) {
            this.pid = body.readInt32BE(0)
            this.secret = body.readInt32BE(4)
          } else if (type === 0x53) {
            const [k, v] = body.toString('latin1').split('\0')
            this.parameters.set(k, v)
          } else if (type === 0x5a) {
            this.txStatus = String.fromCharCode(body[0])
            if (pending.length) this.incoming.push(pending)
            return finish()
          }
        }
      }
      const startup = () => this.sock.write(startupMessage([['user', info.user], ['database', info.database], ...o.params], 'latin1'))
      const attach = (s: net.Socket) => {
        this.sock = s
        s.on('data', onData)
        s.on('error', (e) => {
          if (!done) finish(new ConnectError(e.message, (e as NodeJS.ErrnoException).code))
          this.lost()
        })
        s.on('close', () => {
          if (!done) finish(new ConnectError('the server closed the connection during start-up', 'CONNECTION_CLOSED'))
          this.lost()
        })
      }
      const raw = dial(info.host, info.port)
      attach(raw)
      raw.once('connect', () => {
        raw.setNoDelay(true)
        if (plainOnly(info)) return startup()
        raw.removeListener('data', onData)
        raw.write(SSL_REQUEST)
        raw.once('data', (b: Buffer) => {
          if (b[0] === SSL_ACCEPTED) {
            const t = startTls(raw, info)
            attach(t)
            t.once('secureConnect', startup)
          } else if (plainFallback(info)) {
            raw.on('data', onData)
            startup()
          } else finish(new ConnectError(`the server at ${info.host}:${info.port} does not accept SSL (sslmode=${info.sslmode})`, 'SSL_REFUSED'))
        })
      })
    })
  }

  private received(d: Buffer): void {
    this.incoming.push(d)
    this.wake()
  }

  private lost(): void {
    if (this.bad) return
    this.bad = true
    this.wake()
  }

  private wake(): void {
    const w = this.waiter
    this.waiter = undefined
    w?.()
  }

  /** Resolves true when unread data is there (or the connection closed), false after ms (select()). */
  waitReadable(ms: number): Promise<boolean> {
    if (this.incoming.length || this.bad) return Promise.resolve(true)
    return new Promise<boolean>((resolve) => {
      const t = ms >= 0 ? setTimeout(() => ((this.waiter = undefined), resolve(false)), ms) : undefined
      this.waiter = () => {
        if (t) clearTimeout(t)
        resolve(true)
      }
    })
  }

  /**
   * PQconsumeInput: moves what arrived into the input buffer (no parsing). False, as libpq's, once the
   * connection is gone and nothing is left to read: a caller that waits for readable input must stop then,
   * or it would find the closed socket readable forever.
   */
  consumeInput(): boolean {
    if (this.incoming.length) {
      this.buf = Buffer.concat([this.buf, ...this.incoming])
      this.incoming = []
      return true
    }
    if (this.bad) {
      if (!this.closed) this.errorMessage += CLOSED_MESSAGE
      this.closed = true
      return false
    }
    return !this.closed
  }

  /** PQsendQuery: false (and errorMessage says why) once the connection is known to be gone. */
  sendQuery(sql: string): boolean {
    if (this.closed) {
      this.errorMessage = 'no connection to the server\n'
      return false
    }
    this.errorMessage = ''
    this.lastQuery = sql
    this.result = null
    this.async = 'busy'
    // A socket the server has closed but whose last words are still unread takes the query as libpq's would
    // (its write succeeds): reading then finds the server's FATAL error and the end of the stream.
    if (!this.bad) this.sock.write(frame(0x51, Buffer.from(sql + '\0', 'latin1')))
    return true
  }

  /**
   * PQisBusy (parses what is buffered). As libpq's, false once the connection is lost and nothing is left to
   * read: getResult then reports the loss, instead of a caller polling a dead connection forever (a loop that
   * never yields to the event loop, so that not even Ctrl-C's cleanup could run).
   */
  isBusy(): boolean {
    this.parseInput()
    return this.async === 'busy' && !(this.bad && !this.incoming.length)
  }

  /** PQgetResult: the next result, waiting for it; null when the query is done. */
  async getResult(): Promise<PgResult | null> {
    this.parseInput()
    while (this.async === 'busy') {
      if (this.bad && !this.incoming.length) {
        if (!this.closed) this.errorMessage += CLOSED_MESSAGE
        this.closed = true
        this.async = 'idle'
        // The isolationtester of each version runs on its own libpq: before 15, libpq made this result of all the
        // connection's error message since the query began (the server's FATAL line again), 15 and later of the new part.
        const major = parseInt(this.parameters.get('server_version') ?? '', 10)
        return { status: 'FATAL_ERROR', fields: [], rows: [], tag: '', errorMessage: major < 15 ? this.errorMessage : CLOSED_MESSAGE }
      }
      await this.waitReadable(-1)
      this.consumeInput()
      this.parseInput()
    }
    if (this.async === 'idle') return null
    const r = this.result!
    this.result = null
    this.async = 'busy'
    return r
  }

  /** PQexec: the last result of the query. */
  async exec(sql: string): Promise<PgResult | null> {
    if (!this.sendQuery(sql)) return null
    let last: PgResult | null = null
    for (let r = await this.getResult(); r; r = await this.getResult()) last = r
    return last
  }

  /** Messages in the input buffer, handled as libpq's pqParseInput3 does. */
  private parseInput(): void {
    for (;;) {
      const end = messageEnd(this.buf, 0, this.buf.length)
      if (end < 0) return
      const type = this.buf[0]
      const body = this.buf.subarray(5, end)
      if (type === 0x4e) {
        // NoticeResponse: handed over at once, whatever the state.
        this.buf = this.buf.subarray(end)
        const f = errorFields(body, 0, body.length, 'latin1')
        this.onNotice(formatMessage(f, false, f.P ? this.lastQuery : undefined))
        continue
      }
      if (type === 0x41) {
        this.buf = this.buf.subarray(end)
        const pid = body.readInt32BE(0)
        const [channel, payload] = body.subarray(4).toString('latin1').split('\0')
        this.notifies.push({ channel, payload, pid })
        continue
      }
      if (this.async !== 'busy') {
        if (this.async === 'ready') return // wait until the application takes the result
        // Idle: an error here is shown as a notice (libpq does the same); everything else is absorbed.
        this.buf = this.buf.subarray(end)
        if (type === 0x45) {
          const f = errorFields(body, 0, body.length, 'latin1')
          if (severity(f) === 'FATAL') this.fatal = f
          this.onNotice(formatMessage(f, false))
        } else if (type === 0x53) {
          const [k, v] = body.toString('latin1').split('\0')
          this.parameters.set(k, v)
        } else if (type === 0x5a) this.txStatus = String.fromCharCode(body[0])
        continue
      }
      this.buf = this.buf.subarray(end)
      switch (type) {
        case 0x43: // CommandComplete
          if (!this.result) this.result = { status: 'COMMAND_OK', fields: [], rows: [], tag: '' }
          this.result.tag = body.toString('latin1', 0, body.length - 1)
          this.async = 'ready'
          break
        case 0x45: {
          const f = errorFields(body, 0, body.length, 'latin1')
          if (severity(f) === 'FATAL') this.fatal = f
          const msg = formatMessage(f, true, f.P ? this.lastQuery : undefined)
          this.result = { status: 'FATAL_ERROR', fields: [], rows: [], tag: '', err: f, errorMessage: msg }
          this.errorMessage += msg
          this.async = 'ready'
          break
        }
        case 0x5a:
          this.txStatus = String.fromCharCode(body[0])
          this.async = 'idle'
          break
        case 0x49: // EmptyQueryResponse
          this.result = { status: 'EMPTY_QUERY', fields: [], rows: [], tag: '' }
          this.async = 'ready'
          break
        case 0x54: {
          // RowDescription
          const n = body.readInt16BE(0)
          const fields: string[] = []
          let p = 2
          for (let i = 0; i < n; i++) {
            const e = body.indexOf(0, p)
            fields.push(body.toString('latin1', p, e))
            p = e + 1 + 18
          }
          this.result = { status: 'TUPLES_OK', fields, rows: [], tag: '' }
          break
        }
        case 0x44: {
          // DataRow
          const n = body.readInt16BE(0)
          const row: (string | null)[] = []
          let p = 2
          for (let i = 0; i < n; i++) {
            const l = body.readInt32BE(p)
            p += 4
            if (l < 0) row.push(null)
            else {
              row.push(body.toString('latin1', p, p + l))
              p += l
            }
          }
          this.result?.rows.push(row)
          break
        }
        case 0x53: {
          const [k, v] = body.toString('latin1').split('\0')
          this.parameters.set(k, v)
          break
        }
        case 0x4b:
          this.pid = body.readInt32BE(0)
          this.secret = body.readInt32BE(4)
          break
        default:
          // CopyIn/CopyOut and the rest: a spec step does not use them.
          break
      }
    }
  }

  /** PQnotifies: the next notification received (parsing what is buffered first). */
  nextNotify(): Notify | undefined {
    this.parseInput()
    return this.notifies.shift()
  }

  /** PQcancel: a CancelRequest on a new connection. Resolves when the server has taken it. */
  cancel(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const s = dial(this.host, this.port)
      const b = cancelRequest(this.pid, this.secret)
      s.once('connect', () => s.end(b))
      s.once('close', () => resolve(true))
      s.once('error', () => resolve(false))
      setTimeout(() => (s.destroy(), resolve(false)), 5000).unref()
    })
  }

  /** PQfinish. */
  async close(): Promise<void> {
    if (!this.sock || this.sock.destroyed) return
    const s = this.sock
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => (s.destroy(), resolve()), 500)
      s.once('close', () => (clearTimeout(t), resolve()))
      s.end(TERMINATE)
    })
  }

  destroy(): void {
    this.sock?.destroy()
  }
}
