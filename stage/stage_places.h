/* Private to stage/: the places layer (stage_types.h says the layers). Placing a stage: its
 * ops and tensors collected, fused (stage_fuse.h), the loss found or built, 16-bit storage,
 * gradients, parameter uses, recompute, and every tensor's place in memory. It may call the
 * fusion passes and the run layer (what a kernel call needs), never the build above. */
#ifndef PP_STAGE_PLACES_H
#define PP_STAGE_PLACES_H

#include "stage_fuse.h"
#include "stage_run.h"

/* places.c: every tensor's place (ops collected, fused, the loss, precision, gradients,
 * uses, memory). */
pp_status stage_place_tensors(pp_stage *s, pp_error *err);
/* tslots.c: the tslot of graph value v, created on first use; a port (input 1: an input,
 * else an output) over tslot t. */
pp_status stage_tslot_of(pp_stage *s, int v, pp_error *err, int *out);
pp_status stage_add_port(pp_stage *s, int input, int t, int is_data, pp_error *err);
/* loss.c: the last stage's loss found or built, its default seed (after stage_fuse). */
pp_status stage_place_loss(pp_stage *s, pp_error *err);
/* precision.c: under --precision bf16/fp16, the storage dtype of every float tensor,
 * the 16-bit copies of parameters that matrix products read, the casts that round their
 * other fp32 operands, and each op's kernel for the dtypes it sees (after stage_place_loss,
 * before place_grads). */
pp_status stage_place_precision(pp_stage *s, pp_error *err);
/* uses.c: every parameter's uses, and the buffers of the later ones (after place_persistent). */
pp_status stage_place_uses(pp_stage *s, pp_error *err);
/* recompute.c. in_slot[t] (base tslots) comes in as KEEP_BW | KEEP_LIVE bits; for
 * tensors backward reads that the slot will not keep it becomes KEEP_ARENA (and the ops
 * that make them, transitively, are marked rerun: run.c re-runs them before a backward). */
enum { KEEP_BW = 1, KEEP_LIVE = 2, KEEP_ARENA = 4 };
pp_status stage_place_recompute(pp_stage *s, char *in_slot, pp_error *err);
/* memplan.c: assigns offsets so that buffers whose [start, end] intervals overlap do not
 * overlap in memory; returns the arena size. offsets[i] out; sizes in bytes. */
typedef struct mem_interval {
    size_t size;
    int start, end;
    size_t offset;
} mem_interval;
size_t stage_memplan(mem_interval *iv, int n);

#endif
