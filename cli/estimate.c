/* The previews' memory estimate (`partition`, `schedule --model`): per
 * stage and per rank what `onnxpipe train` with the same options would allocate, from
 * the stage planner itself (pp_driver_estimate). */
#include "cli.h"

#include <onnxpipe/core_util.h>
#include <onnxpipe/driver.h>
#include <onnxpipe/stage_lib.h>

#include <stdlib.h>
#include <string.h>

/* A rank's or stage's figures in the table's column order. */
static void row(FILE *out, const pp_stage_bytes *b, int64_t comm, int64_t total)
{
    const pp_mem_category cat[] = {PP_MEM_PARAMS, PP_MEM_GRADS, PP_MEM_OPTIMIZER, PP_MEM_STASH, PP_MEM_SCRATCH};
    int64_t v[] = {0, 0, 0, 0, 0, comm, b->constants, total};
    for (int k = 0; k < 5; k++) v[k] = pp_stage_bytes_category(b, cat[k]);
    char s[32];
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        fprintf(out, " %10s", v[k] < 0 ? "" : pp_format_bytes((double)v[k], s, sizeof s));
    fputc('\n', out);
}

static void json_bytes(pp_json *j, const pp_stage_bytes *b)
{
    pp_json_int(j, "slots", b->slots);
    pp_json_int(j, "params_bytes", pp_stage_bytes_category(b, PP_MEM_PARAMS));
    pp_json_int(j, "grads_bytes", b->grads);
    pp_json_int(j, "optimizer_bytes", b->optimizer);
    pp_json_int(j, "stash_bytes", pp_stage_bytes_category(b, PP_MEM_STASH));
    pp_json_int(j, "scratch_bytes", b->scratch);
    pp_json_int(j, "constants_bytes", b->constants);
    pp_json_int(j, "recompute_bytes", b->recompute);   /* of stash: the recompute arena */
    pp_json_int(j, "port_max_bytes", b->port_max);     /* the largest tensor crossing a boundary */
}

static void write_json(pp_json *j, const pp_schedule *sch, const pp_trainer_config *c, pp_device_kind kind,
                       const pp_stage_bytes *st, const pp_driver_bytes *rk)
{
    pp_json_begin_object(j, NULL);
    pp_json_string(j, "device", pp_device_kind_name(kind));
    pp_json_string(j, "optimizer", pp_optim_kind_name(c->optim.kind));
    pp_json_int(j, "microbatch", c->batch / c->microbatches);
    pp_json_begin_array(j, "stages");
    for (int s = 0; s < sch->num_stages; s++) {
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "stage", s);
        pp_json_int(j, "rank", sch->stage_rank[s]);
        json_bytes(j, &st[s]);
        pp_json_int(j, "total_bytes", st[s].total);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_array(j, "ranks");
    for (int r = 0; r < sch->pp; r++) {
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "rank", r);
        json_bytes(j, &rk[r].stages);
        pp_json_int(j, "comm_bytes", rk[r].comm);
        pp_json_int(j, "total_bytes", rk[r].total);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_end_object(j);
}

static void print_text(FILE *out, const pp_schedule *sch, const pp_trainer_config *c, pp_device_kind kind,
                       const pp_stage_bytes *st, const pp_driver_bytes *rk)
{
    fprintf(out, "\nmemory estimate per stage and rank (what `onnxpipe train` allocates on a %s device for %s "
                 "schedule %s, microbatch %lld, optimizer %s):\n%-6s %-5s %5s", pp_device_kind_name(kind),
            sch->pp > 1 ? "this" : "the", pp_schedule_kind_name(sch->kind), (long long)(c->batch / c->microbatches),
            pp_optim_kind_name(c->optim.kind), "stage", "rank", "slots");
    const char *const cols[] = {"params", "grads", "optimizer", "stash", "scratch", "comm", "constants", "total"};
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++) fprintf(out, " %10s", cols[k]);
    fputc('\n', out);
    for (int s = 0; s < sch->num_stages; s++) {
        fprintf(out, "%-6d %-5d %5d", s, sch->stage_rank[s], st[s].slots);
        row(out, &st[s], -1, st[s].total);
    }
    for (int r = 0; r < sch->pp; r++) {
        fprintf(out, "%-6s %-5d %5d", "all", r, rk[r].stages.slots);
        row(out, &rk[r].stages, rk[r].comm, rk[r].total);
    }
    fprintf(out, "params, grads: the flat fp32 buffers (params: and the 16-bit copy under --precision); "
                 "optimizer: its state slots per parameter; stash: the slots (microbatches in flight that the "
                 "driver gives the stage under this schedule) x what forward keeps for backward (and the "
                 "recompute arena); scratch: the forward and backward arenas and the largest kernel call's own "
                 "workspace; comm: the driver's buffers per rank; constants: non-trainable initializers. "
                 "`onnxpipe train` prints the measured peak next to it.\n");
}

pp_status cli_memory_estimate(const pp_schedule *sch, const pp_partition *part, const pp_trainer_config *c,
                              pp_json *json, FILE *out, pp_error *err)
{
    pp_device_kind kind;
    pp_error why = {0};
    PP_CHECK(pp_device_choose(c->device, 0, &kind, &why, err));
    pp_stage_bytes *st = calloc((size_t)sch->num_stages, sizeof *st);
    pp_driver_bytes *rk = calloc((size_t)sch->pp, sizeof *rk);
    pp_status s = st && rk ? PP_OK : PP_NOMEM(err);
    pp_stage_options so = pp_train_stage_options(c);
    if (s == PP_OK) s = pp_driver_estimate(sch, part, kind, &so, c->reduce_dtype, st, rk, err);
    if (s == PP_OK && json) write_json(json, sch, c, kind, st, rk);
    else if (s == PP_OK) print_text(out, sch, c, kind, st, rk);
    else if (s != PP_ERR_NOMEM) {
        /* the preview itself stands: say why there is no estimate (e.g. no loss named) */
        if (json) {
            pp_json_begin_object(json, NULL);
            pp_json_string(json, "error", err->msg);
            pp_json_end_object(json);
        } else {
            fprintf(out, "\nno memory estimate: %s\n", err->msg);
        }
        s = PP_OK;
    }
    free(st);
    free(rk);
    return s;
}

int cli_print_json_with(FILE *out, const char *obj, const char *key, const char *member)
{
    size_t n = strlen(obj);
    while (n && (obj[n - 1] == '\n' || obj[n - 1] == ' ')) n--;
    if (!n || obj[n - 1] != '}') return 0;
    fprintf(out, "%.*s,\n  \"%s\": %s}\n", (int)(n - 1), obj, key, member);
    return 1;
}
