/* pp_plan_search: enumerates the layouts, drops those the memory model says do not fit,
 * orders the rest by their lower bound and simulates best-first; a layout enters the top K
 * only once the stage planner's exact estimate says it fits. The search ends when the next
 * bound is no better than the K-th simulated step (then no layout left could enter: the list
 * is the simulator's top K), or at the time budget. */
#include "planner_internal.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

#define DEFAULT_MEMORY (80.0 * (1ull << 30))
#define DEFAULT_TOP 5
#define DEFAULT_SECONDS 60.0
#define MAX_DEVICES (1 << 20)
#define MAX_PP 4096

void pp_plan_result_destroy(pp_plan_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->entries[i].rank_bytes);
    free(r->entries);
    free(r);
}

static int in_list(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

static pp_status check_options(const pp_plan_options *o, pp_error *err)
{
    if (o->devices < 1 || o->devices > MAX_DEVICES)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "devices %d out of range (1..%d)", o->devices, MAX_DEVICES);
    if (o->batch < 1) return pp_error_set(err, PP_ERR_INVALID_ARG, "batch %lld: expected >= 1", (long long)o->batch);
    if (o->device_memory < 0 || !(o->device_memory < 1e30))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "device memory %g bytes: expected > 0", o->device_memory);
    for (int i = 0; i < o->npp; i++)
        if (o->pp_values[i] < 1 || o->pp_values[i] > MAX_PP)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "pp %d out of range (1..%d)", o->pp_values[i], MAX_PP);
    for (int i = 0; i < o->ndp; i++)
        if (o->dp_values[i] < 1 || o->dp_values[i] > o->devices)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "dp %d out of range (1..%d devices)", o->dp_values[i],
                                o->devices);
    for (int i = 0; i < o->nmicrobatch_counts; i++)
        if (o->microbatch_counts[i] < 1 || o->microbatch_counts[i] > o->batch)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "microbatches %lld out of range (1..batch %lld)",
                                (long long)o->microbatch_counts[i], (long long)o->batch);
    for (int i = 0; i < o->nchunks; i++)
        if (o->chunks[i] < 2 || o->chunks[i] > 64)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "interleaved chunks %d out of range (2..64)", o->chunks[i]);
    if (o->kinds >> PP_SCHED_CUSTOM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule kinds 0x%x: only gpipe, 1f1b, interleaved, zb-h1, zb-v "
                            "are generated", o->kinds);
    if (o->recompute >> 3) return pp_error_set(err, PP_ERR_INVALID_ARG, "recompute set 0x%x: none, selective, full",
                                               o->recompute);
    for (int i = 0; i < o->nprecisions; i++)
        if (o->precisions[i] != PP_DTYPE_F32 && o->precisions[i] != PP_DTYPE_BF16 && o->precisions[i] != PP_DTYPE_F16)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "precision %s: fp32, bf16 or fp16",
                                pp_dtype_name(o->precisions[i]));
    if (o->top < 0 || o->top > 100000) return pp_error_set(err, PP_ERR_INVALID_ARG, "top %d out of range (1..100000)", o->top);
    const pp_plan_links *l = &o->links;
    if (l->host_gbps < 0 || l->network_gbps < 0 || l->latency_s < 0 || l->devices_per_host < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "link speeds, latency and devices per host must be >= 0");
    if (o->cost.gflops < 0 || o->cost.gflops_lowp < 0 || o->cost.optimizer_s_per_param < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "GFLOP/s and optimizer seconds must be >= 0");
    return PP_OK;
}

/* A (kind, chunks) a pipeline of pp ranks can run. */
typedef struct variant {
    int kind, chunks;
} variant;

static int variants_for(const pp_plan_options *o, int pp, variant *out)
{
    unsigned k = o->kinds ? o->kinds : (1u << PP_SCHED_CUSTOM) - 1;
    int n = 0;
    if (pp == 1) {   /* one stage: the kinds coincide; 1f1b stands for them */
        static const int order[] = {PP_SCHED_1F1B, PP_SCHED_GPIPE, PP_SCHED_ZB_H1};
        for (int i = 0; i < 3; i++)
            if (k & (1u << order[i])) {
                out[n++] = (variant){order[i], 1};
                break;
            }
        return n;
    }
    static const int one[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZB_H1};
    for (int i = 0; i < 3; i++)
        if (k & (1u << one[i])) out[n++] = (variant){one[i], 1};
    if (k & (1u << PP_SCHED_INTERLEAVED)) {
        if (!o->chunks) out[n++] = (variant){PP_SCHED_INTERLEAVED, 2};
        for (int i = 0; i < o->nchunks && n < 64; i++) out[n++] = (variant){PP_SCHED_INTERLEAVED, o->chunks[i]};
    }
    if (k & (1u << PP_SCHED_ZB_V)) out[n++] = (variant){PP_SCHED_ZB_V, 2};
    return n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int by_bound(const void *a, const void *b)
{
    const plan_cand *x = a, *y = b;
    return (x->bound > y->bound) - (x->bound < y->bound);
}

typedef struct cand_list {
    plan_cand *v;
    int64_t n, cap;
} cand_list;

static int push(cand_list *l, const plan_cand *x)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 4096;
        plan_cand *g = pp_realloc_array(l->v, (size_t)cap, sizeof *g);
        if (!g) return 0;
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = *x;
    return 1;
}

/* Below this share of the device memory the memory model is trusted to skip recompute. */
#define DOMINANCE_MARGIN 0.8

/* Every layout the options allow, with its bound and memory model; those that fit go into
 * l. Recompute only slows a layout down (the same order, longer backward), so selective is
 * tried only where none did not fit with a margin, and full only where selective did not;
 * the layouts skipped so are counted as dominated. */
static pp_status enumerate(plan_ctx *c, pp_plan_result *res, cand_list *l, pp_error *err)
{
    const pp_plan_options *o = c->o;
    static const pp_dtype all_prec[] = {PP_DTYPE_F32, PP_DTYPE_BF16, PP_DTYPE_F16};
    const pp_dtype *precs = o->nprecisions ? o->precisions : all_prec;
    int nprec = o->nprecisions ? o->nprecisions : 3;
    unsigned rcs = o->recompute ? o->recompute : 7;
    double memory = o->device_memory > 0 ? o->device_memory : DEFAULT_MEMORY;
    int max_pp = o->max_pp > 0 ? o->max_pp : o->devices;
    if (max_pp > MAX_PP) max_pp = MAX_PP;
    res->smallest_bytes = -1;
    /* the divisors of the batch, ascending: the microbatch counts are among them */
    int64_t *div = NULL;
    int ndiv = 0;
    for (int64_t d = 1; d * d <= o->batch; d++) {
        if (o->batch % d) continue;
        int64_t pair[2] = {d, o->batch / d};
        for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
            int64_t *g = pp_realloc_array(div, (size_t)ndiv + 1, sizeof *div);
            if (!g) {
                free(div);
                return PP_NOMEM(err);
            }
            div = g;
            div[ndiv++] = pair[k];
        }
    }
    qsort(div, (size_t)ndiv, sizeof *div, cmp_i64);
    pp_status st = PP_OK;
    variant var[72];
    for (int pp = 1; pp <= max_pp && pp <= o->devices && st == PP_OK; pp++) {
        if (o->pp_values && !in_list(o->pp_values, o->npp, pp)) continue;
        int nv = variants_for(o, pp, var);
        for (int dp = 1; pp * dp <= o->devices && st == PP_OK; dp++) {
            if (o->batch % dp || (o->dp_values && !in_list(o->dp_values, o->ndp, dp))) continue;
            int64_t per = o->batch / dp;
            /* groups of variants on the same stages and ranks: (chunks, zb-v or not) */
            for (int g0 = 0; g0 < nv && st == PP_OK;) {
                int g1 = g0 + 1;
                while (g1 < nv && var[g1].chunks == var[g0].chunks &&
                       (var[g1].kind == PP_SCHED_ZB_V) == (var[g0].kind == PP_SCHED_ZB_V))
                    g1++;
                int v = var[g0].chunks;
                if (pp * v > c->max_s) {
                    g0 = g1;
                    continue;
                }
                for (int di = 0; di < ndiv && div[di] <= per && st == PP_OK; di++) {
                    int64_t m = div[di];
                    if (per % m) continue;
                    int64_t mb = per / m;
                    if (c->model.fixed_batch && mb != c->model.fixed_batch) continue;
                    int ok = !o->microbatch_counts;
                    for (int i = 0; !ok && i < o->nmicrobatch_counts; i++) ok = o->microbatch_counts[i] == m;
                    if (!ok) continue;
                    for (int pi = 0; pi < nprec && st == PP_OK; pi++) {
                        int done[72] = {0};   /* per variant: a lighter recompute fitted */
                        for (int rc = 0; rc < 3 && st == PP_OK; rc++) {
                            if (!(rcs & (1u << rc))) continue;
                            for (int vi = g0; vi < g1; vi++) {
                                if (var[vi].kind == PP_SCHED_INTERLEAVED && m % pp) continue;
                                if (done[vi]) {
                                    res->dominated++;
                                    continue;
                                }
                                plan_cand x = {.pp = pp, .dp = dp, .chunks = v, .kind = (int8_t)var[vi].kind,
                                               .recompute = (int8_t)rc, .prec = (int8_t)precs[pi], .m = m};
                                if ((st = plan_evaluate(c, &x, memory, err)) != PP_OK) break;
                                x.bound = c->ev.bound;
                                x.mem = c->ev.peak_mem;
                                x.order = (int8_t)c->ev.order;
                                res->layouts++;
                                if (res->smallest_bytes < 0 || x.mem < res->smallest_bytes) res->smallest_bytes = x.mem;
                                if (x.mem > memory) {
                                    res->memory_pruned++;
                                    continue;
                                }
                                if (x.mem <= DOMINANCE_MARGIN * memory) done[vi] = 1;
                                if (!push(l, &x)) {
                                    st = PP_NOMEM(err);
                                    break;
                                }
                            }
                        }
                    }
                }
                g0 = g1;
            }
        }
    }
    free(div);
    return st;
}

/* a before b: the faster; at equal steps the one on fewer devices, then with less memory */
static int better(const pp_plan_entry *a, const pp_plan_entry *b)
{
    if (a->step_s != b->step_s) return a->step_s < b->step_s;
    if (a->pp * a->dp != b->pp * b->dp) return a->pp * a->dp < b->pp * b->dp;
    return a->peak_bytes < b->peak_bytes;
}

/* Inserts e into the sorted top list of at most k entries (when full, e is better than
 * the last, which is dropped). */
static void insert_top(pp_plan_result *res, int k, const pp_plan_entry *e)
{
    int i;
    if (res->n < k) {
        i = res->n++;
    } else {
        i = k - 1;
        free(res->entries[i].rank_bytes);
    }
    while (i > 0 && better(e, &res->entries[i - 1])) {
        res->entries[i] = res->entries[i - 1];
        i--;
    }
    res->entries[i] = *e;
}

static pp_status search(plan_ctx *c, pp_plan_result *res, cand_list *l, double t0, pp_error *err)
{
    const pp_plan_options *o = c->o;
    int k = o->top > 0 ? o->top : DEFAULT_TOP;
    double memory = o->device_memory > 0 ? o->device_memory : DEFAULT_MEMORY;
    double budget = o->max_seconds > 0 ? o->max_seconds : DEFAULT_SECONDS;
    res->entries = pp_calloc((size_t)k, sizeof *res->entries);
    if (!res->entries) return PP_NOMEM(err);
    if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof *l->v, by_bound);
    res->complete = 1;
    int64_t *bytes = NULL;
    pp_status st = PP_OK;
    for (int64_t i = 0; i < l->n; i++) {
        const plan_cand *x = &l->v[i];
        if (res->n == k && x->bound >= res->entries[k - 1].step_s) break;
        if (pp_now() - t0 > budget) {
            res->complete = 0;
            break;
        }
        /* simulated on training's own split (the bound was taken on the scanned one) */
        double step = 0, bubble = 0;
        c->exact_mode = 1;
        st = plan_simulate(c, x, &step, &bubble, err);
        c->exact_mode = 0;
        if (st != PP_OK) goto done;
        res->simulated++;
        if (step < x->bound * (1 - 1e-9)) res->bound_misses++;
        if (res->n == k && step >= res->entries[k - 1].step_s) continue;
        pp_plan_entry e = {.pp = x->pp, .dp = x->dp, .chunks = x->chunks, .kind = (pp_schedule_kind)x->kind,
                           .microbatches = x->m, .microbatch = o->batch / ((int64_t)x->dp * x->m),
                           .recompute = (pp_recompute)x->recompute, .precision = (pp_dtype)x->prec, .order = x->order,
                           .step_s = step, .bound_s = x->bound, .bubble = bubble, .compute_s = c->ev.compute_max,
                           .allreduce_s = c->ev.ar_max, .send_s = c->ev.msg_max, .optimizer_s = c->ev.opt_max};
        double model_mem[MAX_PP];
        for (int r = 0; r < x->pp; r++) model_mem[r] = c->ev.mem[r];
        bytes = pp_calloc((size_t)x->pp, sizeof *bytes);
        if (!bytes) {
            st = PP_NOMEM(err);
            goto done;
        }
        PP_CHECK_GOTO(plan_exact_memory(c, x, bytes, &e.exact, e.exact_error, sizeof e.exact_error, err), st, done);
        res->exact_checked += e.exact;
        for (int r = 0; r < x->pp; r++) {
            if (!e.exact) bytes[r] = (int64_t)model_mem[r];
            if (bytes[r] > e.peak_bytes) e.peak_bytes = bytes[r];
        }
        if (e.exact && (double)e.peak_bytes > memory) {
            res->exact_rejected++;
            free(bytes);
            bytes = NULL;
            continue;
        }
        e.rank_bytes = bytes;
        bytes = NULL;
        e.samples_per_s = step > 0 ? (double)o->batch / step : 0;
        e.tokens_per_s = c->model.tokens ? e.samples_per_s * (double)c->model.tokens : 0;
        insert_top(res, k, &e);
    }
done:
    free(bytes);
    return st;
}

pp_status pp_plan_search(const char *model, const pp_graph_options *gopt, const pp_plan_options *opt,
                         pp_plan_result **out, pp_error *err)
{
    *out = NULL;
    PP_CHECK(check_options(opt, err));
    double t0 = pp_now();
    plan_ctx c = {.o = opt};
    cand_list l = {0};
    pp_plan_result *res = pp_calloc(1, sizeof *res);
    pp_status st = res ? PP_OK : PP_NOMEM(err);
    if (st != PP_OK) return st;
    PP_CHECK_GOTO(plan_model_load(&c, model, gopt, err), st, fail);
    res->tokens_per_sample = c.model.tokens;
    c.max_s = c.model.n < MAX_PP * 64 ? c.model.n : MAX_PP * 64;
    c.splits = pp_calloc((size_t)c.max_s + 1, sizeof *c.splits);
    c.exact_splits = pp_calloc((size_t)c.max_s + 1, sizeof *c.exact_splits);
    if (!c.splits || !c.exact_splits) {
        st = PP_NOMEM(err);
        goto fail;
    }
    c.opt_slots = pp_optim_state_slots(&opt->stage.optim);
    c.opt_rate = plan_optimizer_rate(&opt->cost);
    const pp_plan_links *lk = &opt->links;
    c.host_bw = 1e9 * (lk->host_gbps > 0 ? lk->host_gbps
                       : opt->cost.calibration ? opt->cost.calibration->memcpy_gbps : 10.0);
    c.net_bw = 1e9 * (lk->network_gbps > 0 ? lk->network_gbps : 12.5);
    c.lat = lk->latency_s > 0 ? lk->latency_s : 5e-6;
    res->links = (pp_plan_links){c.host_bw / 1e9, c.net_bw / 1e9, c.lat, lk->devices_per_host};
    PP_CHECK_GOTO(enumerate(&c, res, &l, err), st, fail);
    PP_CHECK_GOTO(search(&c, res, &l, t0, err), st, fail);
    if (c.fallback)
        snprintf(res->note, sizeof res->note, "the calibration has no points for some precision asked for: it was "
                 "priced at another precision's rates (calibrate it with --precision)");
    double memory = opt->device_memory > 0 ? opt->device_memory : DEFAULT_MEMORY;
    if (res->n == 0) {
        char need[32], have[32];
        pp_format_bytes(memory, have, sizeof have);
        if (res->layouts == 0)
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "'%s': no layout to search: no pp x dp <= %d devices with dp "
                              "dividing the batch %lld and the schedules, microbatches and chunks asked for", model,
                              opt->devices, (long long)opt->batch);
        else
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "'%s': none of the %lld layouts fits in %s per device; the "
                              "smallest needs %s (raise --device-memory, allow more devices, recompute or 16-bit "
                              "precision)", model, (long long)res->layouts, have,
                              pp_format_bytes(res->smallest_bytes, need, sizeof need));
        goto fail;
    }
    res->seconds = pp_now() - t0;
    free(l.v);
    plan_ctx_free(&c);
    *out = res;
    return PP_OK;
fail:
    free(l.v);
    plan_ctx_free(&c);
    pp_plan_result_destroy(res);
    return st;
}
