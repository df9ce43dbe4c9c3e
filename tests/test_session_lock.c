/* test_session_lock.c - one writer per session file (src/formats/session.h rc_session_lock, `recall chat`).
 *
 *   library           a forked child holds the lock: the parent is refused with the child's pid, and
 *                     takes it once the child is SIGKILLed (the dead holder's PATH.lock left behind
 *                     does not block); a stale PATH.tmp is removed; unlock removes PATH.lock
 *   two_chats         two real processes: the first `recall chat --session` stays inside its chat
 *                     (stdin is a pipe); the second is refused at start, exit 3, with one line naming
 *                     the file and the first's pid; the session is untouched by it, and the first's
 *                     two turns are saved intact (equal to the library's replies); nothing but the
 *                     session is left in the directory. */
#include "problems.h"
#include "blob.h"
#include "fixture.h"
#include "recall_loop.h"
#include "session.h"
#include "tokenize_bpe.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmpdir(void) {
    char *d = strdup("/tmp/recall_slock_XXXXXX");
    cr_assert(d && mkdtemp(d));
    return d;
}

static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    size_t n = 0, cap = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 1 >= cap) b = realloc(b, cap = cap ? cap * 2 : 256);
        b[n++] = (char)c;
    }
    fclose(f);
    if (!b) b = calloc(1, 1);
    b[n] = 0;
    if (len) *len = n;
    return b;
}

Test(session_lock, library) {
    char *d = tmpdir(), path[300], lockp[320], tmp[320];
    snprintf(path, sizeof path, "%s/s.rcs", d);
    snprintf(lockp, sizeof lockp, "%s.lock", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int go[2], hold[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(hold), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        rc_session_lock_t l;
        recall_err e = {0};
        char c = rc_session_lock(path, &l, NULL, &e) ? 'n' : 'y';
        if (write(go[1], &c, 1) != 1) _exit(3);
        close(hold[1]);
        char x;
        (void)!read(hold[0], &x, 1); /* holds the lock until killed (or until this test ends) */
        _exit(0);
    }
    char c = 0;
    cr_assert_eq(read(go[0], &c, 1), 1);
    cr_assert_eq(c, 'y', "the child could not take the lock");
    size_t len;
    char *txt = slurp(lockp, &len);
    cr_assert(txt, "no %s while held", lockp);
    cr_assert_eq(atol(txt), (long)pid, "%s holds '%s', want the pid %ld", lockp, txt, (long)pid);
    free(txt);

    rc_session_lock_t l;
    recall_err err = {0};
    long holder = 0;
    cr_assert_eq(rc_session_lock(path, &l, &holder, &err), RECALL_E_IO);
    cr_assert_eq(holder, (long)pid);
    char want[64];
    snprintf(want, sizeof want, "pid %ld", (long)pid);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%s", err.msg);
    cr_assert_eq(l.fd, -1);
    rc_session_unlock(&l); /* a lock not held: must not remove the holder's file */
    cr_assert_eq(access(lockp, F_OK), 0, "refused caller removed the holder's lock file");

    /* the holder dies by SIGKILL, leaving PATH.lock (and a PATH.tmp of a save killed midway) */
    kill(pid, SIGKILL);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert_eq(access(lockp, F_OK), 0);
    FILE *f = fopen(tmp, "wb");
    cr_assert(f);
    fputs("half a save", f);
    fclose(f);
    err = (recall_err){0};
    cr_assert_eq(rc_session_lock(path, &l, &holder, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(holder, 0);
    cr_assert_neq(access(tmp, F_OK), 0, "the stale %s was kept", tmp);
    txt = slurp(lockp, NULL);
    cr_assert_eq(atol(txt), (long)getpid());
    free(txt);
    rc_session_unlock(&l);
    cr_assert_neq(access(lockp, F_OK), 0, "unlock left %s", lockp);
    cr_assert_eq(n_entries(d), 0);
    close(go[0]);
    close(go[1]);
    close(hold[0]);
    close(hold[1]);
    rmdir(d);
    free(d);
}

typedef struct {
    pid_t pid;
    int in;  /* its stdin */
    int err; /* its stderr */
} chat_child;

static chat_child spawn_chat(const char *blob, const char *sess) {
    int pin[2], perr[2];
    cr_assert_eq(pipe(pin), 0);
    cr_assert_eq(pipe(perr), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        if (dup2(pin[0], 0) < 0 || dup2(perr[1], 2) < 0 || nul < 0 || dup2(nul, 1) < 0) _exit(126);
        close(pin[1]);
        close(perr[0]);
        execl("./recall", "recall", "chat", blob, "--session", sess, "--trace", (char *)NULL);
        _exit(127);
    }
    close(pin[0]);
    close(perr[1]);
    return (chat_child){pid, pin[1], perr[0]};
}

/* Reads the child's stderr until `what` has appeared `times` times in all that was read so far
 * (*acc, grown). Fails the test after 60 s or at end of file. */
static void wait_for(int fd, char **acc, size_t *n, const char *what, int times) {
    for (;;) {
        int seen = 0;
        for (const char *p = *acc ? *acc : ""; (p = strstr(p, what)); p++) seen++;
        if (seen >= times) return;
        struct pollfd pf = {fd, POLLIN, 0};
        cr_assert_eq(poll(&pf, 1, 60000), 1, "no '%s' from the chat within 60 s: %s", what, *acc ? *acc : "");
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof buf);
        cr_assert_gt(r, 0, "the chat ended before '%s': %s", what, *acc ? *acc : "");
        *acc = realloc(*acc, *n + (size_t)r + 1);
        memcpy(*acc + *n, buf, (size_t)r);
        *n += (size_t)r;
        (*acc)[*n] = 0;
    }
}

static void send_line(int fd, const char *msg) {
    size_t l = strlen(msg);
    cr_assert_eq(write(fd, msg, l), (ssize_t)l);
    cr_assert_eq(write(fd, "\n", 1), 1);
}

Test(session_lock, two_chats, .timeout = 180) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char *d = tmpdir(), sess[300], lockp[320], cmd[1024];
    snprintf(sess, sizeof sess, "%s/s.rcs", d);
    snprintf(lockp, sizeof lockp, "%s.lock", sess);
    const char *m1 = "Important to note: the reference code is ZX9043.", *m2 = "Quick, what was the code?";
    signal(SIGPIPE, SIG_IGN);

    chat_child a = spawn_chat(blob, sess);
    char *acc = NULL;
    size_t n_acc = 0;
    send_line(a.in, m1);
    wait_for(a.err, &acc, &n_acc, "[trace] session saved", 1); /* turn 1 on disk, A waits for a line */
    size_t len1;
    char *before = slurp(sess, &len1);
    cr_assert(before);

    /* B on the same file while A is inside its chat: refused at start, one line, exit 3 */
    snprintf(cmd, sizeof cmd, "echo 'a second writer' | ./recall chat %s --session %s 2>&1 >/dev/null", blob, sess);
    char *out;
    cr_assert_eq(fixture_sh(cmd, &out), 3, "%s", out);
    char want[64];
    snprintf(want, sizeof want, "pid %ld", (long)a.pid);
    cr_assert(strstr(out, sess) && strstr(out, want), "%s", out);
    cr_assert(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
    free(out);
    size_t len2;
    char *after = slurp(sess, &len2);
    cr_assert(len2 == len1 && !memcmp(before, after, len1), "the refused chat changed the session");
    free(after);
    free(before);
    cr_assert_eq(access(lockp, F_OK), 0, "the refused chat removed the holder's lock file");

    /* A goes on: its second turn, then end of input */
    send_line(a.in, m2);
    wait_for(a.err, &acc, &n_acc, "[trace] session saved", 2);
    close(a.in);
    int st;
    cr_assert_eq(waitpid(a.pid, &st, 0), a.pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "first chat status %d: %s", st, acc);
    close(a.err);
    free(acc);

    /* the session holds exactly A's two turns, as the library computes them */
    rc_blob *b;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(blob, 0, &b, &err), RECALL_OK, "%s", err.msg);
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    rc_recall *r;
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    int32_t *hist = NULL;
    size_t nh = 0;
    const char *msgs[2] = {m1, m2};
    for (int k = 0; k < 2; k++) {
        int32_t *seg;
        size_t ns;
        cr_assert_eq(rc_chat_segment(rc_recall_bpe(r), rc_recall_eos(r), nh > 0, msgs[k], NULL, &seg, &ns, &err),
                     RECALL_OK);
        hist = realloc(hist, (nh + ns) * sizeof *hist);
        memcpy(hist + nh, seg, ns * sizeof *hist);
        nh += ns;
        free(seg);
        rc_turn t;
        cr_assert_eq(rc_recall_reply(r, hist, (int)nh, NULL, NULL, &t, &err), RECALL_OK, "%s", err.msg);
        hist = realloc(hist, (nh + (size_t)t.n_reply) * sizeof *hist);
        memcpy(hist + nh, t.reply, (size_t)t.n_reply * sizeof *hist);
        nh += (size_t)t.n_reply;
        rc_turn_free(&t);
    }
    rc_session s;
    cr_assert_eq(rc_session_load(sess, &s, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(s.n, nh);
    cr_assert_eq(memcmp(s.ids, hist, nh * sizeof *hist), 0, "the first chat's turns differ from the library's");
    rc_session_free(&s);
    free(hist);
    rc_recall_close(r);
    rc_blob_close(b);
    cr_assert_neq(access(lockp, F_OK), 0, "%s left behind after a clean exit", lockp);
    cr_assert_eq(n_entries(d), 1, "files other than the session left in %s", d);
    unlink(sess);
    rmdir(d);
    free(d);
}
