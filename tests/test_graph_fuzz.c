/* Bad input never crashes the loader, and what it refuses it names.
 * - Byte level: 1,000 mutations of a model built in code (truncations, byte flips,
 *   random bytes, a text file, an empty file) each load to PP_OK or to an error with a
 *   message; a mutated model that loads must also save and load again.
 * - Structure: 1,500 mutations of real PyTorch exports (tests/ref/export_fuzz_seeds.py,
 *   run with $PY; the built model alone without it) from tests/graph_mutate.h: renamed
 *   inputs, duplicated producers, cycles, wrong opsets, bad attribute types, external
 *   data beside and outside the model's folder, huge dims, escape bytes in names, ...
 *   A case applies one mutation (its expected status and message are checked) or stacks
 *   two or three. What loads is partitioned and its table printed: no message or table
 *   may hold a control byte or broken UTF-8 (pp_text_escape leaves it unchanged).
 * - The corpus: tests/fuzz/corpus/, mutated exports that the libFuzzer target found new
 *   paths with (docs/fuzzing.md), each replayed with the structural cases' checks.
 * Runs under AddressSanitizer and UBSan in `make test`; the seeds are fixed. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/partition.h>
#include <onnxpipe/report_json.h>

#include "graph_mutate.h"

#define CASES 1000        /* byte-level */
#define STRUCT_CASES 1500 /* structural, over all seeds */

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

static void test_byte_flips(void **state)
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

/* ---- structural mutations of real exports -------------------------------------- */

/* 1 when text is what pp_text_escape leaves as it is: no control byte but newline and
 * tab, no broken UTF-8. */
static int printable(const char *text, size_t len)
{
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    pp_text_escape(text, 1, buf, len + 1);
    int same = !strcmp(buf, text);
    free(buf);
    return same;
}

typedef struct seed {
    char name[64];
    uint8_t *data;
    size_t len;
    int nnodes;          /* as loaded */
    int64_t nparams;
} seed;

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len ? *len : 1);
    if (b && fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* The dynamic GPT's "batch" and "T" are bound; the other seeds have no symbolic dims. */
static const pp_dim_binding seed_dims[] = {{"T", 8}};
static const pp_graph_options seed_opt = {.batch = 2, .dims = seed_dims, .ndims = 1};

/* Outcomes per mutation (single cases) and over stacked cases. */
static int outcome[NMUTATIONS + 1][PP_STATUS_COUNT];
static int checked[NMUTATIONS + 1];   /* single cases whose expectation was asserted */

static char case_dir[300];

/* What loads is partitioned (2 stages where it can be), its table and JSON printed, and
 * its stage graphs extracted; every message and the table must be printable. */
static void partition_loaded(int k, const pp_graph *g)
{
    pp_partition_options po = {.balance = g->nparams ? PP_BALANCE_PARAMS : PP_BALANCE_UNIFORM};
    pp_partition *p = NULL;
    pp_error err = {0};
    pp_status st = pp_partition_create(g, g->nnodes >= 2 ? 2 : 1, &po, &p, &err);
    if (st != PP_OK) {
        if (st == PP_ERR_INTERNAL || !err.msg[0] || !printable(err.msg, strlen(err.msg)))
            fail_msg("case %d: partition: %s: %s", k, pp_status_string(st), err.msg);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    pp_partition_print(p, mem);
    pp_json j;
    pp_json_init(&j, mem, 0);
    pp_partition_write_json(p, &j);
    pp_json_finish(&j);
    fclose(mem);
    if (!printable(text, len)) fail_msg("case %d: the partition table prints a raw control byte:\n%s", k, text);
    free(text);
    for (int s = 0; s < p->nstages; s++) {
        pp_graph *sg = NULL;
        if (pp_partition_stage_graph(p, s, &sg, &err) != PP_OK) fail_msg("case %d: stage %d: %s", k, s, err.msg);
        pp_graph_destroy(sg);
    }
    pp_partition_destroy(p);
}

/* Loads the case's model file and checks the contract and, where given, the expectation. */
static pp_status load_case(int k, const seed *sd, const mut_expect *e, const char *what)
{
    char path[400];
    snprintf(path, sizeof path, "%s/model.onnx", case_dir);
    pp_graph *g = NULL;
    pp_error err = {0};
    if (getenv("FUZZ_TRACE")) fprintf(stderr, "case %d: %s on %s\n", k, what, sd->name);   /* before a sanitizer stops it */
    pp_status st = pp_graph_load(path, &seed_opt, &g, &err);
    if ((int)st < 0 || st >= PP_STATUS_COUNT) fail_msg("case %d (%s): status %d out of range", k, what, (int)st);
    if (st != PP_OK) {
        if (g) fail_msg("case %d (%s): error %s but a graph was returned", k, what, pp_status_string(st));
        if (!err.msg[0] || err.status != st) fail_msg("case %d (%s): error without its message", k, what);
        if (!printable(err.msg, strlen(err.msg)))
            fail_msg("case %d (%s): the message holds a raw control byte: %s", k, what, err.msg);
    }
    if (st == PP_ERR_INTERNAL) fail_msg("case %d (%s): internal error: %s", k, what, err.msg);
    if (e && e->status != EXPECT_ANY) {
        int ok = e->status == EXPECT_ERROR ? st != PP_OK : (int)st == e->status;
        if (!ok || (e->msg && !strstr(err.msg, e->msg)))
            fail_msg("case %d (%s on %s): expected %s%s%s%s, got %s: %s", k, what, sd->name,
                     e->status == EXPECT_ERROR ? "an error" : pp_status_string((pp_status)e->status),
                     e->msg ? " with '" : "", e->msg ? e->msg : "", e->msg ? "'" : "", pp_status_string(st), err.msg);
    }
    if (st != PP_OK) return st;
    if (e && !strcmp(what, "nodes shuffled") && (g->nnodes != sd->nnodes || g->nparams != sd->nparams))
        fail_msg("case %d: shuffled %s loads as %d nodes, %lld parameters; the export as %d, %lld", k, sd->name,
                 g->nnodes, (long long)g->nparams, sd->nnodes, (long long)sd->nparams);
    pp_graph *again = NULL;
    char resaved[400];
    snprintf(resaved, sizeof resaved, "%s/resaved.onnx", case_dir);
    if (pp_graph_save(g, resaved, NULL, &err) != PP_OK || pp_graph_load(resaved, NULL, &again, &err) != PP_OK)
        fail_msg("case %d (%s) loaded but does not round-trip: %s", k, what, err.msg);
    assert_int_equal(again->nnodes, g->nnodes);
    pp_graph_destroy(again);
    partition_loaded(k, g);
    pp_graph_destroy(g);
    return st;
}

/* The seeds: real exports when $PY can make them, and the model built in code. */
static int load_seeds(seed *seeds, int max)
{
    int n = 0;
    const char *py = getenv("PY"), *src = getenv("SRC_DIR");
    char dir[300], cmd[1200];
    snprintf(dir, sizeof dir, "%s/seeds", tmp_dir);
    if (py && *py && src && access(py, X_OK) == 0) {
        snprintf(cmd, sizeof cmd, "'%s' '%s/tests/ref/export_fuzz_seeds.py' '%s' >'%s/seeds.log' 2>&1", py, src,
                 dir, tmp_dir);
        if (system(cmd) != 0) fail_msg("%s failed (see %s/seeds.log)", cmd, tmp_dir);
        static const char *const names[] = {"gpt_op17_dynamic.onnx", "gpt_op13_nofold.onnx", "mlp.onnx",
                                            "cnn_bn.onnx"};
        for (size_t i = 0; i < sizeof names / sizeof names[0] && n < max; i++) {
            char path[400];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            seeds[n].data = read_file(path, &seeds[n].len);
            if (!seeds[n].data) fail_msg("the seed %s was not written", path);
            snprintf(seeds[n].name, sizeof seeds[n].name, "%s", names[i]);
            n++;
        }
    } else {
        printf("structural fuzz: $PY/$SRC_DIR not set, so no real exports: the model built in code only\n");
    }
    build_model(&seeds[n].data, &seeds[n].len);
    snprintf(seeds[n].name, sizeof seeds[n].name, "built-in");
    n++;
    for (int i = 0; i < n; i++) {   /* each seed loads as it is */
        pp_graph *g = NULL;
        pp_error err = {0};
        if (pp_graph_load_buffer(seeds[i].data, seeds[i].len, NULL, &seed_opt, &g, &err) != PP_OK)
            fail_msg("seed %s does not load: %s", seeds[i].name, err.msg);
        seeds[i].nnodes = g->nnodes;
        seeds[i].nparams = g->nparams;
        pp_graph_destroy(g);
    }
    return n;
}

/* The case folder, with what the external-data mutation points at: a file outside the
 * folder, links to it and to w.bin, and a sub-folder. */
static void make_case_dir(void)
{
    char p[400], q[400];
    snprintf(case_dir, sizeof case_dir, "%s/case", tmp_dir);
    assert_int_equal(mkdir(case_dir, 0700), 0);
    snprintf(p, sizeof p, "%s/sub", case_dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/outside.bin", tmp_dir);
    write_file(p, "0123456789abcdef0123456789abcdef", 32);
    snprintf(q, sizeof q, "%s/link_out.bin", case_dir);
    assert_int_equal(symlink(p, q), 0);
    snprintf(q, sizeof q, "%s/link_in.bin", case_dir);
    assert_int_equal(symlink("w.bin", q), 0);
}

static void test_structural(void **state)
{
    (void)state;
    pp_log_set_level(PP_LOG_ERROR);   /* the opset and --dim warnings, 1,500 times */
    rng_state = 0x2545f4914f6cdd1dull;
    seed seeds[8];
    int nseeds = load_seeds(seeds, 7);
    make_case_dir();
    char abs_data[400];
    snprintf(abs_data, sizeof abs_data, "%s/w.bin", case_dir);
    mut_arena arena = {malloc(64u << 20), 0, 64u << 20, 0};
    assert_non_null(arena.base);
    mut_ctx ctx = {&arena, rng, case_dir, abs_data};
    int stacked = 0, skipped = 0, applied[NMUTATIONS] = {0};
    double t0 = pp_now();
    for (int k = 0; k < STRUCT_CASES; k++) {
        const seed *sd = &seeds[k % nseeds];
        arena.used = 0;
        arena.full = 0;
        Onnx__ModelProto *m = onnx__model_proto__unpack(
            &(ProtobufCAllocator){mut_alloc, mut_free, &arena}, sd->len, sd->data);
        if (!m || !m->graph) fail_msg("case %d: seed %s does not unpack", k, sd->name);
        int n = rng() % 10 < 6 ? 1 : 2 + (int)(rng() % 2), done = 0, last = -1;
        mut_expect e = {EXPECT_ANY, NULL};
        const char *what = "none";
        for (int tries = 0; done < n && tries < 32; tries++) {
            int which = (int)(rng() % NMUTATIONS);
            mut_expect e1;
            const char *w = mutations[which].fn(m, &ctx, &e1);
            if (!w) continue;
            applied[which]++;
            done++, last = which, e = e1, what = w;
        }
        if (arena.full || !done) {
            skipped++;
            continue;
        }
        size_t len = onnx__model_proto__get_packed_size(m);
        uint8_t *buf = mut_alloc(&arena, len);
        if (!buf) {
            skipped++;
            continue;
        }
        assert_int_equal(onnx__model_proto__pack(m, buf), len);
        char path[400];
        snprintf(path, sizeof path, "%s/model.onnx", case_dir);
        write_file(path, buf, len);
        int single = done == 1;
        pp_status st = load_case(k, sd, single ? &e : NULL, single ? what : "stacked");
        if (single) {
            outcome[last][st]++;
            checked[last] += e.status != EXPECT_ANY;
        } else {
            outcome[NMUTATIONS][st]++;
            stacked++;
        }
    }
    double secs = pp_now() - t0;
    printf("structural fuzz: %d cases on %d seeds (", STRUCT_CASES - skipped, nseeds);
    for (int i = 0; i < nseeds; i++) printf("%s%s %zu B", i ? ", " : "", seeds[i].name, seeds[i].len);
    printf("), %d with one mutation, %d stacked, %d skipped; %.1f s\n", STRUCT_CASES - skipped - stacked, stacked,
           skipped, secs);
    printf("  %-14s %7s %7s  outcomes of the single-mutation cases\n", "mutation", "applied", "checked");
    for (int i = 0; i <= NMUTATIONS; i++) {
        if (i < NMUTATIONS) printf("  %-14s %7d %7d ", mutations[i].name, applied[i], checked[i]);
        else printf("  %-14s %7d %7s  outcomes of the stacked cases:", "(stacked)", stacked, "-");
        for (int s = 0; s < PP_STATUS_COUNT; s++)
            if (outcome[i][s]) printf(" %s %d", pp_status_string((pp_status)s), outcome[i][s]);
        printf("\n");
    }
    int ok_total = 0;
    for (int i = 0; i <= NMUTATIONS; i++) ok_total += outcome[i][PP_OK];
    assert_true(ok_total > 0);                         /* some mutants load and are partitioned */
    assert_true(skipped < STRUCT_CASES / 20);
    for (int i = 0; i < NMUTATIONS; i++) assert_true(applied[i] > 0);   /* every mutation ran */
    free(arena.base);
    for (int i = 0; i < nseeds; i++) free(seeds[i].data);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of tests/fuzz/corpus loads to a clean error or to a graph that saves, loads
 * again and partitions (load_case), in name order. */
static void test_corpus(void **state)
{
    (void)state;
    const char *src = getenv("SRC_DIR");
    if (!src) {
        printf("corpus: SRC_DIR not set (run under ctest): skipped\n");
        return;
    }
    char dir[400], *names[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus", src);
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    int n = 0;
    for (struct dirent *de; n < 4096 && (de = readdir(d));)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    if (!case_dir[0]) make_case_dir();
    int status[PP_STATUS_COUNT] = {0};
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        seed sd = {0};
        char path[800];
        snprintf(sd.name, sizeof sd.name, "%s", names[i]);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        sd.data = read_file(path, &sd.len);
        if (!sd.data) fail_msg("cannot read %s", path);
        snprintf(path, sizeof path, "%s/model.onnx", case_dir);
        write_file(path, sd.data, sd.len);
        status[load_case(i, &sd, NULL, names[i])]++;
        bytes += sd.len;
        free(sd.data);
        free(names[i]);
    }
    printf("corpus: %d files (%zu KiB) from %s:", n, bytes >> 10, dir);
    for (int s = 0; s < PP_STATUS_COUNT; s++)
        if (status[s]) printf(" %s %d", pp_status_string((pp_status)s), status[s]);
    printf("\n");
    assert_true(n > 0);
    assert_true(status[PP_OK] > 0);   /* some load and are partitioned, not only refused */
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_graph_fuzz.XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_byte_flips), cmocka_unit_test(test_structural),
                                       cmocka_unit_test(test_corpus)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return rc;
}
