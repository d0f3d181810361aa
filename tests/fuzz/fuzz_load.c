/* libFuzzer target for the loader, to run for hours where `make test`'s fuzz test runs a
 * minute: each input is loaded as an ONNX model, and what loads is partitioned and its
 * table printed. The custom mutator applies tests/graph_mutate.h's structural mutations
 * to inputs that unpack (half the time) and libFuzzer's byte mutations otherwise, so a
 * corpus of real exports is mutated the way the fuzz test does it. Build and run: see
 * docs/fuzzing.md (cmake -DPP_FUZZ=ON with clang). Faults are the sanitizers' reports;
 * an error status is a correct answer. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnxpipe/graph_ir.h>
#include <onnxpipe/partition.h>

#include "../graph_mutate.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint64_t rng_state = 1;
static uint64_t rng(void)
{
    uint64_t x = rng_state;   /* xorshift64*, seeded per call by libFuzzer's seed */
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static mut_arena arena;

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    rng_state = seed | 1;
    if (!arena.base) {
        arena.cap = 64u << 20;
        if (!(arena.base = malloc(arena.cap))) return LLVMFuzzerMutate(data, size, max_size);
    }
    arena.used = 0;
    arena.full = 0;
    Onnx__ModelProto *m = rng() % 2 ? onnx__model_proto__unpack(
        &(ProtobufCAllocator){mut_alloc, mut_free, &arena}, size, data) : NULL;
    if (!m || !m->graph) return LLVMFuzzerMutate(data, size, max_size);
    mut_ctx ctx = {&arena, rng, NULL, NULL};   /* no files: the external-data mutation stays out */
    int done = 0;
    for (int tries = 0; tries < 8 && !done; tries++) {
        mut_expect e;
        done = mutations[rng() % NMUTATIONS].fn(m, &ctx, &e) != NULL;
    }
    size_t len = onnx__model_proto__get_packed_size(m);
    if (!done || arena.full || len > max_size) return LLVMFuzzerMutate(data, size, max_size);
    onnx__model_proto__pack(m, data);
    return len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    pp_log_set_level(PP_LOG_ERROR);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const pp_dim_binding dims[] = {{"T", 8}};
    static const pp_graph_options opt = {.batch = 2, .dims = dims, .ndims = 1};
    pp_graph *g = NULL;
    pp_error err = {0};
    pp_status st = pp_graph_load_buffer(data, size, NULL, &opt, &g, &err);
    if (st == PP_ERR_INTERNAL || (st != PP_OK && (g || !err.msg[0]))) {
        fprintf(stderr, "contract broken: %s: %s\n", pp_status_string(st), err.msg);
        abort();
    }
    if (st != PP_OK) return 0;
    pp_partition_options po = {.balance = g->nparams ? PP_BALANCE_PARAMS : PP_BALANCE_UNIFORM};
    pp_partition *p = NULL;
    if (pp_partition_create(g, g->nnodes >= 2 ? 2 : 1, &po, &p, &err) == PP_OK) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            pp_partition_print(p, null);
            fclose(null);
        }
        pp_partition_destroy(p);
    }
    pp_graph_destroy(g);
    return 0;
}
