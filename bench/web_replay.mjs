// web_replay.mjs - `recall replay` inside recall.wasm under node, through the page's own glue
// (web/recall.js, web/wasi.js): the wasm half of bench/web_vs_native.sh and of make test-web's
// trace check outside the browser.
//   node bench/web_replay.mjs SITE BLOB BENCH PROBLEM TRACE_OUT [--module FILE] [--env NAME=VALUE]
//        [recall replay options...]
// Prints "wasm replay: S s; FILE: KERNELS" (the replay alone: module compiled, blob and bench
// already in memory; KERNELS: which multiply-add the wasm path ran, web_kernels). The relaxed-simd
// module needs node 20's --experimental-wasm-relaxed-simd.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [site, blob, bench, problem, traceOut, ...rest] = process.argv.slice(2);
// --module FILE (in SITE; default recall.wasm) and --env NAME=VALUE (the module's environment)
// come first; what follows goes to recall replay
let module = 'recall.wasm';
const env = {};
while (rest[0] === '--module' || rest[0] === '--env') {
  const [k, v] = rest.splice(0, 2);
  if (k === '--module') module = v;
  else env[v.slice(0, v.indexOf('='))] = v.slice(v.indexOf('=') + 1);
}
const extra = rest;
if (!traceOut) {
  console.error('usage: node bench/web_replay.mjs SITE BLOB BENCH PROBLEM TRACE_OUT [options...]');
  process.exit(2);
}
const { Recall } = await import(pathToFileURL(resolve(site, 'recall.js')).href);
const files = new Map([
  ['/w/world.blob', new Uint8Array(readFileSync(blob))],
  ['/w/bench.json', new Uint8Array(readFileSync(bench))],
]);
const r = await Recall.load(readFileSync(resolve(site, module)), { files, env });
const t0 = performance.now();
const out = r.cli(['replay', '/w/world.blob', '--bench', '/w/bench.json', '--problem', problem, '--trace', '/w/trace.json', ...extra]);
const s = (performance.now() - t0) / 1000;
process.stderr.write(out.stderr);
if (out.rc !== 0) {
  console.error(`wasm replay: exit ${out.rc}`);
  process.exit(1);
}
writeFileSync(traceOut, files.get('/w/trace.json'));
console.log(`wasm replay: ${s.toFixed(3)} s; ${module}: ${r.kernels()}`);
