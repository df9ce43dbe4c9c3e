/* atomic_file.c - PATH.tmp.PID, then fsync and rename (atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

recall_status rc_afile_open(rc_afile *a, const char *path, recall_err *err) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path) + 32;
    a->tmp = malloc(n);
    if (!a->tmp) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", path);
#ifdef __wasi__
    /* WASI has no process ids; its one process per module instance needs no unique suffix */
    snprintf(a->tmp, n, "%s.tmp.0", path);
#else
    snprintf(a->tmp, n, "%s.tmp.%ld", path, (long)getpid());
#endif
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        recall_status s = rc_fail(err, RECALL_E_IO, "%s: cannot create: %s", a->tmp, strerror(errno));
        free(a->tmp);
        a->tmp = NULL;
        return s;
    }
    a->path = path;
    return RECALL_OK;
}

recall_status rc_afile_commit(rc_afile *a, recall_err *err) {
    if (!a->f) return rc_fail(err, RECALL_E_ARG, "atomic file: commit without open");
    int ok = !ferror(a->f), saved = ok ? 0 : EIO; /* an earlier write failed (errno is long gone) */
    if (ok && (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0)) ok = 0, saved = errno;
    if (fclose(a->f) != 0 && ok) ok = 0, saved = errno;
    a->f = NULL;
    recall_status s = RECALL_OK;
    if (!ok) s = rc_fail(err, RECALL_E_IO, "%s: write failed: %s", a->tmp, strerror(saved));
    else if (rename(a->tmp, a->path) != 0)
        s = rc_fail(err, RECALL_E_IO, "%s: cannot rename into place: %s", a->path, strerror(errno));
    if (s) remove(a->tmp);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    return s;
}

void rc_afile_abort(rc_afile *a) {
    if (a->f) {
        fclose(a->f);
        remove(a->tmp);
    }
    free(a->tmp);
    memset(a, 0, sizeof *a);
}
