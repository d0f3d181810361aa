/* The sgemm yardstick on a model's own matrix products: every MatMul/Gemm of MODEL at
 * microbatch B as OpenBLAS runs it in one training step (forward C = A·B, backward
 * dA = dC·Bᵀ and dB = Aᵀ·dC, batched products as one sgemm per matrix; a weight that a
 * Transpose feeds read transposed, as the stage folds it), timed pass after
 * pass in model order on this process's BLAS threads. Prints one JSON line: the FLOPs of
 * a pass (3 x the forward products' FLOPs, the model FLOPs onnxpipe's profiler and
 * bench_step count), and GFLOP/s of the median and the best pass, by wall and CPU time.
 * Usage: bench_gemm_mix MODEL.onnx --batch B [--dim NAME=N]... [--seconds S] [--list] [--onnxpipe]
 *        [--compare]
 * (--dim binds a symbolic dim, e.g. the exports' seq;
 * OPENBLAS_NUM_THREADS: threads; --list prints the products as a JSON line instead of
 * timing them, for another library's yardstick on the same shapes; --onnxpipe times the
 * same products through the cpu kernels' own smat_gemm, kernels/cpu/gemm.c where it
 * applies, instead of cblas_sgemm; --compare times each distinct product both ways, call
 * by call in alternating order for S seconds (default 1), and prints per product the
 * speedup of smat_gemm over cblas_sgemm (median and quartiles of the paired calls), then
 * the pass's speedup from those times: a machine whose speed drifts by 10-25% over tens of
 * seconds (docs/benchmarks.md) moves two separate runs apart by more than the difference,
 * and each pair of calls sees the same speed) */
#include "bench_util.h"

#include <onnxpipe/graph_ir.h>

#include "smat.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

typedef struct gemm {
    int M, N, K, ta, tb;   /* C (M, N) = op(A) (M, K) · op(B) (K, N), row-major */
    int count;             /* matrices in a batched product */
} gemm;

static double loadavg(void)
{
    double l[1] = {-1};
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* Appends the forward and the two backward products of one MatMul / Gemm.
 * a: (..., M, K), b: (..., K, N) or (K, N); Gemm's transA/transB swap the last two dims. */
static int add_product(gemm *out, int n, const pp_shape *a, const pp_shape *b, int ta, int tb)
{
    if (a->rank < 2 || b->rank < 2) return n;
    int64_t M = a->dims[a->rank - (ta ? 1 : 2)], K = a->dims[a->rank - (ta ? 2 : 1)];
    int64_t N = b->dims[b->rank - (tb ? 2 : 1)], count = 1;
    if (b->rank == 2) {                 /* a weight: the leading dims of a fold into M */
        for (int i = 0; i < a->rank - 2; i++) M *= a->dims[i];
    } else {                            /* batched: one sgemm per matrix */
        for (int i = 0; i < a->rank - 2; i++) count *= a->dims[i];
    }
    out[n++] = (gemm){(int)M, (int)N, (int)K, ta, tb, (int)count};   /* C = op(A)·op(B) */
    /* the gradients of A and B as stored: dA = dC·op(B)ᵀ (transA: its transpose op(B)·dCᵀ),
     * dB = op(A)ᵀ·dC (transB: dCᵀ·op(A)) */
    out[n++] = ta ? (gemm){(int)K, (int)M, (int)N, tb, 1, (int)count} : (gemm){(int)M, (int)K, (int)N, 0, !tb, (int)count};
    out[n++] = tb ? (gemm){(int)N, (int)K, (int)M, 1, ta, (int)count} : (gemm){(int)K, (int)N, (int)M, !ta, 0, (int)count};
    return n;
}

/* Whether value v is what stage/fuse.c's fold_trans_b folds into the MatMul that reads it:
 * a float Transpose (perm [1, 0] or none) of a rank-2 tensor, read only by that MatMul; the
 * stage then runs the product on the untransposed tensor with sgemm's transpose flag. */
static int weight_transpose(const pp_graph *g, int v)
{
    const int t = g->values[v].producer;
    if (t < 0 || g->values[v].nconsumers != 1) return 0;
    const pp_node *tr = &g->nodes[t];
    if (tr->op != PP_OP_TRANSPOSE || tr->ninputs != 1 || g->values[tr->inputs[0]].shape.rank != 2 ||
        g->values[tr->inputs[0]].dtype != PP_DTYPE_F32)
        return 0;
    const pp_attr *perm = pp_attr_find(tr->attrs, tr->nattrs, "perm");
    return !perm || (perm->type == PP_ATTR_INTS && perm->n == 2 && perm->ints[0] == 1 && perm->ints[1] == 0);
}

/* One product as the pass runs it (count matrices), on smat_gemm (ours) or cblas_sgemm. */
static void run_product(const gemm *p, int ours, const float *A, const float *B, float *C)
{
    const int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
    for (int k = 0; k < p->count; k++)
        if (ours)
            smat_gemm(SMAT_FULL, p->M, p->N, p->K, 1.f, (smat){(float *)A, p->ta, lda}, (smat){(float *)B, p->tb, ldb},
                      0.f, (smat){C, 0, p->N});
        else
            cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->M,
                        p->N, p->K, 1.f, A, lda, B, ldb, 0.f, C, p->N);
}

static int same_product(const gemm *a, const gemm *b)
{
    return a->M == b->M && a->N == b->N && a->K == b->K && a->ta == b->ta && a->tb == b->tb && a->count == b->count;
}

#define MAX_PAIRS 100000

/* --compare: per distinct product, pairs of calls (cblas_sgemm, smat_gemm), the order
 * alternating from pair to pair, for `seconds`; one JSON line each, then the pass's. */
static int compare(const char *path, int64_t batch, const gemm *gs, int n, double seconds, const float *A,
                   const float *B, float *C)
{
    double *ratio = malloc(MAX_PAIRS * sizeof *ratio), pass[2] = {0, 0};
    if (!ratio) return 1;
    for (int i = 0; i < n; i++) {
        int uses = 0, seen = 0;
        for (int j = 0; j < n; j++)
            if (same_product(&gs[j], &gs[i])) uses++, seen |= j < i;
        if (seen) continue;
        double t[2] = {0, 0};
        int pairs = 0;
        run_product(&gs[i], 0, A, B, C), run_product(&gs[i], 1, A, B, C);   /* warm */
        for (const double start = pp_now(); pairs < MAX_PAIRS && (pairs < 10 || pp_now() - start < seconds); pairs++) {
            double d[2];
            for (int s = 0; s < 2; s++) {
                const int ours = (pairs + s) % 2;
                const double t0 = pp_now();
                run_product(&gs[i], ours, A, B, C);
                d[ours] = pp_now() - t0;
            }
            t[0] += d[0], t[1] += d[1], ratio[pairs] = d[0] / d[1];
        }
        const double flop = 2.0 * gs[i].M * gs[i].N * gs[i].K * gs[i].count * pairs;
        const double med = median(ratio, pairs);   /* sorts ratio */
        printf("{\"bench\": \"gemm_compare\", \"model\": \"%s\", \"microbatch\": %lld, \"M\": %d, \"N\": %d, \"K\": %d, "
               "\"transA\": %d, \"transB\": %d, \"count\": %d, \"uses_per_pass\": %d, \"pairs\": %d, "
               "\"openblas_gflops\": %.2f, \"onnxpipe_gflops\": %.2f, \"speedup_median\": %.3f, "
               "\"speedup_q1\": %.3f, \"speedup_q3\": %.3f}\n",
               path, (long long)batch, gs[i].M, gs[i].N, gs[i].K, gs[i].ta, gs[i].tb, gs[i].count, uses, pairs,
               flop / t[0] * 1e-9, flop / t[1] * 1e-9, med, ratio[pairs / 4], ratio[3 * pairs / 4]);
        pass[0] += uses * t[0] / pairs, pass[1] += uses * t[1] / pairs;
    }
    printf("{\"bench\": \"gemm_compare_pass\", \"model\": \"%s\", \"microbatch\": %lld, \"openblas_ms\": %.2f, "
           "\"onnxpipe_ms\": %.2f, \"speedup\": %.3f, \"openblas_core\": \"%s\", \"loadavg_1m\": %.2f}\n",
           path, (long long)batch, pass[0] * 1e3, pass[1] * 1e3, pass[0] / pass[1], openblas_get_corename(), loadavg());
    free(ratio);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int64_t batch = 0;
    double seconds = 3.0;
    int seconds_set = 0;
    int list = 0, ours = 0, cmp = 0, ndims = 0;
    pp_dim_binding dims[8];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--onnxpipe")) ours = 1;
        else if (!strcmp(argv[i], "--compare")) cmp = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]), seconds_set = 1;
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc && ndims < 8 && strchr(argv[i + 1], '=')) {
            char *eq = strchr(argv[++i], '=');
            *eq = '\0';
            dims[ndims++] = (pp_dim_binding){argv[i], atoll(eq + 1)};
        }
        else path = argv[i];
    }
    if (!path || batch <= 0) {
        fprintf(stderr, "usage: bench_gemm_mix MODEL.onnx --batch B [--dim NAME=N]... [--seconds S] [--list] [--onnxpipe] [--compare]\n");
        return 2;
    }
    pp_error err = {0};
    pp_graph *g = NULL;
    pp_graph_options opt = {.batch = batch, .dims = dims, .ndims = ndims};
    if (pp_graph_load(path, &opt, &g, &err)) {
        printf("{\"bench\": \"gemm_mix\", \"error\": \"%s\"}\n", err.msg);
        return 1;
    }
    gemm *gs = calloc((size_t)g->nnodes * 3 + 1, sizeof *gs);
    if (!gs) return 1;
    int n = 0, products = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *nd = &g->nodes[i];
        if (nd->op != PP_OP_MATMUL && nd->op != PP_OP_GEMM) continue;
        int64_t ta = 0, tb = 0;
        if (nd->op == PP_OP_GEMM &&
            (pp_attr_int(nd->attrs, nd->nattrs, "transA", 0, &ta, nd->name, &err) ||
             pp_attr_int(nd->attrs, nd->nattrs, "transB", 0, &tb, nd->name, &err))) {
            printf("{\"bench\": \"gemm_mix\", \"error\": \"%s\"}\n", err.msg);
            return 1;
        }
        int b = nd->inputs[1];
        if (nd->op == PP_OP_MATMUL && weight_transpose(g, b)) {   /* as the stage runs it: W read transposed */
            b = g->nodes[g->values[b].producer].inputs[0];
            tb = 1;
        }
        n = add_product(gs, n, &g->values[nd->inputs[0]].shape, &g->values[b].shape, (int)ta, (int)tb);
        products++;
    }
    if (list) {   /* [M, N, K, transA, transB, count] per sgemm, in pass order */
        printf("{\"bench\": \"gemm_mix_shapes\", \"model\": \"%s\", \"microbatch\": %lld, \"gemms\": [", path,
               (long long)batch);
        for (int i = 0; i < n; i++)
            printf("%s[%d, %d, %d, %d, %d, %d]", i ? ", " : "", gs[i].M, gs[i].N, gs[i].K, gs[i].ta, gs[i].tb,
                   gs[i].count);
        printf("]}\n");
        free(gs);
        pp_graph_destroy(g);
        return 0;
    }
    /* one buffer set large enough for every product */
    size_t amax = 0, bmax = 0, cmax = 0;
    double flops = 0;
    int calls = 0;
    for (int i = 0; i < n; i++) {
        calls += gs[i].count;
        size_t a = (size_t)gs[i].M * gs[i].K, b = (size_t)gs[i].K * gs[i].N, c = (size_t)gs[i].M * gs[i].N;
        amax = a > amax ? a : amax, bmax = b > bmax ? b : bmax, cmax = c > cmax ? c : cmax;
        flops += 2.0 * gs[i].M * gs[i].N * gs[i].K * gs[i].count;
    }
    float *A = malloc(amax * sizeof *A), *B = malloc(bmax * sizeof *B), *C = malloc(cmax * sizeof *C);
    if (!A || !B || !C) return 1;
    for (size_t i = 0; i < amax; i++) A[i] = (float)(i % 17) * 0.01f;
    for (size_t i = 0; i < bmax; i++) B[i] = (float)(i % 13) * 0.01f;
    memset(C, 0, cmax * sizeof *C);

    if (cmp) {
        const int rc = compare(path, batch, gs, n, seconds_set ? seconds : 1.0, A, B, C);
        free(A), free(B), free(C), free(gs);
        pp_graph_destroy(g);
        return rc;
    }
    int cap = 4096, passes = 0;
    double *wall = malloc((size_t)cap * sizeof *wall), *cpu = malloc((size_t)cap * sizeof *cpu);
    if (!wall || !cpu) return 1;
    double start = pp_now();
    while (passes < cap && (passes < 5 || pp_now() - start < seconds)) {
        double t0 = pp_now(), c0 = cpu_now();
        for (int i = 0; i < n; i++) run_product(&gs[i], ours, A, B, C);
        wall[passes] = pp_now() - t0;
        cpu[passes] = cpu_now() - c0;
        passes++;
    }
    double wmed = median(wall, passes), cmed = median(cpu, passes);
    printf("{\"bench\": \"gemm_mix\", \"gemm\": \"%s\", \"model\": \"%s\", \"microbatch\": %lld, \"products\": %d, \"sgemm_calls_per_pass\": %d, "
           "\"gflop_per_pass\": %.4f, \"passes\": %d, \"blas_threads\": %d, \"gflops_median\": %.2f, "
           "\"gflops_best\": %.2f, \"gflops_cpu_median\": %.2f, \"openblas_core\": \"%s\", \"loadavg_1m\": %.2f}\n",
           ours ? "onnxpipe smat_gemm" : "openblas cblas_sgemm", path, (long long)batch, products, calls, flops * 1e-9, passes, openblas_get_num_threads(),
           flops / wmed * 1e-9, flops / wall[0] * 1e-9, flops / cmed * 1e-9, openblas_get_corename(), loadavg());
    free(A);
    free(B);
    free(C);
    free(wall);
    free(cpu);
    free(gs);
    pp_graph_destroy(g);
    return 0;
}
