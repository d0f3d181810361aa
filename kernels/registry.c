/* Kernel lookup by (op type, device, dtype) over the tables the kernel families define:
 * the cpu tables are built in; other backends register theirs at run time. */
#include <onnxpipe/kernels.h>

#include <string.h>

extern const pp_kernel_table pp_cpu_kernels_math;   /* elementwise, matmul, conv, pooling */
extern const pp_kernel_table pp_cpu_kernels_nn;     /* normalisation, softmax, loss, shapes */

#define MAX_TABLES 16
static const pp_kernel_table *tables[MAX_TABLES] = {&pp_cpu_kernels_math, &pp_cpu_kernels_nn};
static int ntables = 2;

pp_status pp_kernel_register_table(const pp_kernel_table *table, pp_error *err)
{
    for (int t = 0; t < ntables; t++)
        if (tables[t] == table) return PP_OK;
    if (ntables == MAX_TABLES)
        return pp_error_set(err, PP_ERR_INTERNAL, "too many kernel tables (at most %d)", MAX_TABLES);
    tables[ntables++] = table;
    return PP_OK;
}

const pp_kernel *pp_kernel_find(const char *op_type, pp_device_kind device, pp_dtype dtype)
{
    for (int t = 0; t < ntables; t++)
        for (int k = 0; k < tables[t]->count; k++) {
            const pp_kernel *kn = &tables[t]->kernels[k];
            if (kn->device == device && kn->dtype == dtype && !strcmp(kn->op_type, op_type)) return kn;
        }
    return NULL;
}

int pp_kernel_list(pp_device_kind device, const pp_kernel **out, int max)
{
    int n = 0;
    for (int t = 0; t < ntables; t++)
        for (int k = 0; k < tables[t]->count; k++)
            if (tables[t]->kernels[k].device == device) {
                if (n < max) out[n] = &tables[t]->kernels[k];
                n++;
            }
    return n;
}
