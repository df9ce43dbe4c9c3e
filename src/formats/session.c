/* session.c - the chat session file (session.h): parse, encode, atomic save. */
#include "session.h"

#include "checksum.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* Header bytes [0,24) then the id bytes, as stored. */
static uint64_t session_sum(const uint8_t *head24, const uint8_t *id_bytes, size_t n) {
    rc_xxh64_state st;
    rc_xxh64_init(&st, 0);
    rc_xxh64_update(&st, head24, 24);
    rc_xxh64_update(&st, id_bytes, n * 4);
    return rc_xxh64_digest(&st);
}

void rc_session_free(rc_session *s) {
    free(s->ids);
    memset(s, 0, sizeof *s);
}

recall_status rc_session_parse(const void *buf, size_t len, const char *what, rc_session *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    const uint8_t *p = buf;
    if (len < RC_SESSION_HEADER)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %zu bytes, shorter than the %u-byte session header (truncated?)",
                       what, len, RC_SESSION_HEADER);
    if (memcmp(p, RC_SESSION_MAGIC, 8) != 0)
        return rc_fail(err, RECALL_E_FORMAT, "%s: not a recall session file (bad magic at byte 0)", what);
    uint32_t version = rd32(p + 8);
    if (version != RC_SESSION_VERSION)
        return rc_fail(err, RECALL_E_VERSION, "%s: session format version %u at byte 8, this build reads %u", what,
                       version, RC_SESSION_VERSION);
    uint32_t vocab = rd32(p + 12);
    uint64_t n = rd64(p + 16);
    if (n > RC_SESSION_MAX_IDS)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %llu ids at byte 16 exceeds the limit %u", what,
                       (unsigned long long)n, RC_SESSION_MAX_IDS);
    size_t want = RC_SESSION_HEADER + (size_t)n * 4;
    if (len != want)
        return rc_fail(err, RECALL_E_FORMAT, "%s: header says %llu ids (%zu bytes) but the file has %zu bytes (%s)",
                       what, (unsigned long long)n, want, len, len < want ? "truncated" : "trailing bytes");
    uint64_t stored = rd64(p + 24), got = session_sum(p, p + RC_SESSION_HEADER, (size_t)n);
    if (stored != got)
        return rc_fail(err, RECALL_E_CHECKSUM, "%s: checksum mismatch (stored %016llx at byte 24, computed %016llx)",
                       what, (unsigned long long)stored, (unsigned long long)got);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %llu ids", what, (unsigned long long)n);
    for (size_t i = 0; i < (size_t)n; i++) {
        uint32_t v = rd32(p + RC_SESSION_HEADER + 4 * i);
        /* the checksum only proves the writer meant it; ids are still checked against the vocab */
        if (v > INT32_MAX || (vocab && v >= vocab)) {
            free(ids);
            return rc_fail(err, RECALL_E_FORMAT, "%s: id %u at byte %zu is outside the vocab (%u)", what, v,
                           RC_SESSION_HEADER + 4 * i, vocab);
        }
        ids[i] = (int32_t)v;
    }
    out->ids = ids;
    out->n = (size_t)n;
    out->vocab = vocab;
    return RECALL_OK;
}

recall_status rc_session_load(const char *path, rc_session *out, recall_err *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        return rc_fail(err, e == ENOENT ? RECALL_E_MISSING : RECALL_E_IO, "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rc_fail(err, RECALL_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > RC_SESSION_HEADER + (uint64_t)RC_SESSION_MAX_IDS * 4) {
        close(fd);
        return rc_fail(err, RECALL_E_FORMAT, "%s: %lld bytes is larger than any session file", path,
                       (long long)st.st_size);
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    recall_status s = got == len ? rc_session_parse(buf, len, path, out, err)
                                 : rc_fail(err, RECALL_E_IO, "%s: short read (%zu of %zu bytes)", path, got, len);
    free(buf);
    return s;
}

/* The ids a session may hold: at most RC_SESSION_MAX_IDS, each in [0, vocab) (vocab 0: any >= 0). */
static recall_status check_ids(const int32_t *ids, size_t n, uint32_t vocab, recall_err *err) {
    if (n > RC_SESSION_MAX_IDS)
        return rc_fail(err, RECALL_E_LIMIT, "session: %zu ids exceeds the limit %u", n, RC_SESSION_MAX_IDS);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (vocab && (uint32_t)ids[i] >= vocab))
            return rc_fail(err, RECALL_E_ARG, "session: id %d at index %zu is outside the vocab (%u)", ids[i], i,
                           vocab);
    return RECALL_OK;
}

recall_status rc_session_encode(const int32_t *ids, size_t n, uint32_t vocab, uint8_t **out, size_t *len,
                                recall_err *err) {
    *out = NULL;
    *len = 0;
    RC_TRY(check_ids(ids, n, vocab, err));
    size_t total = RC_SESSION_HEADER + n * 4;
    uint8_t *b = malloc(total);
    if (!b) return rc_fail(err, RECALL_E_NOMEM, "session: out of memory");
    memcpy(b, RC_SESSION_MAGIC, 8);
    wr32(b + 8, RC_SESSION_VERSION);
    wr32(b + 12, vocab);
    wr64(b + 16, (uint64_t)n);
    for (size_t i = 0; i < n; i++) wr32(b + RC_SESSION_HEADER + 4 * i, (uint32_t)ids[i]);
    wr64(b + 24, session_sum(b, b + RC_SESSION_HEADER, n));
    *out = b;
    *len = total;
    return RECALL_OK;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync of the containing directory makes the rename itself durable. */
static void sync_dir_of(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + (slash == path) : 0;
    if (dl >= sizeof dir) return;
    if (dl) memcpy(dir, path, dl);
    else dir[dl++] = '.';
    dir[dl] = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The ids as stored, CHUNK at a time, into a caller buffer of 4 * CHUNK bytes. */
#define CHUNK 4096
static size_t pack(const int32_t *ids, size_t n, size_t from, uint8_t *out) {
    size_t m = n - from < CHUNK ? n - from : CHUNK;
    for (size_t i = 0; i < m; i++) wr32(out + 4 * i, (uint32_t)ids[from + i]);
    return m;
}

/* No heap allocation on this path (stack buffers only), so it is also safe in a forked child of a
 * multi-threaded process: the tests kill such a child in the middle of a save. */
recall_status rc_session_save(const char *path, const int32_t *ids, size_t n, uint32_t vocab, recall_err *err) {
    RC_TRY(check_ids(ids, n, vocab, err));
    char tmp[PATH_MAX];
    size_t pl = strlen(path);
    if (pl + 5 > sizeof tmp) return rc_fail(err, RECALL_E_ARG, "session: path of %zu bytes is too long", pl);
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    uint8_t head[RC_SESSION_HEADER], buf[4 * CHUNK];
    memcpy(head, RC_SESSION_MAGIC, 8);
    wr32(head + 8, RC_SESSION_VERSION);
    wr32(head + 12, vocab);
    wr64(head + 16, (uint64_t)n);
    rc_xxh64_state st;
    rc_xxh64_init(&st, 0);
    rc_xxh64_update(&st, head, 24);
    for (size_t i = 0; i < n;) {
        size_t m = pack(ids, n, i, buf);
        rc_xxh64_update(&st, buf, 4 * m);
        i += m;
    }
    wr64(head + 24, rc_xxh64_digest(&st));
    recall_status s = RECALL_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return rc_fail(err, RECALL_E_IO, "%s: %s", tmp, strerror(errno));
    int bad = write_all(fd, head, sizeof head);
    for (size_t i = 0; i < n && !bad;) {
        size_t m = pack(ids, n, i, buf);
        bad = write_all(fd, buf, 4 * m);
        i += m;
    }
    if (bad) s = rc_fail(err, RECALL_E_IO, "%s: write: %s", tmp, strerror(errno));
    else if (fsync(fd) != 0) s = rc_fail(err, RECALL_E_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !s) s = rc_fail(err, RECALL_E_IO, "%s: close: %s", tmp, strerror(errno));
    if (!s && rename(tmp, path) != 0) s = rc_fail(err, RECALL_E_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
    if (s) unlink(tmp);
    else sync_dir_of(path);
    return s;
}

/* ---- one writer per session: the advisory lock on PATH.lock (session.h) ---- */

/* A bounded retry count: each retry means the holder released or unlinked the lock file between
 * two of our system calls, so more than a few in a row would be a pathological race. */
#define LOCK_TRIES 64

#ifdef __wasi__
/* WASI has neither fcntl record locks nor process ids, so one writer per session cannot be
 * enforced there: refuse rather than write a session file that another writer could clobber. */
recall_status rc_session_lock(const char *path, rc_session_lock_t *out, long *holder_pid, recall_err *err) {
    out->fd = -1;
    out->path = NULL;
    if (holder_pid) *holder_pid = 0;
    return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: session files need a lock (fcntl), which WASI lacks", path);
}
#else
recall_status rc_session_lock(const char *path, rc_session_lock_t *out, long *holder_pid, recall_err *err) {
    out->fd = -1;
    out->path = NULL;
    if (holder_pid) *holder_pid = 0;
    size_t pl = strlen(path);
    if (pl + 6 > PATH_MAX) return rc_fail(err, RECALL_E_ARG, "session: path of %zu bytes is too long", pl);
    char lp[PATH_MAX], tmp[PATH_MAX];
    memcpy(lp, path, pl);
    memcpy(lp + pl, ".lock", 6);
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    for (int attempt = 0; attempt < LOCK_TRIES; attempt++) {
        int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return rc_fail(err, RECALL_E_IO, "%s: %s", lp, strerror(errno));
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int e = errno;
            if (e != EACCES && e != EAGAIN) {
                close(fd);
                return rc_fail(err, RECALL_E_IO, "%s: fcntl(F_SETLK): %s", lp, strerror(e));
            }
            struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
            int got = fcntl(fd, F_GETLK, &q);
            close(fd);
            if (got == 0 && q.l_type == F_UNLCK) continue; /* released in between: try again */
            long pid = got == 0 ? (long)q.l_pid : -1;
            if (holder_pid) *holder_pid = pid;
            return rc_fail(err, RECALL_E_IO, "%s: in use by another process (pid %ld holds %s)", path, pid, lp);
        }
        /* Locked. A holder that was exiting may have unlinked lp after our open: then we hold a
         * lock on a nameless inode that excludes nobody, so start again with a fresh file. */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lp, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            close(fd);
            continue;
        }
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
            int e = errno;
            unlink(lp);
            close(fd);
            return rc_fail(err, RECALL_E_IO, "%s: writing the pid: %s", lp, strerror(e));
        }
        /* we are the only writer: a PATH.tmp now is the remains of a save killed midway */
        if (unlink(tmp) != 0 && errno != ENOENT) {
            int e = errno;
            unlink(lp);
            close(fd);
            return rc_fail(err, RECALL_E_IO, "%s: removing a stale temporary file: %s", tmp, strerror(e));
        }
        out->path = malloc(pl + 6);
        if (!out->path) {
            unlink(lp);
            close(fd);
            return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", lp);
        }
        memcpy(out->path, lp, pl + 6);
        out->fd = fd;
        return RECALL_OK;
    }
    return rc_fail(err, RECALL_E_IO, "%s: the lock file %s kept changing under %d attempts", path, lp, LOCK_TRIES);
}
#endif

void rc_session_unlock(rc_session_lock_t *l) {
    if (l->fd >= 0) {
        /* unlink before close: whoever locks this inode next sees it is no longer lp and retries */
        if (l->path) unlink(l->path);
        close(l->fd);
    }
    free(l->path);
    l->fd = -1;
    l->path = NULL;
}
