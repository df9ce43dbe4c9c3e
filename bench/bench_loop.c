/* bench_loop.c - the recall loop's fast schedule against the reference schedule on one
 * benchmark problem: wall time and decoder rows computed per generated turn, in one run, after
 * checking that both schedules produced the same replies and gate scores (bitwise).
 *
 * usage: bench_loop BLOB BENCH.json [--problem N] [--turns T] [--mode faithful|clean]
 * (RECALL_THREADS / RECALL_SIMD pick threads and path; RECALL_BENCH_LOAD=huge the blob's loading)
 */
#include "bench_problem.h"
#include "bench_util.h"
#include "problems.h"
#include "blob.h"
#include "recall_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double t_prev, secs[8];
    int n;
} timing;

static void on_turn(void *ctx, int index, const rc_problem_turn *t) {
    (void)t;
    timing *tm = ctx;
    double now = bench_now_s();
    if (index < 8) tm->secs[index] = now - tm->t_prev;
    tm->t_prev = now;
    tm->n = index + 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_loop BLOB BENCH.json [--problem N] [--turns T] [--mode faithful|clean]\n");
        return 2;
    }
    int problem = 0, turns = 5;
    rc_loop_mode mode = RC_MODE_FAITHFUL;
    recall_err err = {0};
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--problem")) problem = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--turns")) turns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode")) {
            const int m = rc_mode_parse(argv[i + 1], &err);
            if (m < 0) {
                fprintf(stderr, "bench_loop: --mode: %s\n", err.msg);
                return 2;
            }
            mode = (rc_loop_mode)m;
        }
    }
    rc_blob *b;
    rc_bench *bench;
    rc_problem p;
    /* only the first `turns` generated turns */
    bench_open_problem("bench_loop", argv[1], argv[2], problem, turns, &b, &bench, &p);
    rc_problem_run runs[2];
    timing tm[2];
    double total[2];
    for (int sched = 0; sched < 2; sched++) {
        rc_recall_opts o;
        rc_recall_defaults(b, &o);
        o.mode = mode;
        o.reference_schedule = sched;
        rc_recall *r;
        memset(&tm[sched], 0, sizeof tm[sched]);
        bench_check(rc_recall_open(b, &o, &r, &err), "bench_loop", &err);
        double t0 = bench_now_s();
        tm[sched].t_prev = t0;
        bench_check(rc_run_problem(r, &p, NULL, on_turn, &tm[sched], &runs[sched], &err), "bench_loop", &err);
        total[sched] = bench_now_s() - t0;
        rc_recall_close(r);
        fprintf(stderr, "%s schedule done in %.1f s\n", sched ? "reference" : "fast", total[sched]);
    }
    int same = runs[0].n_turns == runs[1].n_turns;
    for (int t = 0; same && t < runs[0].n_turns; t++) {
        const rc_turn *x = &runs[0].turns[t].turn, *y = &runs[1].turns[t].turn;
        same = x->n_reply == y->n_reply && !memcmp(x->reply, y->reply, (size_t)x->n_reply * 4) &&
               x->n_gates == y->n_gates;
        for (int i = 0; same && i < x->n_gates; i++)
            same = !memcmp(&x->gates[i].score, &y->gates[i].score, sizeof(float)) && x->gates[i].fired == y->gates[i].fired;
    }
    printf("bench_loop %s problem %d (%s mode): outputs %s\n", argv[1], problem,
           rc_mode_name(mode), same ? "bitwise identical" : "DIFFER");
    /* floor: the rows of the fast run that no bit-exact schedule can skip (recall_loop.h:
     * rows_new_gist + rows_seal + one per generated token); reference / floor is the best row
     * ratio any exact schedule could reach on that turn. */
    printf("| turn | feed | reply | rows fast | rows reference | rows ratio | floor | best ratio | s fast | s reference | "
           "time ratio |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < runs[0].n_turns; t++) {
        const rc_problem_turn *a = &runs[0].turns[t], *c = &runs[1].turns[t];
        const long floor_rows = a->turn.rows_new_gist + a->turn.rows_seal + a->turn.n_reply;
        printf("| %d | %d | %d | %ld | %ld | %.1fx | %ld | %.1fx | %.2f | %.2f | %.1fx |\n", t + 1, a->feed_len,
               a->turn.n_reply, a->turn.rows_computed, c->turn.rows_computed,
               (double)c->turn.rows_computed / (double)(a->turn.rows_computed ? a->turn.rows_computed : 1), floor_rows,
               (double)c->turn.rows_computed / (double)(floor_rows ? floor_rows : 1), tm[0].secs[t], tm[1].secs[t],
               tm[1].secs[t] / (tm[0].secs[t] > 0 ? tm[0].secs[t] : 1e-9));
    }
    printf("total: fast %.1f s, reference %.1f s (%.1fx)\n", total[0], total[1], total[1] / total[0]);
    rc_problem_run_free(&runs[0]);
    rc_problem_run_free(&runs[1]);
    rc_problem_free(&p);
    rc_bench_free(bench);
    rc_blob_close(b);
    return same ? 0 : 1;
}
