// A minimal PostgreSQL wire-protocol client for the bench's load generator, and nothing else.
//
// Why not postgres.js here: measured on the 2-core machines this project runs on, postgres.js spends about
// 20 µs of JavaScript per query (Query promise, Result array, row objects, type handling). With 8 clients
// the node process then takes ~0.8 of a core from the server it is measuring, and race reached only
// 0.66-0.75x pgbench's TPS on the oltp mix whatever the statement shape (prepared, pipelined, .values(),
// simple protocol). This client speaks only what a benchmark transaction needs: named prepared statements
// (Parse once), then Bind/Execute per statement and one Sync per round trip, a round trip's statements
// pipelined in one write, replies read into one reused buffer, text results of which only the first column of
// the first row is kept, errors by SQLSTATE. It reached 0.97-1.03x pgbench. Everything else (schema, setup,
// control) stays on postgres.js. `race bench --driver postgres.js` runs the same workload through postgres.js,
// to show the difference.
// The protocol's shared parts (start-up, SSL, authentication, framing, error fields) are db/pgwire.ts's.
import net from 'node:net'
import { codedError, connInfo, dial, errorFields, md5Password, messageEnd, plainFallback, plainOnly, Scram, SSL_ACCEPTED, SSL_REQUEST, startTls, startupMessage, TERMINATE, type ConnInfo } from '../db/pgwire.js'
import type { Target } from '../db/target.js'

/** One statement of a pipelined batch: a prepared statement's name and its parameters (text format). */
export interface Bound {
  stmt: string
  params: readonly (string | number)[]
}

/** What a batch returned: the first error (SQLSTATE and message), and each statement's first value. */
export interface BatchResult {
  code: string | null
  message: string | null
  /** First column of the first row of each statement, as text; null when it returned no row or NULL. */
  values: (string | null)[]
}

export interface WireError extends Error {
  code: string
}

const wireError: (code: string, message: string) => WireError = codedError

const SYNC = Buffer.from([0x53, 0, 0, 0, 4])

interface Pending {
  /** ReadyForQuery messages (one per Sync) that end this request. */
  syncs: number
  ready: number
  /** The statement whose results arrive now (advanced by CommandComplete). */
  stmt: number
  result: BatchResult
  resolve: (r: BatchResult) => void
  reject: (e: Error) => void
}

/** A growable byte writer reused across batches; each batch is copied out once. */
class Writer {
  buf = Buffer.allocUnsafe(1024)
  len = 0
  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n))
    this.buf.copy(next, 0, 0, this.len)
    this.buf = next
  }
  byte(b: number): void {
    this.ensure(1)
    this.buf[this.len++] = b
  }
  int16(v: number): void {
    this.ensure(2)
    this.buf.writeInt16BE(v, this.len)
    this.len += 2
  }
  int32(v: number): void {
    this.ensure(4)
    this.buf.writeInt32BE(v, this.len)
    this.len += 4
  }
  cstr(s: string): void {
    const n = Buffer.byteLength(s)
    this.ensure(n + 1)
    this.buf.write(s, this.len)
    this.len += n
    this.buf[this.len++] = 0
  }
  /** A string without terminator (a parameter value). */
  str(s: string): void {
    const n = Buffer.byteLength(s)
    this.ensure(n)
    this.buf.write(s, this.len)
    this.len += n
  }
  /** A string of one-byte characters (a number's digits). */
  ascii(s: string): void {
    this.ensure(s.length)
    this.buf.write(s, this.len, 'latin1')
    this.len += s.length
  }
  bytes(b: Buffer): void {
    this.ensure(b.length)
    b.copy(this.buf, this.len)
    this.len += b.length
  }
  /** Starts a message of `type`; returns where its length goes. */
  begin(type: number): number {
    this.byte(type)
    const at = this.len
    this.int32(0)
    return at
  }
  end(at: number): void {
    this.buf.writeInt32BE(this.len - at, at)
  }
  take(): Buffer {
    const out = Buffer.allocUnsafe(this.len)
    this.buf.copy(out, 0, 0, this.len)
    this.len = 0
    return out
  }
}

export interface WireOptions {
  connectTimeoutMs: number
  /** Startup parameters: search_path, default_transaction_isolation, statement_timeout, application_name. */
  params: Record<string, string>
  /**
   * Unnamed statements only (Parse with each Bind), for a transaction-mode pooler that lends another server
   * connection per transaction: a named statement parsed on one is missing on the next (PgBouncer < 1.21).
   */
  unnamed?: boolean
}

export class WireClient {
  pid = 0
  private socket!: net.Socket
  private rest: Buffer | null = null
  private pending: Pending[] = []
  private w = new Writer()
  private closed = false
  private startup?: { resolve: () => void; reject: (e: Error) => void; scram?: Scram }
  private unnamed: Record<string, string> | null = null

  private constructor(private readonly info: ConnInfo) {}

  static async connect(target: Target, o: WireOptions): Promise<WireClient> {
    const c = new WireClient(connInfo(target))
    if (o.unnamed) c.unnamed = {}
    await c.open(o)
    return c
  }

  private open(o: WireOptions): Promise<void> {
    const { host, port } = this.info
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        fail(wireError('CONNECT_TIMEOUT', `no answer from ${host}:${port} within ${o.connectTimeoutMs} ms`))
        this.socket.destroy()
      }, o.connectTimeoutMs)
      const fail = (e: Error) => {
        clearTimeout(timer)
        this.startup = undefined
        reject(e)
      }
      this.startup = {
        resolve: () => {
          clearTimeout(timer)
          this.startup = undefined
          resolve()
        },
        reject: fail,
      }
      const plain = plainOnly(this.info)
      // Without TLS, the socket reads into one buffer of this client's own and hands it straight to the
      // parser (net's onread): no buffer allocated per read, no stream machinery per reply.
      const onread = plain ? { buffer: Buffer.allocUnsafe(READ_BUFFER), callback: (n: number, b: Buffer) => (this.onRead(b, n), true) } : undefined
      const sock = dial(host, port, onread)
      this.attach(sock)
      sock.once('connect', () => {
        sock.setNoDelay(true)
        if (plain) return this.sendStartup(o.params)
        // SSLRequest; the answer is one byte, before any message.
        sock.removeAllListeners('data')
        sock.write(SSL_REQUEST)
        sock.once('data', (b) => {
          if (b[0] === SSL_ACCEPTED) {
            const t = startTls(sock, this.info)
            this.attach(t)
            t.once('secureConnect', () => this.sendStartup(o.params))
          } else if (plainFallback(this.info)) {
            sock.on('data', (d) => this.onData(d))
            this.sendStartup(o.params)
          } else {
            fail(wireError('SSL_REFUSED', `the server at ${host}:${port} does not accept SSL (sslmode=${this.info.sslmode})`))
            sock.destroy()
          }
        })
      })
    })
  }

  private attach(sock: net.Socket): void {
    this.socket = sock
    sock.on('data', (d) => this.onData(d))
    sock.on('error', (e) => this.lost(e as WireError))
    sock.on('close', () => this.lost(wireError('CONNECTION_CLOSED', 'the server closed the connection')))
  }

  private sendStartup(params: Record<string, string>): void {
    const all: Record<string, string> = { user: this.info.user, database: this.info.database, client_encoding: 'UTF8', ...params }
    this.socket.write(startupMessage(Object.entries(all)))
  }

  private lost(e: WireError): void {
    if (this.closed) return
    this.closed = true
    const err = e.code ? e : wireError('CONNECTION_CLOSED', e.message)
    this.startup?.reject(err)
    for (const p of this.pending.splice(0)) p.reject(err)
  }

  /** Prepares named statements (parameter types inferred by the server). */
  async prepare(statements: Record<string, string>): Promise<void> {
    if (this.unnamed) {
      this.unnamed = { ...statements }
      return
    }
    const w = this.w
    const names = Object.keys(statements)
    for (const name of names) {
      const at = w.begin(0x50) // Parse
      w.cstr(name)
      w.cstr(statements[name])
      w.int16(0)
      w.end(at)
      w.bytes(SYNC)
    }
    const r = await this.send(names.length, names.length)
    if (r.code) throw wireError(r.code, `preparing the bench statements failed: ${r.message}`)
  }

  /**
   * Sends every statement of the batch in one write (Bind/Execute each, one Sync at the end, as libpq's
   * pipeline mode does) and waits for all of them. The server runs them in order and answers them in one
   * flush; after an error it skips the rest of the batch up to the Sync (a batch is one transaction's
   * statements, or one statement, so nothing after an error would have succeeded: 25P02), and the caller
   * rolls back.
   */
  run(batch: readonly Bound[]): Promise<BatchResult> {
    const w = this.w
    for (const b of batch) {
      if (this.unnamed) {
        const p = w.begin(0x50) // Parse, unnamed
        w.byte(0)
        w.cstr(this.unnamed[b.stmt])
        w.int16(0)
        w.end(p)
      }
      const at = w.begin(0x42) // Bind
      w.byte(0) // unnamed portal
      w.cstr(this.unnamed ? '' : b.stmt)
      w.int16(0) // all parameters text
      w.int16(b.params.length)
      for (const p of b.params) {
        if (typeof p === 'number') {
          const s = String(p) // digits, sign, '.': one byte each
          w.int32(s.length)
          w.ascii(s)
        } else {
          w.int32(Buffer.byteLength(p))
          w.str(p)
        }
      }
      w.int16(0) // all results text
      w.end(at)
      w.bytes(EXECUTE)
    }
    w.bytes(SYNC)
    return this.send(batch.length, 1)
  }

  private send(n: number, syncs: number): Promise<BatchResult> {
    const buf = this.w.take()
    if (this.closed) return Promise.reject(wireError('CONNECTION_CLOSED', 'the connection is closed'))
    return new Promise<BatchResult>((resolve, reject) => {
      this.pending.push({ syncs, ready: 0, stmt: 0, result: { code: null, message: null, values: nulls(n) }, resolve, reject })
      this.socket.write(buf)
    })
  }

  private onData(d: Buffer): void {
    this.onRead(d, d.length, true)
  }

  /**
   * Parses the first n bytes of b; an incomplete message at the end is kept for the next read (copied when b
   * is the socket's reused read buffer).
   */
  private onRead(d: Buffer, n: number, owned = false): void {
    let b = d
    let end = n
    if (this.rest) {
      b = Buffer.concat([this.rest, d.subarray(0, n)])
      end = b.length
      this.rest = null
      owned = true
    }
    let o = 0
    for (let e = messageEnd(b, o, end); e >= 0; e = messageEnd(b, o, end)) {
      this.message(b[o], b, o + 5, e)
      o = e
    }
    if (o < end) this.rest = owned ? b.subarray(o, end) : Buffer.from(b.subarray(o, end))
  }

  private message(type: number, b: Buffer, start: number, end: number): void {
    const p = this.pending[0]
    switch (type) {
      case 0x44: {
        // DataRow: keep the first column of the first row.
        if (!p || p.result.values[p.stmt] !== null) return
        if (b.readInt16BE(start) < 1) return
        const l = b.readInt32BE(start + 2)
        if (l >= 0) p.result.values[p.stmt] = b.toString('utf8', start + 6, start + 6 + l)
        return
      }
      case 0x43: // CommandComplete (or EmptyQueryResponse): the next statement's results follow
      case 0x49:
        if (p) p.stmt++
        return
      case 0x5a: // ReadyForQuery: a Sync is answered
        if (this.startup) return this.startup.resolve()
        if (!p) return
        if (++p.ready === p.syncs) {
          this.pending.shift()
          p.resolve(p.result)
        }
        return
      case 0x45: {
        // ErrorResponse
        const f = errorFields(b, start, end)
        const code = f.C ?? ''
        const message = f.M ?? ''
        if (this.startup) {
          this.startup.reject(wireError(code, message))
          this.socket.destroy()
          return
        }
        if (p && !p.result.code) {
          p.result.code = code
          p.result.message = message
        }
        return
      }
      case 0x4b: // BackendKeyData
        this.pid = b.readInt32BE(start)
        return
      case 0x52: // Authentication*
        try {
          return this.auth(b, start, end)
        } catch (e) {
          this.startup?.reject(e as Error)
          this.socket.destroy()
          return
        }
      default:
        // ParseComplete, BindComplete, CommandComplete, NoData, notices, parameter status: nothing to keep.
        return
    }
  }

  private auth(b: Buffer, start: number, end: number): void {
    const kind = b.readInt32BE(start)
    const { user, password } = this.info
    const w = this.w
    if (kind === 0) return // AuthenticationOk; ReadyForQuery follows
    if (kind === 3 || kind === 5) {
      let pw = password
      if (kind === 5) pw = md5Password(user, password, b.subarray(start + 4, start + 8))
      const at = w.begin(0x70)
      w.cstr(pw)
      w.end(at)
      this.socket.write(w.take())
      return
    }
    if (kind === 10) {
      const mechs = b.toString('utf8', start + 4, end).split('\0')
      if (!mechs.includes('SCRAM-SHA-256')) return this.startup?.reject(wireError('AUTH', `unsupported SASL mechanisms: ${mechs.join(' ')}`))
      const scram = new Scram(password)
      this.startup!.scram = scram
      const first = Buffer.from(scram.clientFirst())
      const at = w.begin(0x70)
      w.cstr('SCRAM-SHA-256')
      w.int32(first.length)
      w.bytes(first)
      w.end(at)
      this.socket.write(w.take())
      return
    }
    if (kind === 11) {
      const final = Buffer.from(this.startup!.scram!.clientFinal(b.toString('utf8', start + 4, end)))
      const at = w.begin(0x70)
      w.bytes(final)
      w.end(at)
      this.socket.write(w.take())
      return
    }
    if (kind === 12) return // SASLFinal: server signature; AuthenticationOk follows
    this.startup?.reject(wireError('AUTH', `unsupported authentication method ${kind}`))
  }

  /** Ends the session politely, then for sure. */
  async close(): Promise<void> {
    if (this.closed) return
    this.lost(wireError('CONNECTION_ENDED', 'the connection was closed by race'))
    const s = this.socket
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => (s.destroy(), resolve()), 500)
      s.once('close', () => (clearTimeout(t), resolve()))
      s.end(TERMINATE)
    })
  }

  /** Ends the connection now; whatever is in flight rejects with CONNECTION_DESTROYED. */
  destroy(): void {
    this.lost(wireError('CONNECTION_DESTROYED', 'the connection was ended by race'))
    this.socket?.destroy()
  }
}

function nulls(n: number): (string | null)[] {
  const a: (string | null)[] = []
  for (let i = 0; i < n; i++) a.push(null)
  return a
}

/** Bytes a plain connection reads at once (net's default for a socket is 64 KiB too). */
const READ_BUFFER = 64 * 1024
const EXECUTE = Buffer.from([0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0])
