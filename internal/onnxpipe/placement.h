/* Topology-aware placement: reads each host's hardware with hwloc (packages, NUMA
 * nodes, cores, PCI GPUs and NICs), chooses the process-grid order that keeps the
 * heavier traffic (data-parallel all-reduce or pipeline sends) inside a host and under
 * one PCIe switch, and gives every rank its host, stage, replica, cores and GPU.
 * Part of comm/: plain byte counts in, nothing about graphs. */
#ifndef ONNXPIPE_PLACEMENT_H
#define ONNXPIPE_PLACEMENT_H

#include <onnxpipe/comm_lib.h>
#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- topologies --------------------------------------------------------------- */

/* An hwloc topology: pp_topology * is hwloc_topology_t, so either can be passed. */
typedef struct hwloc_topology pp_topology;
struct hwloc_bitmap_s;

/* Loads a topology with I/O discovery (HWLOC_TYPE_FILTER_KEEP_IMPORTANT: PCI GPUs,
 * NICs, bridges). xml: an hwloc XML file (lstopo --of xml); synthetic: an hwloc
 * synthetic description ("node:2 package:2 core:8 pu:1", no PCI devices); both NULL:
 * this machine. At most one may be non-NULL. Local. The caller frees it with pp_topology_destroy. */
pp_status pp_topology_load(const char *xml, const char *synthetic, pp_topology **out, pp_error *err);
void pp_topology_destroy(pp_topology *t);

#define PP_BUSID_LEN 16     /* "0000:65:00.0" and its NUL */
#define PP_CPUS_LEN 128     /* a PU list "0-7,16-23" (cut with "..." when longer) */

/* What is near a PCI device. */
typedef struct pp_pci_locality {
    char busid[PP_BUSID_LEN];   /* "dddd:bb:dd.f" */
    unsigned vendor, device;    /* PCI ids (0x10de: NVIDIA) */
    unsigned class_id;          /* PCI class (0x0302: 3D controller, 0x0207: InfiniBand) */
    int numa;                   /* OS index of the NUMA node it hangs off; -1 when not one */
    int package;                /* OS index of its package; -1 when attached above packages */
    char cpus[PP_CPUS_LEN];     /* PUs (OS indexes) of its nearest non-I/O ancestor */
    char nic[32];               /* nearest NIC: OS device name ("mlx5_0", "eth0") or bus id; "" */
} pp_pci_locality;

/* NVIDIA GPUs (vendor 0x10de, display/3D class) of a topology, in PCI bus id order
 * (CUDA's order under CUDA_DEVICE_ORDER=PCI_BUS_ID). Local. */
int pp_topology_ngpus(pp_topology *t);
/* Locality of GPU i (0 <= i < pp_topology_ngpus). Local. */
pp_status pp_topology_gpu(pp_topology *t, int i, pp_pci_locality *out, pp_error *err);
/* Locality of the PCI device with this bus id ("0000:65:00.0", or CUDA's
 * "00000000:65:00.0" from cudaDeviceGetPCIBusId); PP_ERR_INVALID_ARG when it is
 * malformed or not in the topology. Local. */
pp_status pp_topology_pci_find(pp_topology *t, const char *busid, pp_pci_locality *out, pp_error *err);

/* ---- the plan ----------------------------------------------------------------- */

/* How close two ranks are; traffic is counted per level. */
typedef enum {
    PP_LINK_SWITCH = 0,  /* GPUs under one PCIe switch (or the same GPU) */
    PP_LINK_PACKAGE,     /* same package: CPU ranks on one socket, GPUs on one root complex */
    PP_LINK_HOST,        /* same host, across packages (or locality unknown) */
    PP_LINK_NETWORK,     /* different hosts */
    PP_LINK_COUNT
} pp_link_level;
/* "switch", "package", "host", "network": a static string. Local. Thread-safe. */
const char *pp_link_level_name(pp_link_level l);

typedef enum {
    PP_PLACE_AUTO = 0,   /* ranks on GPUs on hosts that have NVIDIA GPUs, else on cores */
    PP_PLACE_CPU,        /* cores only, even where there are GPUs */
    PP_PLACE_GPU,        /* GPUs; an error on a host without any */
} pp_place_device;

typedef struct pp_placement_input {
    int pp, dp;
    const int64_t *param_bytes;     /* [pp] bytes of each stage's parameters (= gradients all-reduced) */
    const int64_t *send_bytes;      /* [pp] activation bytes stage s sends to s+1 per microbatch
                                       (the last is ignored); NULL: no pipeline traffic */
    int64_t microbatches;           /* per step */
    int nhosts;
    const int *rank_host;           /* [pp*dp] host of each world rank (launch order); NULL: equal
                                       consecutive blocks (nhosts must divide pp*dp) */
    pp_topology *const *topology;   /* [nhosts] each host's topology, borrowed (may repeat one) */
    const char *const *host_names;  /* [nhosts] for printing; NULL: "host0", "host1", ... */
    int order;                      /* -1: choose; else the pp_grid_order to use (e.g. rank 0's) */
    pp_place_device device;
} pp_placement_input;

/* Bytes moved per step, by level. Pipeline: each boundary s of each replica carries
 * send_bytes[s] x microbatches forward and the same in gradients back. Data parallel:
 * a ring all-reduce over the replicas of a stage in replica order (which visits each
 * host once: ranks of a replica grow with it in both orders); each of its dp links
 * carries 2 (dp-1)/dp x param_bytes[s]; dp = 1: none. */
typedef struct pp_traffic {
    double level[PP_LINK_COUNT];
    double intra, inter;            /* levels switch..host, and network */
    double dp_bytes, pipe_bytes;    /* the totals by kind */
} pp_traffic;

typedef struct pp_rank_place {
    int rank, host, local;          /* world rank, host index, index among its host's ranks */
    int stage, replica;
    struct hwloc_bitmap_s *cpuset;  /* PUs (OS indexes) to bind to; owned */
    char cpus[PP_CPUS_LEN];         /* the same as a list */
    int numa;                       /* OS index of the nearest NUMA node, -1 */
    int gpu;                        /* index among the host's GPUs (PCI order); -1: a CPU rank */
    char gpu_busid[PP_BUSID_LEN];   /* "" for CPU ranks; use cudaDeviceGetByPCIBusId */
    char nic[32];                   /* nearest NIC to its GPU; "" */
} pp_rank_place;

typedef struct pp_placement {
    int pp, dp, nranks, nhosts;
    pp_grid_order order;
    int order_forced;               /* 1: input.order was given */
    pp_traffic traffic[2];          /* predicted for each order (index: pp_grid_order) */
    pp_rank_place *ranks;           /* [nranks] */
    char (*host_names)[64];         /* [nhosts] */
    int oversubscribed;             /* some host has more ranks than cores (or than GPUs) */
    char warning[256];              /* "" or what was oversubscribed */
} pp_placement;

/* Chooses the order (unless forced) with the fewest network bytes, then the fewest
 * cross-package bytes, then cross-switch; ties go to PP_GRID_STAGE_MAJOR. Local rank i
 * of a GPU host gets GPU i mod ngpus and a share of the cores nearest that GPU; a CPU
 * rank gets its own cores (hwloc_distrib over cores). More ranks than cores (or GPUs)
 * is allowed: cores/GPUs are shared and p->warning says so. Errors: pp, dp < 1, bad
 * byte counts, hosts or rank_host that do not cover pp*dp ranks, --gpu on a host
 * without GPUs. Local; in's arrays are not kept. The caller frees it with pp_placement_destroy. */
pp_status pp_placement_plan(const pp_placement_input *in, pp_placement **out, pp_error *err);
void pp_placement_destroy(pp_placement *p);

/* The table (rank -> host, stage, replica, cores, GPU) and the traffic of both orders. Local. */
void pp_placement_print(const pp_placement *p, FILE *out);
void pp_placement_write_json(const pp_placement *p, pp_json *j);

/* ---- at the start of a job ------------------------------------------------------ */

#define PP_HOST_NAME_LEN 64
/* Collective over world: which ranks share memory (pp_comm_mpi_node); hosts are
 * numbered in the order of their first rank. rank_host[world->size]; names may be NULL,
 * else [world->size] entries of which the first *nhosts are filled (caller-owned arrays). */
pp_status pp_placement_hosts(pp_comm *world, int *rank_host, int *nhosts, char (*names)[PP_HOST_NAME_LEN],
                                    pp_error *err);

/* Collective over world: the plan every rank of the job agrees on. Hosts come from
 * pp_placement_hosts, every host is taken to look like `here` (this machine), and rank
 * 0's order is broadcast. in gives pp, dp, the bytes, microbatches, order and device;
 * its nhosts, rank_host, topology and host_names are ignored. Fails on every rank when
 * pp x dp is not the world size. The caller frees it with pp_placement_destroy. */
pp_status pp_placement_plan_job(pp_comm *world, const pp_placement_input *in, pp_topology *here,
                                       pp_placement **out, pp_error *err);

/* The ordinal of the device of this kind that p gave rank: 0 on the host (the cpu); else the GPU at
 * ranks[rank].gpu_busid, asked of the build's communicator backend for the kind (cuda:
 * cudaDeviceGetByPCIBusId), or the rank's index among its host's ranks when placement saw
 * no GPUs (a container may hide them from hwloc) or the build has no such backend (then
 * pp_device_create says what is missing). An error names a bus id no visible GPU has. Local. */
pp_status pp_placement_device_index(const pp_placement *p, int rank, pp_device_kind kind, int *index,
                                           pp_error *err);

typedef enum {
    PP_BIND_APPLIED = 0,  /* bound to the planned cores with hwloc_set_cpubind */
    PP_BIND_EXTERNAL,     /* already bound (mpirun --bind-to ...): left as it is */
    PP_BIND_DISABLED,     /* binding turned off (--bind-to none, PP_BIND=none): not bound */
} pp_bind_kind;

typedef struct pp_bind_result {
    pp_bind_kind kind;
    char cpus[PP_CPUS_LEN];         /* the binding in effect after the call ("0-31" when unbound) */
    char note[256];                 /* why, and any mismatch with OMPI_COMM_WORLD_LOCAL_RANK/SIZE */
} pp_bind_result;

/* Binds the calling process to p->ranks[rank].cpuset unless it is already bound to less
 * than the whole machine (mpirun binds to cores by default), or binding is off
 * (mpirun --bind-to none, i.e. OMPI_MCA_hwloc_base_binding_policy=none). PP_BIND (read
 * here): auto (default), none (never bind), force (bind to the plan's cores even then).
 * topo must be this machine's (pp_topology_load(NULL, NULL, ...)). Local. */
pp_status pp_placement_bind(const pp_placement *p, int rank, pp_topology *topo, pp_bind_result *res,
                                   pp_error *err);

#ifdef __cplusplus
}
#endif
#endif
