/* What rank 0 logs per step: TensorBoard scalars (--logdir) and a JSON line (--metrics)
 * with the same values; every --log-every steps the ranks' own figures (wait, memory) are
 * gathered so the measured bubble and per-rank series can be written too. */
#include "job_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <onnxpipe/core_util.h>

struct train_log {
    pp_comm *world;
    pp_tb_writer *tb;
    FILE *metrics;
    const char *metrics_path;
    int64_t every, last_step;
    const char *rate_tag, *rate_key;    /* tokens or samples per second */
    double *gathered;                   /* [world size][RANK_FIGURES] */
    char **tags;                        /* per-rank tags, [RANK_TAGS x size] */
};

enum { F_STEP_S, F_COMPUTE_S, F_WAIT_S, F_STAGE_BYTES, F_RSS_BYTES, F_INPUT_S, F_INPUT_READ_S, RANK_FIGURES };
#define RANK_TAGS 4

int64_t train_rss_peak_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : (int64_t)ru.ru_maxrss * 1024;
}

pp_status train_log_open(const pp_train_config *c, pp_comm *world, int64_t steps, int tokens, train_log **out,
                         pp_error *err)
{
    *out = NULL;
    if (!c->logdir && !c->metrics_out) return PP_OK;
    train_log *l = calloc(1, sizeof *l);
    if (!l) return PP_NOMEM(err);
    l->world = world;
    l->every = c->log_every > 0 ? c->log_every : 10;
    l->last_step = steps;
    l->metrics_path = c->metrics_out;
    l->rate_tag = tokens ? "train/tokens_per_s" : "train/samples_per_s";
    l->rate_key = tokens ? "tokens_per_s" : "samples_per_s";
    int n = pp_comm_size(world);
    l->gathered = calloc((size_t)n * RANK_FIGURES, sizeof *l->gathered);
    l->tags = calloc((size_t)n * RANK_TAGS, sizeof *l->tags);
    pp_status st = PP_OK;
    if (!l->gathered || !l->tags) st = PP_NOMEM(err);
    static const char *const fmt[RANK_TAGS] = {"pipeline/wait_s/rank%d", "memory/peak_bytes/rank%d",
                                               "memory/rss_peak_bytes/rank%d", "pipeline/input_s/rank%d"};
    for (int i = 0; st == PP_OK && i < n * RANK_TAGS; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, fmt[i / n], i % n);
        if (!(l->tags[i] = pp_strdup(tag))) st = PP_NOMEM(err);
    }
    if (st == PP_OK && pp_comm_rank(world) == 0) {
        if (c->logdir) st = pp_tb_open(c->logdir, &l->tb, err);
        if (st == PP_OK && c->metrics_out && !(l->metrics = fopen(c->metrics_out, "w")))
            st = pp_error_set(err, PP_ERR_IO, "--metrics: cannot create '%s'", c->metrics_out);
    }
    if (st != PP_OK) {
        train_log_close(l, NULL);
        return st;
    }
    *out = l;
    return PP_OK;
}

pp_status train_log_text(train_log *l, const char *tag, const char *text, pp_error *err)
{
    return l && l->tb ? pp_tb_text(l->tb, tag, 0, text, err) : PP_OK;
}

int train_log_gathers(const train_log *l, int64_t step)
{
    return l && (step == 1 || step % l->every == 0 || step == l->last_step);
}

/* Every rank's figures to every rank (rank 0 writes them). Collective. */
static pp_status gather(train_log *l, const train_step_log *s, pp_error *err)
{
    double mine[RANK_FIGURES] = {s->step_s, s->compute_s, s->wait_s, (double)s->stage_bytes, (double)s->rss_bytes,
                                 s->input_s, s->input_read_s};
    return pp_comm_allgather(l->world, mine, l->gathered, sizeof mine, err);
}

/* 1 - the ranks' compute over (ranks x the slowest rank's step): bench/pipeline.sh's measure. */
static double measured_bubble(const train_log *l)
{
    int n = pp_comm_size(l->world);
    double compute = 0, slowest = 0;
    for (int r = 0; r < n; r++) {
        compute += l->gathered[r * RANK_FIGURES + F_COMPUTE_S];
        if (l->gathered[r * RANK_FIGURES + F_STEP_S] > slowest) slowest = l->gathered[r * RANK_FIGURES + F_STEP_S];
    }
    return slowest > 0 ? 1.0 - compute / (n * slowest) : 0.0;
}

#define MAX_TAGS 256

static pp_status write_tb(train_log *l, const train_step_log *s, const train_eval_result *ev, int gathered,
                          pp_error *err)
{
    const char *tags[MAX_TAGS] = {"train/loss", "train/lr", "train/grad_norm", l->rate_tag, "train/step_s",
                                  "train/epoch"};
    double vals[MAX_TAGS] = {s->loss, s->lr, s->grad_norm, s->throughput, s->step_s, (double)s->epoch};
    int n = 6, size = pp_comm_size(l->world);
    if (ev) {
        tags[n] = "eval/loss", vals[n++] = ev->loss;
        if (ev->has_perplexity) tags[n] = "eval/perplexity", vals[n++] = ev->perplexity;
        if (ev->has_accuracy) tags[n] = "eval/accuracy", vals[n++] = ev->accuracy;
        tags[n] = "eval/seconds", vals[n++] = ev->seconds;
    }
    if (s->loss_scale) tags[n] = "train/loss_scale", vals[n++] = s->loss_scale;
    if (s->has_ckpt) {
        tags[n] = "ckpt/saves", vals[n++] = s->ckpt_saves;
        tags[n] = "ckpt/stall_s", vals[n++] = s->ckpt_stall_s;
    }
    if (s->has_straggler) {
        tags[n] = "pipeline/straggler_rank", vals[n++] = s->straggler.rank;
        tags[n] = "pipeline/straggler_ratio", vals[n++] = s->straggler.ratio;
    }
    if (gathered) {
        tags[n] = "pipeline/bubble", vals[n++] = measured_bubble(l);
        static const int fig[RANK_TAGS] = {F_WAIT_S, F_STAGE_BYTES, F_RSS_BYTES, F_INPUT_S};
        for (int t = 0; t < RANK_TAGS; t++)
            for (int r = 0; r < size && n < MAX_TAGS; r++)
                tags[n] = l->tags[t * size + r], vals[n++] = l->gathered[r * RANK_FIGURES + fig[t]];
    }
    PP_CHECK(pp_tb_scalars(l->tb, s->step, n, tags, vals, err));
    return gathered || ev ? pp_tb_flush(l->tb, err) : PP_OK;
}

static void write_json(train_log *l, const train_step_log *s, const train_eval_result *ev, int gathered)
{
    pp_json j;
    pp_json_init(&j, l->metrics, 0);
    pp_json_begin_object(&j, NULL);
    pp_json_int(&j, "step", s->step);
    pp_json_int(&j, "epoch", s->epoch);
    pp_json_double(&j, "loss", s->loss);
    pp_json_double(&j, "lr", s->lr);
    pp_json_double(&j, "grad_norm", s->grad_norm);
    pp_json_double(&j, l->rate_key, s->throughput);
    pp_json_double(&j, "step_s", s->step_s);
    pp_json_bool(&j, "skipped", s->skipped);
    if (s->loss_scale) pp_json_double(&j, "loss_scale", s->loss_scale);
    if (ev) {
        pp_json_double(&j, "eval_loss", ev->loss);
        if (ev->has_perplexity) pp_json_double(&j, "eval_perplexity", ev->perplexity);
        if (ev->has_accuracy) pp_json_double(&j, "eval_accuracy", ev->accuracy);
        pp_json_double(&j, "eval_s", ev->seconds);
    }
    if (s->has_ckpt) {
        pp_json_int(&j, "ckpt_saves", s->ckpt_saves);
        pp_json_double(&j, "ckpt_stall_s", s->ckpt_stall_s);
    }
    if (s->has_straggler && s->straggler.rank >= 0) {
        pp_json_int(&j, "straggler_rank", s->straggler.rank);
        pp_json_double(&j, "straggler_ratio", s->straggler.ratio);
        pp_json_double(&j, "straggler_busy_s", s->straggler.busy_s);
        pp_json_double(&j, "straggler_peers_median_s", s->straggler.median_s);
    } else if (s->has_straggler) {
        pp_json_null(&j, "straggler_rank");
    }
    if (gathered) {
        pp_json_double(&j, "bubble", measured_bubble(l));
        static const char *const keys[] = {"step_s_per_rank", "compute_s_per_rank", "wait_s_per_rank",
                                           "stage_bytes_per_rank", "rss_peak_bytes_per_rank", "input_s_per_rank",
                                           "input_read_s_per_rank"};
        for (int f = 0; f < RANK_FIGURES; f++) {
            pp_json_begin_array(&j, keys[f]);
            for (int r = 0; r < pp_comm_size(l->world); r++)
                pp_json_double(&j, NULL, l->gathered[r * RANK_FIGURES + f]);
            pp_json_end_array(&j);
        }
    }
    pp_json_end_object(&j);
    pp_json_finish(&j);
}

pp_status train_log_step(train_log *l, const train_step_log *s, const train_eval_result *ev, pp_error *err)
{
    if (!l) return PP_OK;
    int gathered = train_log_gathers(l, s->step);
    if (gathered) PP_CHECK(gather(l, s, err));
    if (l->tb) PP_CHECK(write_tb(l, s, ev, gathered, err));
    if (l->metrics) {
        write_json(l, s, ev, gathered);
        if (fflush(l->metrics))   /* every step: a killed job leaves its lines */
            return pp_error_set(err, PP_ERR_IO, "--metrics: cannot write '%s'", l->metrics_path);
    }
    return PP_OK;
}

pp_tb_writer *train_log_tb(train_log *l) { return l ? l->tb : NULL; }

pp_status train_log_close(train_log *l, pp_error *err)
{
    if (!l) return PP_OK;
    pp_status st = pp_tb_close(l->tb, err);
    if (l->metrics && fclose(l->metrics) && st == PP_OK)
        st = pp_error_set(err, PP_ERR_IO, "--metrics: cannot write '%s'", l->metrics_path);
    for (int i = 0; l->tags && i < pp_comm_size(l->world) * RANK_TAGS; i++) free(l->tags[i]);
    free(l->tags);
    free(l->gathered);
    free(l);
    return st;
}
