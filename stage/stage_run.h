/* Private to stage/: the run layer (stage_types.h says the layers). Running a placed stage,
 * the memory of its tensors, the profile of its kernel calls. It calls nothing of the
 * layers above (places, build) nor of the fusion passes. */
#ifndef PP_STAGE_RUN_H
#define PP_STAGE_RUN_H

#include "stage_types.h"

/* buffers.c: the memory of place p in slot; of tslot t's value, of its gradient (NULL where
 * it has none). */
void *stage_ptr(pp_stage *s, int slot, place p);
void *stage_tensor_data(pp_stage *s, int slot, int t);
void *stage_grad_data(pp_stage *s, int slot, int t);
/* run.c: whether backward of op reads its forward input k (the registry's saves_in, less a
 * factor kept only for the gradient of inputs that need none: pp_op_info.saves_for_other). */
int stage_op_saves_in(const pp_stage *s, const stage_op *op, int k);
/* The larger pp_kernel.work_bytes of op o's forward and backward calls (while placing:
 * the stage's device must still be there; stage_place_tensors keeps it in
 * stage_op.work_bytes). */
size_t stage_op_work_bytes(pp_stage *s, int o);
/* profile.c: a timer recorded before a kernel call (*start: its index), and after it the
 * call of op o (grad_in NULL: forward; rerun: a forward run again by recompute) with its
 * end timer, read at pp_stage_profile_flush; freeing s->prof (NULL after). */
typedef struct stage_profile stage_profile;
pp_status stage_profile_begin(pp_stage *s, int *start, pp_error *err);
pp_status stage_profile_add(pp_stage *s, int o, const pp_tensor *grad_in, int rerun, int start, pp_error *err);
void stage_profile_free(pp_stage *s);

#endif
