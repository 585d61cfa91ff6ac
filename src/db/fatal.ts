// Why the server ended a connection. When PostgreSQL ends a session on its own (idle_in_transaction_session_timeout,
// pg_terminate_backend, shutdown) it sends one last ErrorResponse with severity FATAL and a SQLSTATE, then closes
// the socket. With no query in flight, postgres.js reads that message and drops it; libpq would hand it to the
// next statement. So race reads the server's messages on the same socket (read only: postgres.js still parses
// and answers everything) and keeps the last FATAL's SQLSTATE, for the session to report on its next step.
// The same reader can also report each ReadyForQuery's transaction status (whether a kept session connection
// may still be in a transaction) and the WARNINGs the server sends.
import net from 'node:net'
import { errorFields, severity } from './pgwire.js'

export interface ServerFatal {
  /** The SQLSTATE, e.g. 25P03 (idle_in_transaction_session_timeout) or 57P01 (admin_shutdown). */
  code: string
  message: string
}

/** The parts of postgres.js's parsed options that say where to connect. */
interface Where {
  host: string[]
  port: number[]
  path?: string | false
  ssl?: unknown
}

/**
 * A postgres.js `socket` option: the socket postgres.js would open itself (its one host and port, or its Unix
 * socket; postgres.js writes at once, Node queues that until connected, and postgres.js's connect_timeout still
 * bounds it), with a reader that reports every FATAL ErrorResponse. Use it only where canReadFatals says so.
 */
export function fatalSocket(onFatal: (e: ServerFatal) => void, also: AlsoRead = {}): (o: Where) => net.Socket {
  return (o: Where) => {
    const socket = o.path ? net.connect(o.path) : net.connect(o.port[0], o.host[0])
    readFatals(socket, onFatal, also)
    return socket
  }
}

/** The transaction status a ReadyForQuery carries (libpq's PQtransactionStatus): idle, in a transaction, in a failed one. */
export type TxStatus = 'I' | 'T' | 'E'

/** More of the server's messages the same reader reports, when asked. */
export interface AlsoRead {
  /** Every ReadyForQuery's transaction status, in order: the server's own word on whether a transaction is open. */
  onReady?: (status: TxStatus) => void
  /** The SQLSTATE of every WARNING the server sends (NoticeResponse), e.g. 25P01 for a ROLLBACK outside a transaction. */
  onWarning?: (code: string) => void
}

/** Whether postgres.js connects to exactly one place in the clear: over TLS the bytes are encrypted, and with several hosts postgres.js's own failover must stay. */
export function canReadFatals(o: Partial<Where>): boolean {
  return !o.ssl && (o.host?.length ?? 0) === 1
}

/** Follows the server's message stream (type byte, int32 length, body) and reports FATAL ErrorResponses. */
export function readFatals(socket: NodeJS.EventEmitter, onFatal: (e: ServerFatal) => void, also: AlsoRead = {}): void {
  let head = Buffer.alloc(0)
  let skip = 0
  let body: Buffer[] | undefined
  let kind = 0
  let want = 0
  socket.on('data', (chunk: Buffer) => {
    let at = 0
    while (at < chunk.length) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - at)
        skip -= n
        at += n
        continue
      }
      if (body) {
        const n = Math.min(want, chunk.length - at)
        body.push(chunk.subarray(at, at + n))
        want -= n
        at += n
        if (want === 0) {
          const whole = Buffer.concat(body)
          body = undefined
          if (kind === 0x45 /* E */) {
            const fatal = parseFatal(whole)
            if (fatal) onFatal(fatal)
          } else if (kind === 0x5a /* Z */) {
            const st = String.fromCharCode(whole[0])
            if (st === 'I' || st === 'T' || st === 'E') also.onReady?.(st)
          } else if (kind === 0x4e /* N */) {
            const code = parseWarning(whole)
            if (code) also.onWarning?.(code)
          }
        }
        continue
      }
      const n = Math.min(5 - head.length, chunk.length - at)
      head = Buffer.concat([head, chunk.subarray(at, at + n)])
      at += n
      if (head.length < 5) continue
      const type = head[0]
      const length = head.readUInt32BE(1) - 4
      head = Buffer.alloc(0)
      if (length > 0 && (type === 0x45 /* E */ || (type === 0x5a /* Z */ && also.onReady) || (type === 0x4e /* N */ && also.onWarning))) {
        body = []
        kind = type
        want = length
      } else skip = Math.max(0, length)
    }
  })
}

/** The SQLSTATE of a NoticeResponse body when its severity is WARNING. */
export function parseWarning(body: Buffer): string | undefined {
  const fields = errorFields(body)
  return severity(fields) === 'WARNING' ? fields.C : undefined
}

/** The SQLSTATE and message of an ErrorResponse body when its severity is FATAL or PANIC. */
export function parseFatal(body: Buffer): ServerFatal | undefined {
  const fields = errorFields(body)
  const level = severity(fields)
  if ((level === 'FATAL' || level === 'PANIC') && fields.C) return { code: fields.C, message: fields.M ?? '' }
  return undefined
}
