/* onnxpipe: pipeline x data parallel training of ONNX models. One include for a
 * custom trainer; each module's header can also be included on its own. The map of
 * the library is DESIGN.md; examples/pipeline_trainer.c is a trainer on trainer.h, and
 * examples/custom_trainer.c one on the partition, schedule and stages underneath. */
#ifndef ONNXPIPE_H
#define ONNXPIPE_H

#include <onnxpipe/version.h>     /* ONNXPIPE_VERSION_MAJOR/MINOR/PATCH/STRING; pp_version() in core.h */
#include <onnxpipe/core.h>        /* status, errors, dtypes, logging, JSON */
#include <onnxpipe/tensor.h>      /* shapes, tensors, attributes */
#include <onnxpipe/graph.h>       /* models: load, save, accessors */
#include <onnxpipe/example.h>     /* example models (GPT, MLP) */
#include <onnxpipe/partition.h>   /* balanced pipeline partition: its stages, their nodes and tensors */
#include <onnxpipe/schedule.h>    /* pipeline schedules: kinds, actions, validate, simulate */
#include <onnxpipe/device.h>      /* cpu / cuda devices */
#include <onnxpipe/optim.h>       /* optimizer kinds and hyper-parameters */
#include <onnxpipe/stage.h>       /* the stage executor: forward, backward, step */
#include <onnxpipe/comm.h>        /* communicators (MPI, NCCL) and the process grid */
#include <onnxpipe/driver.h>      /* the driver handle: a rank's stages */
#include <onnxpipe/ckpt.h>        /* sharded checkpoints: save, resume on any layout, export */
#include <onnxpipe/trainer.h>     /* the trainer: config, create, step, eval, save, load, export */

#endif
