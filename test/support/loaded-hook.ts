// The module hook loaded.ts registers (it runs on the hooks' own thread): appends each resolved URL to the file.
import fs from 'node:fs'

type Next = (specifier: string, context: unknown) => Promise<{ url: string }>

export async function resolve(specifier: string, context: unknown, next: Next): Promise<{ url: string }> {
  const r = await next(specifier, context)
  if (process.env.RACE_TEST_LOADED) fs.appendFileSync(process.env.RACE_TEST_LOADED, r.url + '\n')
  return r
}
