/* The case table of tests/cuda_cases.h on the cpu backend: every float32 case's backward
 * against central finite differences of its forward, every 16-bit case against the float32
 * kernel on the widened values, and (given a folder) every case written as a one-node ONNX
 * model with its inputs and cpu outputs, which tests/ref/op_cases_ort.py runs in onnxruntime.
 * Usage: test_op_cases [DIR]  (or PP_OP_CASES_DIR=DIR); tests/test_op_cases_ort.sh drives both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <sys/stat.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/device.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/op_info.h>

#include "cuda_cases.h"

#define FD_SAMPLES 64       /* elements per input */
#define FD_EPS 1e-3         /* then 1e-2 and 2.5e-4 for an element the first step fails */
#define FD_TOL 1e-2         /* |fd - analytic| / (|analytic| + 0.1 max |analytic| of the input) */
#define FD_KINK 0.05        /* one-sided slopes further apart than this x max |analytic|: a kink, skipped */

static const char *out_dir;     /* where the ONNX cases go; NULL: not written */
static pp_device *cpu;

/* sum over float outputs of gout . out, in double: the scalar whose gradient backward computes */
static double case_loss(const op_case *k, case_side *h, pp_kernel_ctx *c)
{
    pp_error err = {0};
    if (h->k->forward(c, &err) != PP_OK) fail_msg("%s forward: %s", k->op, err.msg);
    double l = 0;
    for (int o = 0; o < k->nout; o++)
        for (int64_t e = 0; h->gout[o].data && e < pp_tensor_numel(&h->out[o]); e++)
            l += case_load(h->gout[o].dtype, h->gout[o].data, e) * case_load(h->out[o].dtype, h->out[o].data, e);
    return l;
}

typedef struct fd_point {
    double central, plus, minus;    /* the central and one-sided slopes */
} fd_point;

static fd_point fd_at(const op_case *k, case_side *h, pp_kernel_ctx *c, float *x, double l0, double eps)
{
    const float x0 = *x, xp = (float)(x0 + eps), xm = (float)(x0 - eps);
    *x = xp;
    const double lp = case_loss(k, h, c);
    *x = xm;
    const double lm = case_loss(k, h, c);
    *x = x0;
    return (fd_point){(lp - lm) / ((double)xp - xm), (lp - l0) / ((double)xp - x0), (l0 - lm) / ((double)x0 - xm)};
}

/* Input i of a float32 case: sampled elements' finite differences against the analytic
 * gradient an (numel doubles). Returns the failures; *worst gets the largest error. */
static int fd_input(const op_case *k, case_side *h, pp_kernel_ctx *c, int i, const double *an, double l0, double *worst,
                    int *kinks, int *checked)
{
    const int64_t n = pp_tensor_numel(&h->in[i]);
    double scale = 0;
    for (int64_t e = 0; e < n; e++) scale = fmax(scale, fabs(an[e]));
    uint64_t seed = 7 + (uint64_t)i;
    int bad = 0;
    for (int s = 0; s < FD_SAMPLES && s < n; s++) {
        const int64_t e = n <= FD_SAMPLES ? s : (int64_t)((case_frand(&seed) + 1.f) * 0.5f * (float)n) % n;
        float *x = (float *)h->in[i].data + e;
        const double den = fabs(an[e]) + 0.1 * scale + 1e-6;
        fd_point p = fd_at(k, h, c, x, l0, FD_EPS);
        if (fabs(p.plus - p.minus) > FD_KINK * scale + 1e-6) {
            (*kinks)++;
            continue;
        }
        double err = fabs(p.central - an[e]) / den;
        static const double retry[] = {1e-2, 2.5e-4};
        for (int r = 0; r < 2 && err > FD_TOL; r++)
            err = fmin(err, fabs(fd_at(k, h, c, x, l0, retry[r]).central - an[e]) / den);
        (*checked)++;
        *worst = fmax(*worst, err);
        if (err > FD_TOL) {
            if (bad < 3) printf("    input %d element %lld: fd %.6g, backward %.6g\n", i, (long long)e, p.central, an[e]);
            bad++;
        }
    }
    return bad;
}

/* Why a float32 case has no finite differences, or NULL. */
static const char *fd_skip(const op_case *k)
{
    if (k->no_fd) return k->no_fd;
    int f32_out = 0;
    for (int o = 0; o < k->nout; o++) {
        if (k->out[o].dtype == PP_DTYPE_BF16 || k->out[o].dtype == PP_DTYPE_F16)
            return "a 16-bit output is rounded: its steps have no slope";
        f32_out += k->out[o].dtype == PP_DTYPE_F32;
    }
    return f32_out ? NULL : "no float output carries a gradient";
}

/* A float32 case: backward of every differentiable input against finite differences. */
static int check_fd(const op_case *k, case_side *h, const void *const *host_in, pp_tensor *gin0)
{
    const pp_op op = case_op(k);
    pp_kernel_ctx c = case_ctx(k, h, host_in);
    c.aux = h->aux;
    const double l0 = case_loss(k, h, &c);
    int bad = 0, inputs = 0;
    for (int i = 0; i < k->nin; i++) {
        if (!pp_op_input_differentiable(op, i) || !h->gin[i].data || k->in[i].dtype != PP_DTYPE_F32) continue;
        const int64_t n = pp_tensor_numel(&h->in[i]);
        double *an = malloc((size_t)n * sizeof *an), worst = 0;
        for (int64_t e = 0; e < n; e++)
            an[e] = case_load(h->gin[i].dtype, h->gin[i].data, e) - case_load(gin0[i].dtype, gin0[i].data, e);
        int kinks = 0, checked = 0;
        const int b = fd_input(k, h, &c, i, an, l0, &worst, &kinks, &checked);
        printf("    input %d [%lld]: %d elements vs central differences, max err %.2e (tol %.0e), %d at kinks skipped\n",
               i, (long long)n, checked, worst, FD_TOL, kinks);
        bad += b || !checked;
        inputs++;
        free(an);
    }
    if (!inputs) printf("    no float32 input carries a gradient: nothing to differentiate\n");
    return bad;
}

/* A copy of t with bfloat16 / float16 widened to float32 (exact); no data stays no data. */
static pp_tensor widened(const pp_tensor *t)
{
    const int lowp = t->dtype == PP_DTYPE_BF16 || t->dtype == PP_DTYPE_F16;
    pp_tensor c = case_tensor(lowp ? PP_DTYPE_F32 : t->dtype, t->rank, t->dims);
    if (!t->data) {
        free(c.data);
        c.data = NULL;
    } else if (!lowp) memcpy(c.data, t->data, pp_tensor_nbytes(t));
    else
        for (int64_t e = 0; e < pp_tensor_numel(t); e++) case_store(c.dtype, c.data, e, case_load(t->dtype, t->data, e));
    return c;
}

/* A 16-bit case: outputs and input gradients against the float32 kernel run on the same
 * values widened (exact), within the case's tolerance (one 16-bit rounding). */
static int check_vs_f32(const op_case *k, case_side *h, const pp_tensor *gin0, const void *const *host_in)
{
    case_side f = {.dev = cpu, .k = pp_kernel_find(case_op(k), PP_DEVICE_CPU, PP_DTYPE_F32)};
    if (!f.k) {
        printf("    no float32 cpu kernel to compare with\n");
        return 1;
    }
    for (int i = 0; i < k->nin; i++) {
        f.in[i] = widened(&h->in[i]);
        f.gin[i] = widened(&gin0[i]);
    }
    for (int o = 0; o < k->nout; o++) {
        f.out[o] = widened(&h->out[o]);
        f.gout[o] = widened(&h->gout[o]);
    }
    int bad = case_calls(k, &f, host_in) != 0;
    double fwd = 0, bwd = 0;
    for (int t = 0; !bad && t < k->nout + k->nin; t++) {
        const pp_tensor *ht = t < k->nout ? &h->out[t] : &h->gin[t - k->nout];
        const pp_tensor *ft = t < k->nout ? &f.out[t] : &f.gin[t - k->nout];
        if (!ht->data || !ft->data) continue;
        pp_tensor w = widened(ht);
        const double d = case_diff(ft, w.data);
        free(w.data);
        if (t < k->nout) fwd = d > fwd || d != d ? d : fwd;
        else bwd = d > bwd || d != d ? d : bwd;
    }
    printf("    vs the float32 kernel on the widened values: outputs max rel diff %.2e, input gradients %.2e (tol %.0e)\n",
           fwd, bwd, (double)k->tol);
    case_host_free(k, &f);
    return bad || !(fwd <= k->tol) || !(bwd <= k->tol);
}

/* ---------------- one-node ONNX models for onnxruntime ---------------- */

/* the model's opset: the case's, else 17 or the op's first opset when later (Gelu: 20) */
static int case_opset(const op_case *k)
{
    const int since = (int)pp_op_get(case_op(k))->since;
    return k->opset ? k->opset : since > 17 ? since : 17;
}

/* Tensor t as graph input (or output) `name` of g, its data in DIR/sub/<name>.bin (raw,
 * little-endian), and its entry in the index j. */
static pp_status write_value(pp_graph *g, pp_json *j, const char *sub, const char *name, const pp_tensor *t, int output,
                             pp_error *err)
{
    pp_shape sh = {.rank = t->rank};
    memcpy(sh.dims, t->dims, (size_t)t->rank * sizeof *t->dims);
    PP_CHECK((output ? pp_graph_add_output : pp_graph_add_input)(g, name, t->dtype, &sh, err));
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s.bin", out_dir, sub, name);
    FILE *f = fopen(path, "wb");
    const size_t nb = pp_tensor_nbytes(t);
    if (!f || fwrite(t->data, 1, nb, f) != nb || fclose(f)) return pp_error_set(err, PP_ERR_IO, "cannot write '%s'", path);
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "name", name);
    pp_json_int(j, "elem_type", (int64_t)t->dtype);
    pp_json_string(j, "dtype", pp_dtype_name(t->dtype));
    pp_json_begin_array(j, "shape");
    for (int d = 0; d < t->rank; d++) pp_json_int(j, NULL, t->dims[d]);
    pp_json_end_array(j);
    snprintf(path, sizeof path, "%s/%s.bin", sub, name);
    pp_json_string(j, "file", path);
    pp_json_end_object(j);
    return PP_OK;
}

/* Case idx as DIR/<idx>_<op>/model.onnx with x<i>.bin (the graph inputs; constant inputs
 * are initializers) and y<o>.bin (the cpu outputs), and its entry in the index j. */
static pp_status write_case(int idx, const op_case *k, const case_side *h, pp_json *j, pp_error *err)
{
    char sub[256], path[512], name[16];
    snprintf(sub, sizeof sub, "%03d_%s", idx, k->op);
    snprintf(path, sizeof path, "%s/%s", out_dir, sub);
    if (mkdir(path, 0777) && errno != EEXIST)
        return pp_error_set(err, PP_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    pp_graph *g = NULL;
    pp_status st = PP_OK;
    const int opset = case_opset(k);
    PP_CHECK(pp_graph_create(sub, opset, &g, err));
    g->ir_version = opset <= 18 ? 8 : opset <= 20 ? 9 : opset <= 22 ? 10 : 11;   /* the IR that opset came with */
    const char *ins[CASE_MAX_IN], *outs[CASE_MAX_OUT + 2];
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "name", sub);
    pp_json_string(j, "op", k->op);
    pp_json_int(j, "opset", opset);
    pp_json_string(j, "compute", pp_dtype_name(case_compute(k)));
    pp_json_double(j, "tol", k->tol);
    if (k->no_ort) pp_json_string(j, "skip", k->no_ort);
    snprintf(path, sizeof path, "%s/model.onnx", sub);
    pp_json_string(j, "model", path);
    pp_json_begin_array(j, "inputs");
    for (int i = 0; i < k->nin; i++) {
        const pp_tensor *t = &h->in[i];
        snprintf(name, sizeof name, "x%d", i);
        ins[i] = pp_graph_strdup(g, name);
        if (k->in[i].fill != FILL_CONST) PP_CHECK_GOTO(write_value(g, j, sub, name, t, 0, err), st, done);
        else {
            pp_shape sh = {.rank = t->rank};
            memcpy(sh.dims, t->dims, (size_t)t->rank * sizeof *t->dims);
            PP_CHECK_GOTO(pp_graph_add_initializer(g, name, t->dtype, &sh, t->data, pp_tensor_nbytes(t), 1, err), st,
                          done);
        }
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "outputs");
    for (int o = 0; o < k->nout; o++) {
        if (k->out[o].rank < 0) {   /* omitted */
            outs[o] = "";
            continue;
        }
        snprintf(name, sizeof name, "y%d", o);
        outs[o] = pp_graph_strdup(g, name);
        PP_CHECK_GOTO(write_value(g, j, sub, name, &h->out[o], 1, err), st, done);
    }
    pp_json_end_array(j);
    pp_json_end_object(j);
    /* The kernels ran in training mode (case_ctx), which BatchNormalization's ONNX form says
     * with an attribute and two more outputs (the updated running statistics, not compared). */
    const int bn = !strcmp(k->op, "BatchNormalization") && k->nout == 1;
    int node = -1, nout = k->nout;
    if (bn) {
        outs[nout++] = "running_mean";
        outs[nout++] = "running_var";
    }
    const char *domain = pp_op_get(case_op(k))->domain;
    if (*domain) PP_CHECK_GOTO(pp_graph_add_opset(g, domain, 1, err), st, done);
    PP_CHECK_GOTO(pp_graph_add_node(g, k->op, domain, "n", ins, k->nin, outs, nout, &node, err), st, done);
    for (int a = 0; a < 8 && k->attr[a].name; a++) PP_CHECK_GOTO(pp_graph_set_attr(g, node, &k->attr[a], err), st, done);
    if (bn) PP_CHECK_GOTO(pp_graph_set_attr_int(g, node, "training_mode", 1, err), st, done);
    snprintf(path, sizeof path, "%s/%s/model.onnx", out_dir, sub);
    PP_CHECK_GOTO(pp_graph_save(g, path, NULL, err), st, done);
done:
    pp_graph_destroy(g);
    return st;
}

/* ---------------- the driver ---------------- */

static void test_cases(void **state)
{
    (void)state;
    FILE *f = NULL;
    pp_json j;
    char path[512];
    if (out_dir) {
        snprintf(path, sizeof path, "%s/index.json", out_dir);
        if ((mkdir(out_dir, 0777) && errno != EEXIST) || !(f = fopen(path, "w")))
            fail_msg("cannot create '%s': %s (its parent folder must exist)", path, strerror(errno));
        pp_json_init(&j, f, 1);
        pp_json_begin_array(&j, NULL);
    }
    int failed = 0, fd = 0, lowp = 0, skipped = 0;
    for (int idx = 0; idx < NCASES; idx++) {
        const op_case *k = &cases[idx];
        const pp_dtype cd = case_compute(k);
        printf("case %3d %-9s %s opset %d\n", idx, pp_dtype_name(cd), k->op, case_opset(k));
        case_side h = {.dev = cpu, .k = pp_kernel_find(case_op(k), PP_DEVICE_CPU, cd)};
        if (!h.k) {
            printf("    no cpu kernel\n");
            failed++;
            continue;
        }
        const void *host_in[CASE_MAX_IN] = {0};
        pp_tensor gin0[CASE_MAX_IN];
        case_host(k, &h, host_in);
        for (int i = 0; i < k->nin; i++) gin0[i] = widened(&h.gin[i]);
        int bad = case_calls(k, &h, host_in) != 0;
        pp_error err = {0};
        if (!bad && f && write_case(idx, k, &h, &j, &err) != PP_OK) {
            printf("    writing its ONNX model: %s\n", err.msg);
            bad = 1;
        }
        if (!bad && cd == PP_DTYPE_F32 && fd_skip(k)) {
            printf("    finite differences skipped: %s\n", fd_skip(k));
            skipped++;
        } else if (!bad && cd == PP_DTYPE_F32) {
            bad = check_fd(k, &h, host_in, gin0);
            fd++;
        } else if (!bad) {
            bad = check_vs_f32(k, &h, gin0, host_in);
            lowp++;
        }
        if (bad) printf("    FAILED\n");
        failed += bad;
        for (int i = 0; i < k->nin; i++) free(gin0[i].data);
        case_host_free(k, &h);
    }
    if (f) {
        pp_json_end_array(&j);
        pp_json_finish(&j);
        assert_int_equal(fclose(f), 0);
        printf("wrote %d one-node models and %s\n", NCASES, path);
    }
    printf("%d cases: %d against finite differences, %d 16-bit against the float32 kernel, %d without; %d failed\n",
           NCASES, fd, lowp, skipped, failed);
    assert_int_equal(failed, 0);
}

int main(int argc, char **argv)
{
    out_dir = argc > 1 ? argv[1] : getenv("PP_OP_CASES_DIR");
    pp_error err = {0};
    if (pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err) != PP_OK) {
        fprintf(stderr, "cpu device: %s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases)};
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pp_device_destroy(cpu);
    return rc;
}
