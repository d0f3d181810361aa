/* hwloc topologies with I/O: loading (this machine, XML, synthetic), NVIDIA GPUs as
 * PCI devices in bus order (Debian's hwloc has no CUDA/NVML plugin), what is near a
 * PCI device (cores, NUMA node, NIC) and how close two GPUs are (PCIe switch ancestry). */
#include "placement_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 256
#define PCI_VENDOR_NVIDIA 0x10de

pp_status pp_topology_load(const char *xml, const char *synthetic, pp_topology **out, pp_error *err)
{
    *out = NULL;
    if (xml && synthetic) return pp_error_set(err, PP_ERR_INVALID_ARG, "give an XML topology or a synthetic one, not both");
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return pp_error_set(err, PP_ERR_NOMEM, "hwloc_topology_init failed");
    if (xml && hwloc_topology_set_xml(t, xml) != 0) {
        hwloc_topology_destroy(t);
        return pp_error_set(err, PP_ERR_IO, "cannot use hwloc XML topology '%s' (%s); write one with "
                            "'lstopo --of xml FILE'", xml, strerror(errno));
    }
    if (synthetic && hwloc_topology_set_synthetic(t, synthetic) != 0) {
        hwloc_topology_destroy(t);
        return pp_error_set(err, PP_ERR_INVALID_ARG, "bad synthetic topology '%s': expected hwloc's syntax, "
                            "levels 'type:count' from the top down to pu, e.g. \"node:2 package:2 core:8 pu:1\"", synthetic);
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return pp_error_set(err, xml ? PP_ERR_PARSE : PP_ERR_IO, "hwloc cannot load the topology%s%s%s (%s)",
                            xml ? " '" : "", xml ? xml : "", xml ? "'" : "", strerror(errno));
    }
    *out = t;
    return PP_OK;
}

void pp_topology_destroy(pp_topology *t)
{
    if (t) hwloc_topology_destroy(t);
}

static int is_gpu(hwloc_obj_t o)
{
    return o->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA && (o->attr->pcidev.class_id >> 8) == 0x03;
}

static unsigned long long bus_key(hwloc_obj_t o)
{
    const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
    return ((unsigned long long)a->domain << 24) | ((unsigned)a->bus << 16) | ((unsigned)a->dev << 8) | a->func;
}

static int by_bus(const void *x, const void *y)
{
    unsigned long long a = bus_key(*(const hwloc_obj_t *)x), b = bus_key(*(const hwloc_obj_t *)y);
    return (a > b) - (a < b);
}

/* gpus[MAX_GPUS] sorted by bus id; returns how many. */
static int list_gpus(pp_topology *t, hwloc_obj_t *gpus)
{
    int n = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o && n < MAX_GPUS; o = hwloc_get_next_pcidev(t, o))
        if (is_gpu(o)) gpus[n++] = o;
    qsort(gpus, (size_t)n, sizeof *gpus, by_bus);
    return n;
}

int pp_topology_ngpus(pp_topology *t)
{
    hwloc_obj_t gpus[MAX_GPUS];
    return list_gpus(t, gpus);
}

hwloc_obj_t topo_gpu_obj(pp_topology *t, int i)
{
    hwloc_obj_t gpus[MAX_GPUS];
    int n = list_gpus(t, gpus);
    return i >= 0 && i < n ? gpus[i] : NULL;
}

pp_status pp_topology_gpu(pp_topology *t, int i, pp_pci_locality *out, pp_error *err)
{
    hwloc_obj_t o = topo_gpu_obj(t, i);
    if (!o) return pp_error_set(err, PP_ERR_INVALID_ARG, "GPU %d out of range (0..%d)", i, pp_topology_ngpus(t) - 1);
    topo_locality(t, o, out);
    return PP_OK;
}

pp_status pp_topology_pci_find(pp_topology *t, const char *busid, pp_pci_locality *out, pp_error *err)
{
    unsigned dom, bus, dev, func;
    char tail;
    if (!busid || sscanf(busid, "%x:%x:%x.%x%c", &dom, &bus, &dev, &func, &tail) != 4 || bus > 0xff ||
        dev > 0x1f || func > 7)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "bad PCI bus id '%s': expected domain:bus:device.function "
                            "in hex, e.g. 0000:65:00.0", busid ? busid : "(null)");
    hwloc_obj_t o = hwloc_get_pcidev_by_busid(t, dom, bus, dev, func);
    if (!o)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "no PCI device %04x:%02x:%02x.%x in the topology (I/O "
                            "discovery sees %d NVIDIA GPUs); is it this machine's?", dom, bus, dev, func,
                            pp_topology_ngpus(t));
    topo_locality(t, o, out);
    return PP_OK;
}

/* OS index of the package holding obj (obj itself or an ancestor), -1 when none does. */
static int topo_package(hwloc_obj_t obj)
{
    for (; obj; obj = obj->parent)
        if (obj->type == HWLOC_OBJ_PACKAGE) return (int)obj->os_index;
    return -1;
}

static hwloc_obj_t first_pu(pp_topology *t, hwloc_const_bitmap_t set)
{
    int i = hwloc_bitmap_first(set);
    return i < 0 ? NULL : hwloc_get_pu_obj_by_os_index(t, (unsigned)i);
}

int topo_cpuset_package(pp_topology *t, hwloc_const_bitmap_t set)
{
    hwloc_obj_t pu = first_pu(t, set);
    return pu ? topo_package(pu) : -1;
}

static int single_numa(hwloc_const_bitmap_t nodeset)
{
    return nodeset && hwloc_bitmap_weight(nodeset) == 1 ? hwloc_bitmap_first(nodeset) : -1;
}

int topo_cpuset_numa(pp_topology *t, hwloc_const_bitmap_t set)
{
    hwloc_obj_t pu = first_pu(t, set);
    return pu ? single_numa(pu->nodeset) : -1;
}

/* Depth of the deepest common ancestor of a and b (larger: closer). */
static int common_depth(hwloc_obj_t a, hwloc_obj_t b)
{
    int d = 0;
    for (hwloc_obj_t o = a; o; o = o->parent) {
        int found = 0;
        for (hwloc_obj_t p = b; p && !found; p = p->parent) found = p == o;
        if (found) return 1000 - d;
        d++;
    }
    return 0;
}

/* The NIC (network class 0x02) nearest to obj: its OS device name, else its bus id. */
static void nearest_nic(pp_topology *t, hwloc_obj_t obj, char *buf, size_t len)
{
    hwloc_obj_t best = NULL;
    int best_depth = -1;
    buf[0] = '\0';
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o; o = hwloc_get_next_pcidev(t, o)) {
        if ((o->attr->pcidev.class_id >> 8) != 0x02) continue;
        int d = common_depth(obj, o);
        if (d > best_depth) best = o, best_depth = d;
    }
    if (!best) return;
    for (hwloc_obj_t c = best->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) {
            snprintf(buf, len, "%s", c->name);
            return;
        }
    const struct hwloc_pcidev_attr_s *a = &best->attr->pcidev;
    snprintf(buf, len, "%04x:%02x:%02x.%x", a->domain, a->bus, a->dev, a->func);
}

void topo_locality(pp_topology *t, hwloc_obj_t pci, pp_pci_locality *out)
{
    const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, pci);
    memset(out, 0, sizeof *out);
    snprintf(out->busid, sizeof out->busid, "%04x:%02x:%02x.%x", a->domain, a->bus, a->dev, a->func);
    out->vendor = a->vendor_id;
    out->device = a->device_id;
    out->class_id = a->class_id;
    out->numa = single_numa(anc->nodeset);
    out->package = topo_package(anc);
    topo_cpus_string(anc->cpuset, out->cpus, sizeof out->cpus);
    nearest_nic(t, pci, out->nic, sizeof out->nic);
}

pp_link_level topo_gpu_link(hwloc_obj_t a, hwloc_obj_t b)
{
    if (a == b) return PP_LINK_SWITCH;
    hwloc_obj_t anc = NULL;
    for (hwloc_obj_t o = a; o && !anc; o = o->parent)
        for (hwloc_obj_t p = b; p && !anc; p = p->parent)
            if (p == o) anc = o;
    /* a PCI-to-PCI bridge above both: the traffic turns around in the switch */
    if (anc && anc->type == HWLOC_OBJ_BRIDGE && anc->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
        return PP_LINK_SWITCH;
    int pa = topo_package(a), pb = topo_package(b);
    return pa >= 0 && pa == pb ? PP_LINK_PACKAGE : PP_LINK_HOST;
}

void topo_cpus_string(hwloc_const_bitmap_t set, char *buf, size_t len)
{
    int n = hwloc_bitmap_list_snprintf(buf, len, set);
    if (n >= (int)len && len > 4) strcpy(buf + len - 4, "...");
}
