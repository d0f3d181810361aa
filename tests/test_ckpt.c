/* ckpt/: CRC32C against the published check values; a save of a two-stage MLP (and of
 * two data-parallel replicas writing disjoint parts) read back bitwise into fresh stages;
 * the refusals a user meets (flipped byte, truncated or deleted shard, another model,
 * another optimizer, a manifest from a newer format), each naming the file or tensor;
 * every file of a checkpoint with a byte flipped, cut, appended or deleted, and a file
 * that is no part of it, refused by verify and by load; latest, keep and the
 * newest-that-verifies choice. */
#include <onnxpipe/ckpt_lib.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/example.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/stage_lib.h>

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

static void test_crc32c(void **state)
{
    (void)state;
    /* RFC 3720 B.4 and the "123456789" check value of CRC-32C */
    unsigned char zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++) inc[i] = (unsigned char)i;
    assert_int_equal(pp_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(pp_crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(pp_crc32c(0, ones, 32), 0x62A8AB43u);
    assert_int_equal(pp_crc32c(0, inc, 32), 0x46DD794Eu);
    /* incremental over odd splits equals one pass */
    static unsigned char big[100003];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 2654435761u >> 13);
    uint32_t one = pp_crc32c(0, big, sizeof big), parts = pp_crc32c(0, big, 7);
    parts = pp_crc32c(parts, big + 7, 50001);
    parts = pp_crc32c(parts, big + 50008, sizeof big - 50008);
    assert_int_equal(one, parts);
    assert_int_equal(pp_crc32c_combine(pp_crc32c(0, big, 50008), pp_crc32c(0, big + 50008, sizeof big - 50008),
                                       sizeof big - 50008), one);
    assert_int_equal(pp_crc32c_combine(one, pp_crc32c(0, NULL, 0), 0), one);
    /* a large buffer (three interleaved chains, then combined) against 4 KiB pieces (one chain) */
    size_t nbig = (1u << 20) + 13;
    unsigned char *m = malloc(nbig);
    assert_non_null(m);
    for (size_t i = 0; i < nbig; i++) m[i] = (unsigned char)(i * 40503u >> 7);
    uint32_t pieces = 0;
    for (size_t at = 0; at < nbig; at += 4096) pieces = pp_crc32c(pieces, m + at, nbig - at < 4096 ? nbig - at : 4096);
    assert_int_equal(pp_crc32c(0, m, nbig), pieces);
    assert_int_equal(pp_crc32c(pp_crc32c(0, m, 5), m + 5, nbig - 5), pieces);
    free(m);
    printf("crc32c: check values of RFC 3720 and '123456789' match; split == whole == combined (%08x)\n", one);
}

typedef struct job {
    pp_graph *g;
    pp_partition *part;
    pp_device *dev;
    pp_stage *s[2];
    int index[2];
} job;

static void make_job(job *j, pp_optim_kind kind, uint64_t fill_seed)
{
    pp_error err = {0};
    pp_mlp_config mc = pp_mlp_config_default();
    mc.batch = 4;
    mc.with_loss = 1;
    assert_int_equal(pp_example_mlp(&mc, &j->g, &err), PP_OK);
    assert_int_equal(pp_partition_create(j->g, 2, NULL, &j->part, &err), PP_OK);
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &j->dev, &err), PP_OK);
    pp_stage_options so = {.slots = 1, .microbatch = 4, .global_batch = 4, .training = 1,
                           .optim = {.kind = kind, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    uint64_t x = fill_seed;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pp_stage_create(j->part, i, j->dev, &so, &j->s[i], &err), PP_OK);
        j->index[i] = i;
        /* distinct values in every parameter and every optimizer state slot (the flat
         * buffers' alignment gaps stay zero: they are not state) */
        float *p = pp_stage_params(j->s[i]), *st = pp_stage_optim_state(j->s[i]);
        int slots = pp_stage_optim_slots(j->s[i]);
        for (int t = 0; fill_seed && t < pp_stage_num_params(j->s[i]); t++) {
            const pp_stage_param *q = pp_stage_param_at(j->s[i], t);
            for (int64_t k = 0; k < q->numel; k++) p[q->offset + k] = (float)((x = x * 6364136223846793005ull + 1) >> 40);
            for (int64_t k = 0; k < q->numel * slots; k++)
                st[slots * q->offset + k] = (float)((x = x * 6364136223846793005ull + 1) >> 40);
        }
    }
}

static void free_job(job *j)
{
    for (int i = 0; i < 2; i++) pp_stage_destroy(j->s[i]);
    pp_device_destroy(j->dev);
    pp_partition_destroy(j->part);
    pp_graph_destroy(j->g);
}

static pp_ckpt_part part_of(job *j, int replica, int replicas, int rank)
{
    return (pp_ckpt_part){.stages = j->s, .stage_index = j->index, .nstages = 2, .partition = j->part,
                          .replica = replica, .replicas = replicas, .rank = rank};
}

static pp_ckpt_meta meta_of(int64_t step)
{
    return (pp_ckpt_meta){.step = step, .samples = step * 4, .seed = 7, .optim = {.kind = PP_OPTIM_ADAMW, .lr = 1e-3f},
                          .pp = 2, .dp = 1, .chunks = 1, .batch = 4, .microbatches = 1, .schedule = "1f1b",
                          .model_path = "mlp", .trainer_json = "{\"lr_schedule\":{\"kind\":\"constant\",\"position\":3}}"};
}

static void assert_same(job *a, job *b)
{
    for (int i = 0; i < 2; i++) {
        size_t n = (size_t)pp_stage_param_elems(a->s[i]) * sizeof(float);
        assert_memory_equal(pp_stage_params(a->s[i]), pp_stage_params(b->s[i]), n);
        assert_memory_equal(pp_stage_optim_state(a->s[i]), pp_stage_optim_state(b->s[i]),
                            n * (size_t)pp_stage_optim_slots(a->s[i]));
    }
}

static char root[256];

static void path(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", root, rel); }

static void sh(const char *fmt, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, arg, arg);
    assert_int_equal(system(cmd), 0);
}

static void test_round_trip(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "%s/test-out/ckpt-unit", getenv("BUILD_DIR") ? getenv("BUILD_DIR") : ".");
    sh("rm -rf '%s' && mkdir -p '%s'", root);
    job a, b;
    make_job(&a, PP_OPTIM_ADAMW, 12345);
    make_job(&b, PP_OPTIM_ADAMW, 0);
    pp_error err = {0};
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    pp_ckpt_meta m = meta_of(3);
    assert_int_equal(pp_ckpt_save(root, "unit", &pa, &m, &err), PP_OK);
    char p[512], text[64] = "";
    path(p, sizeof p, "latest");
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof text, f));
    fclose(f);
    assert_string_equal(text, "step-3\n");
    path(p, sizeof p, "step-3");
    pp_ckpt *c = NULL;
    assert_int_equal(pp_ckpt_open(p, &c, &err), PP_OK);
    const pp_ckpt_info *in = pp_ckpt_inspect(c);
    assert_int_equal(in->meta.step, 3);
    assert_int_equal(in->meta.samples, 12);
    assert_int_equal(in->meta.seed, 7);
    assert_int_equal(in->meta.optim.kind, PP_OPTIM_ADAMW);
    assert_int_equal(in->model_hash, pp_graph_model_hash(a.g));
    assert_int_equal(in->nfiles, 2);
    /* 3 Gemm layers: weight and bias, each with exp_avg and exp_avg_sq */
    assert_int_equal(in->ntensors, 18);
    const pp_ckpt_tensor *t = pp_ckpt_find_tensor(c, "fc.0.weight.exp_avg_sq");
    assert_non_null(t);
    assert_string_equal(t->param, "fc.0.weight");
    assert_string_equal(t->state, "exp_avg_sq");
    assert_int_equal(t->shape.rank, 2);
    assert_null(pp_ckpt_find_tensor(c, "fc.0.weight.momentum"));
    assert_non_null(in->trainer);
    assert_int_equal(pp_ckpt_load(c, &(pp_ckpt_part){.stages = b.s, .stage_index = b.index, .nstages = 2,
                                                      .partition = b.part, .replicas = 1}, &err), PP_OK);
    int ntensors = in->ntensors, nfiles = in->nfiles;
    pp_ckpt_close(c);
    assert_same(&a, &b);
    assert_int_equal(pp_ckpt_verify(p, &err), PP_OK);
    printf("round trip: %d tensors in %d shards read back bitwise; verify ok\n", ntensors, nfiles);
    /* step 3 saved again (a run resumed from an older checkpoint): the new one replaces it */
    pp_ckpt_meta m2 = meta_of(3);
    m2.samples = 99;
    assert_int_equal(pp_ckpt_save(root, "unit2", &pa, &m2, &err), PP_OK);
    assert_int_equal(pp_ckpt_verify(p, &err), PP_OK);
    assert_int_equal(pp_ckpt_open(p, &c, &err), PP_OK);
    assert_int_equal(pp_ckpt_inspect(c)->meta.samples, 99);
    pp_ckpt_close(c);
    sh("test $(ls '%s' | wc -l) -eq 2", root);   /* step-3 and latest: nothing left aside */
    printf("step-3 saved again: replaced whole, verify ok, nothing left beside it\n");
    free_job(&a);
    free_job(&b);
}

/* Two replicas of the same two stages write disjoint halves: the union is everything once. */
static void test_replicas(void **state)
{
    (void)state;
    job a, b;
    make_job(&a, PP_OPTIM_SGD, 999);
    make_job(&b, PP_OPTIM_SGD, 0);
    pp_error err = {0};
    pp_ckpt_meta m = meta_of(4);
    m.optim.kind = PP_OPTIM_SGD;
    m.dp = 2;
    pp_ckpt_part r1 = part_of(&a, 1, 2, 1), r0 = part_of(&a, 0, 2, 0);
    /* replica 1 (rank 1) writes its shards and markers; rank 0 then commits both */
    assert_int_equal(pp_ckpt_save(root, "unit", &r1, &m, &err), PP_OK);
    assert_int_equal(pp_ckpt_save(root, "unit", &r0, &m, &err), PP_OK);
    char p[512];
    path(p, sizeof p, "step-4");
    pp_ckpt *c = NULL;
    assert_int_equal(pp_ckpt_open(p, &c, &err), PP_OK);
    const pp_ckpt_info *in = pp_ckpt_inspect(c);
    assert_int_equal(in->ntensors, 12);      /* sgd with momentum: value + momentum */
    int per_file[8] = {0};
    for (int i = 0; i < in->ntensors; i++) per_file[in->tensors[i].file]++;
    for (int f = 0; f < in->nfiles; f++) assert_true(per_file[f] > 0);
    assert_true(in->nfiles >= 3);            /* both replicas wrote */
    pp_ckpt_part pb = part_of(&b, 0, 1, 0);
    assert_int_equal(pp_ckpt_load(c, &pb, &err), PP_OK);
    assert_same(&a, &b);
    printf("replicas: 12 tensors over %d shards of 2 replicas, each once; loaded bitwise\n", in->nfiles);
    pp_ckpt_close(c);
    free_job(&a);
    free_job(&b);
}

static void expect_error(pp_status st, const pp_error *err, const char *needle)
{
    assert_int_not_equal(st, PP_OK);
    printf("  refused: %s\n", err->msg);
    assert_non_null(strstr(err->msg, needle));
}

/* After an edit of dir's manifest: its checksum recomputed by the rule the format states
 * (CRC32C of every byte before the last member's key, "manifest_crc32c"), so the edit
 * reaches the check it is aimed at. */
static void reseal(const char *dir)
{
    char p[600], *text = malloc(1 << 20);
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = 0;
    const char *key = "\"manifest_crc32c\": \"", *at = NULL;
    for (const char *q = strstr(text, key); q; q = strstr(q + 1, key)) at = q;
    assert_non_null(at);
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", pp_crc32c(0, text, (size_t)(at - text)));
    fseek(f, (long)(at - text + strlen(key)), SEEK_SET);
    fwrite(hex, 1, 8, f);
    fclose(f);
    free(text);
}

static void test_refusals(void **state)
{
    (void)state;
    job a;
    make_job(&a, PP_OPTIM_ADAMW, 4242);
    pp_error err = {0};
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    pp_ckpt_meta m = meta_of(5);
    assert_int_equal(pp_ckpt_save(root, "unit", &pa, &m, &err), PP_OK);
    char good[512], bad[512], shard[600];
    path(good, sizeof good, "step-5");
    path(bad, sizeof bad, "bad");
    snprintf(shard, sizeof shard, "%s/shard-s001-r000.safetensors", bad);
    pp_ckpt *c = NULL;
    /* a flipped byte in a tensor's data: verify and load name the file and the tensor */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && f='%s' && printf 'Z' | dd of=\"$f\" bs=1 "
             "seek=$(( $(stat -c%%s \"$f\") - 5 )) conv=notrunc status=none", bad, good, bad, shard);
    assert_int_equal(system(cmd), 0);
    expect_error(pp_ckpt_verify(bad, &err), &err, "shard-s001-r000.safetensors");
    assert_non_null(strstr(err.msg, "tensor '"));
    assert_int_equal(pp_ckpt_open(bad, &c, &err), PP_OK);
    expect_error(pp_ckpt_load(c, &pa, &err), &err, "fails its checksum");
    pp_ckpt_close(c);
    /* truncated */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && truncate -s 100 '%s'", bad, good, bad, shard);
    assert_int_equal(system(cmd), 0);
    expect_error(pp_ckpt_verify(bad, &err), &err, "truncated");
    /* deleted */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && rm '%s'", bad, good, bad, shard);
    assert_int_equal(system(cmd), 0);
    expect_error(pp_ckpt_verify(bad, &err), &err, "shard-s001-r000.safetensors");
    /* another model: the hash in the manifest edited */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\"hash\": \"[0-9a-f]*\"/\"hash\": "
             "\"00000000deadbeef\"/' '%s/manifest.json'", bad, good, bad, bad);
    assert_int_equal(system(cmd), 0);
    expect_error(pp_ckpt_open(bad, &c, &err), &err, "manifest.json' fails its checksum");
    reseal(bad);
    assert_int_equal(pp_ckpt_open(bad, &c, &err), PP_OK);
    expect_error(pp_ckpt_load(c, &pa, &err), &err, "00000000deadbeef");
    assert_non_null(strstr(err.msg, "another model"));
    pp_ckpt_close(c);
    /* a newer format */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\"version\": 2/\"version\": 9/' "
             "'%s/manifest.json'", bad, good, bad, bad);
    assert_int_equal(system(cmd), 0);
    reseal(bad);
    expect_error(pp_ckpt_open(bad, &c, &err), &err, "newer");
    /* another optimizer */
    job s;
    make_job(&s, PP_OPTIM_SGD, 0);
    pp_ckpt_part ps = part_of(&s, 0, 1, 0);
    assert_int_equal(pp_ckpt_open(good, &c, &err), PP_OK);
    expect_error(pp_ckpt_load(c, &ps, &err), &err, "--optimizer adamw");
    pp_ckpt_close(c);
    free_job(&s);
    /* the newest that verifies: step-6 is corrupt, so resume takes step-5 */
    m = meta_of(6);
    assert_int_equal(pp_ckpt_save(root, "unit", &pa, &m, &err), PP_OK);
    path(bad, sizeof bad, "step-6/shard-s000-r000.safetensors");
    snprintf(cmd, sizeof cmd, "truncate -s 64 '%s'", bad);
    assert_int_equal(system(cmd), 0);
    char dir[512];
    assert_int_equal(pp_ckpt_find_resume(root, dir, sizeof dir, &err), PP_OK);
    assert_string_equal(dir, good);
    printf("resume auto skips the corrupt step-6 and takes %s\n", dir);
    free_job(&a);
}

static void test_keep(void **state)
{
    (void)state;
    job a;
    make_job(&a, PP_OPTIM_ADAMW, 77);
    pp_error err = {0};
    char keep_root[300];
    snprintf(keep_root, sizeof keep_root, "%s/keep", root);
    pp_ckpt_writer_options o = {.root = keep_root, .keep = 2, .async = 1, .run_id = "k1"};
    pp_ckpt_writer *w = NULL;
    assert_int_equal(pp_ckpt_writer_create(&o, &w, &err), PP_OK);
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    for (int step = 1; step <= 4; step++) {
        pp_ckpt_meta m = meta_of(step);
        double stall = -1;
        assert_int_equal(pp_ckpt_writer_save(w, &pa, &m, &stall, &err), PP_OK);
        assert_true(stall >= 0);
    }
    assert_int_equal(pp_ckpt_writer_wait(w, &err), PP_OK);
    pp_ckpt_writer_destroy(w);
    pp_ckpt_entry *e;
    int n;
    assert_int_equal(pp_ckpt_list(keep_root, &e, &n, &err), PP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(e[0].step, 4);
    assert_true(e[0].latest);
    assert_int_equal(e[1].step, 3);
    pp_ckpt_list_free(e, n);
    printf("keep 2 of 4 async saves: step-4 (latest) and step-3 remain\n");
    free_job(&a);
}

/* defer_copy: the thread copies parameters and optimizer state; after wait_staged the
 * trainer may change them, and the checkpoint still holds the values at the save. */
static void test_deferred_copy(void **state)
{
    (void)state;
    job a, b;
    make_job(&a, PP_OPTIM_ADAMW, 31337);
    make_job(&b, PP_OPTIM_ADAMW, 0);
    pp_error err = {0};
    char droot[300];
    snprintf(droot, sizeof droot, "%s/deferred", root);
    pp_ckpt_writer_options o = {.root = droot, .async = 1, .defer_copy = 1, .run_id = "d1"};
    pp_ckpt_writer *w = NULL;
    assert_int_equal(pp_ckpt_writer_create(&o, &w, &err), PP_OK);
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    pp_ckpt_meta m = meta_of(9);
    size_t n0 = (size_t)pp_stage_param_elems(a.s[0]);
    float *saved = malloc(n0 * sizeof(float));
    assert_non_null(saved);
    memcpy(saved, pp_stage_params(a.s[0]), n0 * sizeof(float));
    assert_int_equal(pp_ckpt_writer_save(w, &pa, &m, NULL, &err), PP_OK);
    assert_true(pp_ckpt_writer_wait_staged(w) >= 0);
    for (size_t k = 0; k < n0; k++) pp_stage_params(a.s[0])[k] += 1.0f;   /* the next optimizer step */
    assert_int_equal(pp_ckpt_writer_wait(w, &err), PP_OK);
    pp_ckpt_writer_destroy(w);
    char p[512];
    snprintf(p, sizeof p, "%s/step-9", droot);
    pp_ckpt *c = NULL;
    assert_int_equal(pp_ckpt_open(p, &c, &err), PP_OK);
    pp_ckpt_part pb = part_of(&b, 0, 1, 0);
    assert_int_equal(pp_ckpt_load(c, &pb, &err), PP_OK);
    pp_ckpt_close(c);
    assert_memory_equal(pp_stage_params(b.s[0]), saved, n0 * sizeof(float));
    printf("deferred copy: the checkpoint holds the values at save, not those changed after wait_staged\n");
    free(saved);
    free_job(&a);
    free_job(&b);
}

/* `latest` decides: a newer step of an abandoned run is never resumed; names that are not
 * step-<N> as written (step-007) are no checkpoints; numbers out of range are refused. */
static void test_candidates(void **state)
{
    (void)state;
    job a;
    make_job(&a, PP_OPTIM_ADAMW, 5);
    pp_error err = {0};
    char croot[300], cmd[4096];
    snprintf(croot, sizeof croot, "%s/cand", root);
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    int steps[] = {10, 5, 7};   /* a run to 10, then one resumed from 5 that saved 7 */
    for (int i = 0; i < 3; i++) {
        pp_ckpt_meta m = meta_of(steps[i]);
        assert_int_equal(pp_ckpt_save(croot, "c1", &pa, &m, &err), PP_OK);
    }
    snprintf(cmd, sizeof cmd, "cp -r '%s/step-5' '%s/step-007'", croot, croot);
    assert_int_equal(system(cmd), 0);
    pp_ckpt_entry *e;
    int n;
    assert_int_equal(pp_ckpt_resume_candidates(croot, &e, &n, &err), PP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(e[0].step, 7);
    assert_true(e[0].latest);
    assert_int_equal(e[1].step, 5);
    pp_ckpt_list_free(e, n);
    printf("resume candidates: step-7 (latest), step-5; step-10 of the abandoned run and step-007 left out\n");
    const char *edits[] = {"s/\"step\": 5,/\"step\": 1e300,/", "s/\"size\": \\([0-9]*\\)/\"size\": 1e300/",
                           "s/\"offset\": \\([0-9]*\\)/\"offset\": -8/", "s/\"version\": 2/\"version\": 0/"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s/x' && cp -r '%s/step-5' '%s/x' && sed -i '%s' '%s/x/manifest.json'",
                 croot, croot, croot, edits[i], croot);
        assert_int_equal(system(cmd), 0);
        char x[400];
        snprintf(x, sizeof x, "%s/x", croot);
        reseal(x);
        pp_ckpt *c = NULL;
        assert_int_not_equal(pp_ckpt_open(x, &c, &err), PP_OK);
        printf("  refused: %s\n", err.msg);
    }
    free_job(&a);
}

/* Every file of a checkpoint (the manifest and each shard): one byte flipped at its
 * start, middle and end, its last byte cut, a byte appended, the file deleted; and a file
 * the manifest does not list. verify and load each refuse, naming the file. */
static void test_tamper(void **state)
{
    (void)state;
    job a;
    make_job(&a, PP_OPTIM_ADAMW, 77);
    pp_error err = {0};
    pp_ckpt_part pa = part_of(&a, 0, 1, 0);
    pp_ckpt_meta m = meta_of(3);
    char troot[300], good[400], bad[400], cmd[4096];
    snprintf(troot, sizeof troot, "%s/tamper", root);
    assert_int_equal(pp_ckpt_save(troot, "unit", &pa, &m, &err), PP_OK);
    snprintf(good, sizeof good, "%s/step-3", troot);
    snprintf(bad, sizeof bad, "%s/bad", troot);
    const char *files[] = {"manifest.json", "shard-s000-r000.safetensors", "shard-s001-r000.safetensors"};
    const char *edits[] = {  /* shell on $f */
        "printf '\\132' | dd of=\"$f\" bs=1 seek=0 conv=notrunc status=none",
        "printf '\\001' | dd of=\"$f\" bs=1 seek=$(( $(stat -c%s \"$f\") / 2 )) conv=notrunc status=none",
        "printf '\\041' | dd of=\"$f\" bs=1 seek=$(( $(stat -c%s \"$f\") - 1 )) conv=notrunc status=none",
        "truncate -s -1 \"$f\"", "printf ' ' >> \"$f\"", "rm \"$f\""};
    const char *what[] = {"first byte set to Z", "middle byte set to 0x01", "last byte set to !", "last byte cut",
                          "a byte appended", "deleted"};
    int cases = 0;
    for (int fi = 0; fi < 3; fi++)
        for (int e = 0; e < 6; e++) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && f='%s/%s' && %s", bad, good, bad, bad,
                     files[fi], edits[e]);
            assert_int_equal(system(cmd), 0);
            printf("%s, %s:\n", files[fi], what[e]);
            expect_error(pp_ckpt_verify(bad, &err), &err, files[fi]);
            pp_ckpt *c = NULL;
            pp_status st = pp_ckpt_open(bad, &c, &err);
            if (st == PP_OK) st = pp_ckpt_load(c, &pa, &err);
            pp_ckpt_close(c);
            expect_error(st, &err, files[fi]);
            cases++;
        }
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && echo x > '%s/notes.txt'", bad, good, bad, bad);
    assert_int_equal(system(cmd), 0);
    printf("a file the manifest does not list:\n");
    expect_error(pp_ckpt_verify(bad, &err), &err, "notes.txt");
    pp_ckpt *c = NULL;
    assert_int_equal(pp_ckpt_open(bad, &c, &err), PP_OK);
    expect_error(pp_ckpt_load(c, &pa, &err), &err, "notes.txt");
    pp_ckpt_close(c);
    assert_int_equal(pp_ckpt_verify(good, &err), PP_OK);
    printf("%d edits of 3 files and 1 stray file: each refused by verify and by load, naming the file\n", cases);
    free_job(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tamper),
        cmocka_unit_test(test_keep),
        cmocka_unit_test(test_deferred_copy),
        cmocka_unit_test(test_candidates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
