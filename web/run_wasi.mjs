// run_wasi.mjs MODULE [ARGS...] - runs a WASI command module (the kernel self-test built for
// wasm32, make test-web) under node with the page's own WASI glue (web/wasi.js): its output on
// stdout / stderr, its exit status as node's.
import { readFileSync } from 'node:fs';
import { Wasi, WasiExit, completeImports } from './wasi.js';

const [path, ...args] = process.argv.slice(2);
const wasi = new Wasi({ stdout: (b) => process.stdout.write(b), stderr: (b) => process.stderr.write(b) });
const argv = [path, ...args].map((a) => new TextEncoder().encode(a + '\0'));
Object.assign(wasi.imports.wasi_snapshot_preview1, {
  args_sizes_get(countPtr, sizePtr) {
    wasi.view().setUint32(countPtr, argv.length, true);
    wasi.view().setUint32(sizePtr, argv.reduce((a, b) => a + b.length, 0), true);
    return 0;
  },
  args_get(ptrs, buf) {
    let p = buf;
    argv.forEach((b, i) => {
      wasi.view().setUint32(ptrs + 4 * i, p, true);
      wasi.bytes().set(b, p);
      p += b.length;
    });
    return 0;
  },
});
const module = await WebAssembly.compile(readFileSync(path));
const instance = await WebAssembly.instantiate(module, completeImports(module, wasi.imports));
wasi.bind(instance);
let code = 0;
try {
  instance.exports._start();
} catch (e) {
  if (!(e instanceof WasiExit)) throw e;
  code = e.code;
}
process.exitCode = code;
