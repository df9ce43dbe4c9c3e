/* atomic_file.h - writing a file so that a reader sees either the previous file or the whole new
 * one, never a part of it: the bytes go to PATH.tmp.PID, which commit flushes, fsyncs and renames
 * over PATH; abort (and any failed commit) removes it. Every output file of the CLI and of the
 * writers in the library (blob, .npz, JSON documents) goes through this. */
#ifndef RECALL_ATOMIC_FILE_H
#define RECALL_ATOMIC_FILE_H

#include "status.h"

#include <stdio.h>

typedef struct {
    FILE *f;          /* write here between open and commit */
    char *tmp;        /* PATH.tmp.PID */
    const char *path; /* borrowed: must live until commit or abort */
} rc_afile;

/* Creates PATH.tmp.PID for writing (binary mode). On failure *a is cleared and err names the file. */
recall_status rc_afile_open(rc_afile *a, const char *path, recall_err *err);
/* Checks the stream for errors, flushes, fsyncs, closes and renames over PATH. On any failure the
 * temporary file is removed and err names the file and the reason. *a is cleared either way. */
recall_status rc_afile_commit(rc_afile *a, recall_err *err);
/* Closes and removes the temporary file (nothing when *a was never opened or is already done). */
void rc_afile_abort(rc_afile *a);

#endif
