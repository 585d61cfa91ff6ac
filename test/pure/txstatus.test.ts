// The server's messages race reads beside postgres.js on a session's socket (db/fatal.ts): each ReadyForQuery's
// transaction status (whether a kept connection needs a ROLLBACK before the next trial) and the WARNINGs the
// server sends, alongside the FATAL it may end the connection with, however the bytes are cut.
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { test } from 'node:test'
import { readFatals, type ServerFatal, type TxStatus } from '../../src/db/fatal.js'

/** A message as the server sends it: its type byte, int32 length, then its body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5)
  head[0] = type.charCodeAt(0)
  head.writeUInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}
const fields = (f: Record<string, string>) => Buffer.concat([...Object.entries(f).map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])])
const ready = (st: string) => message('Z', Buffer.from(st))

test('ReadyForQuery statuses and WARNINGs are read in order, beside the FATAL, however the bytes arrive', () => {
  const stream = Buffer.concat([
    ready('I'),
    message('C', Buffer.from('BEGIN\0')),
    ready('T'),
    message('E', fields({ S: 'ERROR', V: 'ERROR', C: '23505', M: 'duplicate' })),
    ready('E'),
    message('N', fields({ S: 'WARNING', V: 'WARNING', C: '25P01', M: 'there is no transaction in progress' })),
    message('N', fields({ S: 'NOTICE', V: 'NOTICE', C: '00000', M: 'just a notice' })),
    ready('I'),
    message('E', fields({ S: 'FATAL', V: 'FATAL', C: '57P01', M: 'terminating connection due to administrator command' })),
  ])
  for (const size of [1, 2, 5, 7, stream.length]) {
    const socket = new EventEmitter()
    const statuses: TxStatus[] = []
    const warnings: string[] = []
    const fatals: ServerFatal[] = []
    readFatals(socket, (e) => fatals.push(e), { onReady: (s) => statuses.push(s), onWarning: (c) => warnings.push(c) })
    for (let i = 0; i < stream.length; i += size) socket.emit('data', stream.subarray(i, i + size))
    assert.deepEqual(statuses, ['I', 'T', 'E', 'I'], `chunks of ${size}`)
    assert.deepEqual(warnings, ['25P01'], `chunks of ${size}`)
    assert.deepEqual(fatals.map((f) => f.code), ['57P01'], `chunks of ${size}`)
  }
})

test('without the extra callbacks only the FATAL is read (the stream is skipped as before)', () => {
  const socket = new EventEmitter()
  const fatals: ServerFatal[] = []
  readFatals(socket, (e) => fatals.push(e))
  socket.emit('data', Buffer.concat([ready('T'), message('N', fields({ V: 'WARNING', C: '01000' })), message('E', fields({ V: 'FATAL', C: '25P03' }))]))
  assert.deepEqual(fatals.map((f) => f.code), ['25P03'])
})
