/* Placement at the start of a job: which world ranks share a host (MPI shared-memory
 * split), the device ordinal of a rank's GPU, and binding the calling rank to its planned
 * cores, without fighting a binding that mpirun already made. */
#include "comm_internal.h"
#include "placement_internal.h"

#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/env.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

pp_status pp_placement_hosts(pp_comm *world, int *rank_host, int *nhosts, char (*names)[PP_HOST_NAME_LEN],
                             pp_error *err)
{
    pp_comm *node = NULL;
    int *leader = NULL;
    char(*all)[PP_HOST_NAME_LEN] = NULL;
    pp_status st = PP_OK;
    int mine = world->rank;
    PP_CHECK_GOTO(pp_comm_mpi_node(world, &node, err), st, done);
    /* a host is known by the world rank of its node communicator's rank 0 */
    PP_CHECK_GOTO(pp_comm_broadcast(node, &mine, sizeof mine, 0, err), st, done);
    leader = malloc((size_t)world->size * sizeof *leader);
    all = calloc((size_t)world->size, sizeof *all);
    if (!leader || !all) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for %d ranks", world->size);
        goto done;
    }
    PP_CHECK_GOTO(pp_comm_allgather(world, &mine, leader, sizeof mine, err), st, done);
    char me[PP_HOST_NAME_LEN] = {0};
    snprintf(me, sizeof me, "%s", pp_comm_mpi_host());
    PP_CHECK_GOTO(pp_comm_allgather(world, me, all, sizeof me, err), st, done);
    *nhosts = 0;
    for (int r = 0; r < world->size; r++) {
        int h = -1;
        for (int q = 0; q < r && h < 0; q++)
            if (leader[q] == leader[r]) h = rank_host[q];
        if (h < 0) {
            h = (*nhosts)++;
            if (names) memcpy(names[h], all[r], PP_HOST_NAME_LEN);
        }
        rank_host[r] = h;
    }
done:
    free(leader);
    free(all);
    pp_comm_destroy(node);
    return st;
}

pp_status pp_placement_plan_job(pp_comm *world, const pp_placement_input *in, pp_topology *here, pp_placement **out,
                                pp_error *err)
{
    *out = NULL;
    if (in->pp * in->dp != world->size)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "--pp %d x --dp %d = %d ranks, but the job has %d; launch with "
                            "mpirun -np %d", in->pp, in->dp, in->pp * in->dp, world->size, in->pp * in->dp);
    int *rank_host = malloc((size_t)world->size * sizeof *rank_host), nhosts = 0;
    char(*names)[PP_HOST_NAME_LEN] = calloc((size_t)world->size, sizeof *names);
    pp_topology **topo = malloc((size_t)world->size * sizeof *topo);
    const char **name_ptr = malloc((size_t)world->size * sizeof *name_ptr);
    pp_status st = PP_OK;
    if (!rank_host || !names || !topo || !name_ptr) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory for %d ranks", world->size);
        goto done;
    }
    PP_CHECK_GOTO(pp_placement_hosts(world, rank_host, &nhosts, names, err), st, done);
    for (int h = 0; h < nhosts; h++) topo[h] = here, name_ptr[h] = names[h];
    pp_placement_input job = *in;
    job.nhosts = nhosts;
    job.rank_host = rank_host;
    job.topology = topo;
    job.host_names = name_ptr;
    PP_CHECK_GOTO(pp_placement_plan(&job, out, err), st, done);
    /* hosts that differ could choose differently: rank 0's choice holds */
    int order = (int)(*out)->order;
    PP_CHECK_GOTO(pp_comm_broadcast(world, &order, sizeof order, 0, err), st, done);
    if (order != (int)(*out)->order) {
        pp_placement_destroy(*out);
        *out = NULL;
        job.order = order;
        PP_CHECK_GOTO(pp_placement_plan(&job, out, err), st, done);
        (*out)->order_forced = in->order >= 0;
    }
done:
    free(rank_host);
    free(names);
    free(topo);
    free(name_ptr);
    return st;
}

pp_status pp_placement_device_index(const pp_placement *p, int rank, pp_device_kind kind, int *index,
                                    pp_error *err)
{
    if (!p || rank < 0 || rank >= p->nranks)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d out of range (0..%d)", rank, p ? p->nranks - 1 : -1);
    const pp_rank_place *r = &p->ranks[rank];
    const pp_comm_backend *b = comm_backend_for(kind);
    if (pp_device_kind_caps(kind) & PP_DEVICE_CAP_HOST_MEMORY) {   /* the host is one device */
        *index = 0;
        return PP_OK;
    }
    *index = r->local;
    if (!r->gpu_busid[0] || !b || !b->device_at_busid) return PP_OK;
    return b->device_at_busid(r->gpu_busid, index, err);
}

pp_status pp_placement_bind(const pp_placement *p, int rank, pp_topology *topo, pp_bind_result *res, pp_error *err)
{
    memset(res, 0, sizeof *res);
    if (rank < 0 || rank >= p->nranks)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d out of range (0..%d)", rank, p->nranks - 1);
    if (!hwloc_topology_is_thissystem(topo))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d: cannot bind with an XML or synthetic topology; "
                            "load this machine's (pp_topology_load(NULL, NULL))", rank);
    const pp_rank_place *rp = &p->ranks[rank];
    size_t len = 0;
    /* mpirun tells each process its index on the host; a different one means the plan's hosts are wrong */
    const char *lr = pp_env_get("OMPI_COMM_WORLD_LOCAL_RANK"), *ls = pp_env_get("OMPI_COMM_WORLD_LOCAL_SIZE");
    int nlocal = 0;
    for (int r = 0; r < p->nranks; r++) nlocal += p->ranks[r].host == rp->host;
    if ((lr && atoi(lr) != rp->local) || (ls && atoi(ls) != nlocal))
        len += (size_t)snprintf(res->note, sizeof res->note, "mpirun's local rank %s of %s differs from the plan's "
                                "%d of %d; ", lr ? lr : "?", ls ? ls : "?", rp->local, nlocal);
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    if (!cur) return PP_NOMEM(err);
    pp_status st = PP_OK;
    if (hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS) != 0) {
        st = pp_error_set(err, PP_ERR_IO, "rank %d: hwloc_get_cpubind failed (%s)", rank, strerror(errno));
        goto done;
    }
    const char *mode = pp_env_get("PP_BIND");
    if (mode && strcmp(mode, "auto") && strcmp(mode, "none") && strcmp(mode, "force")) {
        st = pp_error_set(err, PP_ERR_INVALID_ARG, "PP_BIND='%s': expected auto, none or force", mode);
        goto done;
    }
    int force = pp_env_is("PP_BIND", "force");
    if (!force && (pp_env_is("PP_BIND", "none") || pp_env_is("OMPI_MCA_hwloc_base_binding_policy", "none"))) {
        res->kind = PP_BIND_DISABLED;
        snprintf(res->note + len, sizeof res->note - len, "binding off (%s=none)",
                 pp_env_is("PP_BIND", "none") ? "PP_BIND" : "OMPI_MCA_hwloc_base_binding_policy");
    } else if (!force && !hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(topo), cur)) {
        res->kind = PP_BIND_EXTERNAL;
        snprintf(res->note + len, sizeof res->note - len, "already bound (mpirun --bind-to); planned cores %s "
                 "not applied (PP_BIND=force applies them)", rp->cpus);
    } else if (hwloc_set_cpubind(topo, rp->cpuset, HWLOC_CPUBIND_PROCESS) != 0) {
        st = pp_error_set(err, PP_ERR_IO, "rank %d: hwloc_set_cpubind to cores %s failed (%s); set PP_BIND=none "
                          "to run unbound", rank, rp->cpus, strerror(errno));
        goto done;
    } else {
        res->kind = PP_BIND_APPLIED;
        snprintf(res->note + len, sizeof res->note - len, "bound to planned cores %s", rp->cpus);
        hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS);
    }
    topo_cpus_string(cur, res->cpus, sizeof res->cpus);
done:
    hwloc_bitmap_free(cur);
    return st;
}
