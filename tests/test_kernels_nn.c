/* Tests of the cpu "nn" kernels: every backward against central finite differences
 * (kernel_check.h), every forward against brute-force loops or closed forms computed
 * here in double, and that each kernel's backward needs only what the registry's saves_in/out keep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kernel_check.h"
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/op_info.h>

#define T4(a, b, c, d) .rank = 4, .dims = {a, b, c, d}
#define T3(a, b, c) .rank = 3, .dims = {a, b, c}
#define T2(a, b) .rank = 2, .dims = {a, b}
#define T1(a) .rank = 1, .dims = {a}
#define T0 .rank = 0
#define CASE(nm, o, ni, no) .name = nm, .op = o, .nin = ni, .nout = no
#define I64(arr) .dtype = PP_DTYPE_I64, .rank = 1, .dims = {sizeof(arr) / sizeof(arr[0])}, .fill = KC_DATA, .data = arr
#define LABELS(lo_, hi_) .dtype = PP_DTYPE_I64, .fill = KC_INTS, .lo = lo_, .hi = hi_
#define AINT(nm, v) {.name = nm, .type = PP_ATTR_INT, .i = v}
#define AINTS(nm, arr) {.name = nm, .type = PP_ATTR_INTS, .n = sizeof(arr) / sizeof(arr[0]), .ints = arr}
#define ASTR(nm, v) {.name = nm, .type = PP_ATTR_STRING, .s = v}

static const int64_t ax_1[] = {1}, ax_m1_0[] = {-1, 0}, ax_none[1] = {0}, ax_0_2[] = {0, 2};
static const int64_t perm_0213[] = {0, 2, 1, 3}, perm_0231[] = {0, 2, 3, 1};
static const int64_t sl_starts[] = {1, -1}, sl_ends[] = {4, -100}, sl_axes[] = {0, 2}, sl_steps[] = {1, -2};
static const int64_t sl_starts2[] = {-3, 0}, sl_ends2[] = {INT64_MIN, 5}, sl_steps2[] = {-1, 2}, sl_axes2[] = {-1, 1};
static const int64_t split_25[] = {2, 5}, split_23[] = {2, 3};
static const int64_t shape_234[] = {2, 3, 4};

/* ---------------- gradients vs finite differences ---------------- */

static const kc_case grad_cases[] = {
    {CASE("softmax_last", "Softmax", 1, 1), .in = {{T3(3, 4, 5)}}, .out = {{T3(3, 4, 5)}}},
    {CASE("softmax_axis1", "Softmax", 1, 1), .in = {{T3(3, 4, 5)}}, .out = {{T3(3, 4, 5)}},
     .attrs = {AINT("axis", 1)}, .nattrs = 1},
    {CASE("softmax_axis-3", "Softmax", 1, 1), .in = {{T3(3, 4, 5)}}, .out = {{T3(3, 4, 5)}},
     .attrs = {AINT("axis", -3)}, .nattrs = 1},
    {CASE("softmax_op11_coerce2d", "Softmax", 1, 1), .opset = 11, .in = {{T3(3, 4, 5)}}, .out = {{T3(3, 4, 5)}}},
    {CASE("logsoftmax_last", "LogSoftmax", 1, 1), .in = {{T2(6, 7)}}, .out = {{T2(6, 7)}}},
    {CASE("logsoftmax_axis-2", "LogSoftmax", 1, 1), .in = {{T3(3, 4, 5)}}, .out = {{T3(3, 4, 5)}},
     .attrs = {AINT("axis", -2)}, .nattrs = 1},
    {CASE("logsoftmax_op11_axis2", "LogSoftmax", 1, 1), .opset = 11, .in = {{T3(2, 3, 4)}}, .out = {{T3(2, 3, 4)}},
     .attrs = {AINT("axis", 2)}, .nattrs = 1},
    {CASE("layernorm_last_stats", "LayerNormalization", 3, 3), .in = {{T3(2, 3, 8)}, {T1(8)}, {T1(8)}},
     .out = {{T3(2, 3, 8)}, {T3(2, 3, 1)}, {T3(2, 3, 1)}}},
    {CASE("layernorm_axis1_nobias", "LayerNormalization", 3, 1), .in = {{T3(2, 3, 4)}, {T2(3, 4)}, {T1(12), .omitted = 1}},
     .out = {{T3(2, 3, 4)}}, .attrs = {AINT("axis", 1), {.name = "epsilon", .type = PP_ATTR_FLOAT, .f = 1e-3f}}, .nattrs = 2},
    {CASE("reducesum_op13_axis1_keep", "ReduceSum", 2, 1), .opset = 13, .in = {{T3(3, 4, 5)}, {I64(ax_1)}},
     .out = {{T3(3, 1, 5)}}},
    {CASE("reducesum_op13_axes-1,0_nokeep", "ReduceSum", 2, 1), .opset = 13, .in = {{T3(3, 4, 5)}, {I64(ax_m1_0)}},
     .out = {{T1(4)}}, .attrs = {AINT("keepdims", 0)}, .nattrs = 1},
    {CASE("reducesum_all_nokeep", "ReduceSum", 1, 1), .opset = 13, .in = {{T3(3, 4, 5)}}, .out = {{T0}},
     .attrs = {AINT("keepdims", 0)}, .nattrs = 1},
    {CASE("reducesum_noop_empty_axes", "ReduceSum", 2, 1), .opset = 13,
     .in = {{T2(3, 4)}, {.dtype = PP_DTYPE_I64, T1(0), .fill = KC_DATA, .data = ax_none}}, .out = {{T2(3, 4)}},
     .attrs = {AINT("noop_with_empty_axes", 1)}, .nattrs = 1},
    {CASE("reducesum_op11_attr", "ReduceSum", 1, 1), .opset = 11, .in = {{T3(3, 4, 5)}}, .out = {{T3(1, 4, 1)}},
     .attrs = {AINTS("axes", ax_0_2)}, .nattrs = 1},
    {CASE("reducemean_op17_attr_nokeep", "ReduceMean", 1, 1), .in = {{T3(3, 4, 5)}}, .out = {{T1(4)}},
     .attrs = {AINTS("axes", ax_0_2), AINT("keepdims", 0)}, .nattrs = 2},
    {CASE("reducemean_op18_input_last", "ReduceMean", 2, 1), .opset = 18, .in = {{T3(3, 4, 5)}, {I64(ax_m1_0)}},
     .out = {{T3(1, 4, 1)}}},
    {CASE("xent_mean", "SoftmaxCrossEntropyLoss", 2, 1), .in = {{T2(6, 5)}, {T1(6), LABELS(0, 4)}}, .out = {{T0}}},
    {CASE("xent_mean_weights_ignore", "SoftmaxCrossEntropyLoss", 3, 1),
     .in = {{T2(8, 5)}, {T1(8), LABELS(-1, 4)}, {T1(5), .fill = KC_POSITIVE, .nograd = 1}}, .out = {{T0}},
     .attrs = {AINT("ignore_index", -1)}, .nattrs = 1},
    {CASE("xent_sum_ignore", "SoftmaxCrossEntropyLoss", 2, 1), .in = {{T2(8, 5)}, {T1(8), LABELS(0, 4)}}, .out = {{T0}},
     .attrs = {AINT("ignore_index", 2), ASTR("reduction", "sum")}, .nattrs = 2},
    {CASE("xent_none_spatial_weights", "SoftmaxCrossEntropyLoss", 3, 1),
     .in = {{T3(3, 4, 5)}, {T2(3, 5), LABELS(0, 3)}, {T1(4), .fill = KC_POSITIVE, .nograd = 1}}, .out = {{T2(3, 5)}},
     .attrs = {ASTR("reduction", "none")}, .nattrs = 1},
    {CASE("xent_mean_spatial_logprob", "SoftmaxCrossEntropyLoss", 2, 2), .in = {{T3(3, 4, 5)}, {T2(3, 5), LABELS(0, 3)}},
     .out = {{T0}, {T3(3, 4, 5)}}},
    {CASE("reshape", "Reshape", 2, 1), .in = {{T3(2, 3, 4)}, {I64(shape_234)}}, .out = {{T2(6, 4)}}},
    {CASE("flatten", "Flatten", 1, 1), .in = {{T3(2, 3, 4)}}, .out = {{T2(2, 12)}}},
    {CASE("squeeze", "Squeeze", 2, 1), .in = {{T3(2, 1, 4)}, {I64(ax_1)}}, .out = {{T2(2, 4)}}},
    {CASE("unsqueeze", "Unsqueeze", 2, 1), .in = {{T2(2, 4)}, {I64(ax_1)}}, .out = {{T3(2, 1, 4)}}},
    {CASE("transpose_0213", "Transpose", 1, 1), .in = {{T4(2, 3, 4, 5)}}, .out = {{T4(2, 4, 3, 5)}},
     .attrs = {AINTS("perm", perm_0213)}, .nattrs = 1},
    {CASE("transpose_0231", "Transpose", 1, 1), .in = {{T4(2, 3, 4, 5)}}, .out = {{T4(2, 4, 5, 3)}},
     .attrs = {AINTS("perm", perm_0231)}, .nattrs = 1},
    {CASE("transpose_default_reverse", "Transpose", 1, 1), .in = {{T3(2, 3, 4)}}, .out = {{T3(4, 3, 2)}}},
    {CASE("slice_neg_step", "Slice", 5, 1),
     .in = {{T3(5, 6, 7)}, {I64(sl_starts)}, {I64(sl_ends)}, {I64(sl_axes)}, {I64(sl_steps)}}, .out = {{T3(3, 6, 4)}}},
    {CASE("slice_neg_axes_step", "Slice", 5, 1),
     .in = {{T3(5, 6, 7)}, {I64(sl_starts2)}, {I64(sl_ends2)}, {I64(sl_axes2)}, {I64(sl_steps2)}},
     .out = {{T3(5, 3, 5)}}},
    {CASE("split_uneven_axis1", "Split", 2, 2), .opset = 13, .in = {{T2(5, 7)}, {I64(split_25)}},
     .out = {{T2(5, 2)}, {T2(5, 5)}}, .attrs = {AINT("axis", 1)}, .nattrs = 1},
    {CASE("split_op11_attr_axis-3", "Split", 1, 2), .opset = 11, .in = {{T3(5, 3, 2)}}, .out = {{T3(2, 3, 2)}, {T3(3, 3, 2)}},
     .attrs = {AINT("axis", -3), AINTS("split", split_23)}, .nattrs = 2},
    {CASE("concat_axis1", "Concat", 3, 1), .in = {{T3(2, 1, 3)}, {T3(2, 4, 3)}, {T3(2, 2, 3)}}, .out = {{T3(2, 7, 3)}},
     .attrs = {AINT("axis", 1)}, .nattrs = 1},
    {CASE("concat_axis-1", "Concat", 2, 1), .in = {{T2(3, 2)}, {T2(3, 5)}}, .out = {{T2(3, 7)}},
     .attrs = {AINT("axis", -1)}, .nattrs = 1},
    {CASE("gather_axis0_embedding", "Gather", 2, 1), .in = {{T2(10, 4)}, {T2(3, 5), LABELS(-10, 9)}},
     .out = {{T3(3, 5, 4)}}},
    {CASE("gather_axis1_int32", "Gather", 2, 1), .in = {{T3(3, 6, 4)}, {.dtype = PP_DTYPE_I32, T1(9), .fill = KC_INTS, .lo = -6, .hi = 5}},
     .out = {{T3(3, 9, 4)}}, .attrs = {AINT("axis", 1)}, .nattrs = 1},
    {CASE("expand_31_to_234", "Expand", 2, 1), .in = {{T2(3, 1)}, {I64(shape_234)}}, .out = {{T3(2, 3, 4)}}},
    {CASE("expand_14_to_234", "Expand", 2, 1), .in = {{T3(2, 1, 4)}, {I64(shape_234)}}, .out = {{T3(2, 3, 4)}}},
};

static void test_gradients(void **state)
{
    (void)state;
    const int n = (int)(sizeof grad_cases / sizeof grad_cases[0]);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double e = kc_check(&grad_cases[i]);
        double tol = grad_cases[i].tol ? grad_cases[i].tol : 2e-3;
        if (!(e >= 0 && e <= tol)) {
            printf("FAILED %s: %.3g (tolerance %.3g)\n", grad_cases[i].name, e, tol);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---------------- forward values vs references computed here ---------------- */

typedef struct fwd {
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO];
    void *aux;
    pp_error err;
    pp_status st;
} fwd;

/* Runs case c's forward on fresh inputs; the caller reads f->in / f->out. */
static void fwd_run(const kc_case *c, fwd *f)
{
    pp_device *dev = NULL;
    memset(f, 0, sizeof *f);
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &f->err), PP_OK);
    const pp_kernel *k = pp_kernel_find(pp_op_lookup("", c->op), PP_DEVICE_CPU, PP_DTYPE_F32);
    assert_non_null(k);
    for (int i = 0; i < c->nin; i++) f->in[i] = kc_alloc(&c->in[i]);
    for (int i = 0; i < c->nout; i++) f->out[i] = kc_alloc(&c->out[i]);
    f->st = kc_forward(c, dev, k, f->in, f->out, &f->aux, &f->err);
    pp_device_destroy(dev);
}

static void fwd_free(const kc_case *c, fwd *f)
{
    for (int i = 0; i < c->nin; i++) free(f->in[i].data);
    for (int i = 0; i < c->nout; i++) free(f->out[i].data);
    free(f->aux);
}

static float fv(const pp_tensor *t, int64_t i) { return ((const float *)t->data)[i]; }
static int64_t iv(const pp_tensor *t, int64_t i)
{
    return t->dtype == PP_DTYPE_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* multi-index of flat i over dims[rank] */
static void unravel(int64_t i, int rank, const int64_t *dims, int64_t *idx)
{
    for (int k = rank - 1; k >= 0; k--) {
        idx[k] = i % dims[k];
        i /= dims[k];
    }
}
static int64_t ravel(int rank, const int64_t *dims, const int64_t *idx)
{
    int64_t f = 0;
    for (int k = 0; k < rank; k++) f = f * dims[k] + idx[k];
    return f;
}

static double report(const char *what, double maxdiff, double tol)
{
    printf("%-52s max |kernel - reference| %.3g\n", what, maxdiff);
    assert_true(maxdiff <= tol);
    return maxdiff;
}

/* Softmax / LogSoftmax at every axis variant (and opset 11's 2-D coercion) against
 * exp(x)/sum in double; softmax rows must sum to 1. */
static void test_softmax_forward(void **state)
{
    (void)state;
    const struct { const char *op; int64_t opset, axis; } v[] = {
        {"Softmax", 17, -1}, {"Softmax", 17, 1}, {"Softmax", 17, 0}, {"Softmax", 11, 1},
        {"LogSoftmax", 17, -1}, {"LogSoftmax", 13, -2}, {"LogSoftmax", 11, 2}, {"LogSoftmax", 11, 0},
    };
    for (size_t t = 0; t < sizeof v / sizeof v[0]; t++) {
        kc_case c = {CASE("softmax_fwd", v[t].op, 1, 1), .opset = v[t].opset, .in = {{T3(3, 4, 5)}},
                     .out = {{T3(3, 4, 5)}}, .attrs = {AINT("axis", v[t].axis)}, .nattrs = 1};
        fwd f;
        fwd_run(&c, &f);
        assert_int_equal(f.st, PP_OK);
        const int64_t *d = f.in[0].dims;
        const int ax = (int)(v[t].axis < 0 ? v[t].axis + 3 : v[t].axis);
        double md = 0, msum = 0;
        for (int64_t i = 0; i < 60; i++) {
            /* the group of i: the same index except along the softmax dims */
            int64_t idx[3], j2[3];
            unravel(i, 3, d, idx);
            double sum = 0, sump = 0;
            for (int64_t j = 0; j < 60; j++) {
                unravel(j, 3, d, j2);
                int same = 1;
                for (int k = 0; k < 3; k++) {
                    const int free_dim = v[t].opset < 13 ? k >= ax : k == ax;
                    if (!free_dim && j2[k] != idx[k]) same = 0;
                }
                if (!same) continue;
                sum += exp((double)fv(&f.in[0], j));
                sump += v[t].op[0] == 'S' ? fv(&f.out[0], j) : exp(fv(&f.out[0], j));
            }
            const double ref = v[t].op[0] == 'S' ? exp((double)fv(&f.in[0], i)) / sum : fv(&f.in[0], i) - log(sum);
            md = fmax(md, fabs(fv(&f.out[0], i) - ref));
            msum = fmax(msum, fabs(sump - 1));
        }
        char what[96];
        snprintf(what, sizeof what, "%s opset %lld axis %lld vs double", v[t].op, (long long)v[t].opset,
                 (long long)v[t].axis);
        report(what, md, 1e-5);
        snprintf(what, sizeof what, "%s opset %lld axis %lld: |row sum - 1|", v[t].op, (long long)v[t].opset,
                 (long long)v[t].axis);
        report(what, msum, 1e-5);
        fwd_free(&c, &f);
    }
}

/* LayerNorm against the two-pass formula in double, with the Mean / InvStdDev outputs. */
static void test_layernorm_forward(void **state)
{
    (void)state;
    kc_case c = {CASE("ln_fwd", "LayerNormalization", 3, 3), .in = {{T3(4, 3, 16)}, {T2(3, 16)}, {T2(3, 16)}},
                 .out = {{T3(4, 3, 16)}, {T3(4, 1, 1)}, {T3(4, 1, 1)}},
                 .attrs = {AINT("axis", -2), {.name = "epsilon", .type = PP_ATTR_FLOAT, .f = 1e-4f}}, .nattrs = 2};
    fwd f;
    fwd_run(&c, &f);
    assert_int_equal(f.st, PP_OK);
    double md = 0, mst = 0;
    for (int r = 0; r < 4; r++) {
        double m = 0, var = 0;
        for (int j = 0; j < 48; j++) m += fv(&f.in[0], r * 48 + j);
        m /= 48;
        for (int j = 0; j < 48; j++) var += pow(fv(&f.in[0], r * 48 + j) - m, 2);
        const double rs = 1 / sqrt(var / 48 + 1e-4);
        for (int j = 0; j < 48; j++) {
            const double ref = (fv(&f.in[0], r * 48 + j) - m) * rs * fv(&f.in[1], j) + fv(&f.in[2], j);
            md = fmax(md, fabs(fv(&f.out[0], r * 48 + j) - ref));
        }
        mst = fmax(mst, fmax(fabs(fv(&f.out[1], r) - m), fabs(fv(&f.out[2], r) - rs) / rs));
    }
    report("LayerNormalization axis -2 vs double", md, 1e-5);
    report("LayerNormalization Mean, InvStdDev (relative) vs double", mst, 1e-5);
    fwd_free(&c, &f);
}

/* ReduceSum / ReduceMean against a brute-force loop over the kept indices. */
static void test_reduce_forward(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof grad_cases / sizeof grad_cases[0]; t++) {
        const kc_case *c = &grad_cases[t];
        if (strncmp(c->op, "Reduce", 6)) continue;
        fwd f;
        fwd_run(c, &f);
        assert_int_equal(f.st, PP_OK);
        /* the reduced dims, read back from the case */
        int red[3] = {0, 0, 0}, nax = 0;
        const int rank = f.in[0].rank;
        if (c->nin > 1) {
            for (int64_t i = 0; i < pp_tensor_numel(&f.in[1]); i++, nax++) red[(iv(&f.in[1], i) + rank) % rank] = 1;
        } else if (c->nattrs && !strcmp(c->attrs[0].name, "axes")) {
            for (int i = 0; i < c->attrs[0].n; i++, nax++) red[(c->attrs[0].ints[i] + rank) % rank] = 1;
        }
        const pp_attr *noop = pp_attr_find(c->attrs, c->nattrs, "noop_with_empty_axes");
        if (nax == 0 && !(noop && noop->i))
            for (int k = 0; k < rank; k++) red[k] = 1;
        int64_t kd[3], idx[3], count = 1;
        for (int k = 0; k < rank; k++) {
            kd[k] = red[k] ? 1 : f.in[0].dims[k];
            count *= red[k] ? f.in[0].dims[k] : 1;
        }
        double *ref = calloc((size_t)pp_tensor_numel(&f.out[0]), sizeof *ref);
        for (int64_t i = 0; i < pp_tensor_numel(&f.in[0]); i++) {
            unravel(i, rank, f.in[0].dims, idx);
            for (int k = 0; k < rank; k++)
                if (red[k]) idx[k] = 0;
            ref[ravel(rank, kd, idx)] += fv(&f.in[0], i);
        }
        double md = 0;
        for (int64_t o = 0; o < pp_tensor_numel(&f.out[0]); o++)
            md = fmax(md, fabs(fv(&f.out[0], o) - (c->op[6] == 'M' ? ref[o] / (double)count : ref[o])));
        char what[96];
        snprintf(what, sizeof what, "%s %s vs brute force", c->op, c->name);
        report(what, md, 1e-5);
        free(ref);
        fwd_free(c, &f);
    }
}

/* SoftmaxCrossEntropyLoss: -w[label] * log_softmax(scores)[label] in double, summed,
 * or divided by the summed weight of the non-ignored labels. */
static void test_xent_forward(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof grad_cases / sizeof grad_cases[0]; t++) {
        const kc_case *c = &grad_cases[t];
        if (strcmp(c->op, "SoftmaxCrossEntropyLoss")) continue;
        fwd f;
        fwd_run(c, &f);
        assert_int_equal(f.st, PP_OK);
        const pp_attr *ig = pp_attr_find(c->attrs, c->nattrs, "ignore_index");
        const pp_attr *ra = pp_attr_find(c->attrs, c->nattrs, "reduction");
        const char *red = ra ? ra->s : "mean";
        const int64_t N = f.in[0].dims[0], C = f.in[0].dims[1], D = pp_tensor_numel(&f.in[0]) / (N * C);
        double total = 0, tw = 0, md = 0, mlp = 0;
        int nign = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < D; s++) {
                double sum = 0;
                for (int64_t j = 0; j < C; j++) sum += exp((double)fv(&f.in[0], (n * C + j) * D + s));
                if (f.out[1].data)
                    for (int64_t j = 0; j < C; j++) {
                        const double lp = fv(&f.in[0], (n * C + j) * D + s) - log(sum);
                        mlp = fmax(mlp, fabs(fv(&f.out[1], (n * C + j) * D + s) - lp));
                    }
                const int64_t lab = iv(&f.in[1], n * D + s);
                double l = 0, w = 0;
                if (ig && lab == ig->i) {
                    nign++;
                } else {
                    w = f.in[2].data ? fv(&f.in[2], lab) : 1.0;
                    l = -w * (fv(&f.in[0], (n * C + lab) * D + s) - log(sum));
                }
                if (!strcmp(red, "none")) md = fmax(md, fabs(fv(&f.out[0], n * D + s) - l));
                total += l;
                tw += w;
            }
        if (!strcmp(red, "sum")) md = fabs(fv(&f.out[0], 0) - total);
        if (!strcmp(red, "mean")) md = fabs(fv(&f.out[0], 0) - total / tw);
        char what[128];
        snprintf(what, sizeof what, "xent %s (%s, %d of %lld ignored) vs double", c->name, red, nign,
                 (long long)(N * D));
        report(what, md, 1e-5);
        if (f.out[1].data) report("xent log_prob output vs double", mlp, 1e-5);
        fwd_free(c, &f);
    }
}

/* The data-movement ops: every output element against the input element that a
 * brute-force index map picks. */
static int64_t src_index(const kc_case *c, const fwd *f, const int64_t *o, int *piece)
{
    const pp_tensor *x = &f->in[0];
    int64_t idx[PP_MAX_RANK] = {0};
    *piece = 0;
    if (!strcmp(c->op, "Transpose")) {
        for (int k = 0; k < x->rank; k++)
            idx[c->nattrs ? c->attrs[0].ints[k] : x->rank - 1 - k] = o[k];
    } else if (!strcmp(c->op, "Slice")) {
        for (int k = 0; k < x->rank; k++) idx[k] = o[k];
        for (int64_t i = 0; i < pp_tensor_numel(&f->in[1]); i++) {
            const int k = (int)((iv(&f->in[3], i) + x->rank) % x->rank);
            const int64_t dim = x->dims[k], st = iv(&f->in[4], i);
            int64_t s = iv(&f->in[1], i);
            s = s < 0 ? s + dim : s;
            s = s < 0 ? 0 : s;
            s = st > 0 ? (s > dim ? dim : s) : (s > dim - 1 ? dim - 1 : s);
            idx[k] = s + o[k] * st;
        }
    } else if (!strcmp(c->op, "Gather")) {
        const pp_attr *a = pp_attr_find(c->attrs, c->nattrs, "axis");
        const int ax = a ? (int)a->i : 0, qr = f->in[1].rank;
        for (int k = 0; k < ax; k++) idx[k] = o[k];
        int64_t v = iv(&f->in[1], ravel(qr, f->in[1].dims, o + ax));
        idx[ax] = v < 0 ? v + x->dims[ax] : v;
        for (int k = ax + 1; k < x->rank; k++) idx[k] = o[k + qr - 1];
    } else if (!strcmp(c->op, "Expand")) {
        const int lead = f->out[0].rank - x->rank;
        for (int k = 0; k < x->rank; k++) idx[k] = x->dims[k] == 1 ? 0 : o[k + lead];
    } else if (!strcmp(c->op, "Concat")) {
        const int ax = (int)((c->attrs[0].i + x->rank) % x->rank);
        for (int k = 0; k < x->rank; k++) idx[k] = o[k];
        while (idx[ax] >= f->in[*piece].dims[ax]) idx[ax] -= f->in[(*piece)++].dims[ax];
        return ravel(x->rank, f->in[*piece].dims, idx);
    } else {    /* the copies */
        return ravel(f->out[0].rank, f->out[0].dims, o);
    }
    return ravel(x->rank, x->dims, idx);
}

static void test_movement_forward(void **state)
{
    (void)state;
    const char *ops[] = {"Transpose", "Slice", "Gather", "Expand", "Concat", "Reshape", "Flatten", "Squeeze", "Unsqueeze"};
    for (size_t t = 0; t < sizeof grad_cases / sizeof grad_cases[0]; t++) {
        const kc_case *c = &grad_cases[t];
        int mine = 0;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) mine |= !strcmp(c->op, ops[k]);
        if (!mine) continue;
        fwd f;
        fwd_run(c, &f);
        assert_int_equal(f.st, PP_OK);
        double md = 0;
        int64_t o[PP_MAX_RANK];
        for (int64_t i = 0; i < pp_tensor_numel(&f.out[0]); i++) {
            int piece;
            unravel(i, f.out[0].rank, f.out[0].dims, o);
            const int64_t s = src_index(c, &f, o, &piece);
            md = fmax(md, fabs(fv(&f.out[0], i) - fv(&f.in[piece], s)));
        }
        char what[96];
        snprintf(what, sizeof what, "%s %s vs index map", c->op, c->name);
        report(what, md, 0);
        fwd_free(c, &f);
    }
}

/* Split: the outputs laid side by side along the axis give the input back. */
static void test_split_forward(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof grad_cases / sizeof grad_cases[0]; t++) {
        const kc_case *c = &grad_cases[t];
        if (strcmp(c->op, "Split")) continue;
        fwd f;
        fwd_run(c, &f);
        assert_int_equal(f.st, PP_OK);
        const pp_attr *a = pp_attr_find(c->attrs, c->nattrs, "axis");
        const int rank = f.in[0].rank, ax = (int)((a->i + rank) % rank);
        double md = 0;
        int64_t idx[PP_MAX_RANK];
        for (int64_t i = 0; i < pp_tensor_numel(&f.in[0]); i++) {
            unravel(i, rank, f.in[0].dims, idx);
            int p = 0;
            while (idx[ax] >= f.out[p].dims[ax]) idx[ax] -= f.out[p++].dims[ax];
            md = fmax(md, fabs(fv(&f.in[0], i) - fv(&f.out[p], ravel(rank, f.out[p].dims, idx))));
        }
        char what[96];
        snprintf(what, sizeof what, "Split %s vs index map", c->name);
        report(what, md, 0);
        fwd_free(c, &f);
    }
}

/* Shape, ConstantOfShape and Range against their definitions; int64 data through the
 * copies (labels reshaped at run time). */
static void test_const_ops(void **state)
{
    (void)state;
    fwd f;
    kc_case sh = {CASE("shape", "Shape", 1, 1), .in = {{T4(2, 3, 4, 5)}}, .out = {{.dtype = PP_DTYPE_I64, T1(2)}},
                  .attrs = {AINT("start", 1), AINT("end", -1)}, .nattrs = 2};
    fwd_run(&sh, &f);
    assert_int_equal(f.st, PP_OK);
    assert_int_equal(iv(&f.out[0], 0), 3);
    assert_int_equal(iv(&f.out[0], 1), 4);
    fwd_free(&sh, &f);

    static const float seven = 7.5f;
    kc_case cs = {CASE("cos", "ConstantOfShape", 1, 1), .in = {{I64(shape_234)}}, .out = {{T3(2, 3, 4)}},
                  .attrs = {{.name = "value", .type = PP_ATTR_TENSOR,
                             .t = {.dtype = PP_DTYPE_F32, .shape = {.rank = 1, .dims = {1}}, .data = &seven, .nbytes = 4}}},
                  .nattrs = 1};
    fwd_run(&cs, &f);
    assert_int_equal(f.st, PP_OK);
    for (int i = 0; i < 24; i++) assert_true(fv(&f.out[0], i) == 7.5f);
    fwd_free(&cs, &f);

    static const int64_t r0[] = {10}, r1[] = {-3}, r2[] = {-4};
    kc_case rg = {CASE("range", "Range", 3, 1),
                  .in = {{.dtype = PP_DTYPE_I64, T0, .fill = KC_DATA, .data = r0},
                         {.dtype = PP_DTYPE_I64, T0, .fill = KC_DATA, .data = r1},
                         {.dtype = PP_DTYPE_I64, T0, .fill = KC_DATA, .data = r2}},
                  .out = {{.dtype = PP_DTYPE_I64, T1(4)}}};
    fwd_run(&rg, &f);
    assert_int_equal(f.st, PP_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(iv(&f.out[0], i), 10 - 4 * i);
    fwd_free(&rg, &f);

    kc_case rs = {CASE("reshape_i64", "Reshape", 2, 1), .in = {{.dtype = PP_DTYPE_I64, T2(3, 4), .fill = KC_INTS, .lo = 0, .hi = 1000},
                  {I64(shape_234)}}, .out = {{.dtype = PP_DTYPE_I64, T1(12)}}};
    fwd_run(&rs, &f);
    assert_int_equal(f.st, PP_OK);
    for (int i = 0; i < 12; i++) assert_int_equal(iv(&f.out[0], i), iv(&f.in[0], i));
    fwd_free(&rs, &f);
    printf("Shape, ConstantOfShape, Range, int64 Reshape: exact\n");
}

/* Bad values are errors that name the node and the value. */
static void test_errors(void **state)
{
    (void)state;
    static const int64_t bad_idx[] = {0, 12};
    kc_case g = {CASE("emb", "Gather", 2, 1), .in = {{T2(10, 4)}, {I64(bad_idx)}}, .out = {{T2(2, 4)}}};
    fwd f;
    fwd_run(&g, &f);
    printf("gather error: %s\n", f.err.msg);
    assert_int_equal(f.st, PP_ERR_INVALID_ARG);
    assert_non_null(strstr(f.err.msg, "'emb'"));
    assert_non_null(strstr(f.err.msg, "12"));
    fwd_free(&g, &f);

    static const int64_t bad_lab[] = {1, 5, 0};
    kc_case x = {CASE("loss", "SoftmaxCrossEntropyLoss", 2, 1), .in = {{T2(3, 5)}, {I64(bad_lab)}}, .out = {{T0}}};
    fwd_run(&x, &f);
    printf("loss error: %s\n", f.err.msg);
    assert_int_equal(f.st, PP_ERR_INVALID_ARG);
    assert_non_null(strstr(f.err.msg, "'loss'"));
    assert_non_null(strstr(f.err.msg, "label 5"));
    fwd_free(&x, &f);

    kc_case s = {CASE("sm", "Softmax", 1, 1), .in = {{T2(3, 5)}}, .out = {{T2(3, 5)}}, .attrs = {AINT("axis", 2)}, .nattrs = 1};
    fwd_run(&s, &f);
    printf("softmax error: %s\n", f.err.msg);
    assert_int_equal(f.st, PP_ERR_INVALID_ARG);
    assert_non_null(strstr(f.err.msg, "axis 2"));
    fwd_free(&s, &f);
}

/* ---------------- backward reads only what saves_in / saves_out keep ---------------- */

/* Runs backward once with everything and once with the unsaved inputs and outputs
 * blanked (data NULL), as the stage executor passes them; the gradients must match. */
static void test_saves(void **state)
{
    (void)state;
    pp_error err = {0};
    pp_device *dev = NULL;
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &dev, &err), PP_OK);
    for (size_t t = 0; t < sizeof grad_cases / sizeof grad_cases[0]; t++) {
        const kc_case *c = &grad_cases[t];
        const pp_op op = pp_op_lookup("", c->op);
        const pp_kernel *k = pp_kernel_find(op, PP_DEVICE_CPU, PP_DTYPE_F32);
        fwd f;
        fwd_run(c, &f);
        assert_int_equal(f.st, PP_OK);
        pp_tensor in2[KC_MAX_IO], out2[KC_MAX_IO], gout[KC_MAX_IO], g1[KC_MAX_IO], g2[KC_MAX_IO];
        for (int i = 0; i < c->nin; i++) {
            in2[i] = f.in[i];
            if (!(pp_op_get(op)->saves_in >> i & 1)) in2[i].data = NULL;
            g1[i] = g2[i] = f.in[i];
            g1[i].data = g2[i].data = NULL;
            if (f.in[i].data && f.in[i].dtype == PP_DTYPE_F32) {
                g1[i].data = calloc(1, pp_tensor_nbytes(&f.in[i]) + 4);
                g2[i].data = calloc(1, pp_tensor_nbytes(&f.in[i]) + 4);
            }
        }
        for (int i = 0; i < c->nout; i++) {
            out2[i] = f.out[i];
            if (!(pp_op_get(op)->saves_out >> i & 1)) out2[i].data = NULL;
            kc_io o = c->out[i];
            o.fill = KC_RANDN;
            gout[i] = kc_alloc(&o);
        }
        pp_kernel_ctx ctx = {.node = c->name, .op = op, .op_type = c->op, .opset = c->opset ? c->opset : 17, .attrs = c->attrs,
                             .nattrs = c->nattrs, .in = f.in, .nin = c->nin, .out = f.out, .nout = c->nout,
                             .aux = f.aux, .dev = dev};
        assert_int_equal(k->backward(&ctx, gout, g1, &err), PP_OK);
        ctx.in = in2;
        ctx.out = out2;
        pp_status st = k->backward(&ctx, gout, g2, &err);
        if (st != PP_OK) printf("%s: backward with only the saved tensors failed: %s\n", c->name, err.msg);
        assert_int_equal(st, PP_OK);
        for (int i = 0; i < c->nin; i++) {
            if (g1[i].data) assert_memory_equal(g1[i].data, g2[i].data, pp_tensor_nbytes(&f.in[i]));
            free(g1[i].data);
            free(g2[i].data);
        }
        for (int i = 0; i < c->nout; i++) free(gout[i].data);
        fwd_free(c, &f);
    }
    printf("backward with only saves_in / saves_out: identical gradients in %zu cases\n",
           sizeof grad_cases / sizeof grad_cases[0]);
    pp_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),        cmocka_unit_test(test_softmax_forward),
        cmocka_unit_test(test_layernorm_forward), cmocka_unit_test(test_reduce_forward),
        cmocka_unit_test(test_xent_forward),      cmocka_unit_test(test_movement_forward),
        cmocka_unit_test(test_split_forward),     cmocka_unit_test(test_const_ops),
        cmocka_unit_test(test_errors),            cmocka_unit_test(test_saves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
