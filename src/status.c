/* status.c - error values and their messages. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *recall_strerror(recall_status s) {
    switch (s) {
    case RECALL_OK: return "ok";
    case RECALL_E_IO: return "i/o error";
    case RECALL_E_FORMAT: return "malformed input";
    case RECALL_E_CHECKSUM: return "checksum mismatch";
    case RECALL_E_VERSION: return "unsupported version";
    case RECALL_E_UNSUPPORTED: return "unsupported";
    case RECALL_E_NOMEM: return "out of memory";
    case RECALL_E_ARG: return "bad argument";
    case RECALL_E_SHAPE: return "shape or dtype mismatch";
    case RECALL_E_MISSING: return "missing";
    case RECALL_E_LIMIT: return "limit exceeded";
    case RECALL_E_SECURITY: return "refused as unsafe";
    case RECALL_E_CANCELLED: return "cancelled";
    default: return "unknown error";
    }
}

recall_status rc_fail(recall_err *err, recall_status code, const char *fmt, ...) {
    if (err && err->code == RECALL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

recall_status rc_wrap(recall_err *err, const char *fmt, ...) {
    if (!err) return RECALL_E_ARG;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t pl = strlen(prefix);
    if (pl >= sizeof err->msg) pl = sizeof err->msg - 1;
    memcpy(err->msg, prefix, pl);
    size_t ol = strlen(old);
    if (ol > sizeof err->msg - 1 - pl) ol = sizeof err->msg - 1 - pl;
    memcpy(err->msg + pl, old, ol);
    err->msg[pl + ol] = 0;
    return err->code;
}
