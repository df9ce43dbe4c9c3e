/* soak.c - `make soak`: a long chat through `recall chat --session`, killed by SIGKILL at seeded
 * random points and restarted from the session file.
 *
 *   soak RECALL_BIN BLOB [--turns N] [--kills K] [--seed S] [--reply-cap M] [--pooler-cache MB]
 *
 * 1. Reference: one uninterrupted chat of N turns (seeded messages, reply cap M). After each turn
 *    ("[trace] session saved" on the child's stderr) the session file is loaded with the library;
 *    every state must extend the previous one, so the final ids and the per-turn lengths describe
 *    every turn boundary. Peak RSS (VmHWM) and RSS are read from /proc at turns 20, 100 and N.
 * 2. Killed run: the same messages, in a fresh directory; K turns drawn with the seed are each
 *    interrupted by SIGKILL, either during generation (a random delay within the reference
 *    turn's time) or around the save (after the whole reply was printed, 0-2 ms later). After
 *    every kill the session must load and equal the reference exactly at a turn boundary: the
 *    turns whose save was reported, or one more when the kill landed after the rename but before
 *    the report; then the chat is restarted from the file and continues with the next message.
 *    Every turn reported saved must have printed exactly the reference's text for that turn, and
 *    the session must equal the reference state after it.
 * 3. At the end: the final session equals the reference bitwise, the chat exits 0 (under ASan
 *    with leak detection that also means no leak), and the directory holds only the session file
 *    (the lock file and any temporary file are gone).
 * Exit status 0 when every check passed. */
#include "bench_util.h"
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define SAVED "[trace] session saved"

static void die(const char *fmt, const char *a, long b) {
    fprintf(stderr, "soak: FAIL: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(1);
}

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64: the kill plan depends only on --seed */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    char *p;
    size_t n;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    b->p = realloc(b->p, b->n + n + 1);
    if (!b->p) die("%s out of memory %ld", "", 0);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

typedef struct {
    pid_t pid;
    int in, out, err;
    buf o, e; /* everything read from its stdout / stderr */
} child;

static const char *pooler_cache = "256"; /* recall chat --pooler-cache (--pooler-cache MB; 256 = its default) */

static child spawn(const char *bin, const char *blob, const char *sess, const char *cap) {
    int pi[2], po[2], pe[2];
    if (pipe(pi) || pipe(po) || pipe(pe)) die("%s pipe: errno %ld", "", errno);
    child c = {0};
    c.pid = fork();
    if (c.pid < 0) die("%s fork: errno %ld", "", errno);
    if (c.pid == 0) {
        dup2(pi[0], 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        for (int fd = 3; fd < 64; fd++) close(fd);
        execl(bin, bin, "chat", blob, "--session", sess, "--trace", "--max-turn-tokens", cap, "--pooler-cache",
              pooler_cache, (char *)NULL);
        _exit(127);
    }
    close(pi[0]);
    close(po[1]);
    close(pe[1]);
    c.in = pi[1];
    c.out = po[0];
    c.err = pe[0];
    return c;
}

/* Reads what is available within `ms` milliseconds. Returns 0 once both pipes are at EOF. */
static int pump(child *c, int ms) {
    struct pollfd pf[2] = {{c->out, POLLIN, 0}, {c->err, POLLIN, 0}};
    int open_fds = (c->out >= 0) + (c->err >= 0);
    if (!open_fds) return 0;
    if (poll(pf, 2, ms) <= 0) return 1;
    char tmp[65536];
    for (int i = 0; i < 2; i++) {
        if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t r = read(pf[i].fd, tmp, sizeof tmp);
        if (r > 0) buf_add(i ? &c->e : &c->o, tmp, (size_t)r);
        else if (r == 0) {
            close(pf[i].fd);
            *(i ? &c->err : &c->out) = -1;
        }
    }
    return (c->out >= 0) + (c->err >= 0) > 0;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s ? s : ""; (p = strstr(p, what)); p++) n++;
    return n;
}

static int finish(child *c, int do_kill) {
    if (do_kill) kill(c->pid, SIGKILL);
    if (c->in >= 0) close(c->in);
    c->in = -1;
    while (pump(c, 1000)) {}
    int st;
    if (waitpid(c->pid, &st, 0) != c->pid) die("%s waitpid: errno %ld", "", errno);
    return st;
}

static void send_msg(child *c, const char *m) {
    size_t l = strlen(m);
    if (write(c->in, m, l) != (ssize_t)l || write(c->in, "\n", 1) != 1) die("%s write to the chat: errno %ld", "", errno);
}

/* Waits until the child reported `k` completed saves. */
static void wait_saved(child *c, int k) {
    double t0 = bench_now_s();
    while (count(c->e.p, SAVED) < k) {
        if (!pump(c, 1000)) die("the chat ended before save %s%ld:\n", c->e.p ? c->e.p : "", k);
        if (bench_now_s() - t0 > 600) die("%sno save %ld within 600 s", "", k);
    }
}

static long proc_kb(pid_t pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key) + 1);
    fclose(f);
    return v;
}

/* The session at `path` must be the reference's state after some turn in [lo, hi]; returns it. */
static int check_boundary(const char *path, const int32_t *ref, const size_t *ref_len, int lo, int hi) {
    rc_session s;
    recall_err err = {0};
    recall_status st = rc_session_load(path, &s, &err);
    if (st == RECALL_E_MISSING && lo == 0) return 0;
    if (st) die("session does not open: %s (after turn %ld)", err.msg, lo);
    int turn = -1;
    for (int t = lo; t <= hi && turn < 0; t++)
        if (s.n == (t ? ref_len[t - 1] : 0) && !memcmp(s.ids, ref, s.n * sizeof *ref)) turn = t;
    if (turn < 0) {
        fprintf(stderr, "soak: session holds %zu ids, expected the reference after turn %d..%d\n", s.n, lo, hi);
        die("%ssession is not the reference at a completed turn (after %ld turns)", "", lo);
    }
    rc_session_free(&s);
    return turn;
}

static void only_session_left(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) die("%s: opendir errno %ld", dir, errno);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "s.rcs"))
            die("left behind: %s (errno %ld)", e->d_name, 0);
    closedir(d);
}

/* The chat: N seeded lines, every fifth a question about a locker told of earlier. */
static char **make_messages(int N) {
    char **msg = calloc((size_t)N, sizeof *msg);
    for (int t = 0; t < N; t++) {
        msg[t] = malloc(96);
        unsigned locker = (unsigned)(rnd() % 50), code = (unsigned)(rnd() % 10000);
        if (t % 5 == 4) snprintf(msg[t], 96, "What is the code of locker %u?", locker);
        else snprintf(msg[t], 96, "Note %d: locker %u has code %04u.", t + 1, locker, code);
    }
    return msg;
}

/* SIGKILLs the chat in the turn just sent: phase 1 during generation, at a seeded fraction of the
 * reference turn's time; phase 2 around the save, once the whole reply (reply_len bytes after
 * out0) is printed, a seeded few microseconds later. Either way before `saved` grows. */
static void kill_turn(child *c, int phase, double ref_turn_s, size_t reply_len, size_t out0, int saved) {
    if (phase == 1) {
        double until = bench_now_s() + ref_turn_s * (double)(rnd() % 1000) / 1000.0;
        while (bench_now_s() < until && count(c->e.p, SAVED) == saved) pump(c, 1);
    } else {
        while (c->o.n - out0 < reply_len && count(c->e.p, SAVED) == saved) pump(c, 1);
        usleep((useconds_t)(rnd() % 2000));
    }
    kill(c->pid, SIGKILL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: soak RECALL_BIN BLOB [--turns N] [--kills K] [--seed S] [--reply-cap M] [--pooler-cache MB]\n");
        return 2;
    }
    const char *bin = argv[1], *blob = argv[2], *cap = "8";
    int N = 200, K = 10;
    unsigned long seed = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--turns")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kills")) K = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reply-cap")) cap = argv[i + 1];
        else if (!strcmp(argv[i], "--pooler-cache")) pooler_cache = argv[i + 1];
        else die("unknown argument %s%ld", argv[i], 0);
    }
    if (N < 1 || K < 0 || K > N - 1) die("%sbad --turns / --kills (%ld)", "", N);
    signal(SIGPIPE, SIG_IGN);
    rng_state = seed;
    char **msg = make_messages(N);

    /* ---- 1. the uninterrupted reference ---- */
    char dir[] = "/tmp/recall_soak_XXXXXX", sess[64];
    if (!mkdtemp(dir)) die("%s mkdtemp errno %ld", "", errno);
    snprintf(sess, sizeof sess, "%s/s.rcs", dir);
    size_t *ref_len = calloc((size_t)N, sizeof *ref_len), *text_at = calloc((size_t)N + 1, sizeof *text_at);
    double *ref_time = calloc((size_t)N, sizeof *ref_time);
    int32_t *ref = NULL;
    double t_ref = bench_now_s();
    child c = spawn(bin, blob, sess, cap);
    long hwm[3] = {0}, rss[3] = {0};
    size_t len_at[3] = {0};
    const int marks[3] = {20 < N ? 20 : N, 100 < N ? 100 : N, N};
    for (int t = 0; t < N; t++) {
        double t0 = bench_now_s();
        send_msg(&c, msg[t]);
        wait_saved(&c, t + 1);
        ref_time[t] = bench_now_s() - t0;
        text_at[t + 1] = c.o.n;
        rc_session s;
        recall_err err = {0};
        if (rc_session_load(sess, &s, &err)) die("reference session: %s%ld", err.msg, t);
        size_t prev = t ? ref_len[t - 1] : 0;
        if (s.n <= prev || (prev && memcmp(s.ids, ref, prev * sizeof *ref)))
            die("%sreference turn %ld does not extend the previous state", "", t + 1);
        ref = realloc(ref, s.n * sizeof *ref);
        memcpy(ref, s.ids, s.n * sizeof *ref);
        ref_len[t] = s.n;
        rc_session_free(&s);
        for (int m = 0; m < 3; m++)
            if (t + 1 == marks[m]) {
                hwm[m] = proc_kb(c.pid, "VmHWM:");
                rss[m] = proc_kb(c.pid, "VmRSS:");
                len_at[m] = ref_len[t];
            }
    }
    int st = finish(&c, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) die("reference chat exit status %s%ld", c.e.p ? c.e.p : "", st);
    if (count(c.e.p, "Sanitizer")) die("reference chat: sanitizer report:\n%s%ld", c.e.p, 0);
    only_session_left(dir);
    t_ref = bench_now_s() - t_ref;
    buf ref_out = c.o;
    free(c.e.p);
    unlink(sess);

    /* ---- 2. the killed run ---- */
    int *kill_phase = calloc((size_t)N, sizeof *kill_phase); /* 0 none, 1 generation, 2 save */
    for (int k = 0; k < K;) {
        int t = 1 + (int)(rnd() % (uint64_t)(N - 1)); /* never the first turn: it has no history */
        if (!kill_phase[t]) kill_phase[t] = 1 + (int)(rnd() % 2), k++;
    }
    int done = 0, restarts = 0, kills_gen = 0, kills_save = 0, mid_save = 0, after_rename = 0, texts = 0;
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", sess);
    double t_kill = bench_now_s();
    while (done < N) {
        c = spawn(bin, blob, sess, cap);
        int saved = 0, killed = 0;
        for (int t = done; t < N && !killed; t++) {
            size_t out0 = c.o.n;
            send_msg(&c, msg[t]);
            if (kill_phase[t]) {
                const int ph = kill_phase[t];
                kill_phase[t] = 0; /* each drawn turn is interrupted once */
                kill_turn(&c, ph, ref_time[t], text_at[t + 1] - text_at[t], out0, saved);
                kills_gen += ph == 1;
                kills_save += ph == 2;
                killed = 1;
                break;
            }
            wait_saved(&c, ++saved);
            /* the printed text of this turn equals the reference's, the file its state */
            size_t a = out0, want_n = text_at[t + 1] - text_at[t];
            if (c.o.n - a != want_n || memcmp(c.o.p + a, ref_out.p + text_at[t], want_n))
                die("%sturn %ld printed other text than the reference", "", t + 1);
            texts++;
            check_boundary(sess, ref, ref_len, t + 1, t + 1);
            done = t + 1;
        }
        st = finish(&c, 0);
        if (killed) {
            if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) die("%skilled chat status %ld", "", st);
            struct stat sb;
            if (stat(tmp, &sb) == 0) mid_save++;
            int got = check_boundary(sess, ref, ref_len, done, done + 1);
            after_rename += got > done;
            done = got;
            restarts++;
        } else {
            if (!WIFEXITED(st) || WEXITSTATUS(st)) die("chat exit status %s%ld", c.e.p ? c.e.p : "", st);
        }
        if (count(c.e.p, "Sanitizer")) die("chat: sanitizer report:\n%s%ld", c.e.p, 0);
        free(c.o.p);
        free(c.e.p);
    }
    t_kill = bench_now_s() - t_kill;
    if (check_boundary(sess, ref, ref_len, N, N) != N) die("%sfinal session differs (%ld)", "", N);
    only_session_left(dir);
    unlink(sess);
    rmdir(dir);

    printf("soak: %d turns, reply cap %s, pooler cache %s MiB, seed %lu: reference run %.1f s; killed run %.1f s with %d SIGKILLs "
           "(%d during generation, %d around the save: %d left FILE.tmp mid-save, %d after the rename), "
           "%d restarts from the session file\n",
           N, cap, pooler_cache, seed, t_ref, t_kill, kills_gen + kills_save, kills_gen, kills_save, mid_save, after_rename,
           restarts);
    printf("soak: after every kill the session opened and held exactly the reference's ids at a completed turn; "
           "%d turns' printed text = the reference's; final session = the uninterrupted run's (%zu ids); "
           "only the session file left\n",
           texts, ref_len[N - 1]);
    for (int m = 0; m < 3; m++)
        printf("soak: turn %3d: history %6zu ids, peak RSS (VmHWM) %ld KB, RSS %ld KB\n", marks[m], len_at[m], hwm[m],
               rss[m]);
    if (len_at[2] > len_at[0])
        printf("soak: RSS growth turn %d -> %d: %.1f bytes per history token (%ld KB over %zu tokens)\n", marks[0],
               N, 1024.0 * (double)(rss[2] - rss[0]) / (double)(len_at[2] - len_at[0]), rss[2] - rss[0],
               len_at[2] - len_at[0]);
    return 0;
}
