/* numpy multidirectional broadcasting for the cpu kernels: the output index space is
 * merged into as few dims as possible and walked row by row, each input with its own
 * element strides (0 on broadcast dims), so same-shape and scalar cases are one row. */
#ifndef PP_KERNELS_CPU_BROADCAST_H
#define PP_KERNELS_CPU_BROADCAST_H

#include <onnxpipe/tensor.h>

#define PP_BCAST_MAX_IN 3

typedef struct pp_bcast {
    int nin;
    int rank;                                    /* merged rank, >= 1 */
    int64_t dims[PP_MAX_RANK];                   /* merged output dims */
    int64_t strides[PP_BCAST_MAX_IN][PP_MAX_RANK]; /* element strides per input, 0 = broadcast */
    int64_t inner;                               /* dims[rank-1]: elements per row */
    int64_t rows;                                /* product of the other dims */
    int64_t inner_stride[PP_BCAST_MAX_IN];       /* strides[i][rank-1]: 0 or 1 */
} pp_bcast;

/* Plans the walk of out's index space over nin inputs (shapes must broadcast to out's);
 * errors name `node`. */
pp_status pp_bcast_init(pp_bcast *b, const pp_tensor *out, const pp_tensor *const *in, int nin,
                        const char *node, pp_error *err);

/* Element offsets of row r's first element in each input. */
static inline void pp_bcast_row(const pp_bcast *b, int64_t r, int64_t *off)
{
    for (int i = 0; i < b->nin; i++) off[i] = 0;
    for (int d = b->rank - 2; d >= 0 && r; d--) {
        int64_t q = r / b->dims[d], idx = r - q * b->dims[d];
        r = q;
        for (int i = 0; i < b->nin; i++) off[i] += idx * b->strides[i][d];
    }
}

/* dst (shape broadcastable to src's) += scale x the sum of src over the broadcast dims: the
 * gradient of a broadcast input; assign: dst = that (its old contents are not read). */
pp_status pp_bcast_reduce_add(pp_tensor *dst, const pp_tensor *src, float scale, int assign, const char *node,
                              pp_error *err);

#endif
