/* rope.c - RoPE profiles (plain, YaRN): reading them from the blob or the command line, the
 * positions they allow, and their inverse frequencies [D/2] + attention factor (formulas and
 * their fp32 / fp64 split in rope.h). */
#include "rope.h"

#include "ops.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROPE_MAX_POSITIONS (1 << 24) /* as qwen2.max_pos */

void rc_rope_yarn_init(rc_rope_profile *p, double factor, int64_t orig) {
    memset(p, 0, sizeof *p);
    p->type = RC_ROPE_YARN;
    p->factor = factor;
    p->orig = orig;
    p->beta_fast = 32.0; /* transformers: rope.get("beta_fast") or 32 */
    p->beta_slow = 1.0;
    p->truncate = 1;
}

int64_t rc_rope_trained_positions(const rc_rope_profile *p, int64_t max_pos) {
    if (p->type != RC_ROPE_YARN) return max_pos;
    double n = floor(p->factor * (double)p->orig);
    return n > (double)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)n;
}

recall_status rc_rope_check(const rc_rope_profile *p, const char *what, recall_err *err) {
    if (p->type == RC_ROPE_DEFAULT) return RECALL_OK;
    if (p->type != RC_ROPE_YARN) return rc_fail(err, RECALL_E_FORMAT, "%s: unknown rope type %d", what, (int)p->type);
    if (!(p->factor >= 1.0 && p->factor <= 1e6))
        return rc_fail(err, RECALL_E_FORMAT, "%s: yarn factor %.9g outside [1, 1e6]", what, p->factor);
    if (p->orig < 1 || p->orig > ROPE_MAX_POSITIONS)
        return rc_fail(err, RECALL_E_FORMAT, "%s: yarn original_max_position_embeddings %lld outside [1, %d]", what,
                       (long long)p->orig, ROPE_MAX_POSITIONS);
    int64_t n = rc_rope_trained_positions(p, 0);
    if (n > ROPE_MAX_POSITIONS)
        return rc_fail(err, RECALL_E_LIMIT, "%s: yarn factor %.9g x %lld original = %lld positions, over the %d this "
                       "build holds", what, p->factor, (long long)p->orig, (long long)n, ROPE_MAX_POSITIONS);
    if (!(p->beta_fast > 0.0 && p->beta_fast < 1e6) || !(p->beta_slow > 0.0 && p->beta_slow < 1e6))
        return rc_fail(err, RECALL_E_FORMAT, "%s: yarn beta_fast %.9g / beta_slow %.9g must be positive", what,
                       p->beta_fast, p->beta_slow);
    if (!(p->mscale >= 0.0 && p->mscale < 1e6) || !(p->mscale_all_dim >= 0.0 && p->mscale_all_dim < 1e6) ||
        !(p->attention_factor >= 0.0 && p->attention_factor < 1e6))
        return rc_fail(err, RECALL_E_FORMAT, "%s: yarn mscale %.9g / mscale_all_dim %.9g / attention_factor %.9g out "
                       "of range", what, p->mscale, p->mscale_all_dim, p->attention_factor);
    double lo, hi, att;
    rc_rope_yarn_constants(p, 10000.0, 2, &lo, &hi, &att); /* the attention factor does not depend on theta / D */
    if (!((float)att >= FLT_MIN && (float)att < 1e6f)) /* a factor that rounds to 0 or a subnormal zeroes RoPE */
        return rc_fail(err, RECALL_E_FORMAT, "%s: yarn attention factor %.9g is not a normal fp32 number", what, att);
    return RECALL_OK;
}

recall_status rc_rope_parse(const char *spec, rc_rope_profile *p, recall_err *err) {
    if (!spec || strncmp(spec, "yarn:", 5) != 0)
        return rc_fail(err, RECALL_E_ARG, "rope scaling '%s': expected yarn:FACTOR:ORIG (only yarn is supported)",
                       spec ? spec : "(null)");
    char *end;
    errno = 0;
    double factor = strtod(spec + 5, &end);
    if (errno || end == spec + 5 || *end != ':')
        return rc_fail(err, RECALL_E_ARG, "rope scaling '%s': FACTOR is not a number (yarn:FACTOR:ORIG)", spec);
    const char *o = end + 1;
    errno = 0;
    long long orig = strtoll(o, &end, 10);
    if (errno || end == o || *end)
        return rc_fail(err, RECALL_E_ARG, "rope scaling '%s': ORIG is not an integer (yarn:FACTOR:ORIG)", spec);
    rc_rope_yarn_init(p, factor, (int64_t)orig);
    char what[128];
    snprintf(what, sizeof what, "rope scaling '%.80s'", spec);
    recall_err e = {0};
    if (rc_rope_check(p, what, &e)) return rc_fail(err, RECALL_E_ARG, "%s", e.msg); /* an argument error */
    return RECALL_OK;
}

/* A profile key: one value (a number, or an integer when `integer`); absent keeps *v. */
static recall_status rope_key(const rc_blob *b, const char *key, int required, int integer, double *v,
                              recall_err *err) {
    const rc_blob_kv *kv = rc_blob_kv_find(b, key);
    if (!kv) return required ? rc_fail(err, RECALL_E_MISSING, "%s: %s is yarn but %s is missing", rc_blob_path(b),
                                       RC_ROPE_KEY_TYPE, key)
                             : RECALL_OK;
    if (kv->type == RC_KV_STR || kv->count != 1 || (integer && kv->type != RC_KV_I64))
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s must be one %s", rc_blob_path(b), key,
                       integer ? "integer" : "number");
    *v = kv->type == RC_KV_I64 ? (double)kv->v.i[0] : kv->v.f[0];
    return RECALL_OK;
}

/* Every qwen2.rope.* key of the file is one this build reads (a profile key it did not know would
 * be silently ignored: another RoPE than the file asks for), and none comes without the type. */
static recall_status rope_keys_known(const rc_blob *b, recall_err *err) {
    static const char *const known[] = {RC_ROPE_KEY_TYPE,   RC_ROPE_KEY_FACTOR,  RC_ROPE_KEY_ORIG,
                                        RC_ROPE_KEY_BETA_FAST, RC_ROPE_KEY_BETA_SLOW, RC_ROPE_KEY_MSCALE,
                                        RC_ROPE_KEY_MSCALE_ALL, RC_ROPE_KEY_ATTN, RC_ROPE_KEY_TRUNCATE};
    const char prefix[] = "qwen2.rope.";
    const int typed = rc_blob_kv_find_file(b, RC_ROPE_KEY_TYPE) != NULL;
    for (size_t i = 0; i < rc_blob_n_kv(b); i++) {
        const char *key = rc_blob_kv_at(b, i)->key;
        if (strncmp(key, prefix, sizeof prefix - 1)) continue;
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(key, known[k])) k++;
        if (k == sizeof known / sizeof known[0])
            return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: config key %s is not a RoPE profile key this build knows "
                           "(type, factor, orig_max_pos, beta_fast, beta_slow, mscale, mscale_all_dim, "
                           "attention_factor, truncate)", rc_blob_path(b), key);
        if (!typed)
            return rc_fail(err, RECALL_E_FORMAT, "%s: config key %s without %s (which RoPE is it for?)",
                           rc_blob_path(b), key, RC_ROPE_KEY_TYPE);
    }
    return RECALL_OK;
}

recall_status rc_rope_read(const rc_blob *b, rc_rope_profile *p, recall_err *err) {
    memset(p, 0, sizeof *p);
    RC_TRY(rope_keys_known(b, err));
    const rc_blob_kv *t = rc_blob_kv_find(b, RC_ROPE_KEY_TYPE);
    if (!t) return RECALL_OK;
    if (t->type != RC_KV_STR || strcmp(t->v.s, "yarn") != 0 || t->count != 4)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: %s is '%.40s'; this build knows yarn only", rc_blob_path(b),
                       RC_ROPE_KEY_TYPE, t->type == RC_KV_STR ? t->v.s : "(not a string)");
    double factor = 0, orig = 0, trunc = 1;
    RC_TRY(rope_key(b, RC_ROPE_KEY_FACTOR, 1, 0, &factor, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_ORIG, 1, 1, &orig, err));
    rc_rope_yarn_init(p, factor, 0);
    if (!(orig >= 1 && orig <= ROPE_MAX_POSITIONS)) /* checked before the conversion to int64 */
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s %.17g outside [1, %d]", rc_blob_path(b), RC_ROPE_KEY_ORIG, orig,
                       ROPE_MAX_POSITIONS);
    p->orig = (int64_t)orig;
    RC_TRY(rope_key(b, RC_ROPE_KEY_BETA_FAST, 0, 0, &p->beta_fast, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_BETA_SLOW, 0, 0, &p->beta_slow, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_MSCALE, 0, 0, &p->mscale, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_MSCALE_ALL, 0, 0, &p->mscale_all_dim, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_ATTN, 0, 0, &p->attention_factor, err));
    RC_TRY(rope_key(b, RC_ROPE_KEY_TRUNCATE, 0, 1, &trunc, err));
    if (trunc != 0 && trunc != 1)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s is %.17g (0 or 1)", rc_blob_path(b), RC_ROPE_KEY_TRUNCATE, trunc);
    p->truncate = trunc != 0;
    return rc_rope_check(p, rc_blob_path(b), err);
}

static rc_blob_kv kv_f64(const char *key, double v) {
    rc_blob_kv kv;
    memset(&kv, 0, sizeof kv);
    snprintf(kv.key, sizeof kv.key, "%s", key);
    kv.type = RC_KV_F64;
    kv.count = 1;
    kv.v.f[0] = v;
    return kv;
}

static rc_blob_kv kv_i64(const char *key, int64_t v) {
    rc_blob_kv kv = kv_f64(key, 0);
    kv.type = RC_KV_I64;
    kv.v.i[0] = v;
    return kv;
}

recall_status rc_rope_attach(rc_blob *b, const rc_rope_profile *p, recall_err *err) {
    RC_TRY(rc_rope_check(p, "rope scaling", err));
    rc_rope_profile have;
    RC_TRY(rc_rope_read(b, &have, err));
    int64_t max_pos = 0;
    RC_TRY(rc_blob_get_i64(b, "qwen2.max_pos", &max_pos, err));
    if (have.type != RC_ROPE_DEFAULT) {
        /* REQ-CTX-002: a file-declared profile is used; an explicit one may only repeat it */
        if (have.type != p->type || have.factor != p->factor || have.orig != p->orig) {
            char a[160], f[160];
            rc_rope_describe(p, max_pos, a, sizeof a);
            rc_rope_describe(&have, max_pos, f, sizeof f);
            return rc_fail(err, RECALL_E_ARG, "%s: rope scaling %s contradicts the file's %s", rc_blob_path(b), a, f);
        }
        return RECALL_OK;
    }
    if (p->type == RC_ROPE_DEFAULT) return RECALL_OK;
    rc_blob_kv kv;
    memset(&kv, 0, sizeof kv);
    snprintf(kv.key, sizeof kv.key, "%s", RC_ROPE_KEY_TYPE);
    kv.type = RC_KV_STR;
    kv.count = 4;
    memcpy(kv.v.s, "yarn", 4);
    const rc_blob_kv all[] = {kv,
                              kv_f64(RC_ROPE_KEY_FACTOR, p->factor),
                              kv_i64(RC_ROPE_KEY_ORIG, p->orig),
                              kv_f64(RC_ROPE_KEY_BETA_FAST, p->beta_fast),
                              kv_f64(RC_ROPE_KEY_BETA_SLOW, p->beta_slow),
                              kv_f64(RC_ROPE_KEY_MSCALE, p->mscale),
                              kv_f64(RC_ROPE_KEY_MSCALE_ALL, p->mscale_all_dim),
                              kv_f64(RC_ROPE_KEY_ATTN, p->attention_factor),
                              kv_i64(RC_ROPE_KEY_TRUNCATE, p->truncate)};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) RC_TRY(rc_blob_overlay_kv(b, &all[i], err));
    return RECALL_OK;
}

recall_status rc_rope_blob_positions(const rc_blob *b, int *out, recall_err *err) {
    int64_t max_pos = 0;
    rc_rope_profile p;
    RC_TRY(rc_blob_get_i64(b, "qwen2.max_pos", &max_pos, err));
    RC_TRY(rc_rope_read(b, &p, err));
    int64_t n = rc_rope_trained_positions(&p, max_pos);
    if (n < 1 || n > ROPE_MAX_POSITIONS)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %lld trained positions outside [1, %d]", rc_blob_path(b),
                       (long long)n, ROPE_MAX_POSITIONS);
    *out = (int)n;
    return RECALL_OK;
}

/* get_mscale(scale, mscale) of transformers, in double */
static double get_mscale(double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * rc_log_d(scale) + 1.0;
}

void rc_rope_yarn_constants(const rc_rope_profile *p, double theta, int D, double *low, double *high,
                            double *attention) {
    const double pi = 3.141592653589793116; /* math.pi */
    const double lb = rc_log_d(theta);
    /* Python: (dim * log(orig / (r * 2 * pi))) / (2 * log(base)), left to right */
    double lo = ((double)D * rc_log_d((double)p->orig / (p->beta_fast * 2.0 * pi))) / (2.0 * lb);
    double hi = ((double)D * rc_log_d((double)p->orig / (p->beta_slow * 2.0 * pi))) / (2.0 * lb);
    if (p->truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    if (lo < 0.0) lo = 0.0;
    if (hi > (double)(D - 1)) hi = (double)(D - 1);
    if (lo == hi) hi += 0.001; /* transformers: prevent the singularity */
    *low = lo;
    *high = hi;
    if (p->attention_factor > 0.0)
        *attention = p->attention_factor;
    else if (p->mscale > 0.0 && p->mscale_all_dim > 0.0)
        *attention = get_mscale(p->factor, p->mscale) / get_mscale(p->factor, p->mscale_all_dim);
    else
        *attention = get_mscale(p->factor, 1.0);
}

void rc_rope_inv_freq(const rc_rope_profile *p, double theta, int D, float *inv_freq, float *attention) {
    const float th = (float)theta;
    const int half = D / 2;
    *attention = 1.0f;
    if (p->type != RC_ROPE_YARN) {
        for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / rc_powf_pos(th, (float)(2 * i) / (float)D);
        return;
    }
    double low, high, att;
    rc_rope_yarn_constants(p, theta, D, &low, &high, &att);
    const float flow = (float)low, span = (float)(high - low), ff = (float)p->factor;
    for (int i = 0; i < half; i++) {
        const float pf = rc_powf_pos(th, (float)(2 * i) / (float)D);
        const float ext = 1.0f / pf, itp = 1.0f / (ff * pf);
        float ramp = ((float)i - flow) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        const float e = 1.0f - ramp;
        const float a = itp * (1.0f - e), b = ext * e; /* separate roundings: -ffp-contract=off */
        inv_freq[i] = a + b;
    }
    *attention = (float)att;
}

void rc_rope_describe(const rc_rope_profile *p, int64_t max_pos, char *buf, size_t n) {
    if (p->type != RC_ROPE_YARN) {
        snprintf(buf, n, "default (%lld positions)", (long long)max_pos);
        return;
    }
    double lo, hi, att;
    rc_rope_yarn_constants(p, 10000.0, 2, &lo, &hi, &att); /* attention does not depend on theta / D */
    snprintf(buf, n, "yarn:%.9g:%lld (factor %.9g x %lld original = %lld positions, beta %.9g/%.9g, attention %.9g)",
             p->factor, (long long)p->orig, p->factor, (long long)p->orig,
             (long long)rc_rope_trained_positions(p, max_pos), p->beta_fast, p->beta_slow, att);
}
