/* The op registry (internal/onnxpipe/op_info.h): one entry per supported op with everything
 * that is not compute, made from the op list (include/onnxpipe/backend/op_list.h), and the one
 * FLOP model over it. Shape rules and folders live in graph/infer*.c and graph/fold*.c;
 * kernels in kernels/<device>/. */
#include "infer.h"

#include <onnxpipe/einsum_plan.h>    /* Einsum's labels, for its FLOPs */
#include <onnxpipe/element_ops.h>   /* what elementwise gradients read */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/op_info.h>

#define BIT(i) (1u << (i))

/* What an elementwise op's gradient reads, from its row in kernels/element_ops.h. */
#define EL_IN(ID) ((PP_EL_READS_##ID & PP_EL_X) ? BIT(0) : 0u)
#define EL_OUT(ID) ((PP_EL_READS_##ID & PP_EL_Y) ? BIT(0) : 0u)

/* The flags a row's KINDS column implies: G never runs, FOLD runs only as its folder. */
#define KIND_FLAGS_FB 0u
#define KIND_FLAGS_F 0u
#define KIND_FLAGS_G PP_OPF_GRAPH_ONLY
#define KIND_FLAGS_FOLD PP_OPF_FOLD_ONLY

/* A row of op_list.h as a registry entry; the optional trailing fields are designated
 * initializers (.prec: PP_PREC_FOLLOW when not given; .saves_for_other: 0). */
#define ROW(ID, nm, kernel, kinds, since_, nondiff_, sin, sout, flags_, rule, per, shape_, fold_, ...)              \
    [PP_OP_##ID] = {.name = nm, .domain = "", .since = since_, .nondiff = nondiff_, .saves_in = sin,               \
                    .saves_out = sout, .flags = (flags_) | KIND_FLAGS_##kinds, .flop_rule = PP_FLOPS_##rule,       \
                    .flops_per = per, .shape = shape_, .fold = fold_, __VA_ARGS__},

/* a row outside ai.onnx overrides .domain (the residual norms' com.microsoft) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const pp_op_info ops[PP_OP_COUNT] = {PP_OP_LIST(ROW)};
#pragma GCC diagnostic pop

const pp_op_info *pp_op_get(pp_op op)
{
    return (int)op >= 0 && op < PP_OP_COUNT ? &ops[op] : NULL;
}

/* Op ids sorted by name, built once, for bsearch. */
static int by_name[PP_OP_COUNT];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static int cmp_id(const void *a, const void *b)
{
    return strcmp(ops[*(const int *)a].name, ops[*(const int *)b].name);
}

static void sort_names(void)
{
    for (int i = 0; i < PP_OP_COUNT; i++) by_name[i] = i;
    qsort(by_name, PP_OP_COUNT, sizeof by_name[0], cmp_id);
}

static int cmp_key(const void *key, const void *elem)
{
    return strcmp(key, ops[*(const int *)elem].name);
}

pp_op pp_op_lookup(const char *domain, const char *op_type)
{
    if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
    if (!op_type) return PP_OP_UNKNOWN;
    pthread_once(&by_name_once, sort_names);
    const int *hit = bsearch(op_type, by_name, PP_OP_COUNT, sizeof by_name[0], cmp_key);
    return hit && !strcmp(ops[*hit].domain, domain) ? (pp_op)*hit : PP_OP_UNKNOWN;
}

int pp_op_input_differentiable(pp_op op, int index)
{
    const pp_op_info *oi = pp_op_get(op);
    if (!oi || index < 0 || index >= 32) return 0;
    return !(oi->nondiff & BIT(index));
}

/* ---- the FLOP model --------------------------------------------------------- */

/* a * b for counts >= 0; *over set when the product leaves int64 (a kernel size or a
 * contraction dim can be large where no single tensor is). */
static int64_t mul(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static int64_t add(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static int64_t attr_int(const pp_attr *attrs, int nattrs, const char *name)
{
    const pp_attr *a = pp_attr_find(attrs, nattrs, name);
    return a && a->type == PP_ATTR_INT ? a->i : 0;
}

int64_t pp_op_flops(pp_op op, const pp_attr *attrs, int nattrs, const pp_shape *const *in, int nin,
                    const pp_shape *out, int *over)
{
    const pp_op_info *oi = pp_op_get(op);
    if (!oi || oi->flop_rule == PP_FLOPS_NONE) return 0;
    int64_t oe = out ? pp_shape_numel(out) : -1;
    if (oe < 0) return -1;
    const pp_shape *a = nin > 0 ? in[0] : NULL, *w = nin > 1 ? in[1] : NULL;
    int64_t bias = nin > 2 && in[2] ? oe : 0;
    switch (oi->flop_rule) {
    case PP_FLOPS_MATMUL:   /* [.., M, K] x [.., K, N]: 2*M*N*K per batch entry */
        if (!a || a->rank < 1 || a->dims[a->rank - 1] < 0) return -1;
        return mul(2 * oe, a->dims[a->rank - 1], over);
    case PP_FLOPS_GEMM:     /* A [M, K] (or [K, M] with transA) */
        if (!a || a->rank != 2 || a->dims[0] < 0 || a->dims[1] < 0) return -1;
        return add(mul(2 * oe, a->dims[attr_int(attrs, nattrs, "transA") ? 0 : 1], over), bias, over);
    case PP_FLOPS_CONV: {   /* W [Cout, Cin/group, k...]: 2 * out * (Cin/group) * kernel */
        if (!w || w->rank < 2) return -1;
        int64_t per = 1;
        for (int d = 1; d < w->rank; d++) per *= w->dims[d];   /* a tensor's dims: fits */
        return add(mul(2 * oe, per, over), bias, over);
    }
    case PP_FLOPS_POOL: {
        const pp_attr *k = pp_attr_find(attrs, nattrs, "kernel_shape");
        int64_t per = 1;
        for (int d = 0; k && k->type == PP_ATTR_INTS && d < k->n; d++) per = mul(per, k->ints[d], over);
        return mul(oe, per, over);
    }
    case PP_FLOPS_REDUCE: {
        int64_t ie = a ? pp_shape_numel(a) : -1;
        return ie < 0 ? -1 : mul(ie, oi->flops_per, over);
    }
    case PP_FLOPS_ATTENTION: {   /* Q [B, H, Sq, Dk] or [B, Sq, H * Dk]; K [.., Skv, Dk] */
        const int64_t qe = a ? pp_shape_numel(a) : -1;
        const int64_t heads = a && a->rank == 3 ? attr_int(attrs, nattrs, "q_num_heads") : 1;
        if (qe < 0 || !w || w->rank < 3 || heads <= 0 || a->dims[a->rank - 1] <= 0) return -1;
        const int64_t skv = w->dims[w->rank - 2], scores = mul(qe / (a->dims[a->rank - 1] / heads), skv, over);
        return add(mul(2 * (qe + oe), skv, over), mul(scores, oi->flops_per, over), over);
    }
    case PP_FLOPS_EINSUM: {
        const pp_attr *eq = pp_attr_find(attrs, nattrs, "equation");
        int ranks[2] = {0, 0};
        const int64_t *dims[2] = {NULL, NULL};
        for (int i = 0; i < nin && i < 2; i++) {
            if (!in[i] || in[i]->rank < 0) return -1;
            ranks[i] = in[i]->rank, dims[i] = in[i]->dims;
        }
        pp_einsum_eq q;
        int64_t size[PP_EINSUM_LABELS], terms = 1;
        char msg[256];
        if (!eq || eq->type != PP_ATTR_STRING || pp_einsum_parse(eq->s, nin, ranks, &q, msg, sizeof msg) ||
            pp_einsum_sizes(eq->s, &q, dims, size, msg, sizeof msg))
            return -1;
        for (int l = 0; l < PP_EINSUM_LABELS; l++)
            if (size[l] >= 0) terms = mul(terms, size[l], over);
            else if (size[l] == -1) return -1;
        return mul(terms, oi->flops_per, over);
    }
    default:
        return mul(oe, oi->flops_per, over);
    }
}
