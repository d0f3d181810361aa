/* One pp_stage on its own, on the cpu, against closed forms computed here in double:
 * the example MLP x -> Gemm fc.0 -> Relu -> Gemm head -> mean softmax cross-entropy, as a
 * whole stage (parameter gradients of both Gemms) and as a last stage holding Relu ..
 * loss (its activation input's gradient, what it sends back). Microbatches run in stash
 * slots out of order, as a schedule does (three in flight at once, a slot reused), with
 * each recompute (none, selective, full: gradients bitwise equal to one another), with
 * the backward split into input and weight halves (no parameter gradient after an input
 * half; the halves' result bitwise equal to the whole backward's), and with loss weights
 * (a slot's seed is its labels' weight over the global batch's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <onnxpipe/example.h>
#include <onnxpipe/stage_lib.h>
#include <onnxpipe/graph_ir.h>

#define B 3       /* samples per microbatch */
#define IN 5
#define H 6
#define C 4
#define M 4       /* microbatches per step */
#define SLOTS 3

/* ---- the reference: the MLP's loss and gradients in double --------------------------- */

typedef struct mlp_params {
    const float *w1, *b1, *w2, *b2;   /* [H][IN], [H], [C][H], [C]; w1, b1 NULL for the tail stage */
} mlp_params;

typedef struct mlp_ref {
    double loss;                      /* mean over the microbatch */
    double dh[B][H];                  /* d(seed x loss) / d(fc.0's output) */
    double dw1[H][IN], db1[H], dw2[C][H], db2[C];   /* accumulated over microbatches */
} mlp_ref;

static double input_x(int m, int b, int i) { return sin(1.0 + 0.7 * (m * B + b) + 1.3 * i); }
static double input_h(int m, int b, int j) { return cos(0.3 + 1.1 * (m * B + b) + 0.9 * j); }
static int64_t label(int m, int b) { return (int64_t)((m * B + b) * 3 % C); }

/* Microbatch m's loss, and its gradients times seed added into r (h = fc.0's output,
 * computed from x when p->w1 is set, else input_h). */
static void mlp_reference(const mlp_params *p, int m, double seed, mlp_ref *r)
{
    r->loss = 0;
    for (int b = 0; b < B; b++) {
        double h[H], a[H], z[C], zmax = -INFINITY, sum = 0, dz[C];
        for (int j = 0; j < H; j++) {
            h[j] = p->w1 ? p->b1[j] : input_h(m, b, j);
            for (int i = 0; p->w1 && i < IN; i++) h[j] += (double)p->w1[j * IN + i] * input_x(m, b, i);
            a[j] = h[j] > 0 ? h[j] : 0;
        }
        for (int k = 0; k < C; k++) {
            z[k] = p->b2[k];
            for (int j = 0; j < H; j++) z[k] += (double)p->w2[k * H + j] * a[j];
            zmax = fmax(zmax, z[k]);
        }
        for (int k = 0; k < C; k++) sum += exp(z[k] - zmax);
        int64_t y = label(m, b);
        r->loss += (log(sum) + zmax - z[y]) / B;
        for (int k = 0; k < C; k++) dz[k] = seed * (exp(z[k] - zmax) / sum - (k == y)) / B;
        for (int j = 0; j < H; j++) {
            double da = 0;
            for (int k = 0; k < C; k++) {
                r->dw2[k][j] += dz[k] * a[j];
                da += dz[k] * p->w2[k * H + j];
            }
            r->dh[b][j] = h[j] > 0 ? da : 0;
            r->db1[j] += r->dh[b][j];
            for (int i = 0; p->w1 && i < IN; i++) r->dw1[j][i] += r->dh[b][j] * input_x(m, b, i);
        }
        for (int k = 0; k < C; k++) r->db2[k] += dz[k];
    }
}

/* ---- the stage ------------------------------------------------------------------------ */

typedef struct fixture {
    pp_device *dev;
    pp_graph *g;
    int tail_first;   /* node id of relu.0: the tail stage holds [tail_first, nnodes) */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    pp_error err = {0};
    pp_mlp_config mc = pp_mlp_config_default();
    mc.in = IN, mc.hidden[0] = H, mc.nhidden = 1, mc.classes = C, mc.batch = B, mc.seed = 3, mc.with_loss = 1;
    if (pp_device_create(PP_DEVICE_CPU, 0, &f->dev, &err) != PP_OK || pp_example_mlp(&mc, &f->g, &err) != PP_OK)
        fail_msg("%s", err.msg);
    f->tail_first = -1;
    for (int n = 0; n < f->g->nnodes; n++)
        if (!strcmp(f->g->nodes[n].name, "relu.0")) f->tail_first = n;
    assert_true(f->tail_first > 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pp_graph_destroy(f->g);
    pp_device_destroy(f->dev);
    free(f);
    return 0;
}

enum { WHOLE, TAIL };
static const char *const shape_name[] = {"whole stage", "last stage Relu..loss"};

static pp_stage *make(const fixture *f, int shape, pp_recompute r, int whole_backward)
{
    pp_stage_options so = {.slots = SLOTS, .microbatch = B, .global_batch = B * M, .seed = 1, .training = 1,
                           .recompute = r, .whole_backward = whole_backward};
    so.optim = (pp_optim_hparams){.kind = PP_OPTIM_SGD};
    pp_stage *s = NULL;
    pp_error err = {0};
    if (pp_stage_create_range(f->g, shape == TAIL ? f->tail_first : 0, f->g->nnodes, 1, f->dev, &so, &s, &err) !=
        PP_OK)
        fail_msg("%s", err.msg);
    return s;
}

static const pp_stage_param *param(const pp_stage *s, const char *name)
{
    for (int i = 0; i < pp_stage_num_params(s); i++)
        if (!strcmp(pp_stage_param_at(s, i)->name, name)) return pp_stage_param_at(s, i);
    return NULL;
}

static const float *param_data(pp_stage *s, const char *name)
{
    const pp_stage_param *p = param(s, name);
    return p ? pp_stage_params(s) + p->offset : NULL;
}

static mlp_params params_of(pp_stage *s)
{
    return (mlp_params){param_data(s, "fc.0.weight"), param_data(s, "fc.0.bias"), param_data(s, "head.weight"),
                        param_data(s, "head.bias")};
}

/* Writes microbatch m's data (x or fc.0's output, labels) into slot's inputs. */
static void feed(pp_stage *s, int slot, int m)
{
    for (int i = 0; i < pp_stage_num_inputs(s); i++) {
        const pp_stage_port *p = pp_stage_input(s, i);
        void *d = pp_stage_input_buffer(s, slot, i);
        for (int b = 0; b < B; b++)
            if (!strcmp(p->name, "labels")) ((int64_t *)d)[b] = label(m, b);
            else if (!strcmp(p->name, "x"))
                for (int k = 0; k < IN; k++) ((float *)d)[b * IN + k] = (float)input_x(m, b, k);
            else
                for (int k = 0; k < H; k++) ((float *)d)[b * H + k] = (float)input_h(m, b, k);
    }
}

/* The largest |got - want| / (1e-5 + |want|) over n values. */
static double rel_err(const float *got, const double *want, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs(got[i] - want[i]) / (1e-5 + fabs(want[i])));
    return e;
}

typedef struct step_log {
    double loss_err, dh_err, grad_err, step_loss, step_loss_ref;
    int zero_after_input;   /* 1: the parameter gradients were all 0 after the first input half */
} step_log;

/* A schedule's order on one stage: forwards of m0 -> slot 2, m1 -> 0, m2 -> 1 (three in
 * flight), backward m1, m3 -> slot 0 (reused), backwards m2, m0, m3. split: each backward
 * is an input half, the weight halves come later (W1 before slot 0 is reused, W2 W0 W3 at
 * the end), in the same microbatch order. weights: each microbatch's label weight (NULL:
 * the default seeds). Checks each loss before its backward and each input gradient right
 * after it, and the parameter gradients at the end, against mlp_reference. */
static void run_step(pp_stage *s, int shape, int split, const double *weights, step_log *log)
{
    static const struct {
        char kind;   /* F, B (whole or input half), W (weight half) */
        int m, slot;
    } order[] = {{'F', 0, 2}, {'F', 1, 0}, {'F', 2, 1}, {'B', 1, 0}, {'W', 1, 0}, {'F', 3, 0}, {'B', 2, 1},
                 {'B', 0, 2}, {'W', 2, 1}, {'W', 0, 2}, {'B', 3, 0}, {'W', 3, 0}};
    pp_error err = {0};
    const mlp_params p = params_of(s);
    double total_weight = 0;
    for (int m = 0; weights && m < M; m++) total_weight += weights[m];
    mlp_ref ref;
    memset(&ref, 0, sizeof ref);
    memset(log, 0, sizeof *log);
    log->zero_after_input = -1;
    assert_int_equal(pp_stage_zero_grads(s, &err), PP_OK);
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        int m = order[k].m, slot = order[k].slot;
        if (order[k].kind == 'F') {
            feed(s, slot, m);
            assert_int_equal(pp_stage_forward(s, slot, 1, m, &err), PP_OK);
            continue;
        }
        if (order[k].kind == 'W') {
            if (split) assert_int_equal(pp_stage_backward(s, slot, PP_BACKWARD_WEIGHT, &err), PP_OK);
            continue;
        }
        double seed = weights ? weights[m] / total_weight : 1.0 / M;
        if (weights) pp_stage_set_loss_weight(s, slot, weights[m], total_weight);
        mlp_ref one;
        memset(&one, 0, sizeof one);
        mlp_reference(&p, m, seed, &one);
        mlp_reference(&p, m, seed, &ref);   /* accumulates the parameter gradients */
        double loss = pp_stage_loss(s, slot);
        log->loss_err = fmax(log->loss_err, fabs(loss - one.loss) / one.loss);
        log->step_loss += pp_stage_loss_share(s, slot, loss);
        log->step_loss_ref += seed * one.loss;
        assert_int_equal(pp_stage_backward(s, slot, split ? PP_BACKWARD_INPUT : PP_BACKWARD_FULL, &err), PP_OK);
        if (split && log->zero_after_input < 0) {
            log->zero_after_input = 1;
            for (int64_t i = 0; i < pp_stage_param_elems(s); i++)
                if (pp_stage_grads(s)[i] != 0) log->zero_after_input = 0;
        }
        if (shape == TAIL) {
            const float *dh = pp_stage_grad_input_buffer(s, slot, 0);
            assert_non_null(dh);
            assert_string_equal(pp_stage_input(s, 0)->name, "fc.0.out");
            log->dh_err = fmax(log->dh_err, rel_err(dh, &one.dh[0][0], B * H));
        }
    }
    const struct {
        const char *name;
        const double *want;
    } grads[] = {{"fc.0.weight", &ref.dw1[0][0]}, {"fc.0.bias", ref.db1}, {"head.weight", &ref.dw2[0][0]},
                 {"head.bias", ref.db2}};
    int checked = 0;
    for (size_t i = 0; i < 4; i++) {
        const pp_stage_param *q = param(s, grads[i].name);
        if (!q) continue;
        log->grad_err = fmax(log->grad_err, rel_err(pp_stage_grads(s) + q->offset, grads[i].want, (int)q->numel));
        checked++;
    }
    assert_int_equal(checked, shape == TAIL ? 2 : 4);
}

static void check_log(const step_log *l, int shape)
{
    assert_true(l->loss_err < 1e-5);
    assert_true(l->grad_err < 1e-4);
    assert_true(shape == WHOLE || l->dh_err < 1e-4);
    assert_true(fabs(l->step_loss - l->step_loss_ref) < 1e-5 * l->step_loss_ref);
}

/* The input gradients' error, or why there are none. */
static const char *dh_text(const step_log *l, int shape, char *buf, size_t len)
{
    if (shape == WHOLE) return "none (x is data)";
    snprintf(buf, len, "%.1e", l->dh_err);
    return buf;
}

static int same_grads(pp_stage *a, pp_stage *b)
{
    return pp_stage_param_elems(a) == pp_stage_param_elems(b) &&
           !memcmp(pp_stage_grads(a), pp_stage_grads(b), (size_t)pp_stage_param_elems(a) * sizeof(float));
}

/* Out-of-order slots under each recompute: closed forms, and bitwise equal gradients. */
static void slots_and_recompute(void **state)
{
    fixture *f = *state;
    for (int shape = WHOLE; shape <= TAIL; shape++) {
        pp_stage *none = NULL;
        for (int r = PP_RECOMPUTE_NONE; r <= PP_RECOMPUTE_FULL; r++) {
            pp_stage *s = make(f, shape, (pp_recompute)r, 1);
            step_log l;
            run_step(s, shape, 0, NULL, &l);
            int same = none ? same_grads(s, none) : 1;
            char dh[32];
            printf("  %s, recompute %-9s: 4 microbatches in slots 2,0,1,0 (3 in flight) vs closed form: losses rel "
                   "err %.1e, step loss %.7f (closed form %.7f), parameter gradients %.1e, input gradients %s%s\n",
                   shape_name[shape], pp_recompute_name((pp_recompute)r), l.loss_err, l.step_loss, l.step_loss_ref,
                   l.grad_err, dh_text(&l, shape, dh, sizeof dh),
                   !none ? "" : same ? "; gradients bitwise those of none" : "; gradients DIFFER from none's");
            check_log(&l, shape);
            assert_true(same);
            if (none) pp_stage_destroy(s);
            else none = s;
        }
        pp_stage_destroy(none);
    }
}

/* Zero-bubble halves: input gradients after the input half, no parameter gradient yet,
 * and in the end the whole backward's gradients bit for bit. */
static void split_backward(void **state)
{
    fixture *f = *state;
    for (int shape = WHOLE; shape <= TAIL; shape++)
        for (int r = PP_RECOMPUTE_NONE; r <= PP_RECOMPUTE_FULL; r += PP_RECOMPUTE_FULL) {
            pp_stage *whole = make(f, shape, (pp_recompute)r, 1), *s = make(f, shape, (pp_recompute)r, 0);
            step_log lw, l;
            run_step(whole, shape, 0, NULL, &lw);
            run_step(s, shape, 1, NULL, &l);
            int same = same_grads(s, whole);
            char dh[32];
            printf("  %s, recompute %s, input halves then weight halves: parameter gradients %s after the first input "
                   "half; vs closed form: input gradients %s, parameter gradients %.1e and %s the whole backward's\n",
                   shape_name[shape], pp_recompute_name((pp_recompute)r), l.zero_after_input ? "all 0" : "NOT 0",
                   dh_text(&l, shape, dh, sizeof dh), l.grad_err, same ? "bitwise" : "NOT");
            check_log(&l, shape);
            assert_int_equal(l.zero_after_input, 1);
            assert_true(same);
            pp_stage_destroy(whole);
            pp_stage_destroy(s);
        }
}

/* pp_stage_set_loss_weight: seeds weight / global weight (a microbatch of weight 0
 * contributes nothing), the step's loss the weighted mean. */
static void loss_weights(void **state)
{
    fixture *f = *state;
    const double weights[M] = {1, 3, 0, 2};
    for (int shape = WHOLE; shape <= TAIL; shape++) {
        pp_stage *s = make(f, shape, PP_RECOMPUTE_NONE, 0);
        step_log l;
        run_step(s, shape, 1, weights, &l);
        char dh[32];
        printf("  %s, label weights 1,3,0,2 (split backward): step loss %.7f vs closed form %.7f, parameter "
               "gradients %.1e, input gradients %s\n",
               shape_name[shape], l.step_loss, l.step_loss_ref, l.grad_err, dh_text(&l, shape, dh, sizeof dh));
        check_log(&l, shape);
        pp_stage_destroy(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slots_and_recompute),
        cmocka_unit_test(split_backward),
        cmocka_unit_test(loss_weights),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
