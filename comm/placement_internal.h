/* Private to comm/placement.c and comm/topology.c: what the planner needs from the
 * hwloc side (GPU objects in bus order, localities, link levels, cpuset strings). */
#ifndef PP_PLACEMENT_INTERNAL_H
#define PP_PLACEMENT_INTERNAL_H

#include <onnxpipe/placement.h>

#include <hwloc.h>

/* GPU i of t (PCI bus order), or NULL when i is out of range. */
hwloc_obj_t topo_gpu_obj(pp_topology *t, int i);
/* The nearest non-I/O ancestor's facts for a PCI object. */
void topo_locality(pp_topology *t, hwloc_obj_t pci, pp_pci_locality *out);
/* Package of the first PU of a cpuset, -1 when unknown. */
int topo_cpuset_package(pp_topology *t, hwloc_const_bitmap_t set);
/* NUMA node of the first PU of a cpuset when that PU has exactly one, else -1. */
int topo_cpuset_numa(pp_topology *t, hwloc_const_bitmap_t set);
/* How close two GPUs of one host are: PP_LINK_SWITCH when they share a PCI-to-PCI
 * bridge (or are the same device), PP_LINK_PACKAGE when they hang off the same
 * package, else PP_LINK_HOST. */
pp_link_level topo_gpu_link(hwloc_obj_t a, hwloc_obj_t b);
/* "0-7,16-23"; cut with "..." when it does not fit. */
void topo_cpus_string(hwloc_const_bitmap_t set, char *buf, size_t len);

#endif
