/* Every backend's kernel prototypes and table slots, made from the op list
 * (include/onnxpipe/backend/op_list.h): a row's kernel column names pp_cpu_<kernel>_forward and
 * _backward in the cpu backend, pp_cu_<kernel>_... in the cuda one, and its KINDS column
 * (FB, F, G, FOLD) which of them exist. A backend declares them with
 *     #define DECL(ID, name, kernel, kinds, ...) PP_KERNEL_DECL_##kinds(pp_cpu, kernel)
 *     PP_OP_LIST(DECL)
 * and fills its table's slot of op ID with PP_KERNEL_SLOT_##kinds(pp_cpu, kernel), a
 * positional pp_kernel initializer that C and C++ both take; what a kernel adds (aux
 * memory, caps, work bytes) the backend sets beside it. */
#ifndef PP_KERNELS_KERNEL_LIST_H
#define PP_KERNELS_KERNEL_LIST_H

#include <onnxpipe/backend/kernels_backend.h>

#define PP_KERNEL_FWD(pre, k) pre##_##k##_forward
#define PP_KERNEL_BWD(pre, k) pre##_##k##_backward

#define PP_KERNEL_DECL_F(pre, k) pp_status PP_KERNEL_FWD(pre, k)(const pp_kernel_ctx *c, pp_error *err);
#define PP_KERNEL_DECL_FB(pre, k)                                                                                  \
    PP_KERNEL_DECL_F(pre, k)                                                                                       \
    pp_status PP_KERNEL_BWD(pre, k)(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in,          \
                                    pp_error *err);
#define PP_KERNEL_DECL_G(pre, k)
#define PP_KERNEL_DECL_FOLD(pre, k)

/* {aux_bytes, forward, backward, caps, work_bytes, prepare} */
#define PP_KERNEL_SLOT_FB(pre, k) {0, PP_KERNEL_FWD(pre, k), PP_KERNEL_BWD(pre, k), 0, 0, 0}
#define PP_KERNEL_SLOT_F(pre, k) {0, PP_KERNEL_FWD(pre, k), 0, 0, 0, 0}
#define PP_KERNEL_SLOT_G(pre, k) {0, 0, 0, 0, 0, 0}
#define PP_KERNEL_SLOT_FOLD(pre, k) {0, 0, 0, 0, 0, 0}

#endif
