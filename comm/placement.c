/* The placement plan: gives every rank of a (pp x dp) job its host, cores and GPU,
 * predicts the bytes each grid order moves per step at each link level (switch,
 * package, host, network) and picks the order that keeps the heavier traffic close. */
#include "placement_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

typedef struct plan_ctx {
    const pp_placement_input *in;
    pp_placement *p;
    hwloc_obj_t *gpu;   /* [nranks] the rank's GPU object, NULL for CPU ranks */
    int *package;       /* [nranks] package of the rank's first PU, -1 unknown */
} plan_ctx;

const char *pp_link_level_name(pp_link_level l)
{
    static const char *names[PP_LINK_COUNT] = {"switch", "package", "host", "network"};
    return l >= 0 && l < PP_LINK_COUNT ? names[l] : "?";
}

static const char *order_name(pp_grid_order o)
{
    return o == PP_GRID_STAGE_MAJOR ? "stage-major" : "replica-major";
}

static int rank_of(pp_grid_order o, int pp, int dp, int stage, int replica)
{
    return o == PP_GRID_STAGE_MAJOR ? replica * pp + stage : stage * dp + replica;
}

static pp_status check_input(const pp_placement_input *in, pp_error *err)
{
    if (in->pp < 1 || in->dp < 1 || (int64_t)in->pp * in->dp > (1 << 20))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "pp %d x dp %d: both must be >= 1 (and at most 2^20 ranks)",
                            in->pp, in->dp);
    if (!in->param_bytes) return pp_error_set(err, PP_ERR_INVALID_ARG, "param_bytes[%d] is required", in->pp);
    for (int s = 0; s < in->pp; s++) {
        if (in->param_bytes[s] < 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d: param bytes %lld < 0", s,
                                (long long)in->param_bytes[s]);
        if (in->send_bytes && in->send_bytes[s] < 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d: send bytes %lld < 0 (unknown activation "
                                "size? bind the batch)", s, (long long)in->send_bytes[s]);
    }
    if (in->microbatches < 0)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "microbatches %lld < 0", (long long)in->microbatches);
    if (in->nhosts < 1 || !in->topology)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d hosts: need at least one, each with a topology", in->nhosts);
    for (int h = 0; h < in->nhosts; h++)
        if (!in->topology[h]) return pp_error_set(err, PP_ERR_INVALID_ARG, "host %d has no topology", h);
    if (in->order < -1 || in->order > PP_GRID_REPLICA_MAJOR)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "grid order %d out of range (-1..1)", in->order);
    int n = in->pp * in->dp;
    if (!in->rank_host && n % in->nhosts)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d ranks (pp %d x dp %d) do not split evenly over %d hosts; "
                            "use a host count that divides %d or give each rank's host", n, in->pp, in->dp,
                            in->nhosts, n);
    return PP_OK;
}

/* Fills host and local of every rank; every host must get at least one rank. */
static pp_status assign_hosts(const pp_placement_input *in, pp_placement *p, pp_error *err)
{
    int *count = calloc((size_t)p->nhosts, sizeof *count);
    if (!count) return PP_NOMEM(err);
    pp_status st = PP_OK;
    for (int r = 0; r < p->nranks; r++) {
        int h = in->rank_host ? in->rank_host[r] : r / (p->nranks / p->nhosts);
        if (h < 0 || h >= p->nhosts) {
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: host %d out of range (0..%d)", r, h, p->nhosts - 1);
            break;
        }
        p->ranks[r] = (pp_rank_place){.rank = r, .host = h, .local = count[h]++, .numa = -1, .gpu = -1};
    }
    for (int h = 0; st == PP_OK && h < p->nhosts; h++)
        if (!count[h])
            st = pp_error_set(err, PP_ERR_INVALID_ARG, "host %d ('%s') has no ranks; %d ranks on %d hosts", h,
                              p->host_names[h], p->nranks, p->nhosts);
    free(count);
    return st;
}

static void warn(pp_placement *p, const char *host, int n, int have, const char *what)
{
    size_t len = strlen(p->warning);
    p->oversubscribed = 1;
    snprintf(p->warning + len, sizeof p->warning - len, "%s%s: %d ranks share %d %s", len ? "; " : "", host, n,
             have, what);
}

/* rank's share of root's cores: hwloc_distrib of n sets down to cores, set idx. */
static pp_status share_cores(pp_topology *t, hwloc_obj_t root, int n, int idx, hwloc_bitmap_t out, pp_error *err)
{
    hwloc_bitmap_t *sets = calloc((size_t)n, sizeof *sets);
    if (!sets) return PP_NOMEM(err);
    pp_status st = PP_OK;
    int core_depth = hwloc_get_type_depth(t, HWLOC_OBJ_CORE);
    /* hwloc_distrib allocates the n sets itself */
    if (hwloc_distrib(t, &root, 1, sets, (unsigned)n, core_depth >= 0 ? core_depth : INT_MAX, 0) != 0 || !sets[idx])
        st = pp_error_set(err, PP_ERR_NOMEM, "hwloc_distrib of %d ranks failed", n);
    else hwloc_bitmap_copy(out, sets[idx]);
    for (int i = 0; i < n; i++) hwloc_bitmap_free(sets[i]);
    free(sets);
    return st;
}

/* Host h: GPUs and cores of each of its ranks. */
static pp_status place_host(plan_ctx *c, int h, pp_error *err)
{
    pp_placement *p = c->p;
    pp_topology *t = c->in->topology[h];
    int ngpus = pp_topology_ngpus(t), nlocal = 0;
    for (int r = 0; r < p->nranks; r++) nlocal += p->ranks[r].host == h;
    if (c->in->device == PP_PLACE_GPU && !ngpus)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "host %d ('%s') has no NVIDIA GPU (PCI vendor 0x10de) in its "
                            "topology; place on CPUs or give a topology with GPUs", h, p->host_names[h]);
    int use_gpu = c->in->device != PP_PLACE_CPU && ngpus > 0;
    int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    if (ncores <= 0) ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    if (use_gpu && nlocal > ngpus) warn(p, p->host_names[h], nlocal, ngpus, "GPUs");
    if (!use_gpu && nlocal > ncores) warn(p, p->host_names[h], nlocal, ncores, "cores");
    for (int r = 0; r < p->nranks; r++) {
        pp_rank_place *rp = &p->ranks[r];
        if (rp->host != h) continue;
        if (!(rp->cpuset = hwloc_bitmap_alloc())) return PP_NOMEM(err);
        hwloc_obj_t root = hwloc_get_root_obj(t);
        int n = nlocal, idx = rp->local;
        if (use_gpu) {
            pp_pci_locality loc;
            rp->gpu = rp->local % ngpus;
            c->gpu[r] = topo_gpu_obj(t, rp->gpu);
            topo_locality(t, c->gpu[r], &loc);
            snprintf(rp->gpu_busid, sizeof rp->gpu_busid, "%s", loc.busid);
            snprintf(rp->nic, sizeof rp->nic, "%s", loc.nic);
            /* the ranks whose GPUs hang off the same object split its cores */
            root = hwloc_get_non_io_ancestor_obj(t, c->gpu[r]);
            n = idx = 0;
            for (int q = 0; q < p->nranks; q++) {
                if (p->ranks[q].host != h) continue;
                hwloc_obj_t g = topo_gpu_obj(t, p->ranks[q].local % ngpus);
                if (hwloc_get_non_io_ancestor_obj(t, g) != root) continue;
                idx += q < r;
                n++;
            }
        }
        PP_CHECK(share_cores(t, root, n, idx, rp->cpuset, err));
        topo_cpus_string(rp->cpuset, rp->cpus, sizeof rp->cpus);
        rp->numa = topo_cpuset_numa(t, rp->cpuset);
        c->package[r] = topo_cpuset_package(t, rp->cpuset);
    }
    return PP_OK;
}

static pp_link_level pair_level(const plan_ctx *c, int a, int b)
{
    const pp_rank_place *ra = &c->p->ranks[a], *rb = &c->p->ranks[b];
    if (ra->host != rb->host) return PP_LINK_NETWORK;
    if (c->gpu[a] && c->gpu[b]) return topo_gpu_link(c->gpu[a], c->gpu[b]);
    return c->package[a] >= 0 && c->package[a] == c->package[b] ? PP_LINK_PACKAGE : PP_LINK_HOST;
}

static pp_traffic traffic_of(const plan_ctx *c, pp_grid_order o)
{
    const pp_placement_input *in = c->in;
    int pp = in->pp, dp = in->dp;
    pp_traffic t = {0};
    for (int r = 0; r < dp && in->send_bytes; r++)
        for (int s = 0; s + 1 < pp; s++) {
            double b = 2.0 * (double)in->send_bytes[s] * (double)in->microbatches;  /* activations + gradients */
            t.level[pair_level(c, rank_of(o, pp, dp, s, r), rank_of(o, pp, dp, s + 1, r))] += b;
            t.pipe_bytes += b;
        }
    for (int s = 0; s < pp && dp > 1; s++)
        for (int r = 0; r < dp; r++) {
            double b = 2.0 * (dp - 1) / dp * (double)in->param_bytes[s];  /* one ring link */
            t.level[pair_level(c, rank_of(o, pp, dp, s, r), rank_of(o, pp, dp, s, (r + 1) % dp))] += b;
            t.dp_bytes += b;
        }
    t.inter = t.level[PP_LINK_NETWORK];
    t.intra = t.level[PP_LINK_SWITCH] + t.level[PP_LINK_PACKAGE] + t.level[PP_LINK_HOST];
    return t;
}

/* 1 when a moves fewer bytes over the slower links than b. */
static int cheaper(const pp_traffic *a, const pp_traffic *b)
{
    for (int l = PP_LINK_NETWORK; l > PP_LINK_SWITCH; l--)
        if (a->level[l] != b->level[l]) return a->level[l] < b->level[l];
    return 0;
}

pp_status pp_placement_plan(const pp_placement_input *in, pp_placement **out, pp_error *err)
{
    *out = NULL;
    PP_CHECK(check_input(in, err));
    pp_status st = PP_OK;
    plan_ctx c = {.in = in};
    pp_placement *p = calloc(1, sizeof *p);
    if (!p) return PP_NOMEM(err);
    p->pp = in->pp;
    p->dp = in->dp;
    p->nranks = in->pp * in->dp;
    p->nhosts = in->nhosts;
    p->ranks = calloc((size_t)p->nranks, sizeof *p->ranks);
    p->host_names = calloc((size_t)p->nhosts, sizeof *p->host_names);
    c.p = p;
    c.gpu = calloc((size_t)p->nranks, sizeof *c.gpu);
    c.package = calloc((size_t)p->nranks, sizeof *c.package);
    if (!p->ranks || !p->host_names || !c.gpu || !c.package) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for %d ranks", p->nranks);
        goto fail;
    }
    for (int h = 0; h < p->nhosts; h++) {
        if (in->host_names && in->host_names[h]) snprintf(p->host_names[h], sizeof p->host_names[h], "%s", in->host_names[h]);
        else snprintf(p->host_names[h], sizeof p->host_names[h], "host%d", h);
    }
    PP_CHECK_GOTO(assign_hosts(in, p, err), st, fail);
    for (int h = 0; h < p->nhosts; h++) PP_CHECK_GOTO(place_host(&c, h, err), st, fail);
    p->traffic[PP_GRID_STAGE_MAJOR] = traffic_of(&c, PP_GRID_STAGE_MAJOR);
    p->traffic[PP_GRID_REPLICA_MAJOR] = traffic_of(&c, PP_GRID_REPLICA_MAJOR);
    p->order_forced = in->order >= 0;
    if (p->order_forced) p->order = (pp_grid_order)in->order;
    else p->order = cheaper(&p->traffic[PP_GRID_REPLICA_MAJOR], &p->traffic[PP_GRID_STAGE_MAJOR])
                        ? PP_GRID_REPLICA_MAJOR : PP_GRID_STAGE_MAJOR;
    for (int s = 0; s < p->pp; s++)
        for (int r = 0; r < p->dp; r++) {
            pp_rank_place *rp = &p->ranks[rank_of(p->order, p->pp, p->dp, s, r)];
            rp->stage = s;
            rp->replica = r;
        }
    free(c.gpu);
    free(c.package);
    *out = p;
    return PP_OK;
fail:
    free(c.gpu);
    free(c.package);
    pp_placement_destroy(p);
    return st;
}

void pp_placement_destroy(pp_placement *p)
{
    if (!p) return;
    for (int r = 0; p->ranks && r < p->nranks; r++) hwloc_bitmap_free(p->ranks[r].cpuset);
    free(p->ranks);
    free(p->host_names);
    free(p);
}

void pp_placement_print(const pp_placement *p, FILE *out)
{
    char b[PP_LINK_COUNT + 2][32];
    fprintf(out, "placement: pp %d x dp %d = %d ranks on %d host%s, order %s (%s)%s\n", p->pp, p->dp, p->nranks,
            p->nhosts, p->nhosts == 1 ? "" : "s", order_name(p->order),
            p->order == PP_GRID_STAGE_MAJOR ? "rank = replica*pp + stage" : "rank = stage*dp + replica",
            p->order_forced ? ", as asked" : "");
    fprintf(out, "%5s  %-16s %5s %5s %7s  %-24s %4s  %s\n", "rank", "host", "local", "stage", "replica", "cores",
            "numa", "gpu");
    for (int r = 0; r < p->nranks; r++) {
        const pp_rank_place *rp = &p->ranks[r];
        fprintf(out, "%5d  %-16s %5d %5d %7d  %-24s %4d  ", r, p->host_names[rp->host], rp->local, rp->stage,
                rp->replica, rp->cpus, rp->numa);
        if (rp->gpu < 0) fprintf(out, "-\n");
        else fprintf(out, "%d %s%s%s%s\n", rp->gpu, rp->gpu_busid, rp->nic[0] ? " (nic " : "", rp->nic,
                     rp->nic[0] ? ")" : "");
    }
    fprintf(out, "\npredicted bytes per step  %10s %10s %10s %10s | %10s %10s\n", "switch", "package", "host",
            "network", "intra", "inter");
    for (int o = 0; o < 2; o++) {
        const pp_traffic *t = &p->traffic[o];
        for (int l = 0; l < PP_LINK_COUNT; l++) pp_format_bytes(t->level[l], b[l], sizeof b[l]);
        pp_format_bytes(t->intra, b[PP_LINK_COUNT], sizeof b[0]);
        pp_format_bytes(t->inter, b[PP_LINK_COUNT + 1], sizeof b[0]);
        fprintf(out, "  %-13s%-10s  %10s %10s %10s %10s | %10s %10s\n", order_name((pp_grid_order)o),
                o == (int)p->order ? " (chosen)" : "", b[0], b[1], b[2], b[3], b[4], b[5]);
    }
    const pp_traffic *t = &p->traffic[p->order];
    fprintf(out, "  of which data-parallel all-reduce %s, pipeline sends %s\n",
            pp_format_bytes(t->dp_bytes, b[0], sizeof b[0]), pp_format_bytes(t->pipe_bytes, b[1], sizeof b[1]));
    if (p->warning[0]) fprintf(out, "warning: oversubscribed: %s\n", p->warning);
}

static void write_traffic(pp_json *j, const char *key, const pp_traffic *t)
{
    pp_json_begin_object(j, key);
    for (int l = 0; l < PP_LINK_COUNT; l++) pp_json_double(j, pp_link_level_name((pp_link_level)l), t->level[l]);
    pp_json_double(j, "intra", t->intra);
    pp_json_double(j, "inter", t->inter);
    pp_json_double(j, "dp_bytes", t->dp_bytes);
    pp_json_double(j, "pipe_bytes", t->pipe_bytes);
    pp_json_end_object(j);
}

void pp_placement_write_json(const pp_placement *p, pp_json *j)
{
    pp_json_begin_object(j, NULL);
    pp_json_int(j, "pp", p->pp);
    pp_json_int(j, "dp", p->dp);
    pp_json_int(j, "nranks", p->nranks);
    pp_json_string(j, "order", order_name(p->order));
    pp_json_bool(j, "order_forced", p->order_forced);
    pp_json_begin_array(j, "hosts");
    for (int h = 0; h < p->nhosts; h++) pp_json_string(j, NULL, p->host_names[h]);
    pp_json_end_array(j);
    pp_json_begin_array(j, "ranks");
    for (int r = 0; r < p->nranks; r++) {
        const pp_rank_place *rp = &p->ranks[r];
        pp_json_begin_object(j, NULL);
        pp_json_int(j, "rank", r);
        pp_json_int(j, "host", rp->host);
        pp_json_int(j, "local", rp->local);
        pp_json_int(j, "stage", rp->stage);
        pp_json_int(j, "replica", rp->replica);
        pp_json_string(j, "cpus", rp->cpus);
        pp_json_int(j, "numa", rp->numa);
        pp_json_int(j, "gpu", rp->gpu);
        if (rp->gpu >= 0) pp_json_string(j, "gpu_busid", rp->gpu_busid);
        else pp_json_null(j, "gpu_busid");
        pp_json_string(j, "nic", rp->nic);
        pp_json_end_object(j);
    }
    pp_json_end_array(j);
    pp_json_begin_object(j, "traffic");
    write_traffic(j, "stage-major", &p->traffic[PP_GRID_STAGE_MAJOR]);
    write_traffic(j, "replica-major", &p->traffic[PP_GRID_REPLICA_MAJOR]);
    pp_json_end_object(j);
    pp_json_bool(j, "oversubscribed", p->oversubscribed);
    pp_json_string(j, "warning", p->warning);
    pp_json_end_object(j);
}
