/* session.h - the chat session file: the conversation as token ids, nothing else.
 *
 * Layout (version 1, little-endian, exactly 32 + 4 * n_ids bytes; anything else is refused):
 *   [0,8)   magic "RCSESS1\n"
 *   [8,12)  u32 version = 1
 *   [12,16) u32 vocab: every id is < vocab (the model's vocab when written; 0 = not checked)
 *   [16,24) u64 n_ids
 *   [24,32) u64 XXH64 (seed 0) of bytes [0,24) followed by the id bytes
 *   [32,..) int32 ids[n_ids]
 * The checksum covers the header too, so any single flipped bit anywhere is detected.
 *
 * Saving is atomic: the bytes go to PATH.tmp, which is fsync'd and renamed over PATH, then the
 * directory is fsync'd. A crash at any point leaves either the old or the new file at PATH.
 *
 * One writer per session: rc_session_lock takes an advisory write lock (fcntl F_SETLK, whole file)
 * on the companion PATH.lock, which holds the owner's pid as text. PATH itself cannot carry the
 * lock: every save renames a new inode over it. The lock is the kernel's, not the file's: it dies
 * with its process (SIGKILL included), so a PATH.lock left behind by a killed writer never blocks
 * the next start; only a live holder refuses. rc_session_unlock removes PATH.lock (while still
 * holding the lock) and closes it. A process that gets the lock checks that PATH.lock still names
 * the inode it locked (a holder may have unlinked it meanwhile) and retries otherwise, so two
 * processes can never both hold it. With the lock held, a PATH.tmp left by a writer killed
 * mid-save is removed. Advisory: only processes that take the lock are excluded; fcntl locks are
 * per process (closing any other descriptor of PATH.lock in the same process would release it).
 */
#ifndef RECALL_SESSION_H
#define RECALL_SESSION_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

#define RC_SESSION_MAGIC "RCSESS1\n"
#define RC_SESSION_VERSION 1u
#define RC_SESSION_HEADER 32u
#define RC_SESSION_MAX_IDS (1u << 28) /* 1 GiB of ids: far beyond any chat, keeps sizes in int range */

typedef struct {
    int32_t *ids; /* n entries (non-NULL even when n == 0) */
    size_t n;
    uint32_t vocab;
} rc_session;

/* Parses an in-memory session file (hostile input). `what` names it in error messages. */
recall_status rc_session_parse(const void *buf, size_t len, const char *what, rc_session *out, recall_err *err);
/* Reads and parses PATH. A missing file is RECALL_E_MISSING (a new session); the file is never
 * modified, whatever its content. */
recall_status rc_session_load(const char *path, rc_session *out, recall_err *err);
void rc_session_free(rc_session *s);

/* Serialises ids into a malloc'd buffer of RC_SESSION_HEADER + 4 * n bytes. */
recall_status rc_session_encode(const int32_t *ids, size_t n, uint32_t vocab, uint8_t **out, size_t *len,
                                recall_err *err);
/* Atomically replaces PATH (see above). */
recall_status rc_session_save(const char *path, const int32_t *ids, size_t n, uint32_t vocab, recall_err *err);

/* An open session lock (rc_session_lock). */
typedef struct {
    int fd;     /* the locked PATH.lock; -1 when not held */
    char *path; /* "PATH.lock" (malloc'd) */
} rc_session_lock_t;

/* Takes the lock for session PATH (see above). When another live process holds it, returns
 * RECALL_E_IO with one line naming PATH and the holder's pid, and sets *holder_pid (if non-NULL)
 * to that pid; otherwise *holder_pid is 0. */
recall_status rc_session_lock(const char *path, rc_session_lock_t *out, long *holder_pid, recall_err *err);
/* Removes PATH.lock and releases the lock; harmless on a lock not held (fd -1). */
void rc_session_unlock(rc_session_lock_t *l);

#endif
