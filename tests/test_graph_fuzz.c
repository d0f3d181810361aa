/* Bad input never crashes the loader: 1,000 mutations of a valid model (truncations,
 * byte flips, random bytes, a text file, an empty file) each load to PP_OK or to an
 * error with a message. A mutated model that loads must also save and load again.
 * Runs under AddressSanitizer and UBSan in `make test`; the seed is fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <onnxpipe/graph.h>

#define CASES 1000

static char tmp_dir[256];

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    uint64_t x = rng_state;   /* xorshift64* */
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmp_dir, name);
    return buf;
}

/* x[2,8] -> Gemm(W1, b1, transB) -> Relu -> Transpose(perm) -> Transpose -> MatMul(W2) -> Softmax. */
static void build_model(uint8_t **buf, size_t *len)
{
    pp_graph *g;
    pp_error e = {0};
    static float w1[16 * 8], b1[16], w2[16 * 4];
    for (int i = 0; i < 16 * 8; i++) w1[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < 16; i++) b1[i] = (float)i;
    for (int i = 0; i < 16 * 4; i++) w2[i] = (float)(i % 5) - 2.0f;
    assert_int_equal(pp_graph_create("fuzz", 17, &g, &e), PP_OK);
    pp_shape xs = pp_shape_make(2, (int64_t[]){2, 8});
    pp_shape w1s = pp_shape_make(2, (int64_t[]){16, 8}), b1s = pp_shape_make(1, (int64_t[]){16});
    pp_shape w2s = pp_shape_make(2, (int64_t[]){16, 4});
    int id;
    assert_int_equal(pp_graph_add_input(g, "x", PP_DTYPE_F32, &xs, &e), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "W1", PP_DTYPE_F32, &w1s, w1, sizeof w1, 0, &e), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "b1", PP_DTYPE_F32, &b1s, b1, sizeof b1, 0, &e), PP_OK);
    assert_int_equal(pp_graph_add_initializer(g, "W2", PP_DTYPE_F32, &w2s, w2, sizeof w2, 0, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Gemm", "", "fc1", (const char *[]){"x", "W1", "b1"}, 3,
                                       (const char *[]){"h"}, 1, &id, &e), PP_OK);
    assert_int_equal(pp_graph_set_attr_int(g, id, "transB", 1, &e), PP_OK);
    assert_int_equal(pp_graph_set_attr_float(g, id, "alpha", 1.0f, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Relu", "", "act", (const char *[]){"h"}, 1, (const char *[]){"r"}, 1,
                                       &id, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Transpose", "", "t1", (const char *[]){"r"}, 1, (const char *[]){"rt"}, 1,
                                       &id, &e), PP_OK);
    assert_int_equal(pp_graph_set_attr_ints(g, id, "perm", (const int64_t[]){1, 0}, 2, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Transpose", "", "t2", (const char *[]){"rt"}, 1, (const char *[]){"r2"},
                                       1, &id, &e), PP_OK);
    assert_int_equal(pp_graph_set_attr_ints(g, id, "perm", (const int64_t[]){1, 0}, 2, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "MatMul", "", "fc2", (const char *[]){"r2", "W2"}, 2,
                                       (const char *[]){"z"}, 1, &id, &e), PP_OK);
    assert_int_equal(pp_graph_add_node(g, "Softmax", "", "sm", (const char *[]){"z"}, 1, (const char *[]){"y"}, 1,
                                       &id, &e), PP_OK);
    assert_int_equal(pp_graph_set_attr_int(g, id, "axis", -1, &e), PP_OK);
    assert_int_equal(pp_graph_add_output(g, "y", PP_DTYPE_F32, NULL, &e), PP_OK);
    if (pp_graph_finalize(g, NULL, &e) != PP_OK) fail_msg("%s", e.msg);
    if (pp_graph_save(g, tmp_path("base.onnx"), NULL, &e) != PP_OK) fail_msg("%s", e.msg);
    pp_graph_destroy(g);
    FILE *f = fopen(tmp_path("base.onnx"), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(*len);
    assert_int_equal(fread(*buf, 1, *len, f), *len);
    fclose(f);
}

static int counts[PP_STATUS_COUNT];

/* Loads one case; through a file when via_file. Fails the test on a contract breach. */
static void check_case(int k, const uint8_t *data, size_t len, int via_file)
{
    pp_graph *g = NULL;
    pp_error err = {0};
    pp_status st;
    if (via_file) {
        FILE *f = fopen(tmp_path("case.onnx"), "wb");
        assert_non_null(f);
        if (len) assert_int_equal(fwrite(data, 1, len, f), len);
        fclose(f);
        st = pp_graph_load(tmp_path("case.onnx"), NULL, &g, &err);
    } else {
        st = pp_graph_load_buffer(data, len, NULL, NULL, &g, &err);
    }
    if ((int)st < 0 || st >= PP_STATUS_COUNT) {
        fail_msg("case %d: status %d out of range", k, (int)st);
        return;
    }
    counts[st]++;
    if (st != PP_OK) {
        if (g) fail_msg("case %d: error %s but a graph was returned", k, pp_status_string(st));
        if (!err.msg[0] || err.status != st) fail_msg("case %d: error %s without its message", k, pp_status_string(st));
        return;
    }
    if (!g || !g->finalized) fail_msg("case %d: PP_OK without a finalized graph", k);
    /* what loads must also save and load again */
    pp_graph *again = NULL;
    if (pp_graph_save(g, tmp_path("resaved.onnx"), NULL, &err) != PP_OK ||
        pp_graph_load(tmp_path("resaved.onnx"), NULL, &again, &err) != PP_OK)
        fail_msg("case %d loaded but does not round-trip: %s", k, err.msg);
    assert_int_equal(again->nnodes, g->nnodes);
    pp_graph_destroy(again);
    pp_graph_destroy(g);
}

static void test_fuzz(void **state)
{
    (void)state;
    uint8_t *base;
    size_t len;
    build_model(&base, &len);
    uint8_t *buf = malloc(len + 4096);
    int kinds[5] = {0};   /* base, truncations, flips, random, text/empty */
    check_case(-1, base, len, 0);
    assert_int_equal(counts[PP_OK], 1);
    kinds[0]++;
    static const char text[] = "ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n";
    check_case(0, (const uint8_t *)text, sizeof text - 1, 1);
    check_case(1, NULL, 0, 1);
    check_case(2, (const uint8_t *)"", 0, 0);
    kinds[4] += 3;
    for (int k = 3; k < CASES; k++) {
        int via_file = k % 100 == 7;
        uint64_t r = rng() % 100;
        if (r < 40) {               /* truncation at a random length */
            size_t n = (size_t)(rng() % len);
            memcpy(buf, base, n);
            check_case(k, buf, n, via_file);
            kinds[1]++;
        } else if (r < 97) {        /* 1-8 random bytes replaced */
            memcpy(buf, base, len);
            int flips = 1 + (int)(rng() % 8);
            for (int i = 0; i < flips; i++) buf[rng() % len] = (uint8_t)rng();
            check_case(k, buf, len, via_file);
            kinds[2]++;
        } else {                    /* random bytes */
            size_t n = 1 + (size_t)(rng() % 4096);
            for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rng();
            check_case(k, buf, n, via_file);
            kinds[3]++;
        }
    }
    printf("fuzz: %d cases on a %zu-byte model (1 original, %d truncations, %d byte flips, %d random, "
           "3 text/empty; %d through files), seed fixed\n", CASES + 1, len, kinds[1], kinds[2], kinds[3],
           CASES / 100 + 2);
    for (int s = 0; s < PP_STATUS_COUNT; s++)
        if (counts[s]) printf("  %-16s %d\n", pp_status_string((pp_status)s), counts[s]);
    int total = 0;
    for (int s = 0; s < PP_STATUS_COUNT; s++) total += counts[s];
    assert_int_equal(total, CASES + 1);
    assert_int_equal(counts[PP_ERR_INTERNAL], 0);
    free(buf);
    free(base);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_graph_fuzz.XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fuzz)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return rc;
}
