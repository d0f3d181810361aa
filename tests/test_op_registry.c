/* The op registry against the kernel tables: every op has its facts (name, shape rule,
 * cost rule) and, on every backend this build has (the cuda one too when CUDA is built,
 * GPU or not), a forward kernel and a backward one when some input carries a gradient,
 * and bfloat16 / float16 kernels beside every float32 one; graph-only and fold-only ops
 * (KINDS G, FOLD) have no kernel, and a fold-only one has its folder; and the one FLOP
 * model against closed forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/backend/op.h>
#include <onnxpipe/op_info.h>

#include <onnxpipe/element_ops.h>

#include <string.h>

static void test_every_op_has_its_facts(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < PP_OP_COUNT; i++) {
        const pp_op_info *op = pp_op_get((pp_op)i);
        if (!op->name) {
            print_message("op %d has no registry entry\n", i);
            bad++;
            continue;
        }
        const int graph_only = (op->flags & PP_OPF_GRAPH_ONLY) != 0;
        const int ms = !strcmp(op->domain, "com.microsoft");   /* onnxruntime's residual norms, opset 1 */
        if (pp_op_lookup(op->domain, op->name) != (pp_op)i ||
            (!ms && pp_op_lookup("ai.onnx", op->name) != (pp_op)i) || (ms && pp_op_lookup("", op->name) != PP_OP_UNKNOWN)) {
            print_message("%s: lookup by domain and name gives another op\n", op->name);
            bad++;
        }
        /* 13..23, what exporters write; newer for the ops stage/fuse.c makes of HF's SiLU MLP */
        const int64_t newest = i == PP_OP_SWISH ? 24 : i == PP_OP_SWIGLU ? 28 : 23;
        if (ms ? op->since != 1 : op->since < 13 || op->since > newest || strcmp(op->domain, "")) {
            print_message("%s: opset %lld / domain '%s' outside what onnxpipe reads\n", op->name,
                          (long long)op->since, op->domain);
            bad++;
        }
        if (!op->shape && !graph_only) {
            print_message("%s: no shape rule\n", op->name);
            bad++;
        }
        if ((op->flags & PP_OPF_FOLD_ONLY) && !op->fold) {
            print_message("%s: fold-only, but no folder\n", op->name);
            bad++;
        }
    }
    assert_int_equal(pp_op_lookup("", "NoSuchOp"), PP_OP_UNKNOWN);
    assert_int_equal(pp_op_lookup("com.microsoft", "Gelu"), PP_OP_UNKNOWN);
    assert_int_equal(pp_op_lookup("com.microsoft", "SkipLayerNormalization"), PP_OP_SKIP_LAYER_NORMALIZATION);
    assert_null(pp_op_get(PP_OP_COUNT));
    print_message("%d ops in the registry, %d without their facts\n", PP_OP_COUNT, bad);
    assert_int_equal(bad, 0);
}

static void test_every_backend_covers_every_op(void **state)
{
    (void)state;
    int nbackends = 0, bad = 0;
    for (const pp_backend *b; (b = pp_backend_at(nbackends)); nbackends++) {
        assert_ptr_equal(pp_backend_get(b->kind), b);
        int nk = 0;
        for (int i = 0; i < PP_OP_COUNT; i++) {
            const pp_op_info *op = pp_op_get((pp_op)i);
            const pp_kernel *k = pp_kernel_find((pp_op)i, b->kind, PP_DTYPE_F32);
            const int no_kernel = (op->flags & (PP_OPF_GRAPH_ONLY | PP_OPF_FOLD_ONLY)) != 0;
            const int differentiable = op->nondiff != ~0u;
            nk += k != NULL;
            /* 16-bit compute: a native kernel or the adapter around the F32 one, for every F32 kernel */
            for (int h = 0; k && h < 2; h++) {
                const pp_dtype dt = h ? PP_DTYPE_F16 : PP_DTYPE_BF16;
                const pp_kernel *k16 = pp_kernel_find((pp_op)i, b->kind, dt);
                if (!k16 || k16 == k || (k16->backward != NULL) != (k->backward != NULL)) {
                    print_message("%s on %s: %s %s kernel\n", op->name, b->name,
                                  !k16 ? "no" : k16 == k ? "the F32 kernel as its" : "a backward mismatch in its",
                                  pp_dtype_name(dt));
                    bad++;
                }
            }
            if (no_kernel ? k != NULL : !k) {
                print_message("%s: %s a %s fp32 kernel\n", op->name, no_kernel ? "never runs but has" : "no",
                              b->name);
                bad++;
            } else if (k && differentiable != (k->backward != NULL)) {
                print_message("%s on %s: backward %s, but the op %s differentiable inputs\n", op->name, b->name,
                              k->backward ? "given" : "missing", differentiable ? "has" : "has no");
                bad++;
            }
        }
        print_message("backend %s: %d fp32 kernels for %d ops, each with a bfloat16 and a float16 one\n", b->name, nk,
                      PP_OP_COUNT);
    }
    assert_ptr_equal(pp_backend_at(0), pp_backend_get(PP_DEVICE_CPU));
    assert_true(pp_backend_get(PP_DEVICE_CPU)->caps & PP_DEVICE_CAP_HOST_MEMORY);
    assert_int_equal(bad, 0);
}

static int64_t flops(pp_op op, const pp_attr *attrs, int nattrs, const pp_shape *a, const pp_shape *b,
                     const pp_shape *c, const pp_shape *y)
{
    const pp_shape *in[3] = {a, b, c};
    int over = 0;
    int64_t f = pp_op_flops(op, attrs, nattrs, in, 3, y, &over);
    assert_int_equal(over, 0);
    return f;
}

static void test_flop_model(void **state)
{
    (void)state;
    pp_shape a = pp_shape_make(3, (int64_t[]){2, 3, 4}), b = pp_shape_make(2, (int64_t[]){4, 5}),
             y = pp_shape_make(3, (int64_t[]){2, 3, 5});
    /* MatMul [2,3,4] x [4,5]: 2·M·N·K per batch entry */
    assert_int_equal(flops(PP_OP_MATMUL, NULL, 0, &a, &b, NULL, &y), 2 * 2 * 3 * 5 * 4);
    /* Gemm with transA: A [K=6, M=3], B [6, 5], bias: 2·M·N·K + M·N */
    pp_shape ga = pp_shape_make(2, (int64_t[]){6, 3}), gb = pp_shape_make(2, (int64_t[]){6, 5}),
             gc = pp_shape_make(1, (int64_t[]){5}), gy = pp_shape_make(2, (int64_t[]){3, 5});
    pp_attr ta = {.name = "transA", .type = PP_ATTR_INT, .i = 1};
    assert_int_equal(flops(PP_OP_GEMM, &ta, 1, &ga, &gb, &gc, &gy), 2 * 3 * 5 * 6 + 3 * 5);
    /* Conv: X [1,4,8,8], W [6,2,3,3] (group 2), Y [1,6,6,6]: 2·out·(Cin/group)·k·k */
    pp_shape cx = pp_shape_make(4, (int64_t[]){1, 4, 8, 8}), cw = pp_shape_make(4, (int64_t[]){6, 2, 3, 3}),
             cy = pp_shape_make(4, (int64_t[]){1, 6, 6, 6});
    assert_int_equal(flops(PP_OP_CONV, NULL, 0, &cx, &cw, NULL, &cy), 2 * 216 * 2 * 9);
    /* LayerNorm: 8 per element; Reshape: none; ReduceSum: 1 per input element */
    assert_int_equal(flops(PP_OP_LAYER_NORMALIZATION, NULL, 0, &a, NULL, NULL, &a), 8 * 24);
    assert_int_equal(flops(PP_OP_RESHAPE, NULL, 0, &a, NULL, NULL, &a), 0);
    pp_shape r = pp_shape_make(1, (int64_t[]){2});
    assert_int_equal(flops(PP_OP_REDUCE_SUM, NULL, 0, &a, NULL, NULL, &r), 24);
    /* an unknown contraction dim is unknown FLOPs */
    pp_shape u = pp_shape_make(2, (int64_t[]){3, -1});
    assert_int_equal(flops(PP_OP_MATMUL, NULL, 0, &u, &b, NULL, &gy), -1);
    print_message("FLOPs of MatMul, Gemm (transA, bias), grouped Conv, LayerNorm, Reshape, ReduceSum = closed forms\n");
}

/* The op list's kernel column against the element lists: an op on the generic `unary`,
 * `binary`, `compare` or `predicate` kernel has its math in kernels/element_ops.h, and every
 * row there belongs to such an op (Identity's gradient is the unary kernel's too). */
static const struct row {
    const char *id, *kernel;
} rows[] = {
#define ROW(ID, name, kernel, ...) {#ID, #kernel},
    PP_OP_LIST(ROW)
#undef ROW
};
#define ID_OF(ID, ...) #ID,
static const char *const el_unary[] = {PP_EL_UNARY_LIST(ID_OF)}, *const el_binary[] = {PP_EL_BINARY_LIST(ID_OF)},
                         *const el_compare[] = {PP_EL_COMPARE_LIST(ID_OF)},
                         *const el_predicate[] = {PP_EL_PREDICATE_LIST(ID_OF)};
#undef ID_OF

static int listed(const char *id, const char *const *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ids[i], id)) return 1;
    return 0;
}

static const char *kernel_of(const char *id)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!strcmp(rows[i].id, id)) return rows[i].kernel;
    return NULL;
}

static void test_element_ops_match_the_list(void **state)
{
    (void)state;
    int bad = 0;
    const struct { const char *kernel; const char *const *ids; size_t n; } lists[] = {
        {"unary", el_unary, sizeof el_unary / sizeof el_unary[0]},
        {"binary", el_binary, sizeof el_binary / sizeof el_binary[0]},
        {"compare", el_compare, sizeof el_compare / sizeof el_compare[0]},
        {"predicate", el_predicate, sizeof el_predicate / sizeof el_predicate[0]}};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            if (!strcmp(rows[i].kernel, lists[l].kernel) && !listed(rows[i].id, lists[l].ids, lists[l].n)) {
                print_message("%s runs on the %s kernel but has no row in element_ops.h's %s list\n", rows[i].id,
                              lists[l].kernel, lists[l].kernel);
                bad++;
            }
        for (size_t i = 0; i < lists[l].n; i++) {
            const char *k = kernel_of(lists[l].ids[i]);
            if (!k || (strcmp(k, lists[l].kernel) && strcmp(lists[l].ids[i], "IDENTITY"))) {
                print_message("element_ops.h's %s row %s: the op list has it on kernel %s\n", lists[l].kernel,
                              lists[l].ids[i], k ? k : "(none: no such op)");
                bad++;
            }
        }
    }
    print_message("%zu unary, %zu binary, %zu comparison, %zu predicate element rows against the op list: "
                  "%d mismatches\n", sizeof el_unary / sizeof el_unary[0], sizeof el_binary / sizeof el_binary[0],
                  sizeof el_compare / sizeof el_compare[0], sizeof el_predicate / sizeof el_predicate[0], bad);
    assert_int_equal(bad, 0);
}

/* Ops that share a kernel function share what it declares: its caps, aux and work bytes
 * are the kernel's, so a new op on the `unary` kernel cannot forget ASSIGNS_FRESH. */
static void test_shared_kernels_share_caps(void **state)
{
    (void)state;
    int bad = 0;
    for (int bi = 0; pp_backend_at(bi); bi++) {
        const pp_backend *b = pp_backend_at(bi);
        for (int i = 0; i < PP_OP_COUNT; i++)
            for (int j = i + 1; j < PP_OP_COUNT; j++) {
                const pp_kernel *ki = pp_kernel_find((pp_op)i, b->kind, PP_DTYPE_F32),
                                *kj = pp_kernel_find((pp_op)j, b->kind, PP_DTYPE_F32);
                if (!ki || !kj || ki->forward != kj->forward) continue;
                if (ki->caps != kj->caps || ki->aux_bytes != kj->aux_bytes || ki->work_bytes != kj->work_bytes) {
                    print_message("%s and %s share a %s kernel but not its caps / aux / work bytes\n",
                                  pp_op_get((pp_op)i)->name, pp_op_get((pp_op)j)->name, b->name);
                    bad++;
                }
            }
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_op_has_its_facts),
                                       cmocka_unit_test(test_every_backend_covers_every_op),
                                       cmocka_unit_test(test_flop_model),
                                       cmocka_unit_test(test_element_ops_match_the_list),
                                       cmocka_unit_test(test_shared_kernels_share_caps)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
