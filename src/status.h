/* status.h - errors are values.
 *
 * Every library function that can fail returns a recall_status and, when given a non-NULL
 * recall_err, fills it with one human-readable line naming the file / tensor / byte offset.
 * Only the CLI (src/cli/) prints or exits.
 */
#ifndef RECALL_STATUS_H
#define RECALL_STATUS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RECALL_OK = 0,
    RECALL_E_IO,          /* open/read/write/rename/mmap failed */
    RECALL_E_FORMAT,      /* malformed input file (header, bounds, syntax) */
    RECALL_E_CHECKSUM,    /* checksum or CRC mismatch */
    RECALL_E_VERSION,     /* unsupported format version / endianness */
    RECALL_E_UNSUPPORTED, /* valid input we do not handle (dtype, pooling mode, ...) */
    RECALL_E_NOMEM,       /* allocation failed */
    RECALL_E_ARG,         /* bad argument from the caller */
    RECALL_E_SHAPE,       /* dtype/shape does not match the config */
    RECALL_E_MISSING,     /* required tensor / key / file absent */
    RECALL_E_LIMIT,       /* a size or context limit would be exceeded */
    RECALL_E_SECURITY,    /* refused: input asks for something unsafe (pickle GLOBAL, ...) */
    RECALL_E_CANCELLED,   /* the caller's callback asked to stop */
    RECALL_E_COUNT
} recall_status;

typedef struct {
    recall_status code;
    char msg[512];
} recall_err;

const char *recall_strerror(recall_status s);

/* Records code + formatted message in *err (if non-NULL) and returns code. Keeps the first
 * error: a message already set is not overwritten unless it is RECALL_OK. */
recall_status rc_fail(recall_err *err, recall_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefixes an existing error message with context ("pooler.pt: "), keeping its code. */
recall_status rc_wrap(recall_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define RC_TRY(expr)                                                                     \
    do {                                                                                 \
        recall_status rc_try_s_ = (expr);                                                \
        if (rc_try_s_ != RECALL_OK) return rc_try_s_;                                    \
    } while (0)

#endif
