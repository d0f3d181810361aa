/* Sliding-window geometry shared by the cpu and cuda Conv and pooling kernels: kernel, strides,
 * dilations and pads from the ONNX attributes (auto_pad included), 1-D run as 2-D with
 * H = 1, checked against the output shape the caller allocated. */
#ifndef PP_KERNELS_WINDOW_H
#define PP_KERNELS_WINDOW_H

#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/kernels.h>

typedef struct pp_window {
    int nsp;                    /* spatial dims of the op: 1 or 2 */
    int64_t N, C;               /* batch and input channels of x */
    int64_t in[2], out[2];      /* spatial (H, W) of x and y */
    int64_t k[2], s[2], d[2];   /* kernel, stride, dilation */
    int64_t pb[2], pe[2];       /* pads at the begin / end */
} pp_window;

/* x (N, C, spatial...), y (N, M, spatial...); kernel: the spatial kernel dims (from W for
 * Conv, from kernel_shape for pools). ceil_mode: pools' output rounding. */
pp_status pp_window_make(const pp_kernel_ctx *c, const pp_tensor *x, const pp_tensor *y,
                             const int64_t *kernel, int ceil_mode, pp_window *w, pp_error *err);

#endif
