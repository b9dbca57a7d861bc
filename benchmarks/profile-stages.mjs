// The engine's busy time by stage of a connection or a query, from a `node --cpu-prof` profile of a
// runtime (docs/benchmarks.md, "A connection and a query, profiled"). A sample goes to the stage of the
// first frame, from the leaf up, that a rule below claims; the share inside send/close system calls is
// the samples whose leaf is that native call. A second table splits the same time by the layer of the
// leaf frame (what was running when sampled): those system calls, Node's own JavaScript (streams, net,
// buffers, timers), PGX's code, garbage collection, the rest of V8 and native code.
//
// Usage: node benchmarks/profile-stages.mjs DIR [TRANSACTIONS]
//   DIR holds one .cpuprofile and a file `window` with two numbers: the start and end of the pgbench
//   run in microseconds from the profile's start (samples 0.3 s inside that window are counted).
//   Run the runtime as `node --cpu-prof --cpu-prof-dir=DIR --cpu-prof-interval 100 bin/pgx.js start ...`.
import fs from 'node:fs';
const dir = process.argv[2];
const f = fs.readdirSync(dir).find((x) => x.endsWith('.cpuprofile'));
const p = JSON.parse(fs.readFileSync(`${dir}/${f}`));
const [w0, w1] = fs.readFileSync(`${dir}/window`, 'utf8').trim().split(' ').map(Number);
const nodes = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// leaf-to-root: the first frame matching a rule names the stage
const RULES = [
  ['gc', (fn) => fn === '(garbage collector)'],
  ['timers', (fn, url) => /^(processTimers|listOnTimeout|setTimeout|clearTimeout|unenroll|insert)$/.test(fn) && /timers/.test(url) || /deadlines\.js/.test(url)],
  ['logging', (fn, url) => /winston|logform|log\.js/.test(url)],
  ['metrics/watchdog/disk guard', (fn, url) => /memory-watchdog|disk-guard|prom-client|metrics/.test(url)],
  ['close: client socket', (fn, url) => /client\.js/.test(url) && /^(close|terminate|onClose)$/.test(fn) || /^(_destroy|destroy|closeSocketHandle|Socket\._destroy)$/.test(fn) && /net|destroy/.test(url)],
  ['reset+release', (fn, url) => /pool\.js/.test(url) && /^(release|makeIdle|drop|serveWaiters|evictIdleOf)$/.test(fn)],
  ['login check (+reset) on checkout', (fn, url) => /backend-login-checks|login-check\.js/.test(url) || /server\.js/.test(url) && /^(checkLogin|runPhase|onPhaseData|endPhase|phase|frame)$/.test(fn)],
  ['pool checkout', (fn, url) => /pool\.js/.test(url) && /^(acquire|checked|takeIdle|setState|leaveIdleList)$/.test(fn)],
  ['greeting (key, parameters)', (fn, url) => /client\.js/.test(url) && fn === 'attach' || /cancel\.js|backend\.js/.test(url)],
  ['routing, caps, shares', (fn, url) => /client\.js/.test(url) && /^(authenticated|takeSlot|acquire|get isAdmin)$/.test(fn) || /router|session-slots|backend-shares|disposable|registry/.test(url)],
  ['startup parsing + auth', (fn, url) => /client-login\.js|frontend\.js|scram/.test(url)],
  ['query forwarding (pump)', (fn, url) => /pump\.js|outbox\.js|frame\.js|control\.js/.test(url)],
  ['accept + socket setup', (fn, url) => /accept-onread|listener\.js/.test(url) || /client\.js/.test(url) && fn === 'ClientSession' || fn === 'Socket' && /net/.test(url)],
  ['socket reads (Node)', (fn, url) => /^(onStreamRead|onread)$/.test(fn)],
  ['event loop, other', () => false],
];
const SYSCALL = /^(writeBuffer|writev|close|writeUtf8String|accept|readStart)$/;
const isSyscall = (fn, url) => url === '' && SYSCALL.test(fn);
const LAYERS = [
  ['system calls: send, close, accept', isSyscall],
  ['garbage collection', (fn) => fn === '(garbage collector)'],
  ['PGX code', (fn, url) => /\/dist\/src\//.test(url)],
  ["Node's JavaScript (streams, net, buffers, timers)", (fn, url) => url.startsWith('node:')],
  ['dependencies', (fn, url) => /node_modules/.test(url)],
  ['V8 and native, other', () => true],
];
let t = 0, total = 0; const by = new Map(); const sys = new Map(); const layers = new Map();
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i];
  if (t < w0 + 300000 || t > w1 - 300000) continue;
  const dt = p.timeDeltas[i + 1] ?? 0;
  let n = nodes.get(p.samples[i]);
  if (n.callFrame.functionName === '(idle)') continue;
  total += dt;
  let cat = 'event loop, other';
  for (let id = n.id; id !== undefined; id = parent.get(id)) {
    const cf = nodes.get(id).callFrame;
    const hit = RULES.find(([, test]) => test(cf.functionName, cf.url));
    if (hit && hit[0] !== 'event loop, other') { cat = hit[0]; break; }
  }
  by.set(cat, (by.get(cat) ?? 0) + dt);
  if (isSyscall(n.callFrame.functionName, n.callFrame.url)) sys.set(cat, (sys.get(cat) ?? 0) + dt);
  const layer = LAYERS.find(([, test]) => test(n.callFrame.functionName, n.callFrame.url))[0];
  layers.set(layer, (layers.get(layer) ?? 0) + dt);
}
const tx = Number(process.argv[3] ?? 0);
console.log(`busy ${(total / 1000).toFixed(0)} ms${tx ? `, ${(total / tx).toFixed(1)} us per transaction (${tx} in the window)` : ''}`);
for (const [k, v] of [...by].sort((a, b) => b[1] - a[1])) console.log(`${(100 * v / total).toFixed(1).padStart(5)}%  ${tx ? (v / tx).toFixed(1).padStart(6) + ' us  ' : ''}${k}  (in send/close system calls: ${(100 * (sys.get(k) ?? 0) / v).toFixed(0)}%)`);
console.log('by the layer of the leaf frame:');
for (const [k, v] of [...layers].sort((a, b) => b[1] - a[1])) console.log(`${(100 * v / total).toFixed(1).padStart(5)}%  ${tx ? (v / tx).toFixed(2).padStart(6) + ' us  ' : ''}${k}`);
