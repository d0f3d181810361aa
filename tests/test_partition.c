/* pp_partition_create on graphs built in code: cut analysis on a hand-built DAG
 * (a residual skipping two stages, a tied initializer in the first and last stage,
 * labels read by the last stage) against hand-computed facts, costs against closed
 * forms, random chains with skips and tied weights against brute force, and errors. */
#include <onnxpipe/partition_lib.h>
#include <onnxpipe/graph_ir.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* Declares a value's dtype and shape (shape inference must agree). */
static void set_value(pp_graph *g, const char *name, pp_dtype dt, int rank, const int64_t *dims)
{
    int v = pp_graph_value(g, name);
    assert_true(v >= 0);
    g->values[v].dtype = dt;
    g->values[v].shape = pp_shape_make(rank, dims);
}

static void add_node(pp_graph *g, const char *op, const char *name, const char *a, const char *b, const char *out)
{
    const char *in[2] = {a, b};
    const char *o[1] = {out};
    pp_error err = {0};
    assert_int_equal(pp_graph_add_node(g, op, "", name, in, b ? 2 : 1, o, 1, NULL, &err), PP_OK);
}

static void add_weight(pp_graph *g, const char *name, int rank, const int64_t *dims)
{
    pp_shape s = pp_shape_make(rank, dims);
    int64_t n = pp_shape_numel(&s);
    float *d = calloc((size_t)n, sizeof *d);
    pp_error err = {0};
    assert_int_equal(pp_graph_add_initializer(g, name, PP_DTYPE_F32, &s, d, (size_t)n * 4, 1, &err), PP_OK);
    free(d);
}

/* x[2,4] -MatMul E-> h0 -Relu-> h1 | -MatMul W1-> h2 -Relu-> h3 | -MatMul W2-> h4 -Add b2-> h5 |
 * -Add h1-> h6 -MatMul E-> logits -SCE labels-> loss. Cuts (|) after h1, n3, h5. */
static pp_graph *residual_tied_graph(void)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    int64_t x[2] = {2, 4}, w[2] = {4, 4}, b[1] = {4}, lab[1] = {2};
    assert_int_equal(pp_graph_create("dag", 17, &g, &err), PP_OK);
    pp_shape sx = pp_shape_make(2, x), sl = pp_shape_make(1, lab);
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &sx, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "labels", PP_DTYPE_I64, &sl, &err), PP_OK);
    add_weight(g, "E", 2, w);
    add_weight(g, "W1", 2, w);
    add_weight(g, "W2", 2, w);
    add_weight(g, "b2", 1, b);
    add_node(g, "MatMul", "n0", "x", "E", "h0");
    add_node(g, "Relu", "n1", "h0", NULL, "h1");
    add_node(g, "MatMul", "n2", "h1", "W1", "h2");
    add_node(g, "Relu", "n3", "h2", NULL, "h3");
    add_node(g, "MatMul", "n4", "h3", "W2", "h4");
    add_node(g, "Add", "n5", "h4", "b2", "h5");
    add_node(g, "Add", "n6", "h5", "h1", "h6");
    add_node(g, "MatMul", "n7", "h6", "E", "logits");
    add_node(g, "SoftmaxCrossEntropyLoss", "n8", "logits", "labels", "loss");
    const char *hs[] = {"h0", "h1", "h2", "h3", "h4", "h5", "h6", "logits"};
    for (int i = 0; i < 8; i++) set_value(g, hs[i], PP_DTYPE_F32, 2, x);
    set_value(g, "loss", PP_DTYPE_F32, 0, NULL);
    assert_int_equal(pp_graph_add_output(g, "loss", PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    return g;
}

static const char *vname(const pp_partition *p, int v) { return p->graph->values[v].name; }

static void assert_names(const pp_partition *p, const int *ids, int n, const char *const *want, int nwant)
{
    assert_int_equal(n, nwant);
    for (int i = 0; i < n; i++) assert_string_equal(vname(p, ids[i]), want[i]);
}

static void test_cut_analysis(void **state)
{
    (void)state;
    pp_graph *g = residual_tied_graph();
    const char *cuts[] = {"h1", "n3", "h5"};
    pp_partition_options o = {.cuts = cuts, .ncuts = 3, .microbatches = 8};
    pp_partition *p = NULL;
    pp_error err = {0};
    assert_int_equal(pp_partition_create(g, 4, &o, &p, &err), PP_OK);
    int first[4] = {0, 2, 4, 6}, last[4] = {1, 3, 5, 8};
    int64_t params[4] = {16, 16, 20, 16}, own[4] = {16, 16, 20, 0};
    /* MatMul [2,4]x[4,4]: 2*2*4*4 = 64; Relu / Add: 8; SCE: 6 per logit = 48 */
    int64_t flops[4] = {64 + 8, 64 + 8, 64 + 8, 8 + 64 + 48};
    int64_t act[4] = {64, 64, 64, 32 + 32 + 4};
    for (int s = 0; s < 4; s++) {
        assert_int_equal(p->stages[s].first_node, first[s]);
        assert_int_equal(p->stages[s].last_node, last[s]);
        assert_int_equal(p->stages[s].params, params[s]);
        assert_int_equal(p->stages[s].param_bytes, 4 * params[s]);
        assert_int_equal(p->stages[s].own_params, own[s]);
        assert_int_equal(p->stages[s].flops, flops[s]);
        assert_int_equal(p->stages[s].act_bytes, act[s]);
    }
    /* h1 crosses every boundary (relayed residual), plus the chain tensor of each */
    const char *b0[] = {"h1"}, *b1[] = {"h1", "h3"}, *b2[] = {"h1", "h5"};
    const char *const *bw[3] = {b0, b1, b2};
    int bn[3] = {1, 2, 2};
    for (int b = 0; b < 3; b++) {
        assert_int_equal(p->boundaries[b].ntensors, bn[b]);
        for (int k = 0; k < bn[b]; k++)
            assert_string_equal(vname(p, p->cuts[p->boundaries[b].tensors[k]].value), bw[b][k]);
        assert_int_equal(p->boundaries[b].bytes, 32 * bn[b]);
        assert_int_equal(p->stages[b].send_bytes, 32 * bn[b]);
    }
    assert_int_equal(p->cut_bytes, 32 * 5);
    int skips = 0;
    for (int c = 0; c < p->ncuts; c++)
        if (p->cuts[c].to_stage > p->cuts[c].from_stage + 1) {
            skips++;
            assert_string_equal(vname(p, p->cuts[c].value), "h1");
            assert_int_equal(p->cuts[c].from_stage, 0);
            assert_int_equal(p->cuts[c].to_stage, 3);
        }
    assert_int_equal(skips, 1);
    assert_int_equal(p->ntied, 1);
    assert_string_equal(vname(p, p->tied[0].value), "E");
    assert_int_equal(p->tied[0].nstages, 2);
    assert_int_equal(p->tied[0].stages[0], 0);
    assert_int_equal(p->tied[0].stages[1], 3);
    assert_int_equal(p->ninputs, 2);
    for (int i = 0; i < 2; i++) {
        int is_x = !strcmp(vname(p, p->inputs[i].value), "x");
        assert_int_equal(p->inputs[i].nstages, 1);
        assert_int_equal(p->inputs[i].stages[0], is_x ? 0 : 3);
        assert_int_equal(p->inputs[i].bytes, is_x ? 32 : 16);
    }
    const char *in0[] = {"x"}, *out0[] = {"h1"}, *in1[] = {"h1"}, *out1[] = {"h3"};
    const char *in3[] = {"h1", "h5", "labels"}, *out3[] = {"loss"};
    assert_names(p, p->stages[0].inputs, p->stages[0].ninputs, in0, 1);
    assert_names(p, p->stages[0].outputs, p->stages[0].noutputs, out0, 1);
    assert_names(p, p->stages[1].inputs, p->stages[1].ninputs, in1, 1);
    assert_names(p, p->stages[1].outputs, p->stages[1].noutputs, out1, 1);
    assert_names(p, p->stages[3].inputs, p->stages[3].ninputs, in3, 3);
    assert_names(p, p->stages[3].outputs, p->stages[3].noutputs, out3, 1);
    /* 1F1B memory, M = 8, P = 4: the driver gives stage s min(4 - s, 8) slots, one more after
       stage 0 (the next microbatch received); parameters padded
       to 16 elements as in the flat buffer (b2's 4 take 16), Adam's two moments; the parts add
       up (tests/test_partition_memory.c holds the model against the stage planner's dry run) */
    int64_t padded[4] = {16, 16, 32, 16};
    for (int s = 0; s < 4; s++) {
        pp_stage_memory m = pp_partition_stage_memory(p, s, 8);
        assert_int_equal(m.inflight, 4 - s + (s > 0));
        assert_int_equal(m.param_bytes, 4 * padded[s]);
        assert_int_equal(m.optimizer_bytes, 2 * m.param_bytes);
        assert_int_equal(m.stash_bytes, m.slot_bytes * m.inflight);
        assert_true(m.slot_bytes > 0);
        assert_int_equal(m.total_bytes, m.param_bytes + m.grad_bytes + m.optimizer_bytes + m.param_copy_bytes +
                                            m.constant_bytes + m.stash_bytes + m.recompute_bytes + m.scratch_bytes);
    }
    assert_int_equal(pp_partition_stage_memory(p, 0, 2).inflight, 2);
    printf("cut analysis: 4 stages, boundaries %d/%d/%d tensors, skip h1 0->3, tied E in {0,3}, labels enter 3\n",
           bn[0], bn[1], bn[2]);
    pp_partition_destroy(p);

    /* automatic: node params 16,0,16,0,16,4,0,0,0; the bottleneck 16 equals the bound
     * max(16, ceil(52/4)); the cuts go where fewest bytes cross */
    assert_int_equal(pp_partition_create(g, 4, NULL, &p, &err), PP_OK);
    assert_int_equal(p->bottleneck, 16);
    assert_int_equal(p->lower_bound, 16);
    assert_int_equal(p->stages[2].first_node, 4);
    assert_int_equal(p->stages[2].last_node, 4);
    pp_partition_destroy(p);
    pp_graph_destroy(g);
}

/* Random chains: node i reads h(i-1) and maybe an earlier h (a skip), and holds a
 * weight of d*d, d, a tied d-vector or nothing. Brute force over all splits. */
#define RN 10
typedef struct chain {
    int n, d, kind[RN], skip[RN];   /* kind: 0 MatMul, 1 Add bias, 2 Mul tied, 3 Relu, 4 Add skip */
} chain;

static pp_graph *chain_graph(const chain *c)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    int64_t hd[2] = {3, c->d}, wd[2] = {c->d, c->d}, bd[1] = {c->d};
    assert_int_equal(pp_graph_create("chain", 17, &g, &err), PP_OK);
    pp_shape sx = pp_shape_make(2, hd);
    assert_int_equal(pp_graph_add_input(g, "h-1", PP_DTYPE_F32, &sx, &err), PP_OK);
    add_weight(g, "T", 1, bd);
    for (int i = 0; i < c->n; i++) {
        char in[16], out[16], w[16], sk[16];
        snprintf(in, sizeof in, "h%d", i - 1);
        snprintf(out, sizeof out, "h%d", i);
        snprintf(w, sizeof w, "w%d", i);
        snprintf(sk, sizeof sk, "h%d", c->skip[i]);
        switch (c->kind[i]) {
        case 0: add_weight(g, w, 2, wd); add_node(g, "MatMul", NULL, in, w, out); break;
        case 1: add_weight(g, w, 1, bd); add_node(g, "Add", NULL, in, w, out); break;
        case 2: add_node(g, "Mul", NULL, in, "T", out); break;
        case 3: add_node(g, "Relu", NULL, in, NULL, out); break;
        default: add_node(g, "Add", NULL, in, sk, out); break;
        }
        set_value(g, out, PP_DTYPE_F32, 2, hd);
    }
    char last[16];
    snprintf(last, sizeof last, "h%d", c->n - 1);
    assert_int_equal(pp_graph_add_output(g, last, PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    return g;
}

static void brute_chain(const chain *c, const int64_t *w, int P, int s, int start, int *ends, int64_t *bn,
                        int64_t *cb)
{
    if (s == P - 1) {
        ends[s] = c->n - 1;
        int stage[RN];
        int64_t worst = 0;
        for (int t = 0, i = 0; t < P; t++) {
            int64_t sum = 0;
            for (; i <= ends[t]; i++) {
                stage[i] = t;
                sum += w[i];
            }
            if (sum > worst) worst = sum;
        }
        /* bytes: h(i) (3*d floats) crosses from stage[i] to the stage of its last reader */
        int64_t bytes = 0;
        for (int i = 0; i < c->n; i++) {
            int lastr = i + 1 < c->n ? stage[i + 1] : stage[i];
            for (int k = i + 1; k < c->n; k++)
                if (c->kind[k] == 4 && c->skip[k] == i) lastr = stage[k];
            bytes += (int64_t)(lastr - stage[i]) * 12 * c->d;
        }
        if (worst < *bn || (worst == *bn && bytes < *cb)) {
            *bn = worst;
            *cb = bytes;
        }
        return;
    }
    for (int e = start; e <= c->n - (P - s); e++) {
        ends[s] = e;
        brute_chain(c, w, P, s + 1, e + 1, ends, bn, cb);
    }
}

static void test_random_chains_vs_brute_force(void **state)
{
    (void)state;
    uint64_t r = 12345;
    int ninst = 0;
    int64_t maxdiff = 0;
    for (int k = 0; k < 400; k++) {
        chain c = {0};
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        c.n = 2 + (int)((r >> 33) % (RN - 1));
        c.d = 2 + (int)((r >> 20) % 3);
        int64_t w[RN];
        int tied_seen = 0, any_param = 0;
        for (int i = 0; i < c.n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            c.kind[i] = (int)((r >> 33) % 5);
            if (c.kind[i] == 4 && i < 2) c.kind[i] = 3;
            c.skip[i] = c.kind[i] == 4 ? (int)((r >> 40) % (uint64_t)(i - 1)) : 0;
            w[i] = c.kind[i] == 0 ? c.d * c.d : c.kind[i] == 1 ? c.d : c.kind[i] == 2 && !tied_seen ? c.d : 0;
            tied_seen |= c.kind[i] == 2;
            any_param |= w[i] > 0;
        }
        if (!any_param) {
            c.kind[0] = 0;
            w[0] = c.d * c.d;
        }
        pp_graph *g = chain_graph(&c);
        for (int P = 1; P <= 4 && P <= c.n; P++) {
            pp_partition *p = NULL;
            pp_error err = {0};
            assert_int_equal(pp_partition_create(g, P, NULL, &p, &err), PP_OK);
            int ends[RN];
            int64_t bn = INT64_MAX, cb = INT64_MAX;
            brute_chain(&c, w, P, 0, 0, ends, &bn, &cb);
            if (p->bottleneck != bn || p->cut_bytes != cb)
                fail_msg("chain %d, P=%d: bottleneck %lld vs %lld, cut bytes %lld vs %lld", k, P,
                         (long long)p->bottleneck, (long long)bn, (long long)p->cut_bytes, (long long)cb);
            int64_t d = llabs(p->bottleneck - bn) + llabs(p->cut_bytes - cb);
            if (d > maxdiff) maxdiff = d;
            /* the tied vector is held by every stage that reads it */
            int64_t held = 0;
            for (int s = 0; s < P; s++) held += p->stages[s].params;
            int64_t extra = 0;
            for (int t = 0; t < p->ntied; t++) extra += (p->tied[t].nstages - 1) * c.d;
            assert_int_equal(held, g->nparams + extra);
            pp_partition_destroy(p);
            ninst++;
        }
        pp_graph_destroy(g);
    }
    printf("compared %d random graph partitions with brute force: max |difference| = %lld\n", ninst,
           (long long)maxdiff);
}

static void test_errors(void **state)
{
    (void)state;
    pp_graph *g = residual_tied_graph();
    pp_partition *p = NULL;
    pp_error err = {0};
    assert_int_equal(pp_partition_create(g, 0, NULL, &p, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "out of range (1..9"));
    assert_int_equal(pp_partition_create(g, 10, NULL, &p, &err), PP_ERR_INVALID_ARG);
    /* options out of range, each named with its bound */
    struct {
        pp_partition_options o;
        const char *want;
    } badopt[] = {
        {{.tolerance = -0.1}, "balance tolerance -0.1 out of range (0..10"},
        {{.tolerance = 11}, "balance tolerance 11 out of range"},
        {{.tolerance = NAN}, "balance tolerance nan out of range"},
        {{.balance = (pp_balance)9}, "balance 9 out of range"},
        {{.order = (pp_order_mode)5}, "order mode 5 out of range (search, graph)"},
        {{.balance = PP_BALANCE_TIME, .gflops = -1}, "gflops -1 out of range"},
        {{.balance = PP_BALANCE_TIME, .link_gbps = INFINITY}, "link bandwidth (GB/s) inf out of range"},
        {{.balance = PP_BALANCE_TIME, .op_overhead = -1e-6}, "per-node overhead (s) -1e-06 out of range"},
    };
    for (size_t i = 0; i < sizeof badopt / sizeof badopt[0]; i++) {
        assert_int_equal(pp_partition_create(g, 2, &badopt[i].o, &p, &err), PP_ERR_INVALID_ARG);
        if (!strstr(err.msg, badopt[i].want)) fail_msg("bad option %zu: '%s' lacks '%s'", i, err.msg, badopt[i].want);
        assert_null(p);
    }
    struct {
        const char *cuts[3];
        int n, stages;
        const char *want;
    } bad[] = {
        {{"nope", "n3", "h5"}, 3, 4, "names no node and no tensor"},
        {{"n3", "h1", "h5"}, 3, 4, "does not come after"},
        {{"h1", "n3"}, 2, 4, "2 manual cuts make 3 stages, but 4"},
        {{"labels"}, 1, 2, "graph input or initializer"},
        {{"n8"}, 1, 2, "after the last node"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_partition_options o = {.cuts = bad[i].cuts, .ncuts = bad[i].n};
        assert_int_equal(pp_partition_create(g, bad[i].stages, &o, &p, &err), PP_ERR_INVALID_ARG);
        assert_null(p);
        if (!strstr(err.msg, bad[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].want);
    }
    pp_graph_destroy(g);

    /* no parameters: an error under the params balance, fine under uniform */
    int64_t x[2] = {2, 4};
    assert_int_equal(pp_graph_create("noparams", 17, &g, &err), PP_OK);
    pp_shape sx = pp_shape_make(2, x);
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &sx, &err), PP_OK);
    add_node(g, "Relu", "r0", "x", NULL, "y0");
    add_node(g, "Relu", "r1", "y0", NULL, "y1");
    set_value(g, "y0", PP_DTYPE_F32, 2, x);
    set_value(g, "y1", PP_DTYPE_F32, 2, x);
    assert_int_equal(pp_graph_add_output(g, "y1", PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    assert_int_equal(pp_partition_create(g, 2, NULL, &p, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no trainable parameters"));
    pp_partition_options uni = {.balance = PP_BALANCE_UNIFORM};
    assert_int_equal(pp_partition_create(g, 2, &uni, &p, &err), PP_OK);
    assert_int_equal(p->stages[0].last_node, 0);
    pp_partition_destroy(p);
    pp_graph_destroy(g);

    /* a cycle is refused when the graph is finalized, before any partition */
    assert_int_equal(pp_graph_create("cycle", 17, &g, &err), PP_OK);
    add_node(g, "Relu", "a", "b_out", NULL, "a_out");
    add_node(g, "Relu", "b", "a_out", NULL, "b_out");
    assert_int_not_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    assert_non_null(strstr(err.msg, "cycle"));
    pp_graph_destroy(g);
}

/* ---- the time balance ----------------------------------------------------------- */

/* x[4, w0] -> (MatMul W_k [w_k, w_k+1] -> Relu) x 4: wide and narrow tensors alternate. */
static pp_graph *mlp_chain(void)
{
    static const int64_t w[5] = {64, 256, 16, 256, 8};
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_graph_create("widths", 17, &g, &err), PP_OK);
    int64_t xs[2] = {4, w[0]};
    pp_shape sx = pp_shape_make(2, xs);
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &sx, &err), PP_OK);
    char prev[16] = "x";
    for (int k = 0; k < 4; k++) {
        char wn[8], mm[8], h[8], re[8], r[8];
        int64_t wd[2] = {w[k], w[k + 1]};
        snprintf(wn, sizeof wn, "W%d", k), snprintf(mm, sizeof mm, "mm%d", k), snprintf(h, sizeof h, "h%d", k);
        snprintf(re, sizeof re, "relu%d", k), snprintf(r, sizeof r, "r%d", k);
        add_weight(g, wn, 2, wd);
        add_node(g, "MatMul", mm, prev, wn, h);
        add_node(g, "Relu", re, h, NULL, r);
        snprintf(prev, sizeof prev, "%s", r);
    }
    assert_int_equal(pp_graph_add_output(g, prev, PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    return g;
}

/* Seconds of stage [i, j] of the graph's order, from the definition: forward and backward
 * 3 x its FLOPs at gflops plus an overhead per node, plus its sends at link GB/s: every
 * tensor crossing the cut after it, and the gradient (float tensors) crossing the cut before. */
static double stage_seconds(const pp_graph *g, const pp_node_cost *c, int i, int j, double gflops, double link,
                            double overhead)
{
    double t = 0;
    for (int k = i; k <= j; k++) t += 3.0 * (double)c[k].flops / (gflops * 1e9) + overhead;
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->producer < 0) continue;
        int last = val->producer;
        for (int k = 0; k < val->nconsumers; k++)
            if (val->consumers[k] > last) last = val->consumers[k];
        double bytes = (double)pp_shape_numel(&val->shape) * (double)pp_dtype_size(val->dtype);
        if (j < g->nnodes - 1 && val->producer <= j && last > j) t += bytes / (link * 1e9);       /* sent on */
        if (i > 0 && val->producer < i && last >= i && pp_dtype_is_float(val->dtype)) t += bytes / (link * 1e9);
    }
    return t;
}

static void test_time_balance(void **state)
{
    (void)state;
    pp_graph *g = mlp_chain();
    pp_error err = {0};
    pp_partition *flops = NULL, *p = NULL, *free_link = NULL;
    const double G = 0.5, L = 0.002, O = 2e-6;   /* slow enough that sends weigh like compute */
    pp_partition_options fo = {.balance = PP_BALANCE_FLOPS};
    pp_partition_options to = {.balance = PP_BALANCE_TIME, .gflops = G, .link_gbps = L, .op_overhead = O};
    pp_partition_options free_o = {.balance = PP_BALANCE_TIME, .gflops = G};
    for (int P = 2; P <= 4; P++) {
        assert_int_equal(pp_partition_create(g, P, &fo, &flops, &err), PP_OK);
        assert_int_equal(pp_partition_create(g, P, &to, &p, &err), PP_OK);
        assert_int_equal(pp_partition_create(g, P, &free_o, &free_link, &err), PP_OK);
        /* brute force over every split of the (only) order, seconds from the definition */
        int n = g->nnodes, ends[8];
        double best = 1e300;
        for (int mask = 0; mask < 1 << (n - 1); mask++) {
            if (__builtin_popcount((unsigned)mask) != P - 1) continue;
            double worst = 0;
            for (int i = 0, j = 0; j < n; j++)
                if (j == n - 1 || (mask >> j & 1)) {
                    double t = stage_seconds(g, p->costs, i, j, G, L, O);
                    if (t > worst) worst = t;
                    i = j + 1;
                }
            if (worst < best) best = worst;
        }
        double opt = (double)p->optimum / (G * 1e9), worst = 0;
        for (int s = 0; s < P; s++) {
            const pp_stage_info *st = &p->stages[s];
            double t = stage_seconds(g, p->costs, st->first_node, st->last_node, G, L, O);
            assert_true(fabs(st->seconds - t) <= 1e-9 * t);   /* one FLOP-time of rounding per tensor */
            if (t > worst) worst = t;
            ends[s] = st->last_node;
        }
        assert_true(fabs(opt - best) <= 1e-9 * best);
        assert_true(worst <= opt * (1 + 1e-9));   /* tolerance 0: an optimal split */
        /* free links: the flops balance's split; slow ones: no more bytes cross than there */
        for (int s = 0; s < P; s++) assert_int_equal(free_link->stages[s].last_node, flops->stages[s].last_node);
        assert_true(p->cut_bytes <= flops->cut_bytes);
        printf("time balance, %d stages: optimum %.6g s per microbatch (brute force %.6g s), cuts after", P, opt,
               best);
        for (int s = 0; s + 1 < P; s++) printf(" %s", g->nodes[ends[s]].name);
        printf(", %lld B crossing (flops balance: %lld B)\n", (long long)p->cut_bytes, (long long)flops->cut_bytes);
        pp_partition_destroy(flops), pp_partition_destroy(p), pp_partition_destroy(free_link);
    }
    /* a link so slow that one tensor's send leaves int64 FLOP-times: refused, naming the options */
    pp_partition_options slow = {.balance = PP_BALANCE_TIME, .gflops = 1e12, .link_gbps = 1e-9};
    assert_int_equal(pp_partition_create(g, 2, &slow, &p, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "--gflops and --link-gbps"));
    pp_graph_destroy(g);
}

/* Huge dims: one tensor past 2^47 bytes is refused when the graph is finalized (the
 * tensor named); tensors that fit but whose MatMul FLOPs do not fit in int64 are refused
 * by the cost model (the node named), where analyze.c's sums used to overflow. */
static void test_huge_dims(void **state)
{
    (void)state;
    pp_graph *g;
    pp_partition *p = NULL;
    pp_error err = {0};
    int64_t big[2] = {(int64_t)1 << 40, 8}, sq[2] = {(int64_t)1 << 21, (int64_t)1 << 21};
    assert_int_equal(pp_graph_create("huge", 17, &g, &err), PP_OK);
    pp_shape sb = pp_shape_make(2, big);
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &sb, &err), PP_OK);   /* 2^45 bytes: fits */
    add_node(g, "Relu", "r0", "x", NULL, "y0");
    add_node(g, "Concat", "cat", "y0", "y0", "y1");   /* [2^41, 8] float32: 2^46 bytes, fits */
    add_node(g, "Concat", "cat2", "y1", "y1", "y2");  /* 2^47 bytes: the limit, fits */
    add_node(g, "Concat", "cat3", "y2", "y2", "y3");  /* 2^48 bytes: refused */
    assert_int_equal(pp_graph_set_attr_int(g, 1, "axis", 0, &err), PP_OK);
    assert_int_equal(pp_graph_set_attr_int(g, 2, "axis", 0, &err), PP_OK);
    assert_int_equal(pp_graph_set_attr_int(g, 3, "axis", 0, &err), PP_OK);
    assert_int_equal(pp_graph_add_output(g, "y3", PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_ERR_SHAPE);
    printf("2^48 bytes: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "node 'cat3' (Concat): output 'y3': shape [8796093022208, 8] of float32 holds "
                                    "more than 128 TiB"));
    pp_graph_destroy(g);

    assert_int_equal(pp_graph_create("flops", 17, &g, &err), PP_OK);
    pp_shape ss = pp_shape_make(2, sq);
    assert_int_equal(pp_graph_add_input(g, "a", PP_DTYPE_F32, &ss, &err), PP_OK);   /* 2^44 bytes each */
    assert_int_equal(pp_graph_add_input(g, "b", PP_DTYPE_F32, &ss, &err), PP_OK);
    add_node(g, "MatMul", "mm", "a", "b", "c");        /* 2 x 2^42 x 2^21 = 2^64 FLOPs */
    add_node(g, "Relu", "r", "c", NULL, "d");
    assert_int_equal(pp_graph_add_output(g, "d", PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    pp_partition_options uni = {.balance = PP_BALANCE_UNIFORM};
    assert_int_equal(pp_partition_create(g, 2, &uni, &p, &err), PP_ERR_SHAPE);
    printf("2^64 FLOPs: %s\n", err.msg);
    assert_null(p);
    assert_non_null(strstr(err.msg, "node 'mm' (MatMul, output [2097152, 2097152]): the model's forward FLOPs"));
    pp_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_analysis),
        cmocka_unit_test(test_random_chains_vs_brute_force),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_time_balance),
        cmocka_unit_test(test_huge_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
