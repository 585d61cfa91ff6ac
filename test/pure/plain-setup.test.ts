// A spec's plain setup (specfile/plain.ts): what race explore and race run may run without the guard after a run's
// first trial. Only text that provably touches nothing outside the schema is plain; anything else keeps the guard.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { plainSetup } from '../../src/specfile/plain.js'
import { parseSpec } from '../../src/specfile/parse.js'
import { specToScenario } from '../../src/specfile/scenario.js'

test('tables of built-in types, their indexes and rows of literals are plain', () => {
  assert.equal(plainSetup(['create table orders (id serial primary key, customer_id int not null, status text not null)']), true)
  assert.equal(
    plainSetup([
      `create table accounts (id int primary key, balance numeric(12, 2) not null default 0, note varchar(20) null, at timestamp with time zone);
       create unique index on accounts (note);
       create index accounts_balance on accounts (balance);
       -- two rows
       insert into accounts values (1, 100, 'it''s', null), (2, -5.5, 'b', default);`,
      'create table ledger (id bigserial, account int not null references accounts (id), constraint one unique (id, account), foreign key (account) references accounts)',
      'insert into ledger (account) values (1)',
      '',
    ]),
    true,
  )
})

test('anything that could reach outside the schema, or that this reader does not know, is not plain', () => {
  const not = [
    'create table public.orders (id int)', // qualified
    'create table orders (id int default now())', // a function called
    'create table orders (id int); insert into orders values (pg_advisory_lock(1))',
    'create table orders (id int); insert into orders select 1',
    "create table orders (id int); insert into orders values ('1'::int)", // a cast
    "create table orders (t text); insert into orders values (E'\\x')",
    "create table orders (t text); insert into orders values ('a\\')",
    'create table orders (id int references customers (id))', // a table the setup did not make
    'insert into orders values (1)',
    'create table pg_class (id int)', // unqualified, pg_catalog's would be the one inserted into
    'create table orders (id mytype)', // a type of the user's
    'create temp table orders (id int)',
    'create table orders (id int check (id > 0))',
    'create table orders as select 1 as id',
    'create function f() returns int language sql as $$ select 1 $$',
    "set search_path = public",
    "do $$ begin perform 1; end $$",
    'create table orders (id int); create table orders (id int)',
    'create table orders (id int); create index on orders (lower(id))',
    'create table orders (id int);; ',
    'create table orders (id int) /* a comment */',
  ]
  for (const sql of not) assert.equal(plainSetup([sql]), false, sql)
})

test('a spec scenario offers its plain setup, block by block; one with a block that is not plain offers none', () => {
  const spec = (setup: string) => `${setup}\ninvariant "rows" { select count(*) >= 0 from orders }\nexpect held\nsession s1\nstep a { select 1 }\n`
  const s = specToScenario(parseSpec(spec('setup { create table orders (id serial primary key) }\nsetup { insert into orders values (default) }'), 'plain.spec'))
  const setup = s.setup as readonly string[]
  assert.equal(setup.length, 2)
  assert.deepEqual(setup.map((x) => s.plainSetup?.(x)), ['create table orders (id serial primary key)', 'insert into orders values (default)'])
  const t = specToScenario(parseSpec(spec('setup { create table orders (id serial primary key) }\nsetup { insert into orders values (nextval(\'orders_id_seq\')) }'), 'mixed.spec'))
  assert.equal(t.plainSetup, undefined)
})
