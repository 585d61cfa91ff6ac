// The PostgreSQL wire protocol (version 3) as race's own clients speak it: where to connect (connInfo), the
// bytes of start-up, SSL negotiation, authentication (cleartext, MD5, SCRAM-SHA-256) and cancel requests,
// message framing, and the fields of an ErrorResponse or NoticeResponse. One module, so that the bench's load
// client (bench/wire.ts), the isolation runner's libpq-like connection (tester/pgconn.ts), the reader of a
// session's last FATAL (db/fatal.ts) and the PgBouncer race starts (servers/pooler.ts) read the protocol the
// same way. It holds no connection of its own: each client keeps the reading strategy its job needs (the
// bench's reused buffer, libpq's input buffer, a reader that skips what it does not want).
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto'
import net from 'node:net'
import tls from 'node:tls'
import type { Target } from './target.js'

export interface ConnInfo {
  host: string
  port: number
  user: string
  password: string
  database: string
  sslmode: string
}

/** Connection facts from the target's URL, or from the PG* variables as libpq reads them. */
export function connInfo(target: Target, env: NodeJS.ProcessEnv = process.env): ConnInfo {
  if (target.url) {
    const u = new URL(target.url)
    const user = decodeURIComponent(u.username) || env.PGUSER || 'postgres'
    return {
      host: u.searchParams.get('host') ?? (decodeURIComponent(u.hostname) || 'localhost'),
      port: Number(u.port || u.searchParams.get('port') || 5432),
      user,
      password: decodeURIComponent(u.password) || env.PGPASSWORD || '',
      database: decodeURIComponent(u.pathname.replace(/^\//, '')) || user,
      sslmode: u.searchParams.get('sslmode') ?? 'disable',
    }
  }
  const user = env.PGUSER ?? env.PGUSERNAME ?? 'postgres'
  return {
    host: env.PGHOST ?? 'localhost',
    port: Number(env.PGPORT ?? 5432),
    user,
    password: env.PGPASSWORD ?? '',
    database: env.PGDATABASE ?? user,
    sslmode: env.PGSSLMODE ?? 'disable',
  }
}

/** A socket to the server: its Unix socket when host is a directory, else TCP. onread: net's reused read buffer. */
export function dial(host: string, port: number, onread?: net.OnReadOpts): net.Socket {
  return host.startsWith('/') ? net.connect({ path: `${host}/.s.PGSQL.${port}`, onread }) : net.connect({ port, host, onread })
}

/** Whether the connection stays in the clear without asking (sslmode=disable, or a Unix socket). */
export function plainOnly(info: ConnInfo): boolean {
  return info.sslmode === 'disable' || info.host.startsWith('/')
}

/** SSLRequest; the server answers with one byte before any message: 'S' (TLS follows) or 'N'. */
export const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
/** The server's yes to SSLRequest. */
export const SSL_ACCEPTED = 0x53

/** TLS over the raw socket once the server said yes; the certificate is checked only for sslmode=verify-*. */
export function startTls(raw: net.Socket, info: ConnInfo): tls.TLSSocket {
  return tls.connect({ socket: raw, servername: net.isIP(info.host) ? undefined : info.host, rejectUnauthorized: info.sslmode.startsWith('verify') })
}

/** Whether a server that refuses SSL may be spoken to in the clear (sslmode prefer or allow). */
export function plainFallback(info: ConnInfo): boolean {
  return info.sslmode === 'prefer' || info.sslmode === 'allow'
}

/** The protocol version a StartupMessage asks for: 3.0. */
const PROTOCOL_3 = 196608

/** A StartupMessage: the pairs in order, names in UTF-8, values in the given encoding (latin1: bytes as they are). */
export function startupMessage(pairs: readonly (readonly [string, string])[], values: BufferEncoding = 'utf8'): Buffer {
  const parts: Buffer[] = [Buffer.alloc(8)]
  parts[0].writeInt32BE(PROTOCOL_3, 4)
  for (const [k, v] of pairs) parts.push(Buffer.from(k + '\0', 'utf8'), Buffer.from(v + '\0', values))
  parts.push(Buffer.from([0]))
  const b = Buffer.concat(parts)
  b.writeInt32BE(b.length, 0)
  return b
}

/** A frontend message: its type byte, its length, its body. */
export function frame(type: number, body: Buffer): Buffer {
  const head = Buffer.alloc(5)
  head[0] = type
  head.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

/** A NUL-terminated string (UTF-8). */
export function cstr(s: string): Buffer {
  return Buffer.from(s + '\0', 'utf8')
}

/** Terminate. */
export const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4])

/**
 * Where the backend message that starts at `at` ends (type byte, int32 length counting itself, body), or -1
 * when b holds less than all of it before `end`. Its body is b[at + 5, the returned end).
 */
export function messageEnd(b: Buffer, at: number, end: number): number {
  if (end - at < 5) return -1
  const e = at + 1 + b.readInt32BE(at + 1)
  return e <= end ? e : -1
}

/** The password of an AuthenticationMD5Password answer: 'md5' + md5(md5(password + user) + salt). */
export function md5Password(user: string, password: string, salt: Buffer): string {
  const inner = createHash('md5').update(password + user).digest('hex')
  return 'md5' + createHash('md5').update(Buffer.concat([Buffer.from(inner), salt])).digest('hex')
}

/** An error of the connection itself, with a code in place of a SQLSTATE (AUTH, CONNECT_TIMEOUT...). */
export function codedError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code })
}

/** SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL uses it: no channel binding, empty user name. */
export class Scram {
  private nonce = randomBytes(18).toString('base64')
  private firstBare = `n=,r=${this.nonce}`
  constructor(private readonly password: string) {}
  clientFirst(): string {
    return `n,,${this.firstBare}`
  }
  clientFinal(serverFirst: string): string {
    const attrs = Object.fromEntries(serverFirst.split(',').map((kv) => [kv[0], kv.slice(2)]))
    if (!attrs.r?.startsWith(this.nonce)) throw codedError('AUTH', 'SCRAM: the server nonce does not extend ours')
    const salted = pbkdf2Sync(this.password.normalize('NFKC'), Buffer.from(attrs.s, 'base64'), Number(attrs.i), 32, 'sha256')
    const clientKey = createHmac('sha256', salted).update('Client Key').digest()
    const storedKey = createHash('sha256').update(clientKey).digest()
    const withoutProof = `c=biws,r=${attrs.r}`
    const authMessage = `${this.firstBare},${serverFirst},${withoutProof}`
    const sig = createHmac('sha256', storedKey).update(authMessage).digest()
    const proof = Buffer.from(clientKey.map((x, i) => x ^ sig[i]))
    return `${withoutProof},p=${proof.toString('base64')}`
  }
}

/** A CancelRequest for the backend with this pid and secret key (sent on a connection of its own). */
export function cancelRequest(pid: number, secret: number): Buffer {
  const b = Buffer.alloc(16)
  b.writeInt32BE(16, 0)
  b.writeInt32BE(80877102, 4)
  b.writeInt32BE(pid, 8)
  b.writeInt32BE(secret, 12)
  return b
}

/**
 * The fields of an ErrorResponse or NoticeResponse body (b[start, end)), by their one-letter codes: S severity
 * (localized), V severity, C SQLSTATE, M message, D, H, P, W... Texts in UTF-8, or latin1 to keep every byte as
 * one character (the isolation runner's exact transcript).
 */
export function errorFields(b: Buffer, start = 0, end = b.length, encoding: BufferEncoding = 'utf8'): Record<string, string> {
  const fields: Record<string, string> = {}
  let at = start
  while (at < end && b[at] !== 0) {
    const key = String.fromCharCode(b[at])
    const e = b.indexOf(0, at + 1)
    if (e < 0 || e >= end) break
    fields[key] = b.toString(encoding, at + 1, e)
    at = e + 1
  }
  return fields
}

/** A message's severity, unlocalized when the server sends it (V, 9.6 and later), else as sent (S). */
export function severity(fields: Record<string, string>): string | undefined {
  return fields.V ?? fields.S
}
