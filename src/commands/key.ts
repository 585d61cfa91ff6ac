// race key <namespace> <id>: the advisory key exactly as §8.1 derives it, and how pg_locks will show it.
import type { Command } from 'commander'
import { UsageError } from '../errors.js'
import { advisoryKey } from '../scenario.js'

export interface KeyView {
  input: string
  /** Decimal, as a string: a signed 64-bit value does not fit a JSON number. */
  key: string
  sql: string
  /** What pg_locks shows for this key: classid = high 32 bits, objid = low 32 bits (as oids), objsubid = 1. */
  pgLocks: { classid: string; objid: string; objsubid: 1 }
}

export function keyView(namespace: string, id: string): KeyView {
  if (!namespace) throw new UsageError(`the namespace is empty: give one, e.g. race key setup_request 42`)
  if (!id) throw new UsageError(`the id is empty: give one, e.g. race key ${namespace} 42`)
  const k = advisoryKey(namespace, id)
  const u = BigInt.asUintN(64, k)
  return {
    input: `${namespace}:${id}`,
    key: String(k),
    sql: `SELECT pg_advisory_xact_lock(${k}); -- ${`${namespace}:${id}`.replace(/[\r\n]+/g, " ")}`,
    pgLocks: { classid: String(u >> 32n), objid: String(u & 0xffffffffn), objsubid: 1 },
  }
}

export function keyCommand(namespace: string, id: string, o: { sql?: boolean; json?: boolean }): number {
  const v = keyView(namespace, id)
  if (o.json) process.stdout.write(JSON.stringify(v, null, 2) + '\n')
  else process.stdout.write((o.sql ? v.sql : v.key) + '\n')
  return 0
}

export function registerKey(program: Command, exit: (code: number) => void): Command {
  return program
    .command('key')
    .description('the advisory key of namespace:id, as the article derives it (sha256, first 8 bytes, big-endian, signed)')
    .argument('<namespace>', 'what the key is for, e.g. setup_request')
    .argument('<id>', 'the resource, e.g. a user id')
    .option('--sql', 'print the matching SELECT pg_advisory_xact_lock(...)')
    .option('--json', 'print JSON (the key as a string, and how pg_locks shows it)')
    .action((ns: string, id: string, o: { sql?: boolean; json?: boolean }) => exit(keyCommand(ns, id, o)))
    .addHelpText(
      'after',
      '\nExamples:\n  $ race key setup_request 42                  7844923485908670055\n  $ race key setup_request 1 --sql\n  $ race key account 3fa85f64-5717-4562-b3fc-2c963f66afa6 --json',
    )
}
