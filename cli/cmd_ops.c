/* `onnxpipe ops [--json]`: the op registry (include/onnxpipe/backend/op_list.h) as this build has it:
 * every op with the opsets read, backward, the cpu and cuda kernels (and the native 16-bit
 * ones; --json: per device and compute dtype native, adapter or none), constant folding and
 * the precision class. scripts/gen-ops-doc.py makes docs/ops.md from --json. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/kernels.h>
#include <onnxpipe/backend/op.h>
#include <onnxpipe/op_info.h>

/* The newest ai.onnx opset the op list is written against (issue 24: exports at opsets
 * 13-23): an op is read from its registry `since` up to this, or at its `since` alone where
 * that is newer (Swish, 24: what stage/fuse_swish.c makes of SiLU). */
#define OPSET_LATEST 23

static int64_t until_of(const pp_op_info *o)
{
    return *o->domain || o->since > OPSET_LATEST ? o->since : OPSET_LATEST;   /* another domain: its opset 1 */
}

static const char usage[] =
    "usage: onnxpipe ops [--json]\n\n"
    "Lists the ONNX ops onnxpipe supports: the ai.onnx opsets it reads each from (up to the\n"
    "newest it is written against), whether it has a backward, cpu and cuda kernels (and native\n"
    "bfloat16 / float16 cuda kernels; the others run 16 bits through the float32 kernel, the\n"
    "adapter: --json says which per device and dtype), a constant folder, and its precision class under\n"
    "--precision bf16 / fp16 (follow: its inputs' type; lowp: 16-bit operands, fp32 sums; fp32).\n"
    "A fold-only op has no kernel: it is supported where load folds it (constant inputs).\n"
    "A cuda column reads 'n/a' when this build has no cuda backend.\n";

static const char *prec_name(pp_prec p)
{
    return p == PP_PREC_LOWP ? "lowp" : p == PP_PREC_FP32 ? "fp32" : "follow";
}

/* the kernel of op on backend b in compute dtype dt, or NULL */
static const pp_kernel *kernel_of(const pp_backend *b, pp_op op, pp_dtype dt)
{
    for (int t = 0; b && t < b->ntables; t++)
        if (b->tables[t].dtype == dt && b->tables[t].kernels[op].forward) return &b->tables[t].kernels[op];
    return NULL;
}

/* The compute dtypes of b's native 16-bit tables with a kernel for op (bfloat16, float16):
 * their count, at most 4, in out. */
static int native16(const pp_backend *b, pp_op op, pp_dtype out[4])
{
    int n = 0;
    for (int t = 0; b && t < b->ntables && n < 4; t++)
        if (b->tables[t].dtype != PP_DTYPE_F32 && b->tables[t].kernels[op].forward) out[n++] = b->tables[t].dtype;
    return n;
}

/* "kernels": per device of this build and compute dtype, "native" (the backend's own kernel),
 * "adapter" (16 bits through kernels/lowp.c around the float32 kernel) or null (none) */
static void kernels_json(pp_json *j, pp_op op, const pp_backend *cpu, const pp_backend *cuda)
{
    static const pp_dtype dts[3] = {PP_DTYPE_F32, PP_DTYPE_BF16, PP_DTYPE_F16};
    const pp_backend *bs[2] = {cpu, cuda};
    pp_json_begin_object(j, "kernels");
    for (int b = 0; b < 2; b++) {
        if (!bs[b]) continue;
        pp_json_begin_object(j, bs[b]->name);
        for (int d = 0; d < 3; d++) {
            if (pp_kernel_native(op, bs[b]->kind, dts[d])) pp_json_string(j, pp_dtype_name(dts[d]), "native");
            else if (pp_kernel_find(op, bs[b]->kind, dts[d])) pp_json_string(j, pp_dtype_name(dts[d]), "adapter");
            else pp_json_null(j, pp_dtype_name(dts[d]));
        }
        pp_json_end_object(j);
    }
    pp_json_end_object(j);
}

static void print_json(const pp_backend *cpu, const pp_backend *cuda)
{
    pp_json j;
    pp_json_init(&j, stdout, 1);
    pp_json_begin_object(&j, NULL);
    pp_json_int(&j, "opset_latest", OPSET_LATEST);
    pp_json_bool(&j, "cuda_backend", cuda != NULL);
    pp_json_begin_array(&j, "ops");
    for (int i = 0; i < PP_OP_COUNT; i++) {
        const pp_op_info *o = pp_op_get((pp_op)i);
        const pp_kernel *kc = kernel_of(cpu, (pp_op)i, PP_DTYPE_F32);
        pp_json_begin_object(&j, NULL);
        pp_json_string(&j, "name", o->name);
        pp_json_string(&j, "domain", o->domain ? o->domain : "");
        pp_json_int(&j, "since", o->since);
        pp_json_int(&j, "until", until_of(o));
        pp_json_bool(&j, "graph_only", (o->flags & PP_OPF_GRAPH_ONLY) != 0);
        pp_json_bool(&j, "fold_only", (o->flags & PP_OPF_FOLD_ONLY) != 0);
        pp_json_bool(&j, "backward", kc && kc->backward);
        pp_json_bool(&j, "cpu", kc != NULL);
        if (cuda) {
            pp_json_bool(&j, "cuda", kernel_of(cuda, (pp_op)i, PP_DTYPE_F32) != NULL);
            pp_dtype dt[4];
            const int n = native16(cuda, (pp_op)i, dt);
            pp_json_begin_array(&j, "cuda_native16");
            for (int d = 0; d < n; d++) pp_json_string(&j, NULL, pp_dtype_name(dt[d]));
            pp_json_end_array(&j);
        } else {
            pp_json_null(&j, "cuda");
            pp_json_null(&j, "cuda_native16");
        }
        kernels_json(&j, (pp_op)i, cpu, cuda);
        pp_json_bool(&j, "fold", o->fold != NULL);
        pp_json_string(&j, "precision", prec_name(o->prec));
        pp_json_end_object(&j);
    }
    pp_json_end_array(&j);
    pp_json_end_object(&j);
    pp_json_finish(&j);
}

static void print_table(const pp_backend *cpu, const pp_backend *cuda)
{
    printf("%-28s %-8s %-8s %-4s %-5s %-16s %-4s %s\n", "op", "opsets", "backward", "cpu", "cuda", "cuda native16",
           "fold", "precision");
    for (int i = 0; i < PP_OP_COUNT; i++) {
        const pp_op_info *o = pp_op_get((pp_op)i);
        const pp_kernel *kc = kernel_of(cpu, (pp_op)i, PP_DTYPE_F32);
        char opsets[48], n16[64] = "-";
        if (o->since == until_of(o))
            snprintf(opsets, sizeof opsets, "%lld", (long long)o->since);
        else
            snprintf(opsets, sizeof opsets, "%lld-%lld", (long long)o->since, (long long)until_of(o));
        pp_dtype dt[4];
        const int n = cuda ? native16(cuda, (pp_op)i, dt) : 0;
        if (!cuda) snprintf(n16, sizeof n16, "n/a");
        for (int d = 0; d < n; d++) {
            const size_t used = d ? strlen(n16) : 0;
            snprintf(n16 + used, sizeof n16 - used, "%s%s", d ? " " : "", pp_dtype_name(dt[d]));
        }
        printf("%-28s %-8s %-8s %-4s %-5s %-16s %-4s %s%s\n", o->name, opsets, kc && kc->backward ? "yes" : "no",
               kc ? "yes" : "no", cuda ? (kernel_of(cuda, (pp_op)i, PP_DTYPE_F32) ? "yes" : "no") : "n/a",
               n16, o->fold ? "yes" : "no", prec_name(o->prec),
               o->flags & PP_OPF_GRAPH_ONLY  ? "  (graph only: becomes an initializer)"
               : o->flags & PP_OPF_FOLD_ONLY ? "  (fold-only: no kernel; supported where load folds it)"
                                             : "");
    }
    printf("%d ops\n", PP_OP_COUNT);
}

static const pp_option table[] = {
    {.type = PP_OPT_FLAG, .name = "--json", .offset = 0, .size = sizeof(int), .group = "options:",
     .help = "one JSON object instead of the table"},
    {0},
};

static const char *const groups[] = {"options:", NULL};

int cmd_ops(int argc, char **argv)
{
    const cli_options options = {.usage = usage, .table = table, .groups = groups, .hint = "run 'onnxpipe ops --help'"};
    int json = 0;
    int rc = cli_options_parse(&options, &json, argc, argv, NULL, 0, NULL);
    if (rc >= 0) return rc;
    const pp_backend *cpu = pp_backend_get(PP_DEVICE_CPU), *cuda = pp_backend_get(PP_DEVICE_CUDA);
    if (json) print_json(cpu, cuda);
    else print_table(cpu, cuda);
    return 0;
}
