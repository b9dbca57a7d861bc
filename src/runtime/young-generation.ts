// V8's young generation, kept at the size it starts with in a runtime process.
//
// V8 allocates new objects in two semi-spaces that start at 1 MB each and double under allocation up
// to 16 MB each, and no collection gives that back: after a burst of connections a runtime keeps
// 30 MB more resident for the rest of its life, which density and churn count against it. Kept at
// its starting size, measured with two runtimes side by side (pgbench alternating between them,
// engine CPU from /proc): pgbench -C -c 4, RSS 107.7 -> 88.4 MB and V8's heap 47.6 -> 17.3 MB at
// 1.02x the CPU per connection; -S -M prepared -c 16, 1.01x the CPU per transaction, same tps.
// Short-lived objects die in more, smaller scavenges; what survives is the same.
//
// It has to be capped before the runtime's modules load: loading them grows it to 8 MB a semi-space,
// and capped after that it stayed there until V8 shrank it once the process went quiet. The runtime
// of `npm run bench -- mint`, busy from its start, then made 34-38 full collections in 100 s, and
// one landing inside a warm mint is most of that mint's p99 (docs/benchmarks.md, Mint); at 1 MB
// from the start: 3 full collections, 385 scavenges. (Most likely through external memory: the
// sockets' buffers, freed when a scavenge finds their objects dead, climbed from 7 to 13 MB between
// the rare scavenges, and V8 counts external memory towards starting a full collection.)

import v8 from 'node:v8';

/**
 * Stops the young generation from growing, unless the process was started with a semi-space flag of
 * its own (`node --max-semi-space-size=N`, or in NODE_OPTIONS), which is then left to decide.
 * Returns whether it capped it.
 */
export function capYoungGeneration(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env['NODE_OPTIONS'] ?? ''): boolean {
  if ([...execArgv, ...nodeOptions.split(/\s+/)].some((arg) => arg.includes('semi-space') || arg.includes('semi_space'))) return false;
  // Once V8 is running it no longer reads --max-semi-space-size, but it reads the growth factor at
  // every growth: 1 keeps the size it has.
  v8.setFlagsFromString('--semi-space-growth-factor=1');
  return true;
}
