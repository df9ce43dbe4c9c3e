// recall.js - recall.wasm for JavaScript (a browser worker, or node for the benchmark): the
// flat entry points of web/web_api.c as methods that take and return JS values. Errors from the
// library come back as values and are thrown here as RecallError with the library's one line.
import { Wasi, WasiExit, completeImports } from './wasi.js';

export class RecallError extends Error {}

// A module of one function: f32x4.relaxed_madd of the vectors at 0, 16 and 32 in its memory,
// stored at 48 (relaxed-simd; an engine without it refuses the module).
const MADD_PROBE = new Uint8Array([
  0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, // magic, version
  1, 4, 1, 0x60, 0, 0, // types: () -> ()
  3, 2, 1, 0, // functions: one of type 0
  5, 3, 1, 0, 1, // memory: one page
  7, 9, 2, 1, 0x6d, 2, 0, 1, 0x66, 0, 0, // exports: "m" memory 0, "f" function 0
  10, 0x1f, 1, 0x1d, 0, // code: one body of 29 bytes, no locals
  0x41, 0x30, // i32.const 48
  0x41, 0, 0xfd, 0, 4, 0, // v128.load [0]
  0x41, 0, 0xfd, 0, 4, 0x10, // v128.load [16]
  0x41, 0, 0xfd, 0, 4, 0x20, // v128.load [32]
  0xfd, 0x85, 0x02, // f32x4.relaxed_madd
  0xfd, 0x0b, 4, 0, // v128.store
  0x0b, // end
]);

// What this engine's relaxed-simd multiply-add does, on lanes where one rounding and two differ:
// 'fused', 'unfused' (or anything but one rounding), or 'unsupported' (no relaxed-simd). It picks
// which module to load (the page's worker); the module then proves it again itself, on more lanes
// and on its kernels, before it uses the fused kernels (simd/kernels_wasm.c).
export function relaxedMadd() {
  if (!WebAssembly.validate(MADD_PROBE)) return 'unsupported';
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(MADD_PROBE));
  const f = new Float32Array(exports.m.buffer, 0, 16);
  const e = 1 + 2 ** -12, h = 2 ** -24 * (1 + 2 ** -23), m = 1 - 2 ** -23, odd = 1 + 2 ** -23;
  // (1+2^-12)^2 - (1+2^-11) = 2^-24 (unfused: 0); ... - 1; a sum a hair off a midpoint (unfused:
  // the product rounds to half an ulp and the tie goes to the even float), both signs
  f.set([e, e, h, -h, e, e, m, m, -(1 + 2 ** -11), -1, odd, -odd]);
  const want = [2 ** -24, 2 ** -11 + 2 ** -24, odd, -odd];
  exports.f();
  return want.every((w, i) => f[12 + i] === w) ? 'fused' : 'unfused';
}

const EVENT_KINDS = ['token', 'rebuild', 'gate', 'fire'];

export class Recall {
  // bytes: the module (ArrayBuffer / Uint8Array); files: the WASI file system (Map path -> bytes)
  static async load(bytes, { files = new Map(), env = {} } = {}) {
    const r = new Recall();
    r.stdout = [];
    r.stderr = [];
    r.wasi = new Wasi({ files, env, stdout: (b) => r.stdout.push(b), stderr: (b) => r.stderr.push(b) });
    r.onEvent = null;
    const module = await WebAssembly.compile(bytes);
    const imports = { ...r.wasi.imports, recall: { event: (...a) => r.event(...a) } };
    r.instance = await WebAssembly.instantiate(module, completeImports(module, imports));
    r.wasi.bind(r.instance);
    r.x = r.instance.exports;
    r.x._initialize();
    return r;
  }

  // which multiply-add the wasm kernel path runs here, and why (the load-time proof's verdict)
  kernels() {
    return this.cstr(this.x.web_kernels());
  }

  mem() {
    return this.x.memory.buffer;
  }
  cstr(ptr) {
    if (!ptr) return null;
    const b = new Uint8Array(this.mem());
    let end = ptr;
    while (b[end]) end++;
    return new TextDecoder().decode(b.subarray(ptr, end));
  }
  // a NUL-terminated copy of a JS string in wasm memory (free with x.web_free)
  putStr(s) {
    const b = new TextEncoder().encode(s);
    const p = this.x.web_alloc(b.length + 1);
    new Uint8Array(this.mem()).set(b, p);
    new Uint8Array(this.mem())[p + b.length] = 0;
    return p;
  }
  putIds(ids) {
    const p = this.x.web_alloc(ids.length * 4);
    new Int32Array(this.mem(), p, ids.length).set(ids);
    return p;
  }
  // four bytes of scratch for an out parameter, called with its address; returns [result, *out]
  withOut(fn, isFloat = false) {
    const p = this.x.web_alloc(8);
    try {
      const r = fn(p);
      const v = new DataView(this.mem());
      return [r, isFloat ? v.getFloat32(p, true) : v.getInt32(p, true)];
    } finally {
      this.x.web_free(p);
    }
  }

  // A blob (ArrayBuffer / Uint8Array) as a model handle; a damaged or foreign one throws the
  // library's message.
  open(blob) {
    const b = blob instanceof Uint8Array ? blob : new Uint8Array(blob);
    const p = this.x.web_alloc(b.length);
    if (!p) throw new RecallError(`out of memory for a blob of ${b.length} bytes`);
    new Uint8Array(this.mem()).set(b, p);
    const m = this.x.web_open(p, b.length);
    if (!m) throw new RecallError('out of memory');
    const e = this.cstr(this.x.web_model_error(m));
    if (e) {
      this.x.web_close(m);
      throw new RecallError(e);
    }
    const info = this.x.web_alloc(24);
    this.x.web_model_info(m, info);
    const [vocab, maxPos, hidden, layers, bos, eos] = new Int32Array(this.mem(), info, 6);
    this.x.web_free(info);
    return { handle: m, vocab, maxPos, hidden, layers, bos, eos };
  }
  close(model) {
    this.x.web_close(model.handle);
  }

  segment(model, withEos, text) {
    const s = this.putStr(text);
    const [ids, n] = this.withOut((out) => this.x.web_segment(model.handle, withEos ? 1 : 0, s, out));
    this.x.web_free(s);
    if (!ids) throw new RecallError(this.cstr(this.x.web_model_error(model.handle)));
    const r = Int32Array.from(new Int32Array(this.mem(), ids, n));
    this.x.web_ids_free(model.handle, ids);
    return r;
  }

  detokenize(model, ids, skipSpecial = false) {
    const p = this.putIds(ids);
    const t = this.x.web_detokenize(model.handle, p, ids.length, skipSpecial ? 1 : 0);
    this.x.web_free(p);
    if (!t) throw new RecallError(this.cstr(this.x.web_model_error(model.handle)));
    const s = this.cstr(t);
    this.x.web_ids_free(model.handle, t);
    return s;
  }

  // arm: 'RC_bge' | 'SP' | 'FULL'; simd: null (this build's best) or a path name
  loopOpen(model, arm = 'RC_bge', simd = null) {
    const armNo = { RC_bge: 0, SP: 1, FULL: 2 }[arm];
    if (armNo === undefined) throw new RecallError(`unknown arm ${arm}`);
    const s = simd ? this.putStr(simd) : 0;
    const l = this.x.web_loop_open(model.handle, armNo, s);
    if (s) this.x.web_free(s);
    if (!l) throw new RecallError('out of memory');
    const e = this.cstr(this.x.web_loop_error(l));
    if (e) {
      this.x.web_loop_close(l);
      throw new RecallError(e);
    }
    const geo = this.x.web_alloc(32);
    this.x.web_loop_info(l, geo, geo + 24);
    const g = new Int32Array(this.mem(), geo, 6);
    const threshold = new Float32Array(this.mem(), geo + 24, 1)[0];
    const info = { window: g[0], block: g[1], chunk: g[2], k: g[3], turnCap: g[4], bufMin: g[5], threshold };
    this.x.web_free(geo);
    return { handle: l, model, arm, ...info };
  }
  loopClose(loop) {
    this.x.web_loop_close(loop.handle);
  }

  event(kind, token, c0, score, fired, injected, nCand, idsPtr, nIds, hasSp, injLen, windowLen, reused) {
    if (!this.onEvent) return 0;
    const ev = { kind: EVENT_KINDS[kind], token, c0, score, fired: !!fired, injected: !!injected, nCand, hasSp: !!hasSp, injLen, windowLen, reused };
    if (kind === 3) ev.ids = Int32Array.from(new Int32Array(this.mem(), idsPtr, nIds));
    return this.onEvent(ev) ? 1 : 0;
  }

  // One assistant turn on the whole conversation so far; onEvent(ev) sees every loop event as it
  // happens (return true to cancel). Returns the reply ids.
  turn(loop, feed, onEvent = null) {
    const p = this.putIds(feed);
    this.onEvent = onEvent;
    let s;
    try {
      s = this.x.web_turn(loop.handle, p, feed.length);
    } finally {
      this.onEvent = null;
      this.x.web_free(p);
    }
    if (s) throw new RecallError(this.cstr(this.x.web_loop_error(loop.handle)));
    const [ids, n] = this.withOut((out) => this.x.web_reply(loop.handle, out));
    return Int32Array.from(new Int32Array(this.mem(), ids, n));
  }

  // The command line, as `recall ARGS...` natively: files it writes stay in the file system
  // (this.wasi.files). Returns {rc, stdout, stderr}.
  cli(args) {
    this.stdout.length = 0;
    this.stderr.length = 0;
    const argv = ['recall', ...args].map((a) => this.putStr(a));
    const arr = this.putIds(argv);
    let rc;
    try {
      rc = this.x.web_cli(argv.length, arr);
    } catch (e) {
      if (!(e instanceof WasiExit)) throw e;
      rc = e.code;
    } finally {
      argv.forEach((p) => this.x.web_free(p));
      this.x.web_free(arr);
    }
    const join = (chunks) => new TextDecoder().decode(concat(chunks));
    return { rc, stdout: join(this.stdout), stderr: join(this.stderr) };
  }
}

function concat(chunks) {
  const out = new Uint8Array(chunks.reduce((a, c) => a + c.length, 0));
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}
