/* The loader's second thread (graph/load_type.c): a model with thousands of
 * value types, some it decodes (rank <= 4) and some it leaves to the main thread (rank 5),
 * loads to the same dtypes and shapes as the graph it was saved from, and a value type
 * changed in the file is reported as the main thread reports it. */
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

#define N 3000   /* nodes: value types well past the thread's minimum */

/* Two Relu chains, one over [1, 4] and one over [1, 1, 2, 1, 2] (rank 5), interleaved. */
static pp_graph *build(void)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    int64_t d2[2] = {1, 4}, d5[5] = {1, 1, 2, 1, 2};
    pp_shape s2 = pp_shape_make(2, d2), s5 = pp_shape_make(5, d5);
    assert_int_equal(pp_graph_create("ahead", 17, &g, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "a-1", PP_DTYPE_F32, &s2, &err), PP_OK);
    assert_int_equal(pp_graph_add_input(g, "b-1", PP_DTYPE_F32, &s5, &err), PP_OK);
    char in[32], out[32];
    for (int i = 0; i < N; i++) {
        char c = i % 3 == 2 ? 'b' : 'a';
        int prev = i - 1;
        while (prev >= 0 && (prev % 3 == 2 ? 'b' : 'a') != c) prev--;
        snprintf(in, sizeof in, "%c%d", c, prev);
        snprintf(out, sizeof out, "%c%d", c, i);
        const char *ins[1] = {in}, *outs[1] = {out};
        assert_int_equal(pp_graph_add_node(g, "Relu", "", NULL, ins, 1, outs, 1, NULL, &err), PP_OK);
    }
    snprintf(out, sizeof out, "a%d", N - 2);
    assert_int_equal(pp_graph_add_output(g, out, PP_DTYPE_F32, NULL, &err), PP_OK);
    snprintf(out, sizeof out, "b%d", N - 1);
    assert_int_equal(pp_graph_add_output(g, out, PP_DTYPE_F32, NULL, &err), PP_OK);
    assert_int_equal(pp_graph_finalize(g, NULL, &err), PP_OK);
    return g;
}

static uint8_t *saved(const pp_graph *g, size_t *len)
{
    char path[] = "/tmp/test_graph_load_ahead_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    pp_error err = {0};
    assert_int_equal(pp_graph_save(g, path, NULL, &err), PP_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    fclose(f);
    unlink(path);
    return buf;
}

static void test_types_match(void **state)
{
    (void)state;
    pp_graph *ref = build();
    size_t len;
    uint8_t *buf = saved(ref, &len);
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_graph_load_buffer(buf, len, NULL, NULL, &g, &err), PP_OK);
    assert_int_equal(g->nvalues, ref->nvalues);
    int compared = 0, rank5 = 0;
    for (int v = 0; v < g->nvalues; v++) {
        int r = pp_graph_find_value(ref, g->values[v].name);
        assert_true(r >= 0);
        assert_int_equal(g->values[v].dtype, ref->values[r].dtype);
        assert_true(pp_shape_equal(&g->values[v].shape, &ref->values[r].shape));
        compared++;
        rank5 += g->values[v].shape.rank == 5;
    }
    printf("value types: %d values compared with the built graph (%d of rank 5), all equal\n", compared, rank5);
    pp_graph_destroy(g);
    pp_graph_destroy(ref);
    free(buf);
}

/* The last occurrence of the value_info entry of `name`: its name field (tag 0x0a, length)
 * then its type (tag 0x12). */
static uint8_t *find_entry(uint8_t *buf, size_t len, const char *name)
{
    size_t n = strlen(name);
    uint8_t *hit = NULL;
    for (size_t i = 2; i + n + 1 < len; i++)
        if (buf[i - 2] == 0x0a && buf[i - 1] == n && !memcmp(buf + i, name, n) && buf[i + n] == 0x12) hit = buf + i;
    return hit;
}

static void test_changed_type_reported(void **state)
{
    (void)state;
    pp_graph *ref = build();
    size_t len;
    uint8_t *buf = saved(ref, &len);
    /* a1500's type ends with dim_value 4 (0x08 0x04): declare 5 instead */
    uint8_t *e = find_entry(buf, len, "a1500");
    assert_non_null(e);
    uint8_t *end = e + 5 + 2 + e[6];   /* past the type field */
    assert_int_equal(end[-2], 0x08);
    assert_int_equal(end[-1], 0x04);
    end[-1] = 0x05;
    pp_graph *g = NULL;
    pp_error err = {0};
    assert_int_equal(pp_graph_load_buffer(buf, len, NULL, NULL, &g, &err), PP_ERR_SHAPE);
    printf("changed value type: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'a1500' is declared [1, 5]"));
    assert_non_null(strstr(err.msg, "inferred as [1, 4]"));
    pp_graph_destroy(ref);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_match),
        cmocka_unit_test(test_changed_type_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
