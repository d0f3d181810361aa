/* Private to kernels/: Resize (opsets 13-19, modes nearest and linear) as one table per
 * axis, built on the host from the attributes, scales / sizes and shapes
 * (kernels/resize_plan.c, plain C that the cuda files call too): output index o of axis d
 * reads input indices i0, i1 with weights w0, w1 (nearest: w1 = 0), and input index i is
 * read by the outputs [lo, hi) (the maps are monotone), which makes backward a gather:
 * deterministic on every device. */
#ifndef PP_KERNELS_RESIZE_PLAN_H
#define PP_KERNELS_RESIZE_PLAN_H

#include "op_args.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_resize_tap {
    int64_t i0, i1;
    float w0, w1;
} pp_resize_tap;

typedef struct pp_resize_plan {
    int rank;
    int64_t in_dims[PP_MAX_RANK], out_dims[PP_MAX_RANK];
    int64_t tap_off[PP_MAX_RANK];   /* axis d's taps: taps[tap_off[d] + o], o < out_dims[d] */
    int64_t rng_off[PP_MAX_RANK];   /* axis d's ranges: rng[2 (rng_off[d] + i)] = lo, hi, i < in_dims[d] */
    int two[PP_MAX_RANK];           /* 1 where some output of axis d reads two inputs */
    pp_resize_tap *taps;
    int64_t *rng;
    void *mem;                      /* taps and rng in one host allocation of `bytes` (free it) */
    size_t bytes;
} pp_resize_plan;

/* The plan of Resize node c for X = c->in[0] into Y = c->out[0] (the scales or sizes from
 * the tensors or their host copies), or an error naming what is not supported. */
pp_status pp_resize_plan_make(const pp_kernel_ctx *c, pp_resize_plan *p, pp_error *err);

/* weight with which output o of axis d reads input i (0 when it does not) */
static inline PP_HD float pp_resize_weight(const pp_resize_tap *t, int64_t i)
{
    return (t->i0 == i ? t->w0 : 0.f) + (t->i1 == i ? t->w1 : 0.f);
}

/* Output element e (row-major over out_dims): the weighted sum of the inputs it reads, over
 * the two taps of every axis that has two (taps: the plan's table, on the device). */
static inline PP_HD float pp_resize_out(const pp_resize_plan *p, const pp_resize_tap *taps, const float *x, int64_t e)
{
    const pp_resize_tap *t[PP_MAX_RANK];
    int64_t xs[PP_MAX_RANK], s = 1;
    int bit[PP_MAX_RANK], na = 0;
    for (int d = p->rank - 1; d >= 0; d--) {
        t[d] = taps + p->tap_off[d] + e % p->out_dims[d];
        e /= p->out_dims[d];
        xs[d] = s;
        s *= p->in_dims[d];
        bit[d] = p->two[d] ? na++ : -1;
    }
    float acc = 0.f;
    for (unsigned m = 0; m < (1u << na); m++) {
        float w = 1.f;
        int64_t off = 0;
        for (int d = 0; d < p->rank; d++) {
            const int second = bit[d] >= 0 && (m >> bit[d] & 1u);
            w *= second ? t[d]->w1 : t[d]->w0;
            off += (second ? t[d]->i1 : t[d]->i0) * xs[d];
        }
        acc += w * x[off];
    }
    return acc;
}

/* Input element e's gradient: the outputs that read it (the product of its axes' ranges),
 * each dy times the product of its weights (rng: the plan's ranges, on the device). */
static inline PP_HD float pp_resize_grad(const pp_resize_plan *p, const pp_resize_tap *taps, const int64_t *rng,
                                         const float *dy, int64_t e)
{
    int64_t i[PP_MAX_RANK], lo[PP_MAX_RANK], hi[PP_MAX_RANK], o[PP_MAX_RANK];
    for (int d = p->rank - 1; d >= 0; d--) {
        i[d] = e % p->in_dims[d];
        e /= p->in_dims[d];
        lo[d] = o[d] = rng[2 * (p->rng_off[d] + i[d])];
        hi[d] = rng[2 * (p->rng_off[d] + i[d]) + 1];
        if (lo[d] >= hi[d]) return 0.f;
    }
    float acc = 0.f;
    for (;;) {
        float w = 1.f;
        int64_t off = 0;
        for (int d = 0; d < p->rank; d++) {
            w *= pp_resize_weight(taps + p->tap_off[d] + o[d], i[d]);
            off = off * p->out_dims[d] + o[d];
        }
        acc += w * dy[off];
        int d = p->rank - 1;
        while (d >= 0 && ++o[d] == hi[d]) o[d] = lo[d], d--;
        if (d < 0) return acc;
    }
}

#ifdef __cplusplus
}
#endif
#endif
