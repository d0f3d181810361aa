/* The trained set of files without the export recipe's metadata (graph/params.c), on graphs
 * built in code, each against what PyTorch would train: masks reaching only a condition
 * are constants whether their chain folds or not, position tables (cos / sin of p * theta in
 * float32, a causal [1, 1, T, T]) and rotary frequencies read through Cos are constants and
 * their look-alikes are not, a transposed or equal copy of a weight is tied to it (one
 * parameter; --untie keeps two), a saved file writes the copy back as the initializer it was,
 * holding the weight's values, and running statistics several BatchNorms update are untied. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <onnxpipe/graph_ir.h>

#define OK(call)                                                       \
    do {                                                               \
        pp_error e_ = {0};                                             \
        pp_status s_ = (call);                                         \
        if (s_ != PP_OK) fail_msg("%s: %s", #call, e_.msg);            \
    } while (0)

#define T 16     /* positions of the tables */
#define HD 8     /* their columns */

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void add_init(pp_graph *g, const char *name, int rank, const int64_t *dims, const float *data)
{
    pp_shape s = pp_shape_make(rank, dims);
    OK(pp_graph_add_initializer(g, name, PP_DTYPE_F32, &s, data, (size_t)pp_shape_numel(&s) * 4, 1, &e_));
}

static void node(pp_graph *g, const char *op, const char *name, const char *a, const char *b, const char *out)
{
    const char *ins[2] = {a, b};
    OK(pp_graph_add_node(g, op, "", name, ins, b ? 2 : 1, &out, 1, NULL, &e_));
}

static pp_graph *start(void)
{
    pp_graph *g;
    OK(pp_graph_create("g", 17, &g, &e_));
    g->producer_name = "pytorch";
    return g;
}

static int is_param(const pp_graph *g, const char *name)
{
    int v = pp_graph_find_value(g, name);
    assert_true(v >= 0);
    return g->values[v].is_param;
}

/* x [1, 1, T, T] -> Where(Equal(M, 0), -inf, x) -> Softmax -> MatMul(W) -> y: M is nanoGPT's
 * tril buffer (here random 0/1, so that only the gradient path can call it a constant), kept
 * (no_fold, as export loads it) or folded away (as training's bound load). */
static void test_mask_condition(void **state)
{
    (void)state;
    static float m[T * T], w[T * T], zero = 0, ninf = -INFINITY;
    unsigned s = 1;
    for (int i = 0; i < T * T; i++) m[i] = rnd(&s) > 0, w[i] = rnd(&s);
    for (int variant = 0; variant < 4; variant++) {   /* Equal or Cast to bool; no_fold or folding */
        pp_graph *g = start();
        const int64_t xd[] = {1, 1, T, T}, md[] = {T, T};
        pp_shape xs = pp_shape_make(4, xd);
        OK(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &e_));
        add_init(g, "M", 2, md, m);
        add_init(g, "W", 2, md, w);
        add_init(g, "zero", 0, NULL, &zero);
        add_init(g, "ninf", 0, NULL, &ninf);
        if (variant & 1) {
            node(g, "Equal", "eq", "M", "zero", "cond");
        } else {
            int id;
            const char *in = "M", *out = "keep";
            OK(pp_graph_add_node(g, "Cast", "", "cast", &in, 1, &out, 1, &id, &e_));
            OK(pp_graph_set_attr_int(g, id, "to", PP_DTYPE_BOOL, &e_));
            node(g, "Not", "not", "keep", NULL, "cond");
        }
        const char *wi[3] = {"cond", "ninf", "x"}, *wo = "s";
        OK(pp_graph_add_node(g, "Where", "", "where", wi, 3, &wo, 1, NULL, &e_));
        node(g, "Softmax", "softmax", "s", NULL, "p");
        node(g, "MatMul", "mm", "p", "W", "y");
        OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &xs, &e_));
        pp_graph_options o = {.no_fold = variant < 2};
        OK(pp_graph_finalize(g, &o, &e_));
        const int mv = pp_graph_find_value(g, "M"), m_trained = mv >= 0 && g->values[mv].is_param;
        printf("  mask through %s, %s: M trained %d, W trained %d, %lld elements\n",
               variant & 1 ? "Equal" : "Cast(bool)", variant < 2 ? "kept" : "folded", m_trained, is_param(g, "W"),
               (long long)g->nparams);
        assert_false(m_trained);
        assert_int_equal(g->nparams, T * T);   /* W alone */
        assert_true(is_param(g, "W"));
        pp_graph_destroy(g);
    }
}

/* A [1, 1, T, HD] table read by Mul into the output: trained unless its values are a
 * function of the position. Rotary tables as torch computes them (float32 p * inv_freq, then
 * cos / sin), a causal 0/1 [1, 1, T, T], against random values, a [T, T] ramp (linear
 * columns) and a [T, T] identity (rank 2: a weight, never a mask). */
typedef struct table_case {
    const char *name;
    int kind;        /* 0 cos, 1 sin, 2 tril, 3 random, 4 ramp, 5 identity */
    int constant;    /* what PyTorch would do: a buffer (1) or a parameter (0) */
} table_case;

static void make_table(int kind, float *t, int64_t *dims, int *rank)
{
    unsigned s = 7;
    *rank = kind >= 4 ? 2 : 4;
    int64_t cols = kind == 2 || kind >= 4 ? T : HD;
    int64_t d4[] = {1, 1, T, cols};
    memcpy(dims, d4 + 4 - *rank, (size_t)*rank * sizeof *dims);
    for (int p = 0; p < T; p++)
        for (int j = 0; j < cols; j++) {
            float inv = powf(10000.0f, -(float)(2 * (j % (HD / 2))) / HD), ang = (float)p * inv;
            float *x = &t[p * cols + j];
            switch (kind) {
            case 0: *x = cosf(ang); break;
            case 1: *x = sinf(ang); break;
            case 2: *x = j <= p; break;
            case 3: *x = rnd(&s); break;
            case 4: *x = (float)(p * cols + j); break;
            default: *x = p == j; break;
            }
        }
}

static void test_position_tables(void **state)
{
    (void)state;
    static const table_case cases[] = {
        {"rotary cos [1, 1, 16, 8]", 0, 1}, {"rotary sin [1, 1, 16, 8]", 1, 1}, {"causal [1, 1, 16, 16]", 2, 1},
        {"random [1, 1, 16, 8]", 3, 0},     {"ramp [16, 16]", 4, 0},            {"identity [16, 16]", 5, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        static float t[T * T];
        int64_t dims[4];
        int rank;
        make_table(cases[c].kind, t, dims, &rank);
        pp_graph *g = start();
        pp_shape s = pp_shape_make(rank, dims);
        OK(pp_graph_add_input(g, "x", PP_DTYPE_F32, &s, &e_));
        add_init(g, "table", rank, dims, t);
        node(g, "Mul", "mul", "x", "table", "y");
        OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &s, &e_));
        OK(pp_graph_finalize(g, NULL, &e_));
        printf("  %-26s trained %d (PyTorch: %s)\n", cases[c].name, is_param(g, "table"),
               cases[c].constant ? "a buffer" : "a parameter");
        assert_int_equal(is_param(g, "table"), !cases[c].constant);
        pp_graph_destroy(g);
    }
}

/* HF's rotary frequencies: inv_freq [4] = 10000^(-i/4) times positions, then Cos: a buffer.
 * The same vector read by a Mul on the way to the output (a gate) is trained, and so is a
 * vector that is not a frequency ladder read through Cos. */
static void test_angle_rates(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        float f[4];
        for (int i = 0; i < 4; i++) f[i] = variant == 2 ? 0.1f * (float)(i + 1) : powf(10000.0f, -(float)i / 4);
        pp_graph *g = start();
        const int64_t pd[] = {T, 1}, od[] = {T, 4}, fd[] = {4};
        pp_shape ps = pp_shape_make(2, pd), os = pp_shape_make(2, od);
        OK(pp_graph_add_input(g, "pos", PP_DTYPE_F32, &ps, &e_));
        add_init(g, "inv_freq", 1, fd, f);
        node(g, "Mul", "angles", "pos", "inv_freq", "a");
        node(g, "Cos", "cos", "a", NULL, "c");
        if (variant == 1) {
            node(g, "Mul", "gate", "c", "inv_freq", "y");
        } else {
            node(g, "Identity", "out", "c", NULL, "y");
        }
        OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &os, &e_));
        pp_graph_options o = {.no_fold = 1};
        OK(pp_graph_finalize(g, &o, &e_));
        printf("  inv_freq %s: trained %d\n", variant == 0 ? "through Cos only" : variant == 1 ? "also through a Mul"
               : "not a frequency ladder", is_param(g, "inv_freq"));
        assert_int_equal(is_param(g, "inv_freq"), variant != 0);
        pp_graph_destroy(g);
    }
}

/* x [2, R] -> MatMul(W [R, C]) -> h -> MatMul(copy [C, R]) -> y, copy = W^T (the TorchScript
 * exporter's folded LM head) or, square, = W: one parameter of R*C elements, the copy made
 * from W by a node; --untie copy: two. Saved, the file holds both initializers again, the
 * copy W^T (W) bit for bit. */
static pp_graph *copy_graph(int transposed, int64_t R, int64_t C, const char *untie, float *w, float *c)
{
    unsigned s = 3;
    for (int64_t i = 0; i < R * C; i++) w[i] = rnd(&s);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) c[transposed ? j * R + i : i * C + j] = w[i * C + j];
    pp_graph *g = start();
    const int64_t xd[] = {2, R}, wd[] = {R, C}, cd[] = {transposed ? C : R, transposed ? R : C};
    pp_shape xs = pp_shape_make(2, xd);
    OK(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &e_));
    add_init(g, "W", 2, wd, w);
    add_init(g, "onnx::MatMul_9", 2, cd, c);
    node(g, "MatMul", "mm1", "x", "W", "h");
    node(g, "MatMul", "mm2", "h", "onnx::MatMul_9", "y");
    OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &xs, &e_));
    pp_graph_options o = {.params.untie = untie};
    OK(pp_graph_finalize(g, &o, &e_));
    return g;
}

static void test_copies(void **state)
{
    (void)state;
    static const struct {
        int transposed;
        int64_t R, C;
        int tied;   /* one parameter */
    } cases[] = {{1, 8, 24, 1}, {0, 32, 32, 1}, {0, 8, 8, 0}};   /* an equal copy ties only from 1,024 */
    char dir[] = "/tmp/test_trained_set.XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int untie = 0; untie < 2; untie++) {
            const int64_t R = cases[k].R, C = cases[k].C;
            float *w = malloc((size_t)(R * C) * 4), *c = malloc((size_t)(R * C) * 4);
            pp_graph *g = copy_graph(cases[k].transposed, R, C, untie ? "onnx::MatMul_9" : NULL, w, c);
            const int tied = cases[k].tied && !untie;
            const int cv = pp_graph_find_value(g, "onnx::MatMul_9");
            printf("  %s copy [%lld, %lld]%s: %lld trained elements, copy_of %d\n", cases[k].transposed ? "transposed" :
                   "equal", (long long)g->values[cv].shape.dims[0], (long long)g->values[cv].shape.dims[1],
                   untie ? ", --untie" : "", (long long)g->nparams, g->values[cv].copy_of);
            assert_int_equal(g->nparams, (tied ? 1 : 2) * R * C);
            assert_int_equal(g->values[cv].copy_of, tied ? pp_graph_find_value(g, "W") + 1 : 0);
            assert_int_equal(g->values[cv].init < 0, tied);
            if (tied) {   /* the copy is a node's output, W read twice */
                assert_string_equal(g->nodes[g->values[cv].producer].op_type,
                                    cases[k].transposed ? "Transpose" : "Identity");
                assert_int_equal(pp_graph_param_readers(g, pp_graph_find_value(g, "W"), NULL, 0), 2);
                char path[512];
                snprintf(path, sizeof path, "%s/copy%zu.onnx", dir, k);
                OK(pp_graph_save(g, path, NULL, &e_));
                pp_graph *l;
                pp_graph_options o = {.no_fold = 1, .params.untie = "*"};   /* the file as written */
                OK(pp_graph_load(path, &o, &l, &e_));
                int lc = pp_graph_find_value(l, "onnx::MatMul_9");
                assert_int_equal(l->ninits, 2);
                assert_int_equal(l->nnodes, 2);
                assert_true(lc >= 0 && l->values[lc].init >= 0);
                assert_memory_equal(l->inits[l->values[lc].init].t.data, c, (size_t)(R * C) * 4);
                pp_graph_destroy(l);
                unlink(path);
            }
            pp_graph_destroy(g);
            free(w);
            free(c);
        }
    rmdir(dir);
}

/* Two training-mode BatchNormalizations updating one running mean and variance (dynamo's
 * deduplication of fresh statistics): each gets its own, as PyTorch's BatchNorm modules have. */
static void test_running_stats(void **state)
{
    (void)state;
    static const float zeros[4], ones[4] = {1, 1, 1, 1};
    const int64_t xd[] = {2, 4, 3}, cd[] = {4};
    pp_graph *g = start();
    pp_shape xs = pp_shape_make(3, xd);
    OK(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &e_));
    const char *names[] = {"s1", "b1", "s2", "b2"};
    for (int i = 0; i < 4; i++) {
        float w[4] = {1.0f + 0.1f * (float)i, 0.5f, -0.25f, 2.0f};
        add_init(g, names[i], 1, cd, w);
    }
    add_init(g, "mean", 1, cd, zeros);
    add_init(g, "var", 1, cd, ones);
    for (int k = 0; k < 2; k++) {
        const char *ins[5] = {k ? "h" : "x", k ? "s2" : "s1", k ? "b2" : "b1", "mean", "var"};
        const char *outs[3] = {k ? "y" : "h", k ? "m2" : "m1", k ? "v2" : "v1"};
        int id;
        OK(pp_graph_add_node(g, "BatchNormalization", "", k ? "bn2" : "bn1", ins, 5, outs, 3, &id, &e_));
        OK(pp_graph_set_attr_int(g, id, "training_mode", 1, &e_));
    }
    OK(pp_graph_add_output(g, "y", PP_DTYPE_F32, &xs, &e_));
    OK(pp_graph_finalize(g, NULL, &e_));
    for (int k = 0; k < 2; k++) {
        const char *stat = k ? "var" : "mean";
        char copy[32];
        snprintf(copy, sizeof copy, "%s.untied1", stat);
        int v = pp_graph_find_value(g, stat), c = pp_graph_find_value(g, copy);
        printf("  %s: read by %d node(s), its copy %s by %d\n", stat, g->values[v].nconsumers, copy,
               c >= 0 ? g->values[c].nconsumers : 0);
        assert_true(c >= 0 && g->values[c].init >= 0 && !g->values[c].is_param);
        assert_int_equal(g->values[v].nconsumers, 1);
        assert_int_equal(g->values[c].nconsumers, 1);
        assert_string_equal(g->nodes[g->values[c].consumers[0]].name, "bn2");
    }
    assert_int_equal(g->nparams, 16);   /* the scales and biases */
    pp_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask_condition),
        cmocka_unit_test(test_position_tables),
        cmocka_unit_test(test_angle_rates),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_running_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
