/* Launch arithmetic of the float32 / bfloat16 / float16 kernels (launch_io.h): plain C,
 * compiled into every build, tested by tests/test_cuda_launch.c without a GPU. */
#include "launch_io.h"

#include <stdint.h>

int pp_cu_vec_of(int64_t n, const void *const *ptrs, int nptrs)
{
    if (n <= 0 || n % PP_CU_VEC) return 1;
    for (int i = 0; i < nptrs; i++)
        if (ptrs[i] && (uintptr_t)ptrs[i] % 16) return 1;
    return PP_CU_VEC;
}

pp_cu_launch pp_cu_launch_vec(int64_t n, int vec)
{
    return pp_cu_launch_1d(vec > 1 ? n / vec : n);
}

pp_cu_rownorm pp_cu_rownorm_plan(int64_t m, int64_t d, int vec, int params)
{
    pp_cu_rownorm p = {0};
    p.vec = vec > 1 && d % vec == 0 ? vec : 1;
    const int64_t per_row = d / p.vec;
    int64_t b = (per_row + 31) / 32 * 32;
    p.block = (unsigned)(b < 32 ? 32 : b > 1024 ? 1024 : b);
    const int64_t chunks = m < PP_CU_ROWNORM_CHUNKS ? (m > 0 ? m : 1) : PP_CU_ROWNORM_CHUNKS;
    p.rows_per_block = m > 0 ? (m + chunks - 1) / chunks : 1;
    p.grid = (unsigned)(m > 0 ? (m + p.rows_per_block - 1) / p.rows_per_block : 1);
    if (params) {
        const size_t sums = 2 * (size_t)d * sizeof(float);
        p.smem = sums <= PP_CU_ROWNORM_SMEM ? sums : 0;
        p.part_bytes = (size_t)p.grid * sums;
    }
    return p;
}
