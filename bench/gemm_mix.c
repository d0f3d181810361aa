/* The sgemm yardstick on a model's own matrix products: every MatMul/Gemm of MODEL at
 * microbatch B as OpenBLAS runs it in one training step (forward C = A·B, backward
 * dA = dC·Bᵀ and dB = Aᵀ·dC, batched products as one sgemm per matrix), timed pass after
 * pass in model order on this process's BLAS threads. Prints one JSON line: the FLOPs of
 * a pass (3 x the forward products' FLOPs, the model FLOPs onnxpipe's profiler and
 * bench_step count), and GFLOP/s of the median and the best pass, by wall and CPU time.
 * Usage: bench_gemm_mix MODEL.onnx --batch B [--dim NAME=N]... [--seconds S] [--list] [--onnxpipe]
 * (--dim binds a symbolic dim, e.g. the exports' seq;
 * OPENBLAS_NUM_THREADS: threads; --list prints the products as a JSON line instead of
 * timing them, for another library's yardstick on the same shapes; --onnxpipe times the
 * same products through the cpu kernels' own smat_gemm, kernels/cpu/gemm.c where it
 * applies, instead of cblas_sgemm) */
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
    out[n++] = (gemm){(int)M, (int)N, (int)K, ta, tb, (int)count};     /* C = A·B */
    out[n++] = (gemm){(int)M, (int)K, (int)N, 0, 1, (int)count};       /* dA = dC·Bᵀ */
    out[n++] = (gemm){(int)K, (int)N, (int)M, 1, 0, (int)count};       /* dB = Aᵀ·dC */
    return n;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int64_t batch = 0;
    double seconds = 3.0;
    int list = 0, ours = 0, ndims = 0;
    pp_dim_binding dims[8];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--onnxpipe")) ours = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc && ndims < 8 && strchr(argv[i + 1], '=')) {
            char *eq = strchr(argv[++i], '=');
            *eq = '\0';
            dims[ndims++] = (pp_dim_binding){argv[i], atoll(eq + 1)};
        }
        else path = argv[i];
    }
    if (!path || batch <= 0) {
        fprintf(stderr, "usage: bench_gemm_mix MODEL.onnx --batch B [--dim NAME=N]... [--seconds S] [--list] [--onnxpipe]\n");
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
        n = add_product(gs, n, &g->values[nd->inputs[0]].shape, &g->values[nd->inputs[1]].shape, (int)ta, (int)tb);
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

    int cap = 4096, passes = 0;
    double *wall = malloc((size_t)cap * sizeof *wall), *cpu = malloc((size_t)cap * sizeof *cpu);
    if (!wall || !cpu) return 1;
    double start = pp_now();
    while (passes < cap && (passes < 5 || pp_now() - start < seconds)) {
        double t0 = pp_now(), c0 = cpu_now();
        for (int i = 0; i < n; i++) {
            const gemm *p = &gs[i];
            const int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
            for (int k = 0; k < p->count; k++)
                if (ours)
                    smat_gemm(SMAT_FULL, p->M, p->N, p->K, 1.f, (smat){A, p->ta, lda}, (smat){B, p->tb, ldb}, 0.f,
                              (smat){C, 0, p->N});
                else
                    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans,
                                p->M, p->N, p->K, 1.f, A, lda, B, ldb, 0.f, C, p->N);
        }
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
