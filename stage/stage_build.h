/* Private to stage/: the build layer, the top of stage/'s (stage_types.h says the layers).
 * Creating and destroying a stage over its placing (stage_places.h), the buffers stages of
 * one group of shapes share, and the memory profile of a whole graph placed as one stage. */
#ifndef PP_STAGE_BUILD_H
#define PP_STAGE_BUILD_H

#include "stage_places.h"

/* stage.c: all of g placed as its last stage on a device of this kind, nothing allocated
 * (what the memory profile reads) */
pp_status stage_place_whole(const pp_graph *g, pp_device_kind kind, const pp_stage_options *opt, pp_stage **out,
                            pp_error *err);
/* share.c: the check that s's parameter layout is that of s->opt.share; the buffer of
 * that stage s uses for `which` (one of SHARE_*) when it has one of at least need bytes,
 * else NULL; whether s allocated p itself (it frees only those). */
enum { SHARE_PARAMS, SHARE_GRADS, SHARE_OPTIM, SHARE_PARAM16, SHARE_STASH, SHARE_FWD, SHARE_BWD, SHARE_RECOMP };
pp_status stage_check_share(const pp_stage *s, pp_error *err);
void *stage_shared_buffer(const pp_stage *s, int which, size_t need);
int stage_owns(const pp_stage *s, const void *p);

#endif
