/* Shapes with the dims unbound (graph/infer_part.c, a preview's and train's first load) on real
 * TorchScript exports written the way HF's OPT and timm's Swin are (tests/ref/infer_part_ref.py):
 * every dim ONNX's own shape inference with data propagation knows, onnxpipe knows, the same;
 * and every dim onnxpipe knows unbound is the one a load with the dims bound infers. Needs $PY. */
#include <onnxpipe/graph_ir.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define DIR "test-out/infer_part"

/* Compares g's values with the "name<TAB>d,d,?" lines of path (ONNX's shapes); counts the dims
 * ONNX knows, and those onnxpipe knows beyond it. */
static void against_onnx(const pp_graph *g, const char *path, int *compared, int *beyond)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = 0;
        int v = pp_graph_find_value(g, line);
        if (v < 0 || g->values[v].producer < 0) continue;   /* folded away, or an initializer */
        const pp_shape *s = &g->values[v].shape;
        int d = 0;
        char sh[256];
        for (char *save = NULL, *t = strtok_r(tab + 1, ",\n", &save); t; t = strtok_r(NULL, ",\n", &save), d++) {
            if (d >= s->rank) fail_msg("'%s': onnx has rank > %d (onnxpipe %s)", line, s->rank,
                                       pp_shape_format(s, sh, sizeof sh));
            if (*t == '?') {
                *beyond += s->dims[d] >= 0;
                continue;
            }
            if (s->dims[d] != strtoll(t, NULL, 10))
                fail_msg("'%s': dim %d is %s in onnx, onnxpipe has %s", line, d, t, pp_shape_format(s, sh, sizeof sh));
            (*compared)++;
        }
        if (d != s->rank) fail_msg("'%s': onnx has rank %d, onnxpipe %d", line, d, s->rank);
    }
    fclose(f);
}

static void test_exports_unbound(void **state)
{
    (void)state;
    const char *py = getenv("PY"), *src = getenv("SRC_DIR");
    if (!py || !src) {
        printf("PY / SRC_DIR not set (run under ctest): skipped\n");
        skip();
    }
    char cmd[2048], path[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && %s %s/tests/ref/infer_part_ref.py %s", DIR, py, src, DIR);
    fflush(stdout);
    assert_int_equal(system(cmd), 0);
    const char *names[] = {"opt_layer", "swin_block"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pp_graph *g, *b;
        pp_error err = {0};
        pp_graph_options unbound = {.allow_unknown_dims = 1};
        pp_dim_binding dims[] = {{"seq", 9}};
        pp_graph_options bound = {.batch = 3, .dims = dims, .ndims = i == 0};
        snprintf(path, sizeof path, "%s/%s.onnx", DIR, names[i]);
        if (pp_graph_load(path, &unbound, &g, &err) != PP_OK) fail_msg("%s unbound: %s", path, err.msg);
        if (pp_graph_load(path, &bound, &b, &err) != PP_OK) fail_msg("%s bound: %s", path, err.msg);
        int compared = 0, beyond = 0, checked = 0, last = 0, floats = 0;
        snprintf(path, sizeof path, "%s/%s.shapes", DIR, names[i]);
        against_onnx(g, path, &compared, &beyond);
        for (int v = 0; v < g->nvalues; v++) {
            const pp_shape *s = &g->values[v].shape;
            if (g->values[v].dtype == PP_DTYPE_F32 && s->rank > 0) floats++, last += s->dims[s->rank - 1] >= 0;
            int w = pp_graph_find_value(b, g->values[v].name);
            if (w < 0 || s->rank < 0) continue;
            assert_int_equal(b->values[w].shape.rank, s->rank);
            for (int d = 0; d < s->rank; d++)
                if (s->dims[d] >= 0) {
                    if (s->dims[d] != b->values[w].shape.dims[d])
                        fail_msg("%s '%s': dim %d unbound %lld, bound %lld", names[i], g->values[v].name, d,
                                 (long long)s->dims[d], (long long)b->values[w].shape.dims[d]);
                    checked++;
                }
        }
        printf("%s: unbound, %d dims onnx (data_prop) knows: all the same in onnxpipe, which knows %d more; "
               "%d known dims equal to the bound load's; float values with the last dim known: %d of %d\n",
               names[i], compared, beyond, checked, last, floats);
        assert_true(compared > 50);
        pp_graph_destroy(g);
        pp_graph_destroy(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exports_unbound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
