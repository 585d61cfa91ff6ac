// Where race's own files lie: SRC is the folder of its compiled modules (dist/src/), whether race runs as those
// modules or as the CLI's one file (dist/src/cli.bundle.cjs, see src/start.ts), which lies in the same folder.
export const SRC = new URL('./', import.meta.url)
