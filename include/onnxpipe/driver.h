/* The schedule driver as a trainer sees it (public tier): an opaque handle
 * (pp_trainer_driver) that runs one rank's actions of each training step on its stage(s),
 * and those stages, for a trainer that reads or feeds them (examples/bucket_trainer.c).
 * Building and stepping a driver by hand is internal (internal/onnxpipe/driver_lib.h). */
#ifndef ONNXPIPE_DRIVER_H
#define ONNXPIPE_DRIVER_H

#include <onnxpipe/core.h>
#include <onnxpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_driver pp_driver;

/* This rank's stages (for export and checkpoints), owned by d. Local. */
PP_API int pp_driver_num_stages(const pp_driver *d);
PP_API pp_stage *pp_driver_stage(pp_driver *d, int i);
PP_API int pp_driver_stage_index(const pp_driver *d, int i);    /* its virtual stage */

#ifdef __cplusplus
}
#endif
#endif
