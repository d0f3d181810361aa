/* Launch arithmetic of the cuda kernels that read and write float32, bfloat16 and float16
 * tensors alike (io.cuh): when a call may move PP_CU_VEC elements per access (128-bit
 * loads of 16-bit tensors), the grids of the elementwise kernels over such groups, and
 * the plan of the row normalisations (LayerNormalization, RMSNormalization and their
 * residual forms, rownorm.cu). Plain C, compiled into every build and tested without a
 * GPU (tests/test_cuda_launch.c). */
#ifndef PP_KERNELS_CUDA_LAUNCH_IO_H
#define PP_KERNELS_CUDA_LAUNCH_IO_H

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per vector access: 16 bytes of a 16-bit tensor, two float4 of a float32 one. */
#define PP_CU_VEC 8

/* The elements per access of a call whose threads walk n contiguous elements (a whole
 * tensor, or rows of n) of each tensor in ptrs (NULL entries are absent tensors and
 * ignored): PP_CU_VEC when every one is 16-byte aligned and n is a multiple of PP_CU_VEC,
 * so that every group (and every row) starts on 16 bytes whatever the element size; else 1. */
int pp_cu_vec_of(int64_t n, const void *const *ptrs, int nptrs);

/* n elements in groups of vec (1 or PP_CU_VEC, vec dividing n): one group per thread,
 * grid-stride beyond PP_CU_MAX_GRID blocks (grid >= 1). */
pp_cu_launch pp_cu_launch_vec(int64_t n, int vec);

/* A row normalisation of m rows of d elements. Forward: one block per row (grid m), each
 * thread one access of vec elements at a time across the row. Backward: grid chunks of
 * rows_per_block rows, so that the parameters' gradients are summed deterministically:
 * each chunk sums its rows' dy xhat and dy per column (the thread owning the column),
 * in shared memory when 2 d floats fit in PP_CU_ROWNORM_SMEM bytes (smem), else in its
 * own slice of the workspace; its sums go to part[chunk][2][d] (part_bytes), and a last
 * kernel adds the chunks in order into dscale and dbias. */
#define PP_CU_ROWNORM_CHUNKS 1024           /* backward blocks at most */
/* the dynamic shared memory a launch has without opting in (48 KiB for static and dynamic
 * together), less 1 KiB for the kernel's static block-reduction buffers (128 bytes today):
 * d = 6144 (49,152 bytes of sums) would not launch */
#define PP_CU_ROWNORM_SMEM (48 * 1024 - 1024)
typedef struct pp_cu_rownorm {
    int vec;                    /* elements per access: 1 or PP_CU_VEC */
    unsigned block;             /* threads: d / vec rounded up to a warp, in [32, 1024] */
    unsigned grid;              /* backward: chunks (forward launches m blocks) */
    int64_t rows_per_block;     /* backward: rows of one chunk */
    size_t smem;                /* backward with parameter gradients: dynamic shared bytes (0: in part) */
    size_t part_bytes;          /* backward with parameter gradients: grid x 2 d floats */
} pp_cu_rownorm;
/* vec as pp_cu_vec_of gave for the call's row tensors; params: the call wants dscale or dbias. */
pp_cu_rownorm pp_cu_rownorm_plan(int64_t m, int64_t d, int vec, int params);

#ifdef __cplusplus
}
#endif
#endif
