#!/usr/bin/env node
// Entry point of the `pgx` command; the code is compiled TypeScript under dist/ (npm run build).
import('../dist/src/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`pgx: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
