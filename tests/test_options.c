/* The training options' tables (train/options.c) against what they promise: every option a
 * user can type has help, a --help heading and a unique name; the defaults they give are
 * those trainer.h and train_job.h document; the agreement hash (pp_options_hash) changes
 * when, and only when, a field marked agree changes — found by changing each field of a
 * default config in turn; and the public setter pp_trainer_config_set stores what the
 * command line would, refusing what it would refuse with the same message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <onnxpipe/options.h>
#include <onnxpipe/train_job.h>

#include <stdio.h>
#include <string.h>

/* Calls fn on every row of table (sub-tables' rows with their config) at base. */
static void each_row(const pp_option *table, void *base, void (*fn)(const pp_option *r, void *base, void *ctx),
                     void *ctx)
{
    for (const pp_option *r = table; r->type != PP_OPT_END; r++) {
        if (r->type == PP_OPT_TABLE) each_row(r->sub, pp_option_field(r, base), fn, ctx);
        else fn(r, base, ctx);
    }
}

typedef struct names {
    const char *seen[256];
    int n;
    const pp_option *table;
    void *top;
} names;

static void check_row_text(const pp_option *r, void *base, void *ctx)
{
    names *nm = ctx;
    if (!r->name) return;
    void *at = NULL;
    assert_non_null(r->help);
    assert_non_null(r->group);
    if ((r->type == PP_OPT_FLAG) != (r->metavar == NULL)) fail_msg("%s: a flag has no metavar, a value has one", r->name);
    for (int i = 0; i < nm->n; i++)
        if (!strcmp(nm->seen[i], r->name)) fail_msg("%s: two rows of one table", r->name);
    nm->seen[nm->n++] = r->name;
    /* the parser finds this row, at this config */
    assert_ptr_equal(pp_option_find(nm->table, r->name, nm->top, &at), r);
    assert_ptr_equal(at, base);
}

static void test_rows_documented(void **state)
{
    (void)state;
    pp_train_config c = {0};
    names nm = {.table = pp_train_option_table, .top = &c};
    each_row(pp_train_option_table, &c, check_row_text, &nm);
    printf("pp_train_option_table: %d options a user can type, each with help and a heading\n", nm.n);
    assert_true(nm.n >= 70);
}

static void test_defaults(void **state)
{
    (void)state;
    pp_trainer_config d;
    pp_trainer_config_init(&d);
    /* trainer.h's pp_trainer_config_default comment, value by value */
    assert_int_equal(d.pp, 1);
    assert_int_equal(d.dp, 1);
    assert_int_equal(d.schedule, PP_SCHED_1F1B);
    assert_int_equal(d.batch, 8);
    assert_int_equal(d.microbatches, 1);
    assert_int_equal(d.steps, 10);
    assert_int_equal(d.optim.kind, PP_OPTIM_ADAMW);
    assert_true(d.optim.beta1 == 0.9f && d.optim.beta2 == 0.999f && d.optim.eps == 1e-8f);
    assert_true(d.lr.kind == PP_LR_CONSTANT && d.lr.lr == 1e-3f && d.lr.power == 1.0f);
    assert_int_equal(d.loss.ignore_index, -100);
    assert_int_equal(d.seed, 0);
    assert_true(d.partition.tolerance == 0.02);
    assert_true(d.lock_wait_s == 60);
    assert_int_equal(d.loss_scale_window, 2000);
    assert_string_equal(d.device, "auto");
    assert_null(d.model);
    pp_train_config t = pp_train_config_default();
    assert_memory_equal(&t.trainer, &d, sizeof d);
    assert_int_equal(t.dataset.eos, -1);
    assert_null(t.data);
    printf("defaults: pp 1 dp 1 1f1b batch 8 steps 10 adamw(0.9, 0.999, 1e-8) lr 1e-3 tolerance 0.02 eos -1\n");
}

/* ---- the hash: change one field of a default config, see whether it moves ---- */

typedef struct probe {
    const pp_option *table;
    void *config;           /* the config the table's rows are at (a copy of the default) */
    const void *reference;  /* the default itself */
    size_t size;
    uint32_t h0;
    int agreed, free_rows;
} probe;

static void change(const pp_option *r, void *field, void *count)
{
    static const int64_t one[1] = {7};
    static const char *const name[1] = {"x"};
    static const pp_dim_binding dim[1] = {{"seq", 7}};
    switch (r->type) {
    case PP_OPT_REAL:
        if (r->size == sizeof(double)) *(double *)field += 0.5;
        else *(float *)field += 0.5f;
        break;
    case PP_OPT_STR: *(const char **)field = "changed"; break;
    case PP_OPT_INTS: *(const int64_t **)field = one, *(int *)count = 1; break;
    case PP_OPT_NAMES: *(const char *const **)field = name, *(int *)count = 1; break;
    case PP_OPT_DIMS: *(const pp_dim_binding **)field = dim, *(int *)count = 1; break;
    default:
        if (r->size == sizeof(int64_t)) *(int64_t *)field += 1;
        else if (r->size == sizeof(int)) *(int *)field += 1;
        break;
    }
}

static void check_hash_row(const pp_option *r, void *base, void *ctx)
{
    probe *p = ctx;
    if (!r->size) return;   /* --loss: checks its value, stores nothing */
    size_t at = (size_t)((char *)base - (char *)p->config);
    memcpy(p->config, p->reference, p->size);
    change(r, (char *)base + r->offset, (char *)base + r->count_offset);
    uint32_t h = pp_options_hash(p->table, p->config, 0);
    const char *what = r->name ? r->name : "(a field without an option)";
    if (r->agree && h == p->h0) fail_msg("%s (offset %zu): marked agree, but the hash does not change", what, at + r->offset);
    if (!r->agree && h != p->h0) fail_msg("%s: not marked agree, but the hash changes", what);
    p->agreed += r->agree;
    p->free_rows += !r->agree;
}

static void test_hash_follows_agree(void **state)
{
    (void)state;
    pp_trainer_config d, work;
    pp_trainer_config_init(&d);
    probe p = {.table = pp_trainer_option_table, .config = &work, .reference = &d, .size = sizeof d,
               .h0 = pp_options_hash(pp_trainer_option_table, &d, 0)};
    each_row(pp_trainer_option_table, &work, check_hash_row, &p);
    printf("trainer: %d fields the ranks must agree on move the hash, %d others do not\n", p.agreed, p.free_rows);
    assert_true(p.agreed >= 40);

    /* the run's table hashes its own fields only: the trainer hashes its own (pp_trainer_create) */
    pp_train_config t = pp_train_config_default(), twork;
    uint32_t h0 = pp_options_hash(pp_train_option_table, &t, 0);
    twork = t;
    twork.trainer.batch = 16;
    assert_int_equal(pp_options_hash(pp_train_option_table, &twork, 0), h0);
    twork = t;
    twork.epochs = 3;
    assert_int_not_equal(pp_options_hash(pp_train_option_table, &twork, 0), h0);
    /* equal configs in other memory hash equal (strings by content) */
    char dev[] = "auto";
    work = d;
    work.device = dev;
    assert_int_equal(pp_options_hash(pp_trainer_option_table, &work, 0), p.h0);
    printf("run: its own fields move its hash, the trainer's do not; strings hash by content\n");
}

/* The public config: each kind of row set by name as the command line gives it (the
 * values read back from the layout), copies kept, lists appended, and errors that name
 * the option and its bound, as `onnxpipe train` prints them (tests/test_train_errors.sh). */
static void test_trainer_config_set(void **state)
{
    (void)state;
    pp_trainer_config *c = pp_trainer_config_default();
    assert_non_null(c);
    pp_error err = {0};
    char model[] = "first.onnx";
    const char *const ok[][2] = {
        {"--pp", "4"}, {"microbatches", "8"}, {"--lr-schedule", "cosine"}, {"--lr", "0.01"},
        {"--bucket-kb", "8"}, {"--dim", "seq=128"}, {"dim", "n=2"}, {"--cut", "a,b"}, {"--model", model},
        {"--quiet", "1"}, {"--save-sync", "1"}, {"--save-sync", "0"}, {"--precision", "bf16"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        pp_status st = pp_trainer_config_set(c, ok[i][0], ok[i][1], &err);
        if (st != PP_OK) fail_msg("%s %s: %s", ok[i][0], ok[i][1], err.msg);
    }
    strcpy(model, "other.onnx");   /* the config kept its own copy */
    assert_int_equal(c->pp, 4);
    assert_int_equal(c->microbatches, 8);
    assert_int_equal(c->lr.kind, PP_LR_COSINE);
    assert_true(c->lr.lr == 0.01f);
    assert_int_equal(c->bucket_bytes, 8 * 1024);
    assert_int_equal(c->ndims, 2);
    assert_string_equal(c->dims[0].name, "seq");
    assert_int_equal(c->dims[0].value, 128);
    assert_string_equal(c->dims[1].name, "n");
    assert_int_equal(c->partition.ncuts, 2);
    assert_string_equal(c->partition.cuts[1], "b");
    assert_string_equal(c->model, "first.onnx");
    assert_int_equal(c->quiet, 1);
    assert_int_equal(c->save_sync, 0);
    assert_int_equal(c->precision, PP_DTYPE_BF16);
    printf("pp_trainer_config_set: %zu options of every kind stored as the command line stores them\n",
           sizeof ok / sizeof *ok);

    const char *const bad[][3] = {
        {"--pp", "0", "--pp expects an integer in 1..4096, got '0'"},
        {"--lr", "x", "--lr expects a number in"},
        {"--schedule", "zigzag", "zigzag"},
        {"--dim", "seq", "--dim expects NAME=VALUE, got 'seq'"},
        {"--quiet", "yes", "--quiet is a flag"},
        {"--data", "dir", "not a trainer option"},
        {"--no-such", "1", "not a trainer option"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pp_error e = {0};
        assert_int_not_equal(pp_trainer_config_set(c, bad[i][0], bad[i][1], &e), PP_OK);
        if (!strstr(e.msg, bad[i][2])) fail_msg("%s %s: '%s' lacks '%s'", bad[i][0], bad[i][1], e.msg, bad[i][2]);
        printf("  %s %s: %s\n", bad[i][0], bad[i][1], e.msg);
    }
    assert_int_equal(c->pp, 4);   /* a refused value changes nothing */

    const int64_t lengths[] = {64, 128}, unsorted[] = {128, 64};
    assert_int_equal(pp_trainer_config_set_buckets(c, "len", lengths, 2, &err), PP_OK);
    assert_int_equal(c->nbuckets, 2);
    assert_int_equal(c->buckets[1], 128);
    assert_string_equal(c->bucket_dim, "len");
    assert_int_not_equal(pp_trainer_config_set_buckets(c, NULL, unsorted, 2, &err), PP_OK);
    assert_int_equal(c->nbuckets, 2);
    pp_trainer_config_set_graph(c, NULL);
    pp_trainer_config_destroy(c);   /* ASan/LSan: every copy and list freed once */
    pp_trainer_config_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_documented),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_hash_follows_agree),
        cmocka_unit_test(test_trainer_config_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
