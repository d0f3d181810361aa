/* Shared by the kernel tests: runs one op's forward and backward on the cpu device
 * and checks every gradient against central finite differences of
 * L = sum_k <out_k, R_k> (R random), that backward accumulates (+=), and that a kernel
 * with assigns_fresh assigns every element of a gradient marked fresh.
 * Header-only so each test program includes it once. */
#ifndef PP_TEST_KERNEL_CHECK_H
#define PP_TEST_KERNEL_CHECK_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KC_MAX_IO 6

typedef enum {
    KC_RANDN = 0,       /* float, normal(0, 1) */
    KC_POSITIVE,        /* float, uniform(0.5, 2) (Sqrt, Pow bases, Div denominators) */
    KC_INTS,            /* int64 uniform in [lo, hi] (indices, labels) */
    KC_DATA,            /* given values (data, as int64 or float per dtype) */
    KC_BOOLS,           /* bool, random */
} kc_fill;

typedef struct kc_io {
    pp_dtype dtype;     /* UNDEFINED is taken as F32 */
    int rank;
    int64_t dims[PP_MAX_RANK];
    kc_fill fill;
    int64_t lo, hi;     /* KC_INTS */
    const void *data;   /* KC_DATA */
    int nograd;         /* input: do not check its gradient */
    int omitted;        /* optional input/output left out */
} kc_io;

typedef struct kc_case {
    const char *name;
    const char *op;
    int64_t opset;      /* 0: 17 */
    int nin, nout;
    kc_io in[KC_MAX_IO];
    kc_io out[KC_MAX_IO];
    pp_attr attrs[8];
    int nattrs;
    int training;
    double tol;         /* on max |fd - analytic| / max(1, |fd|); 0: 2e-2 */
    int skip_grad;      /* forward only */
} kc_case;

static uint64_t kc_rng_state = 0x9E3779B97F4A7C15ull;
static double kc_uniform(void)
{
    uint64_t z = (kc_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}
static double kc_randn(void)
{
    double u = kc_uniform(), v = kc_uniform();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static pp_tensor kc_alloc(const kc_io *io)
{
    pp_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = io->dtype ? io->dtype : PP_DTYPE_F32;
    t.rank = io->rank;
    memcpy(t.dims, io->dims, sizeof t.dims);
    if (io->omitted) return t;
    size_t nb = pp_tensor_nbytes(&t);
    t.data = calloc(1, nb ? nb : 8);
    int64_t n = pp_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) {
        switch (t.dtype) {
        case PP_DTYPE_F32:
            ((float *)t.data)[i] = io->fill == KC_DATA ? ((const float *)io->data)[i]
                                 : io->fill == KC_POSITIVE ? (float)(0.5 + 1.5 * kc_uniform())
                                 : (float)kc_randn();
            break;
        case PP_DTYPE_I64:
            ((int64_t *)t.data)[i] = io->fill == KC_DATA ? ((const int64_t *)io->data)[i]
                                   : io->lo + (int64_t)(kc_uniform() * (double)(io->hi - io->lo + 1));
            break;
        case PP_DTYPE_I32:
            ((int32_t *)t.data)[i] = (int32_t)(io->lo + (int64_t)(kc_uniform() * (double)(io->hi - io->lo + 1)));
            break;
        case PP_DTYPE_BOOL:
            ((uint8_t *)t.data)[i] = io->fill == KC_DATA ? ((const uint8_t *)io->data)[i] : kc_uniform() < 0.5;
            break;
        default: break;
        }
    }
    return t;
}

/* Runs forward into c_out (allocated by the caller). Returns the status. */
static pp_status kc_forward(const kc_case *c, pp_device *dev, const pp_kernel *k, pp_tensor *in,
                            pp_tensor *out, void **aux, pp_error *err)
{
    pp_kernel_ctx ctx = {
        .node = c->name, .op = pp_op_lookup("", c->op), .op_type = c->op, .opset = c->opset ? c->opset : 17,
        .attrs = c->attrs, .nattrs = c->nattrs, .in = in, .nin = c->nin, .out = out,
        .nout = c->nout, .dev = dev, .training = c->training, .rng = {1, 2, 3, 4},
    };
    size_t ab = k->aux_bytes ? k->aux_bytes(&ctx) : 0;
    free(*aux);
    *aux = ab ? calloc(1, ab) : NULL;
    ctx.aux = *aux;
    return k->forward(&ctx, err);
}

static double kc_loss(const kc_case *c, pp_tensor *out, pp_tensor *r)
{
    double L = 0;
    for (int k = 0; k < c->nout; k++) {
        if (!out[k].data || out[k].dtype != PP_DTYPE_F32) continue;
        int64_t n = pp_tensor_numel(&out[k]);
        for (int64_t i = 0; i < n; i++) L += (double)((float *)out[k].data)[i] * ((float *)r[k].data)[i];
    }
    return L;
}

/* For a kernel with assigns_fresh: backward once with every gradient marked fresh into
 * buffers of NaN must write every element, and write half of what two accumulating calls
 * added (gin). Returns the max relative difference, or -1 on a kernel error. */
static double kc_check_fresh(const kc_case *c, const pp_kernel *k, pp_kernel_ctx *ctx, const pp_tensor *gout,
                             const pp_tensor *gin)
{
    pp_tensor fin[KC_MAX_IO];
    pp_error err = {0};
    double worst = 0;
    ctx->grad_fresh = 0;
    for (int i = 0; i < c->nin; i++) {
        fin[i] = gin[i];
        if (!gin[i].data) continue;
        int64_t n = pp_tensor_numel(&gin[i]);
        fin[i].data = malloc((size_t)n * sizeof(float) + 8);
        for (int64_t e = 0; e < n; e++) ((float *)fin[i].data)[e] = NAN;
        ctx->grad_fresh |= 1u << i;
    }
    if (k->backward(ctx, gout, fin, &err) != PP_OK) {
        printf("%s: fresh backward failed: %s\n", c->name, err.msg);
        worst = -1;
    }
    for (int i = 0; i < c->nin; i++) {
        if (!gin[i].data) continue;
        const float *a = gin[i].data, *f = fin[i].data;
        for (int64_t e = 0; e < pp_tensor_numel(&gin[i]) && worst >= 0; e++) {
            double d = fabs(0.5 * (double)a[e] - (double)f[e]) / fmax(1.0, fabs(0.5 * (double)a[e]));
            if (!(d <= worst)) worst = isnan(d) ? 1e30 : d;
        }
        free(fin[i].data);
    }
    ctx->grad_fresh = 0;
    return worst;
}

/* Checks the case; returns the max relative gradient error (or -1 on a kernel error,
 * with the message printed). Forward-only cases return 0 after a successful forward. */
static double kc_check(const kc_case *c)
{
    pp_error err = {0};
    pp_device *dev = NULL;
    if (pp_device_create(PP_DEVICE_CPU, 0, &dev, &err) != PP_OK) return -1;
    const pp_kernel *k = pp_kernel_find(pp_op_lookup("", c->op), PP_DEVICE_CPU, PP_DTYPE_F32);
    if (!k) {
        printf("%s: no cpu kernel for %s\n", c->name, c->op);
        pp_device_destroy(dev);
        return -1;
    }
    pp_tensor in[KC_MAX_IO], out[KC_MAX_IO], r[KC_MAX_IO], gout[KC_MAX_IO], gin[KC_MAX_IO];
    void *aux = NULL;
    for (int i = 0; i < c->nin; i++) in[i] = kc_alloc(&c->in[i]);
    for (int k2 = 0; k2 < c->nout; k2++) {
        kc_io o = c->out[k2];
        o.fill = KC_RANDN;
        out[k2] = kc_alloc(&o);
        r[k2] = kc_alloc(&o);
        gout[k2] = r[k2];
        if (out[k2].dtype != PP_DTYPE_F32) gout[k2].data = NULL;
    }
    double worst = 0;
    if (kc_forward(c, dev, k, in, out, &aux, &err) != PP_OK) {
        printf("%s: forward failed: %s\n", c->name, err.msg);
        worst = -1;
        goto done;
    }
    if (c->skip_grad || !k->backward) goto done;
    for (int i = 0; i < c->nin; i++) {
        gin[i] = in[i];
        gin[i].data = NULL;
        if (!in[i].data || in[i].dtype != PP_DTYPE_F32 || c->in[i].nograd) continue;
        gin[i].data = calloc(1, pp_tensor_nbytes(&in[i]) + 8);
    }
    pp_kernel_ctx ctx = {
        .node = c->name, .op = pp_op_lookup("", c->op), .op_type = c->op, .opset = c->opset ? c->opset : 17,
        .attrs = c->attrs, .nattrs = c->nattrs, .in = in, .nin = c->nin, .out = out,
        .nout = c->nout, .aux = aux, .dev = dev, .training = c->training, .rng = {1, 2, 3, 4},
    };
    /* twice: the second call must add the same amount again */
    for (int rep = 0; rep < 2; rep++)
        if (k->backward(&ctx, gout, gin, &err) != PP_OK) {
            printf("%s: backward failed: %s\n", c->name, err.msg);
            worst = -1;
            goto done;
        }
    const double eps = 1e-2;
    for (int i = 0; i < c->nin; i++) {
        if (!gin[i].data) continue;
        float *x = in[i].data, *g = gin[i].data;
        int64_t n = pp_tensor_numel(&in[i]);
        int64_t stride = n > 48 ? n / 48 : 1;
        for (int64_t e = 0; e < n; e += stride) {
            float x0 = x[e];
            x[e] = (float)(x0 + eps);
            kc_forward(c, dev, k, in, out, &aux, &err);
            double lp = kc_loss(c, out, r);
            x[e] = (float)(x0 - eps);
            kc_forward(c, dev, k, in, out, &aux, &err);
            double lm = kc_loss(c, out, r);
            x[e] = x0;
            double fd = (lp - lm) / (2 * eps);
            double an = 0.5 * (double)g[e];
            double rel = fabs(fd - an) / fmax(1.0, fabs(fd));
            if (rel > worst) worst = rel;
        }
    }
    printf("%-40s %-24s max gradient error vs finite differences %.3g\n", c->name, c->op, worst);
    if ((k->caps & PP_KCAP_ASSIGNS_FRESH)) {   /* the saved outputs and aux of the unperturbed inputs again */
        if (kc_forward(c, dev, k, in, out, &aux, &err) != PP_OK) {
            printf("%s: forward failed: %s\n", c->name, err.msg);
            worst = -1;
            goto done;
        }
        ctx.aux = aux;
        double fe = kc_check_fresh(c, k, &ctx, gout, gin);
        printf("%-40s %-24s fresh (assigned) gradient vs half the twice-added one: max rel diff %.3g\n", c->name, c->op,
               fe);
        if (fe < 0 || fe > 1e-5) worst = fe < 0 ? -1 : fmax(worst, 1.0);
    }
done:
    for (int i = 0; i < c->nin; i++) free(in[i].data);
    for (int k2 = 0; k2 < c->nout; k2++) {
        free(out[k2].data);
        free(r[k2].data);
    }
    if (!c->skip_grad && k->backward && worst >= 0)
        for (int i = 0; i < c->nin; i++) free(gin[i].data);
    free(aux);
    pp_device_destroy(dev);
    return worst;
}

#endif
