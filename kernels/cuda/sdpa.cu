/* The bfloat16 / float16 Attention kernels on cuDNN's fused attention (flash attention: the
 * Sq x Skv scores are never stored), through cuDNN's backend graph API in the form
 * cudnn-frontend's SDPA nodes build it: forward Q K^T, scale, mask, causal select, softmax with
 * its statistics (max + log sum exp, kept in aux for backward), P V; backward recomputes P from
 * the statistics and runs dV = P^T dO, dS = P (dO V^T - rowsum(dO O)) scale, dK = dS^T Q,
 * dQ = dS K, grouped-query heads summed. Q, K, V, Y and the mask are read with their own strides
 * (sdpa_plan.h). Plans are built once per call shape and cached on the device; where cuDNN
 * refuses a graph the call runs on the adapter (kernels/lowp.c) around the direct kernel of
 * attention.cu, and the stage's fusion, which asks first (pp_kernel.prepare), keeps the chain
 * unfused and says why. */
#include "cuda_internal.h"
#include "lowp.h"
#include "nn_cuda.h"
#include "op_args_nn.h"
#include "reduce.cuh"
#include "sdpa_plan.h"
#include <onnxpipe/element.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static_assert(PP_CUDNN_DATA_FLOAT == CUDNN_DATA_FLOAT && PP_CUDNN_DATA_HALF == CUDNN_DATA_HALF &&
                  PP_CUDNN_DATA_BFLOAT16 == CUDNN_DATA_BFLOAT16,
              "launch.h's cuDNN data types");

/* unique ids: sdpa_plan.h's tensors, then the scalars passed by value, then virtual tensors */
enum { UID_SCALE = PP_SDPA_NT, UID_NEG_INF, UID_ONE, UID_VIRTUAL = 32 };

/* descriptors of one graph's build and plan: the largest backward (bias, causal band, grouped
 * heads) makes about 83, the plan search 2 modes x (1 + 16 configs + 16 plans) more */
#define GB_DESCS 256
#define GB_OPS 48

/* A graph being built: every descriptor made (destroyed with the plan), the operations, and
 * the first failure (later calls do nothing). */
typedef struct gb {
    cudnnBackendDescriptor_t d[GB_DESCS];
    int nd;
    cudnnBackendDescriptor_t ops[GB_OPS];
    int nops;
    int64_t next_uid;
    cudnnStatus_t st;
    char what[200];
} gb;

static void gb_fail(gb *g, cudnnStatus_t st, const char *what)
{
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    g->st = st;
    char detail[120] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    snprintf(g->what, sizeof g->what, "%s: %s%s%s", what, cudnnGetErrorString(st), detail[0] ? ": " : "", detail);
}

static cudnnBackendDescriptor_t make(gb *g, cudnnBackendDescriptorType_t type)
{
    cudnnBackendDescriptor_t d = NULL;
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    if (g->nd == GB_DESCS) {
        gb_fail(g, CUDNN_STATUS_INTERNAL_ERROR, "too many descriptors");
        return NULL;
    }
    cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) gb_fail(g, st, "cudnnBackendCreateDescriptor");
    else g->d[g->nd++] = d;
    return d;
}

static void set(gb *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
                int64_t n, const void *v, const char *what)
{
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = cudnnBackendSetAttribute(d, a, t, n, v);
    if (st != CUDNN_STATUS_SUCCESS) gb_fail(g, st, what);
}

static void fin(gb *g, cudnnBackendDescriptor_t d, const char *what)
{
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) gb_fail(g, st, what);
}

/* A tensor: in memory (uid given), virtual (uid < 0: the next one) or a host scalar passed by value. */
static cudnnBackendDescriptor_t tensor(gb *g, int64_t uid, int dtype, const long long *dims, const long long *st,
                                       int by_value)
{
    cudnnBackendDescriptor_t d = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const cudnnDataType_t t = (cudnnDataType_t)dtype;
    int64_t dd[4], ss[4];
    for (int i = 0; i < 4; i++) dd[i] = dims[i], ss[i] = st[i];
    const bool virt = uid < 0, byval = by_value != 0;
    const int64_t id = virt ? g->next_uid++ : uid, align = 16;
    set(g, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t, "tensor data type");
    set(g, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dd, "tensor dims");
    set(g, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, ss, "tensor strides");
    set(g, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id, "tensor id");
    set(g, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(g, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
    if (byval) set(g, d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval, "tensor by value");
    fin(g, d, "tensor");
    return d;
}

static cudnnBackendDescriptor_t mem(gb *g, const pp_cu_sdpa *p, int which, int dtype)
{
    return tensor(g, which, dtype, p->t[which].dims, p->t[which].st, 0);
}

static cudnnBackendDescriptor_t scalar(gb *g, int64_t uid)
{
    const long long one[4] = {1, 1, 1, 1};
    return tensor(g, uid, CUDNN_DATA_FLOAT, one, one, 1);
}

/* A virtual tensor [d0, d1, d2, d3], packed (or with strides st). */
static cudnnBackendDescriptor_t virt(gb *g, int dtype, long long d0, long long d1, long long d2, long long d3,
                                     const long long *st)
{
    const long long dims[4] = {d0, d1, d2, d3}, packed[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
    return tensor(g, -1, dtype, dims, st ? st : packed, 0);
}

static void add_op(gb *g, cudnnBackendDescriptor_t op, const char *what)
{
    fin(g, op, what);
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    if (g->nops == GB_OPS) gb_fail(g, CUDNN_STATUS_INTERNAL_ERROR, "too many operations");
    else g->ops[g->nops++] = op;
}

/* y = mode(x[, b[, t]]) computed in comp; axis >= 0 for GEN_INDEX */
static void pw(gb *g, cudnnPointwiseMode_t mode, cudnnDataType_t comp, cudnnBackendDescriptor_t x,
               cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis)
{
    cudnnBackendDescriptor_t d = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(g, d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(g, d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &comp, "pointwise precision");
    if (axis >= 0) set(g, d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    fin(g, d, "pointwise descriptor");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const float one = 1.f;
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, "pointwise op");
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pointwise x");
    if (b) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "pointwise b");
    if (t) set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, "pointwise t");
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise y");
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, "pointwise alpha1");
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, "pointwise alpha2");
    add_op(g, op, "pointwise operation");
}

/* y = mode(x, b) in fp32 into a new virtual fp32 tensor like `like` (dims d) */
static cudnnBackendDescriptor_t pw2(gb *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                    cudnnBackendDescriptor_t b, const long long *d)
{
    cudnnBackendDescriptor_t y = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    pw(g, mode, CUDNN_DATA_FLOAT, x, b, NULL, y, -1);
    return y;
}

static void matmul(gb *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c)
{
    cudnnBackendDescriptor_t d = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(g, d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "matmul compute type");
    fin(g, d, "matmul descriptor");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul a");
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "matmul b");
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul c");
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, "matmul desc");
    add_op(g, op, "matmul operation");
}

static void reduce(gb *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t d = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(g, d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "reduction compute type");
    set(g, d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduction operator");
    fin(g, d, "reduction descriptor");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reduction x");
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reduction y");
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, "reduction desc");
    add_op(g, op, "reduction operation");
}

/* y: the same memory as x seen with other dims and strides */
static void reshape(gb *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reshape x");
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reshape y");
    add_op(g, op, "reshape operation");
}

/* The scaled scores s (+ the mask) of p, rows i and keys j, with j > i set to -inf under causal
 * (cudnn-frontend's top-left diagonal band: row index >= column index is kept). */
static cudnnBackendDescriptor_t scores(gb *g, const pp_cu_sdpa *p, cudnnBackendDescriptor_t s,
                                       cudnnBackendDescriptor_t scale, const long long *d)
{
    s = pw2(g, CUDNN_POINTWISE_MUL, s, scale, d);
    if (p->has_bias) s = pw2(g, CUDNN_POINTWISE_ADD, s, mem(g, p, PP_SDPA_BIAS, p->bias_dtype), d);
    return s;
}

static cudnnBackendDescriptor_t causal(gb *g, cudnnBackendDescriptor_t s, const long long *d)
{
    cudnnBackendDescriptor_t row = virt(g, CUDNN_DATA_INT32, d[0], d[1], d[2], d[3], NULL);
    cudnnBackendDescriptor_t col = virt(g, CUDNN_DATA_INT32, d[0], d[1], d[2], d[3], NULL);
    cudnnBackendDescriptor_t keep = virt(g, CUDNN_DATA_BOOLEAN, d[0], d[1], d[2], d[3], NULL);
    cudnnBackendDescriptor_t y = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, row, 2);
    pw(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, col, 3);
    pw(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1);
    pw(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, scalar(g, UID_NEG_INF), keep, y, -1);
    return y;
}

/* Forward: O = softmax(scale Q K^T + mask, causal) V, and the statistics max + log sum exp. */
static void build_forward(gb *g, const pp_cu_sdpa *p)
{
    const long long d[4] = {p->b, p->hq, p->sq, p->skv}, r[4] = {p->b, p->hq, p->sq, 1};
    cudnnBackendDescriptor_t q = mem(g, p, PP_SDPA_Q, p->dtype), kt = mem(g, p, PP_SDPA_KT, p->dtype);
    cudnnBackendDescriptor_t v = mem(g, p, PP_SDPA_V, p->dtype), o = mem(g, p, PP_SDPA_O, p->dtype);
    cudnnBackendDescriptor_t stats = mem(g, p, PP_SDPA_STATS, CUDNN_DATA_FLOAT);
    cudnnBackendDescriptor_t s = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    matmul(g, q, kt, s);
    s = scores(g, p, s, scalar(g, UID_SCALE), d);
    if (p->causal) s = causal(g, s, d);
    /* softmax as cudnn-frontend writes it: max, x - max, exp, sum, log, stats = max + log sum */
    cudnnBackendDescriptor_t mx = virt(g, CUDNN_DATA_FLOAT, r[0], r[1], r[2], r[3], NULL);
    reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, mx);
    cudnnBackendDescriptor_t e = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    pw(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, pw2(g, CUDNN_POINTWISE_SUB, s, mx, d), NULL, NULL, e, -1);
    cudnnBackendDescriptor_t sum = virt(g, CUDNN_DATA_FLOAT, r[0], r[1], r[2], r[3], NULL);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, sum);
    cudnnBackendDescriptor_t lg = virt(g, CUDNN_DATA_FLOAT, r[0], r[1], r[2], r[3], NULL);
    pw(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, NULL, NULL, lg, -1);
    pw(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, lg, NULL, stats, -1);
    /* the probabilities in the inputs' type: the second product's A */
    cudnnBackendDescriptor_t prob = virt(g, p->dtype, d[0], d[1], d[2], d[3], NULL);
    pw(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, sum, NULL, prob, -1);
    matmul(g, prob, v, o);
}

/* dX = A^T-shaped product into out, or, with grouped-query heads, into a full-head tensor of
 * `full` dims summed over each group of query heads */
static void head_product(gb *g, const pp_cu_sdpa *p, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                         cudnnBackendDescriptor_t out, long long dim)
{
    if (p->hq == p->hkv) {
        matmul(g, a, b, out);
        return;
    }
    cudnnBackendDescriptor_t full = virt(g, p->dtype, p->b, p->hq, p->skv, dim, NULL);
    matmul(g, a, b, full);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

/* Backward (cudnn-frontend's, with dQ accumulated in fp32): dV, dK, dQ of O = softmax(S) V. */
static void build_backward(gb *g, const pp_cu_sdpa *p)
{
    const long long d[4] = {p->b, p->hq, p->sq, p->skv}, r[4] = {p->b, p->hq, p->sq, 1};
    const long long tr[4] = {p->hq * p->sq * p->skv, p->sq * p->skv, 1, p->skv};   /* [b, hq, skv, sq] of S */
    cudnnBackendDescriptor_t q = mem(g, p, PP_SDPA_Q, p->dtype), kt = mem(g, p, PP_SDPA_KT, p->dtype);
    cudnnBackendDescriptor_t vt = mem(g, p, PP_SDPA_VT, p->dtype), o = mem(g, p, PP_SDPA_O, p->dtype);
    cudnnBackendDescriptor_t dout = mem(g, p, PP_SDPA_DO, p->dtype), stats = mem(g, p, PP_SDPA_STATS, CUDNN_DATA_FLOAT);
    cudnnBackendDescriptor_t dq = mem(g, p, PP_SDPA_DQ, p->dtype), dk = mem(g, p, PP_SDPA_DK, p->dtype);
    cudnnBackendDescriptor_t dv = mem(g, p, PP_SDPA_DV, p->dtype);
    cudnnBackendDescriptor_t rowsum = mem(g, p, PP_SDPA_SUM, CUDNN_DATA_FLOAT);
    cudnnBackendDescriptor_t accum = mem(g, p, PP_SDPA_DQ_ACCUM, CUDNN_DATA_FLOAT);
    cudnnBackendDescriptor_t scale = scalar(g, UID_SCALE);
    /* rowsum = sum over dv of dO * O */
    const long long od[4] = {p->b, p->hq, p->sq, p->dv};
    cudnnBackendDescriptor_t dsum = virt(g, CUDNN_DATA_FLOAT, r[0], r[1], r[2], r[3], NULL);
    reduce(g, CUDNN_REDUCE_TENSOR_ADD, pw2(g, CUDNN_POINTWISE_MUL, dout, o, od), dsum);
    pw(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dsum, scalar(g, UID_ONE), NULL, rowsum, -1);
    /* P = exp(scale Q K^T + mask - stats), causal */
    cudnnBackendDescriptor_t s = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    matmul(g, q, kt, s);
    s = pw2(g, CUDNN_POINTWISE_SUB, scores(g, p, s, scale, d), stats, d);
    if (p->causal) s = causal(g, s, d);
    cudnnBackendDescriptor_t prob = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    pw(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s, NULL, NULL, prob, -1);
    /* dV = P^T dO */
    cudnnBackendDescriptor_t pt = virt(g, p->dtype, p->b, p->hq, p->skv, p->sq, tr);
    reshape(g, prob, pt);
    head_product(g, p, pt, dout, dv, p->dv);
    /* dS = scale P (dO V^T - rowsum) */
    cudnnBackendDescriptor_t dp = virt(g, CUDNN_DATA_FLOAT, d[0], d[1], d[2], d[3], NULL);
    matmul(g, dout, vt, dp);
    cudnnBackendDescriptor_t ds = pw2(g, CUDNN_POINTWISE_SUB, dp, rowsum, d);
    ds = pw2(g, CUDNN_POINTWISE_MUL, ds, prob, d);
    ds = pw2(g, CUDNN_POINTWISE_MUL, ds, scale, d);
    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = virt(g, p->dtype, p->b, p->hq, p->skv, p->sq, tr);
    reshape(g, ds, dst);
    head_product(g, p, dst, q, dk, p->dk);
    /* dQ = dS K, accumulated in fp32, then rounded into dQ */
    const pp_cu_sdpa_tensor *k = &p->t[PP_SDPA_K];
    cudnnBackendDescriptor_t kk = tensor(g, -1, p->dtype, k->dims, k->st, 0);
    reshape(g, kt, kk);
    matmul(g, ds, kk, accum);
    pw(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, accum, NULL, NULL, dq, -1);
}

/* ---------------- plans: built once per call shape, cached on the device ---------------- */

typedef struct cu_sdpa_entry {
    pp_cu_sdpa key;
    int ok;
    char why[256];                  /* cuDNN's refusal */
    cudnnBackendDescriptor_t plan;
    int64_t ws;                     /* the plan's workspace bytes */
    gb *g;                          /* the graph's descriptors, alive with the plan */
} cu_sdpa_entry;

struct cu_sdpa {
    cu_sdpa_entry *e;
    int n, cap;
    int warned;                     /* a refusal at run time was logged */
};

static void gb_free(gb *g)
{
    if (!g) return;
    for (int i = g->nd - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->d[i]);
    free(g);
}

void pp_cu_sdpa_cache_free(pp_cuda *cu)
{
    cu_sdpa *c = cu->sdpa;
    if (!c) return;
    for (int i = 0; i < c->n; i++) gb_free(c->e[i].g);
    free(c->e);
    free(c);
    cu->sdpa = NULL;
}

/* The graph's execution plan: the heuristics' engine configs (mode A, then the fallback list,
 * up to 16 of each), the first whose plan finalizes; a refusal says how many were tried and
 * why the last one failed. */
static void plan_of(gb *g, cudnnHandle_t h, cudnnBackendDescriptor_t *plan, int64_t *ws)
{
    *plan = NULL;
    cudnnBackendDescriptor_t graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops, "graph ops");
    set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
    fin(g, graph, "operation graph");
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    int64_t tried = 0;
    cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
    for (int m = 0; m < 2 && g->st == CUDNN_STATUS_SUCCESS && !*plan; m++) {
        cudnnBackendDescriptor_t heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        set(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristics graph");
        set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], "heuristics mode");
        fin(g, heur, "heuristics");
        int64_t n = 0;
        if (g->st == CUDNN_STATUS_SUCCESS &&
            cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL) !=
                CUDNN_STATUS_SUCCESS)
            n = 0;
        if (n > 16) n = 16;
        cudnnBackendDescriptor_t cfg[16];
        for (int64_t i = 0; i < n; i++) cfg[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        int64_t got = 0;
        if (g->st == CUDNN_STATUS_SUCCESS && n > 0 &&
            cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfg) !=
                CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int64_t i = 0; i < got && !*plan && g->st == CUDNN_STATUS_SUCCESS; i++) {
            cudnnBackendDescriptor_t x = make(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            set(g, x, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "plan handle");
            set(g, x, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i], "plan config");
            if (g->st != CUDNN_STATUS_SUCCESS) break;
            cudnnStatus_t st = cudnnBackendFinalize(x);
            tried++;
            int64_t bytes = 0, k = 0;
            if (st == CUDNN_STATUS_SUCCESS)
                st = cudnnBackendGetAttribute(x, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &k,
                                              &bytes);
            if (st == CUDNN_STATUS_SUCCESS) *plan = x, *ws = bytes;
            else last = st;
        }
    }
    if (g->st == CUDNN_STATUS_SUCCESS && !*plan) {
        char why[160];
        snprintf(why, sizeof why, "no engine of the heuristics takes the graph (%lld engine configs tried%s%s)",
                 (long long)tried, last != CUDNN_STATUS_SUCCESS ? "; the last: " : "",
                 last != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(last) : "");
        gb_fail(g, CUDNN_STATUS_NOT_SUPPORTED, why);
    }
}

/* The cached plan of p (built now if new; a refusal is cached too). NULL: out of host memory. */
static cu_sdpa_entry *entry_of(pp_cuda *cu, const pp_cu_sdpa *p)
{
    if (!cu->sdpa && !(cu->sdpa = (cu_sdpa *)calloc(1, sizeof *cu->sdpa))) return NULL;
    cu_sdpa *c = cu->sdpa;
    for (int i = 0; i < c->n; i++)
        if (!memcmp(&c->e[i].key, p, sizeof *p)) return &c->e[i];
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 16;
        cu_sdpa_entry *e = (cu_sdpa_entry *)realloc(c->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        c->e = e;
        c->cap = cap;
    }
    gb *g = (gb *)calloc(1, sizeof *g);
    if (!g) return NULL;
    cu_sdpa_entry *x = &c->e[c->n++];
    memset(x, 0, sizeof *x);
    x->key = *p;
    x->g = g;
    g->next_uid = UID_VIRTUAL;
    if (p->backward) build_backward(g, p);
    else build_forward(g, p);
    plan_of(g, cu->dnn, &x->plan, &x->ws);
    x->ok = g->st == CUDNN_STATUS_SUCCESS && x->plan;
    if (!x->ok) snprintf(x->why, sizeof x->why, "cuDNN refuses the %s graph: %s", p->backward ? "backward" : "forward",
                         g->what);
    return x;
}

/* ---------------- the kernels ---------------- */

typedef struct sdpa_call {
    pp_attn_args a;
    pp_cu_sdpa fwd, bwd;
    cu_sdpa_entry *ef, *eb;     /* NULL on a planning device (no ctx): the static rules only */
} sdpa_call;

/* Whether c runs on cuDNN (both graphs: forward keeps the statistics backward needs); else
 * PP_ERR_UNSUPPORTED and the reason. */
static pp_status sdpa_of(const pp_kernel_ctx *c, sdpa_call *x, pp_error *err)
{
    PP_CHECK(pp_args_attention(c, &x->a, err));
    const pp_dtype io = c->in[0].dtype;
    if (c->in[1].dtype != io || c->in[2].dtype != io || c->out[0].dtype != io)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "Q, K, V and Y of one dtype (got %s, %s, %s, %s)",
                            pp_dtype_name(io), pp_dtype_name(c->in[1].dtype), pp_dtype_name(c->in[2].dtype),
                            pp_dtype_name(c->out[0].dtype));
    const pp_dtype mask = x->a.mask ? c->in[3].dtype : PP_DTYPE_F32;
    PP_CHECK(pp_cu_sdpa_plan(&x->fwd, &x->a, io, mask, 0, c->node, err));
    PP_CHECK(pp_cu_sdpa_plan(&x->bwd, &x->a, io, mask, 1, c->node, err));
    x->ef = x->eb = NULL;
    pp_cuda *cu = c->dev ? cu_of(c->dev) : NULL;
    if (!cu) return PP_OK;
    /* the forward's entry looked up again after the backward's: inserting that may move the cache */
    if (!entry_of(cu, &x->fwd) || !(x->eb = entry_of(cu, &x->bwd)) || !(x->ef = entry_of(cu, &x->fwd)))
        return pp_error_set(err, PP_ERR_NOMEM, "out of host memory for cuDNN's attention plans");
    const cu_sdpa_entry *bad = !x->ef->ok ? x->ef : !x->eb->ok ? x->eb : NULL;
    if (bad) return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "%s", bad->why);
    return PP_OK;
}

/* The cuDNN path, or (0) the adapter's, logged once per device when cuDNN refuses at run time. */
static int native(const pp_kernel_ctx *c, sdpa_call *x)
{
    pp_error why = {PP_OK, ""};
    if (sdpa_of(c, x, &why) == PP_OK) return 1;
    pp_cuda *cu = c->dev ? cu_of(c->dev) : NULL;
    if (cu && cu->sdpa && !cu->sdpa->warned++)
        pp_log(PP_LOG_INFO, "cuda device %d: Attention runs on the direct kernel: %s", c->dev->index, why.msg);
    return 0;
}

PP_CU_FWD(pp_cu_attention_lp_prepare)
{
    sdpa_call x;
    return sdpa_of(c, &x, err);
}

PP_CU_AUX(pp_cu_attention_lp_aux)
{
    sdpa_call x;
    if (native(c, &x)) return pp_cu_sdpa_stats_bytes(&x.fwd);
    const pp_kernel *k = pp_lowp_adapter(PP_OP_ATTENTION, PP_DEVICE_CUDA);
    return k && k->aux_bytes ? k->aux_bytes(c) : 0;
}

/* What a call allocates for itself: nothing on cuDNN (the device's workspace), the adapter's
 * fp32 shadows otherwise. */
size_t pp_cu_attention_lp_work(const pp_kernel_ctx *c, const pp_tensor *grad_out, const pp_tensor *grad_in)
{
    sdpa_call x;
    if (native(c, &x)) return 0;
    const pp_kernel *k = pp_lowp_adapter(PP_OP_ATTENTION, PP_DEVICE_CUDA);
    return k && k->work_bytes ? k->work_bytes(c, grad_out, grad_in) : 0;
}

/* What cuDNN's version asks of a caller, as cudnn-frontend does it (its
 * scaled_dot_product_flash_attention.h and diagonal_band_mask.h): before 9.6 the backward's
 * fp32 dQ accumulator must be zeroed by the caller; before 9.10 the masked scores take the
 * lowest float rather than -inf. cudnnGetVersion is the library loaded, not the header's. */
static int dnn_before(size_t version) { return cudnnGetVersion() < version; }
static float masked_value(void) { return dnn_before(91000) ? -FLT_MAX : -INFINITY; }

#define SDPA_TRY(c, expr, what)                                                                   \
    do {                                                                                          \
        cudnnStatus_t sd_st_ = (expr);                                                            \
        if (sd_st_ != CUDNN_STATUS_SUCCESS) {                                                     \
            if (vp) cudnnBackendDestroyDescriptor(vp);                                            \
            return pp_cu_fail((c), err, "cuDNN", what, cudnnGetErrorString(sd_st_));              \
        }                                                                                         \
    } while (0)

/* Runs plan e with these (uid, pointer) pairs and workspace ws. */
static pp_status run_plan(const pp_kernel_ctx *c, const cu_sdpa_entry *e, const int64_t *uids, void **ptrs, int n,
                          void *ws, pp_error *err)
{
    for (int i = 0; i < n; i++)
        if (uids[i] < UID_SCALE && ((uintptr_t)ptrs[i] % 16))
            return pp_args_fail(c, PP_ERR_DEVICE, err, "cuDNN's fused attention needs 16-byte aligned tensors "
                                "(tensor %lld is not)", (long long)uids[i]);
    cudnnBackendDescriptor_t vp = NULL;
    SDPA_TRY(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp), "variant pack");
    SDPA_TRY(c, cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids),
             "variant pack ids");
    SDPA_TRY(c, cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs),
             "variant pack pointers");
    SDPA_TRY(c, cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws),
             "variant pack workspace");
    SDPA_TRY(c, cudnnBackendFinalize(vp), "variant pack");
    SDPA_TRY(c, cudnnBackendExecute(cu_of(c->dev)->dnn, e->plan, vp), "cudnnBackendExecute (fused attention)");
    cudnnBackendDestroyDescriptor(vp);
    return PP_OK;
}

PP_CU_FWD(pp_cu_attention_lp_forward)
{
    sdpa_call x;
    if (!native(c, &x)) return pp_lowp_forward(c, err);
    if (!x.a.b || !x.a.sq) return PP_OK;
    float scale = x.a.scale, neg_inf = masked_value();
    int64_t uids[8] = {PP_SDPA_Q, PP_SDPA_KT, PP_SDPA_V, PP_SDPA_O, PP_SDPA_STATS, UID_SCALE};
    void *ptrs[8] = {c->in[0].data, c->in[1].data, c->in[2].data, c->out[0].data, c->aux, &scale};
    int n = 6;
    if (x.fwd.has_bias) uids[n] = PP_SDPA_BIAS, ptrs[n++] = c->in[3].data;
    if (x.fwd.causal) uids[n] = UID_NEG_INF, ptrs[n++] = &neg_inf;
    void *ws = NULL;
    if (x.ef->ws) PP_CHECK(pp_cuda_workspace(c, (size_t)x.ef->ws, &ws, err));
    return run_plan(c, x.ef, uids, ptrs, n, ws, err);
}

/* dst += src, n elements of a 16-bit dtype, in fp32, rounded once */
__global__ void k_add16(uint16_t *dst, const uint16_t *src, int64_t n, pp_dtype t)
{
    CU_FOR(i, n)
    {
        const float s = (float)pp_el_cast_read(t, dst, i) + (float)pp_el_cast_read(t, src, i);
        dst[i] = t == PP_DTYPE_BF16 ? pp_el_bf16_from_f32(s) : pp_el_f16_from_f32(s);
    }
}

/* cuDNN assigns dQ, dK, dV: a gradient that is fresh (c->grad_fresh) is written in place, one
 * this call adds to goes to a temporary first, one nobody asked for to a temporary only */
PP_CU_BWD(pp_cu_attention_lp_backward)
{
    sdpa_call x;
    if (!native(c, &x)) return pp_lowp_backward(c, grad_out, grad_in, err);
    if (!grad_out[0].data || (!grad_in[0].data && !grad_in[1].data && !grad_in[2].data) || !x.a.b || !x.a.sq)
        return PP_OK;
    unsigned temps = 0;
    for (int i = 0; i < 3; i++) {
        if (grad_in[i].data && grad_in[i].dtype != c->in[i].dtype)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "the gradient of input %d is %s, its input %s: cuDNN's "
                                "fused attention writes them in one dtype", i, pp_dtype_name(grad_in[i].dtype),
                                pp_dtype_name(c->in[i].dtype));
        if (!grad_in[i].data || !(c->grad_fresh >> i & 1)) temps |= 1u << i;
    }
    pp_cu_sdpa_ws w;
    pp_cu_sdpa_bwd_ws(&x.bwd, (size_t)x.eb->ws, temps, &w);
    char *ws;
    PP_CHECK(pp_cuda_workspace(c, w.bytes, (void **)&ws, err));
    void *grads[3];
    for (int i = 0; i < 3; i++) grads[i] = temps >> i & 1 ? (void *)(ws + w.tmp_at[i]) : grad_in[i].data;
    float scale = x.a.scale, neg_inf = masked_value(), one = 1.f;
    int64_t uids[16] = {PP_SDPA_Q, PP_SDPA_KT, PP_SDPA_VT, PP_SDPA_O, PP_SDPA_DO, PP_SDPA_STATS, PP_SDPA_DQ,
                        PP_SDPA_DK, PP_SDPA_DV, PP_SDPA_SUM, PP_SDPA_DQ_ACCUM, UID_SCALE, UID_ONE};
    void *ptrs[16] = {c->in[0].data, c->in[1].data, c->in[2].data, c->out[0].data, grad_out[0].data, c->aux,
                      grads[0], grads[1], grads[2], ws + w.sum_at, ws + w.accum_at, &scale, &one};
    int n = 13;
    if (x.bwd.has_bias) uids[n] = PP_SDPA_BIAS, ptrs[n++] = c->in[3].data;
    if (x.bwd.causal) uids[n] = UID_NEG_INF, ptrs[n++] = &neg_inf;
    if (dnn_before(90600)) CU_TRY(c, cudaMemsetAsync(ws + w.accum_at, 0, w.accum_bytes, cu_of(c->dev)->stream));
    PP_CHECK(run_plan(c, x.eb, uids, ptrs, n, ws, err));
    for (int i = 0; i < 3; i++) {
        if (!grad_in[i].data || !(temps >> i & 1)) continue;
        const int64_t ne = pp_tensor_numel(&grad_in[i]);
        pp_cu_launch L = pp_cu_launch_1d(ne);
        k_add16<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>((uint16_t *)grad_in[i].data,
                                                                 (const uint16_t *)grads[i], ne, grad_in[i].dtype);
        CU_LAUNCHED(c);
    }
    return PP_OK;
}
