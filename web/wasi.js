// wasi.js - the WASI (preview 1) calls recall.wasm makes, served from memory: a file system of
// Uint8Arrays under one preopened directory "/", stdout / stderr handed to callbacks, a clock, the
// environment given. No network, no real files: the page (and bench/web_replay.mjs under node)
// put the blob and the bench into `files` and read the trace back from it.
// Only what wasi-libc calls for this engine is here (the module's import list, docs/WEB.md);
// anything else answers ENOSYS, so an unexpected call is an error value, never a crash.

const E = { SUCCESS: 0, BADF: 8, EXIST: 20, INVAL: 28, ISDIR: 31, NOENT: 44, NOSYS: 52, NOTDIR: 54, NOTEMPTY: 55 };
const FT = { CHAR: 2, DIR: 3, FILE: 4 };
const O = { CREAT: 1, DIRECTORY: 2, EXCL: 4, TRUNC: 8 };
const APPEND = 1;
const ALL_RIGHTS = 0x1fffffffn;

export class WasiExit extends Error {
  constructor(code) {
    super(`exit(${code})`);
    this.code = code;
  }
}

export class Wasi {
  // files: Map of absolute path ("/w/world.blob") to Uint8Array; env: {NAME: value}
  constructor({ files = new Map(), env = {}, stdout = () => {}, stderr = () => {} } = {}) {
    this.files = files;
    this.dirs = new Set(['/']);
    this.env = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    this.out = { 1: stdout, 2: stderr };
    this.fds = new Map([[3, { dir: '/' }]]); // 0..2: stdio; 3: the preopened root
    this.next = 4;
    this.memory = null;
    this.imports = { wasi_snapshot_preview1: this.table() };
  }

  bind(instance) {
    this.memory = instance.exports.memory;
  }

  view() {
    return new DataView(this.memory.buffer);
  }
  bytes() {
    return new Uint8Array(this.memory.buffer);
  }
  str(ptr, len) {
    return new TextDecoder().decode(this.bytes().subarray(ptr, ptr + len));
  }

  // "/" + a path relative to the root, with "." and ".." resolved
  resolve(dirfd, ptr, len) {
    const d = this.fds.get(dirfd);
    if (!d || d.dir === undefined) return null;
    const parts = [];
    for (const p of (d.dir + '/' + this.str(ptr, len)).split('/')) {
      if (p === '' || p === '.') continue;
      if (p === '..') parts.pop();
      else parts.push(p);
    }
    return '/' + parts.join('/');
  }
  isDir(path) {
    if (this.dirs.has(path)) return true;
    const pre = path === '/' ? '/' : path + '/';
    for (const f of this.files.keys()) if (f.startsWith(pre)) return true;
    return false;
  }
  fileStat(view, buf, type, size) {
    for (let i = 0; i < 64; i += 8) view.setBigUint64(buf + i, 0n, true);
    view.setUint8(buf + 16, type);
    view.setBigUint64(buf + 24, 1n, true);
    view.setBigUint64(buf + 32, BigInt(size), true);
  }

  table() {
    const w = this;
    const iovs = (ptr, n) => {
      const v = w.view();
      const out = [];
      for (let i = 0; i < n; i++) out.push([v.getUint32(ptr + 8 * i, true), v.getUint32(ptr + 8 * i + 4, true)]);
      return out;
    };
    const envBytes = () => w.env.map((s) => new TextEncoder().encode(s + '\0'));
    return {
      environ_sizes_get(countPtr, sizePtr) {
        const e = envBytes();
        w.view().setUint32(countPtr, e.length, true);
        w.view().setUint32(sizePtr, e.reduce((a, b) => a + b.length, 0), true);
        return E.SUCCESS;
      },
      environ_get(ptrs, buf) {
        let p = buf;
        envBytes().forEach((b, i) => {
          w.view().setUint32(ptrs + 4 * i, p, true);
          w.bytes().set(b, p);
          p += b.length;
        });
        return E.SUCCESS;
      },
      clock_time_get(id, precision, timePtr) {
        const ns = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round(performance.now() * 1e6));
        w.view().setBigUint64(timePtr, ns, true);
        return E.SUCCESS;
      },
      fd_prestat_get(fd, buf) {
        if (fd !== 3) return E.BADF;
        w.view().setUint8(buf, 0);
        w.view().setUint32(buf + 4, 1, true);
        return E.SUCCESS;
      },
      fd_prestat_dir_name(fd, ptr, len) {
        if (fd !== 3 || len < 1) return E.BADF;
        w.bytes()[ptr] = 0x2f; // "/"
        return E.SUCCESS;
      },
      fd_fdstat_get(fd, buf) {
        const v = w.view();
        const f = w.fds.get(fd);
        if (fd > 2 && !f) return E.BADF;
        v.setUint8(buf, fd <= 2 ? FT.CHAR : f.dir !== undefined ? FT.DIR : FT.FILE);
        v.setUint16(buf + 2, f && f.append ? APPEND : 0, true);
        // stdio without seek / tell rights reads as a terminal to isatty(): line-buffered output
        v.setBigUint64(buf + 8, fd <= 2 ? ALL_RIGHTS & ~0x24n : ALL_RIGHTS, true);
        v.setBigUint64(buf + 16, ALL_RIGHTS, true);
        return E.SUCCESS;
      },
      fd_fdstat_set_flags() {
        return E.SUCCESS;
      },
      fd_filestat_get(fd, buf) {
        const f = w.fds.get(fd);
        if (fd <= 2) w.fileStat(w.view(), buf, FT.CHAR, 0);
        else if (!f) return E.BADF;
        else if (f.dir !== undefined) w.fileStat(w.view(), buf, FT.DIR, 0);
        else w.fileStat(w.view(), buf, FT.FILE, w.files.get(f.path).length);
        return E.SUCCESS;
      },
      path_filestat_get(dirfd, flags, ptr, len, buf) {
        const path = w.resolve(dirfd, ptr, len);
        if (path === null) return E.BADF;
        if (w.files.has(path)) w.fileStat(w.view(), buf, FT.FILE, w.files.get(path).length);
        else if (w.isDir(path)) w.fileStat(w.view(), buf, FT.DIR, 0);
        else return E.NOENT;
        return E.SUCCESS;
      },
      path_open(dirfd, dirflags, ptr, len, oflags, rightsBase, rightsInh, fdflags, fdPtr) {
        const path = w.resolve(dirfd, ptr, len);
        if (path === null) return E.BADF;
        const exists = w.files.has(path);
        if (!exists && w.isDir(path)) {
          if (oflags & (O.CREAT | O.TRUNC)) return E.ISDIR;
          w.fds.set(w.next, { dir: path });
        } else {
          if (oflags & O.DIRECTORY) return exists ? E.NOTDIR : E.NOENT;
          if (exists && oflags & O.EXCL) return E.EXIST;
          if (!exists && !(oflags & O.CREAT)) return E.NOENT;
          if (!exists || oflags & O.TRUNC) w.files.set(path, new Uint8Array(0));
          w.fds.set(w.next, { path, pos: 0, append: !!(fdflags & APPEND) });
        }
        w.view().setUint32(fdPtr, w.next++, true);
        return E.SUCCESS;
      },
      fd_close(fd) {
        if (fd <= 2) return E.SUCCESS;
        return w.fds.delete(fd) ? E.SUCCESS : E.BADF;
      },
      fd_sync() {
        return E.SUCCESS;
      },
      fd_read(fd, iov, n, nreadPtr) {
        const f = w.fds.get(fd);
        if (fd === 0) {
          w.view().setUint32(nreadPtr, 0, true); // no standard input: end of file
          return E.SUCCESS;
        }
        if (!f || f.path === undefined) return E.BADF;
        const data = w.files.get(f.path);
        let total = 0;
        for (const [ptr, len] of iovs(iov, n)) {
          const k = Math.max(0, Math.min(len, data.length - f.pos));
          w.bytes().set(data.subarray(f.pos, f.pos + k), ptr);
          f.pos += k;
          total += k;
          if (k < len) break;
        }
        w.view().setUint32(nreadPtr, total, true);
        return E.SUCCESS;
      },
      fd_write(fd, iov, n, nwrittenPtr) {
        let total = 0;
        if (fd === 1 || fd === 2) {
          for (const [ptr, len] of iovs(iov, n)) {
            w.out[fd](w.bytes().slice(ptr, ptr + len));
            total += len;
          }
        } else {
          const f = w.fds.get(fd);
          if (!f || f.path === undefined) return E.BADF;
          for (const [ptr, len] of iovs(iov, n)) {
            let data = w.files.get(f.path);
            if (f.append) f.pos = data.length;
            const need = f.pos + len;
            if (need > data.length) {
              // the trace arrives in many small writes: grow the backing store by doubling
              if (data.byteOffset === 0 && data.buffer.byteLength >= need) data = new Uint8Array(data.buffer, 0, need);
              else {
                const grown = new Uint8Array(new ArrayBuffer(Math.max(need, 2 * data.length, 4096)), 0, need);
                grown.set(data);
                data = grown;
              }
              w.files.set(f.path, data);
            }
            data.set(w.bytes().subarray(ptr, ptr + len), f.pos);
            f.pos += len;
            total += len;
          }
        }
        w.view().setUint32(nwrittenPtr, total, true);
        return E.SUCCESS;
      },
      fd_seek(fd, offset, whence, newPtr) {
        const f = w.fds.get(fd);
        if (!f || f.path === undefined) return E.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? f.pos : w.files.get(f.path).length;
        const pos = base + Number(offset);
        if (pos < 0) return E.INVAL;
        f.pos = pos;
        w.view().setBigUint64(newPtr, BigInt(pos), true);
        return E.SUCCESS;
      },
      path_create_directory(dirfd, ptr, len) {
        const path = w.resolve(dirfd, ptr, len);
        if (path === null) return E.BADF;
        if (w.isDir(path) || w.files.has(path)) return E.EXIST;
        w.dirs.add(path);
        return E.SUCCESS;
      },
      path_remove_directory(dirfd, ptr, len) {
        const path = w.resolve(dirfd, ptr, len);
        if (path === null) return E.BADF;
        if (!w.isDir(path)) return E.NOENT;
        for (const f of w.files.keys()) if (f.startsWith(path + '/')) return E.NOTEMPTY;
        w.dirs.delete(path);
        return E.SUCCESS;
      },
      path_rename(fd, ptr, len, fd2, ptr2, len2) {
        const from = w.resolve(fd, ptr, len);
        const to = w.resolve(fd2, ptr2, len2);
        if (from === null || to === null) return E.BADF;
        if (!w.files.has(from)) return E.NOENT;
        w.files.set(to, w.files.get(from));
        w.files.delete(from);
        return E.SUCCESS;
      },
      path_unlink_file(dirfd, ptr, len) {
        const path = w.resolve(dirfd, ptr, len);
        if (path === null) return E.BADF;
        return w.files.delete(path) ? E.SUCCESS : E.NOENT;
      },
      proc_exit(code) {
        throw new WasiExit(code);
      },
    };
  }
}

// Any import the module names that the table above lacks answers ENOSYS (a value, not a trap).
export function completeImports(module, imports) {
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.kind !== 'function') continue;
    imports[imp.module] ??= {};
    imports[imp.module][imp.name] ??= () => E.NOSYS;
  }
  return imports;
}
