/* Helpers of the cpu "nn" kernels: element counts and the strided N-d copy / accumulate
 * loops (see nn_util.h). */
#include "nn_util.h"

#include <string.h>

pp_status nn_same_numel(const pp_kernel_ctx *c, const pp_tensor *a, const pp_tensor *b, pp_error *err)
{
    if (pp_tensor_numel(a) != pp_tensor_numel(b) || pp_dtype_size(a->dtype) != pp_dtype_size(b->dtype))
        return pp_args_fail(c, PP_ERR_SHAPE, err, "input has %lld elements of %s, output %lld of %s",
                       (long long)pp_tensor_numel(a), pp_dtype_name(a->dtype), (long long)pp_tensor_numel(b),
                       pp_dtype_name(b->dtype));
    return PP_OK;
}

int64_t nn_prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

void nn_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* The N-d loop over two operands a (dst) and b (src), in elements, after merging:
 * outer dims d[0..r-2) walked by a counter, and a 2-D block d[r-2] x d[r-1] done by the
 * caller's inner loops. When the innermost dim is strided in one operand (a transpose),
 * a dim that is unit-stride there moves next to it, so that the block can be tiled. */
typedef struct walk {
    int r;                                      /* >= 2; 0 when there are no elements */
    int64_t d[PP_MAX_RANK + 1], a[PP_MAX_RANK + 1], b[PP_MAX_RANK + 1];
} walk;

static void walk_plan(int rank, const int64_t *dims, const int64_t *a_st, const int64_t *b_st, walk *w)
{
    int r = 1;                                  /* slot 0: a leading dim of 1 */
    w->d[0] = 1;
    w->a[0] = w->b[0] = 0;
    for (int k = 0; k < rank; k++) {
        if (dims[k] == 0) {
            w->r = 0;
            return;
        }
        if (dims[k] == 1) continue;
        if (r > 1 && w->a[r - 1] == a_st[k] * dims[k] && w->b[r - 1] == b_st[k] * dims[k]) {
            w->d[r - 1] *= dims[k];
            w->a[r - 1] = a_st[k];
            w->b[r - 1] = b_st[k];
            continue;
        }
        w->d[r] = dims[k];
        w->a[r] = a_st[k];
        w->b[r] = b_st[k];
        r++;
    }
    if (r == 1) {
        w->d[1] = 1;
        w->a[1] = w->b[1] = 0;
        r = 2;
    }
    w->r = r;
    const int in = r - 1;
    if (w->a[in] == 0 || w->b[in] == 0 || (w->a[in] == 1) == (w->b[in] == 1)) return;
    for (int k = in - 1; k >= 0; k--)
        if (w->d[k] > 1 && (w->a[k] == 1 || w->b[k] == 1)) {
            int64_t t;
            t = w->d[k], w->d[k] = w->d[in - 1], w->d[in - 1] = t;
            t = w->a[k], w->a[k] = w->a[in - 1], w->a[in - 1] = t;
            t = w->b[k], w->b[k] = w->b[in - 1], w->b[in - 1] = t;
            return;
        }
}

/* Steps the counter idx over the outer dims d[0..r-2) and moves both offsets with it. */
static void walk_next(const walk *w, int64_t *idx, int64_t *ao, int64_t *bo)
{
    for (int k = w->r - 3; k >= 0; k--) {
        idx[k]++;
        *ao += w->a[k];
        *bo += w->b[k];
        if (idx[k] < w->d[k]) return;
        *ao -= w->a[k] * w->d[k];
        *bo -= w->b[k] * w->d[k];
        idx[k] = 0;
    }
}

#define TILE 32

void nn_copy_strided(void *dst, const int64_t *dst_st, const void *src, const int64_t *src_st,
                     const int64_t *dims, int rank, size_t esize)
{
    walk w;
    walk_plan(rank, dims, dst_st, src_st, &w);
    if (!w.r) return;
    const int r = w.r;
    const int64_t m = w.d[r - 2], n = w.d[r - 1], a1 = w.a[r - 2], an = w.a[r - 1], b1 = w.b[r - 2],
                  bn = w.b[r - 1], outer = nn_prod(w.d, 0, r - 2), es = (int64_t)esize;
    int64_t idx[PP_MAX_RANK + 1] = {0}, ao = 0, bo = 0;
    char *D = dst;
    const char *S = src;
    for (int64_t o = 0; o < outer; o++, walk_next(&w, idx, &ao, &bo)) {
        if (an == 1 && bn == 1) {
            for (int64_t i = 0; i < m; i++) memcpy(D + (ao + i * a1) * es, S + (bo + i * b1) * es, (size_t)(n * es));
        } else if (esize == 4) {        /* tiled so that both sides stay in cache */
            float *y = (float *)D + ao;
            const float *x = (const float *)S + bo;
            for (int64_t i0 = 0; i0 < m; i0 += TILE)
                for (int64_t j0 = 0; j0 < n; j0 += TILE)
                    for (int64_t i = i0; i < i0 + TILE && i < m; i++)
                        for (int64_t j = j0; j < j0 + TILE && j < n; j++) y[i * a1 + j * an] = x[i * b1 + j * bn];
        } else {
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    memcpy(D + (ao + i * a1 + j * an) * es, S + (bo + i * b1 + j * bn) * es, esize);
        }
    }
}

void nn_add_strided(float *dst, const int64_t *dst_st, const float *src, const int64_t *src_st,
                    const int64_t *dims, int rank, float alpha)
{
    walk w;
    walk_plan(rank, dims, dst_st, src_st, &w);
    if (!w.r) return;
    const int r = w.r;
    const int64_t m = w.d[r - 2], n = w.d[r - 1], a1 = w.a[r - 2], an = w.a[r - 1], b1 = w.b[r - 2],
                  bn = w.b[r - 1], outer = nn_prod(w.d, 0, r - 2);
    int64_t idx[PP_MAX_RANK + 1] = {0}, ao = 0, bo = 0;
    for (int64_t o = 0; o < outer; o++, walk_next(&w, idx, &ao, &bo)) {
        float *y = dst + ao;
        const float *x = src + bo;
        if (an != 0 && bn != 0 && !(an == 1 && bn == 1) && (a1 == 1 || b1 == 1)) {   /* transposed */
            for (int64_t i0 = 0; i0 < m; i0 += TILE)
                for (int64_t j0 = 0; j0 < n; j0 += TILE)
                    for (int64_t i = i0; i < i0 + TILE && i < m; i++)
                        for (int64_t j = j0; j < j0 + TILE && j < n; j++) y[i * a1 + j * an] += alpha * x[i * b1 + j * bn];
            continue;
        }
        for (int64_t i = 0; i < m; i++) {
            float *yi = y + i * a1;
            const float *xi = x + i * b1;
            if (an == 0) {              /* a row summed into one element */
                float s = 0;
                for (int64_t j = 0; j < n; j++) s += xi[j * bn];
                yi[0] += alpha * s;
            } else if (an == 1 && bn == 1) {
                for (int64_t j = 0; j < n; j++) yi[j] += alpha * xi[j];
            } else if (an == 1 && bn == 0) {
                const float v = alpha * xi[0];
                for (int64_t j = 0; j < n; j++) yi[j] += v;
            } else {
                for (int64_t j = 0; j < n; j++) yi[j * an] += alpha * xi[j * bn];
            }
        }
    }
}

void nn_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void nn_fill_output(const pp_tensor *y, const void *src, const int64_t *src_st, size_t esize)
{
    int64_t y_st[PP_MAX_RANK];
    nn_strides(y->rank, y->dims, y_st);
    nn_copy_strided(y->data, y_st, src, src_st, y->dims, y->rank, esize);
}
