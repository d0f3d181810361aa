/* The one block reduction of the cuda backend: warp shuffles, then one value per warp
 * through shared memory. Every row kernel (softmax, layer norm, loss, reductions, norms)
 * uses it; blockDim.x must be a multiple of 32 (launch.h pp_cu_launch_rows). */
#ifndef PP_KERNELS_CUDA_REDUCE_CUH
#define PP_KERNELS_CUDA_REDUCE_CUH

struct cu_sum {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
/* max ignoring NaN unless all are, as the cpu's nn_row_max */
struct cu_max {
    __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/* Reduces v over the block with op; every thread gets the result. identity: op's neutral
 * element. Uses (and syncs around) a 32-element shared buffer. */
template <typename T, typename Op> __device__ T cu_block_reduce(T v, Op op, T identity)
{
    __shared__ T part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();   /* part[] may still be read by a previous call */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < nwarps ? part[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* grid-stride loop over [0, n) */
#define CU_FOR(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif
