/* Private to planner/: the calibration's records, per-op-type rates at a (microbatch,
 * precision), and the search's pieces (costs.c, calibrate.c, calib_json.c, search.c,
 * layout.c, exact.c). */
#ifndef PP_PLANNER_INTERNAL_H
#define PP_PLANNER_INTERNAL_H

#include <onnxpipe/core_util.h>
#include <onnxpipe/plan.h>
#include <onnxpipe/driver_lib.h>

/* One op type at one calibration point: totals over the timed runs' median. */
typedef struct calib_op {
    char *type;                 /* the node's op_type ("MatMul") */
    double calls;               /* kernel calls per forward */
    double flops;               /* registry FLOPs of its nodes per forward (pp_op_flops) */
    double bytes;               /* output bytes of its nodes per forward */
    double forward_s, backward_s;   /* per forward and per backward of the stage(s) */
} calib_op;

typedef struct calib_point {
    pp_dtype precision;
    int64_t microbatch;
    calib_op *ops;
    int nops;
} calib_point;

struct pp_calibration {
    char *model;                /* path as given */
    uint64_t model_hash;
    char host[64];
    char device[16];            /* "cpu", "cuda" */
    char optimizer[16];
    int stages_timed;           /* 1: the whole model; 3: first, middle and last of a split */
    int stages_of;              /* ... of that many stages */
    double memcpy_gbps;         /* one thread, 64 MiB */
    double optimizer_s_per_param;
    calib_point *points;        /* sorted by precision, then microbatch */
    int npoints;
};

/* Seconds per unit of an op type's work at one (microbatch, precision): its FLOPs when
 * bytes_unit is 0, else its output bytes (an op the registry counts no FLOPs for). */
typedef struct type_rate {
    double forward, backward;
    int bytes_unit;
} type_rate;

/* The rates of types[ntypes] under model m at (microbatch, precision) into out[ntypes];
 * the flat model: 1 / GFLOP/s per FLOP forward, twice that backward, nothing for ops
 * without FLOPs. *fallback (may be NULL) is set when the calibration has no point of this
 * precision and fp32's (or, without those, another precision's) were used. Returns PP_ERR_INVALID_ARG for a calibration without points. */
pp_status plan_type_rates(const pp_cost_model *m, const char *const *types, int ntypes, int64_t microbatch,
                          pp_dtype precision, type_rate *out, int *fallback, pp_error *err);
/* Optimizer seconds per parameter under m. */
double plan_optimizer_rate(const pp_cost_model *m);
/* A node's forward / backward seconds from its FLOPs and output bytes at rate r. */
static inline double plan_node_forward(const type_rate *r, double flops, double bytes)
{
    return r->bytes_unit ? bytes * r->forward : flops * r->forward;
}
static inline double plan_node_backward(const type_rate *r, double flops, double bytes)
{
    return r->bytes_unit ? bytes * r->backward : flops * r->backward;
}
/* Bytes of an activation tensor stored in precision p, from its fp32 size (16-bit halves it). */
static inline double plan_act_scale(pp_dtype p)
{
    return p == PP_DTYPE_BF16 || p == PP_DTYPE_F16 ? 0.5 : 1.0;
}

/* calib_json.c: reading the file. */
pp_status calib_from_json(const pp_jvalue *root, const char *path, pp_calibration **out, pp_error *err);
void calib_free_points(pp_calibration *c);

/* ---- the search (model_costs.c, layout.c, exact.c, search.c) ---------------------- */

/* The model's nodes in topological order at microbatch 1 and 2: how FLOPs and output
 * bytes grow with the microbatch (affine: f(mb) = f1 + (f2 - f1)(mb - 1)). */
typedef struct plan_model {
    const char *path;
    pp_graph_options gopt;      /* the caller's dims; batch set per load */
    pp_graph *g1, *g2;
    int n;                      /* nodes */
    const char **types;         /* distinct op types (owned by g1) */
    int ntypes;
    int *type_of;               /* [n] */
    double *f1, *f2, *b1, *b2;  /* [n] FLOPs and output bytes */
    unsigned char *keep;        /* [n] kept by selective recompute (MatMul, Gemm, Conv) */
    int64_t *own;               /* [n] trainable elements first read by the node (the params balance) */
    double *p_own, *p_own_bytes;        /* [n + 1] prefix sums of own and its bytes */
    double *p_act1, *p_act2;            /* [n + 1] prefix sums of output bytes */
    double *p_keep1, *p_keep2;          /* [n + 1] ... of the kept nodes' output bytes */
    double *cut1, *cut2;                /* [n] bytes crossing a cut after node i (relayed skips too) */
    struct plan_multi *gin, *tied;      /* graph inputs; parameters read by more than one node */
    int ngin, ntied;
    int64_t tokens;             /* T of a [batch, T] integer input; 0: none */
    int64_t fixed_batch;        /* > 0: the inputs' batch dim is fixed: the only microbatch */
} plan_model;

/* Prefix sums over nodes of forward, backward and selective-recompute forward seconds at
 * one (microbatch, precision). */
typedef struct plan_times {
    int64_t mb;
    pp_dtype precision;
    double *pf, *pb, *psel;     /* [n + 1] */
} plan_times;

/* Values read at several node positions (sorted): a graph input (bytes per microbatch at
 * 1 and 2) or a parameter (bytes and elements; its first reader owns it). */
struct plan_multi {
    int *pos;
    int npos;
    double b1, b2, numel;
};

/* A split into S virtual stages under the params balance, what each holds and, affine in
 * the microbatch, what it stashes and sends (fp32 bytes). The search scans the
 * backward-greedy optimal split (pp_linear_partition without cut costs); what it simulates
 * runs on training's own split, which among the same optimal splits takes the fewest bytes
 * crossing the cuts. A stage's stash under recompute is the bytes crossing into
 * it, the graph inputs it reads and what it sends (+ kept outputs for selective), as
 * pp_partition_recompute_estimate counts (relayed skips included). */
typedef struct plan_split {
    int S;
    int *first, *last;          /* node ranges */
    double *param_bytes, *params;
    double *send1, *send2;
    double *stash1[3], *stash2[3];   /* per pp_recompute, per microbatch in flight */
    double *arena1, *arena2;
} plan_split;

/* One candidate layout. */
typedef struct plan_cand {
    double bound;               /* lower bound on its simulated step, s */
    double mem;                 /* the memory model's largest rank, bytes */
    int32_t pp, dp, chunks;
    int8_t kind, recompute, prec, order;
    int64_t m;
} plan_cand;

typedef struct plan_ctx plan_ctx;

/* The costs of one layout: per stage, per rank, and the lower bound and memory model. */
typedef struct plan_eval {
    int S, pp;                  /* allocated lengths */
    /* per stage at (split, microbatch, precision, recompute): key1 */
    int k1_S, k1_exact, k1_prec, k1_rc;
    int64_t k1_mb;
    double *F, *Bi, *Bw, *stash, *arena, *send;           /* [S] */
    /* where the stages sit at (split, placement, pp, dp): key2 */
    int k2_S, k2_exact, k2_v, k2_pp, k2_dp;
    int *stage_rank;            /* [S] */
    double *bw, *ar;            /* [S] link speed after stage s (0: local); its all-reduce, s */
    double *params;             /* [pp] parameters per rank */
    int order;
    /* per layout */
    double *msg;                /* [S] */
    double *busy, *mem;         /* [pp] */
    double opt_max, bound, peak_mem, compute_max, ar_max, msg_max;
} plan_eval;

struct plan_ctx {
    const pp_plan_options *o;
    plan_model model;
    plan_times *times;          /* cache */
    int ntimes;
    plan_split **splits;        /* [max S + 1], built on demand: the backward-greedy split */
    plan_split **exact_splits;  /* ... training's own (pp_partition_create: cut bytes tie-broken) */
    int exact_mode;             /* plan_get_split hands out exact_splits */
    int max_s;
    int opt_slots;
    double opt_rate;            /* optimizer seconds per parameter */
    double host_bw, net_bw, lat;
    int fallback;               /* a precision was priced with fp32's rates */
    /* exact.c's caches */
    struct { int64_t mb; pp_graph *g; } graphs[4];
    int ngraphs, graph_next;
    struct plan_sched *scheds;
    int nscheds;
    plan_eval ev;               /* scratch */
};

pp_status plan_model_load(plan_ctx *c, const char *path, const pp_graph_options *gopt, pp_error *err);
void plan_model_free(plan_model *m);
pp_status plan_get_times(plan_ctx *c, int64_t mb, pp_dtype precision, const plan_times **out, pp_error *err);
pp_status plan_get_split(plan_ctx *c, int S, const plan_split **out, pp_error *err);
void plan_ctx_free(plan_ctx *c);

/* layout.c: the costs, bound and memory model of x (into c->ev); when limit > 0 and the
 * memory model's peak exceeds it, the bound is left 0 (not computed). */
pp_status plan_evaluate(plan_ctx *c, const plan_cand *x, double limit, pp_error *err);
/* The simulated step of x (after plan_evaluate): makespan and bubble. */
pp_status plan_simulate(plan_ctx *c, const plan_cand *x, double *step_s, double *bubble, pp_error *err);
/* exact.c: x's schedule (cached), and what pp_driver_estimate says each rank allocates:
 * rank_bytes[x->pp]. PP_OK with *exact = 0 and why filled when the stages cannot be
 * planned (e.g. no loss named). */
pp_status plan_schedule(plan_ctx *c, const plan_cand *x, const pp_schedule **out, pp_error *err);
pp_status plan_exact_memory(plan_ctx *c, const plan_cand *x, int64_t *rank_bytes, int *exact, char *why,
                            size_t why_len, pp_error *err);
void plan_exact_free(plan_ctx *c);

#endif
