/* Topology-aware placement on hwloc synthetic topologies and a hand-written XML machine
 * (2 packages, 4 NVIDIA GPUs under two PCIe switches, 2 NICs): traffic of both grid
 * orders against a brute force over rank pairs and hand computations, the order flip,
 * disjoint and GPU-near cpusets, PCI bus id lookup, JSON, binding, hosts, errors. */
#include <onnxpipe/backend/device_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/placement.h>

#include <pp_backends.h>

#include <hwloc.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static pp_topology *load(const char *xml, const char *synthetic)
{
    pp_topology *t = NULL;
    pp_error err = {0};
    pp_status st = pp_topology_load(xml, synthetic, &t, &err);
    if (st != PP_OK) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, PP_OK);
    return t;
}

static pp_topology *load_xml_machine(void)
{
    const char *src = getenv("SRC_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/topo_2s4gpu.xml", src ? src : "..");
    return load(path, NULL);
}

/* A plan with nhosts copies of t, ranks in equal blocks. */
static pp_placement *plan(pp_topology *t, int nhosts, int pp, int dp, const int64_t *params, const int64_t *sends,
                          int64_t m)
{
    pp_topology *topo[16];
    for (int h = 0; h < nhosts; h++) topo[h] = t;
    pp_placement_input in = {.pp = pp, .dp = dp, .param_bytes = params, .send_bytes = sends, .microbatches = m,
                             .nhosts = nhosts, .topology = topo, .order = -1};
    pp_placement *p = NULL;
    pp_error err = {0};
    pp_status st = pp_placement_plan(&in, &p, &err);
    if (st != PP_OK) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, PP_OK);
    return p;
}

/* Network bytes of an order, from nothing but the block layout of ranks on hosts:
 * every (sender, receiver) pair of the pipeline and of the ring, one by one. */
static double brute_network(int order, int nhosts, int pp, int dp, const int64_t *params, const int64_t *sends,
                            int64_t m)
{
    int per_host = pp * dp / nhosts;
    double bytes = 0;
    for (int rank = 0; rank < pp * dp; rank++) {
        int s = order == PP_GRID_STAGE_MAJOR ? rank % pp : rank / dp;
        int r = order == PP_GRID_STAGE_MAJOR ? rank / pp : rank % dp;
        int next_stage = order == PP_GRID_STAGE_MAJOR ? r * pp + s + 1 : (s + 1) * dp + r;
        int next_replica = order == PP_GRID_STAGE_MAJOR ? ((r + 1) % dp) * pp + s : s * dp + (r + 1) % dp;
        if (s + 1 < pp && rank / per_host != next_stage / per_host) bytes += 2.0 * sends[s] * m;
        if (dp > 1 && rank / per_host != next_replica / per_host) bytes += 2.0 * (dp - 1) / dp * params[s];
    }
    return bytes;
}

static void test_order_vs_brute_force(void **state)
{
    (void)state;
    pp_topology *t = load(NULL, "package:2 core:4 pu:1");
    static const int shapes[][3] = {{2, 2, 2}, {4, 2, 2}, {2, 4, 2}, {4, 4, 4}, {3, 4, 2}, {8, 2, 4}, {2, 8, 8}, {1, 4, 2}, {4, 1, 2}};
    uint64_t seed = 12345;
    double maxdiff = 0;
    int flips = 0, cases = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int trial = 0; trial < 20; trial++) {
            int pp = shapes[k][0], dp = shapes[k][1], hosts = shapes[k][2];
            int64_t params[8], sends[8], m = 1 + trial % 8;
            for (int s = 0; s < pp; s++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                params[s] = (int64_t)(seed >> 40) * (trial % 2 ? 100 : 1);
                sends[s] = (int64_t)((seed >> 20) & 0xfffff) * (trial % 2 ? 1 : 100);
            }
            pp_placement *p = plan(t, hosts, pp, dp, params, sends, m);
            double net[2];
            for (int o = 0; o < 2; o++) {
                net[o] = brute_network(o, hosts, pp, dp, params, sends, m);
                double d = fabs(p->traffic[o].inter - net[o]) / fmax(1, net[o]);
                maxdiff = fmax(maxdiff, d);
                assert_true(d < 1e-12);
            }
            /* the chosen order never moves more bytes over the network */
            assert_true(net[p->order] <= net[1 - p->order]);
            flips += p->order == PP_GRID_REPLICA_MAJOR;
            cases++;
            pp_placement_destroy(p);
        }
    printf("order vs brute force: %d cases (%d replica-major), max relative difference of network bytes %.3g\n",
           cases, flips, maxdiff);
    assert_true(flips > 0 && flips < cases);

    /* the flip itself: 2 hosts, pp 2 x dp 2 */
    int64_t heavy_params[2] = {1 << 30, 1 << 30}, light_sends[2] = {1000, 0};
    int64_t light_params[2] = {1000, 1000}, heavy_sends[2] = {1 << 28, 0};
    pp_placement *a = plan(t, 2, 2, 2, heavy_params, light_sends, 8);
    pp_placement *b = plan(t, 2, 2, 2, light_params, heavy_sends, 8);
    printf("params dominate: %s; activations dominate: %s\n",
           a->order == PP_GRID_REPLICA_MAJOR ? "replica-major" : "stage-major",
           b->order == PP_GRID_REPLICA_MAJOR ? "replica-major" : "stage-major");
    assert_int_equal(a->order, PP_GRID_REPLICA_MAJOR);
    assert_int_equal(b->order, PP_GRID_STAGE_MAJOR);
    /* the grid formula holds for every rank */
    for (int r = 0; r < 4; r++) {
        assert_int_equal(a->ranks[r].stage * 2 + a->ranks[r].replica, r);
        assert_int_equal(b->ranks[r].replica * 2 + b->ranks[r].stage, r);
        assert_int_equal(a->ranks[r].host, r / 2);
        assert_int_equal(a->ranks[r].local, r % 2);
    }
    pp_placement_destroy(a);
    pp_placement_destroy(b);
    pp_topology_destroy(t);
}

/* pp 2 x dp 2 on 2 hosts "package:2 core:2 pu:1": each host's 2 ranks get one package
 * each, so same-host pairs are at the host level. P = {1000, 3000}, send 600, M = 4.
 * stage-major: pipe 2 x 2*600*4 = 9600 host; rings cross hosts: 2*1000 + 2*3000 = 8000.
 * replica-major: the rings stay on a host (8000 host), the pipe crosses (9600 network). */
static void test_two_hosts_by_hand(void **state)
{
    (void)state;
    pp_topology *t = load(NULL, "package:2 core:2 pu:1");
    int64_t params[2] = {1000, 3000}, sends[2] = {600, 0};
    pp_placement *p = plan(t, 2, 2, 2, params, sends, 4);
    const double want[2][PP_LINK_COUNT] = {{0, 0, 9600, 8000}, {0, 0, 8000, 9600}};
    double maxdiff = 0;
    for (int o = 0; o < 2; o++)
        for (int l = 0; l < PP_LINK_COUNT; l++) maxdiff = fmax(maxdiff, fabs(p->traffic[o].level[l] - want[o][l]));
    printf("2 hosts by hand: stage-major intra %.0f inter %.0f, replica-major intra %.0f inter %.0f; max diff %g\n",
           p->traffic[0].intra, p->traffic[0].inter, p->traffic[1].intra, p->traffic[1].inter, maxdiff);
    assert_true(maxdiff == 0);
    assert_true(p->traffic[0].intra == 9600 && p->traffic[0].inter == 8000);
    assert_true(p->traffic[0].dp_bytes == 8000 && p->traffic[0].pipe_bytes == 9600);
    assert_int_equal(p->order, PP_GRID_STAGE_MAJOR);
    assert_string_equal(p->ranks[0].cpus, "0-1");
    assert_string_equal(p->ranks[1].cpus, "2-3");
    assert_string_equal(p->ranks[2].cpus, "0-1");
    pp_placement_destroy(p);
    pp_topology_destroy(t);
}

static void test_cpusets_disjoint(void **state)
{
    (void)state;
    pp_topology *t = load(NULL, "package:2 core:8 pu:2");
    hwloc_const_bitmap_t all = hwloc_topology_get_topology_cpuset(t);
    int64_t params[4] = {1, 1, 1, 1};
    for (int n = 1; n <= 16; n++) {
        pp_placement *p = plan(t, 1, 1, n, params, NULL, 1);
        assert_false(p->oversubscribed);
        int weight = 0;
        for (int a = 0; a < n; a++) {
            hwloc_bitmap_t s = p->ranks[a].cpuset;
            assert_false(hwloc_bitmap_iszero(s));
            assert_true(hwloc_bitmap_isincluded(s, all));
            weight += hwloc_bitmap_weight(s);
            /* whole cores: both PUs of every core it touches */
            for (int pu = hwloc_bitmap_first(s); pu >= 0; pu = hwloc_bitmap_next(s, pu)) {
                hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, hwloc_get_pu_obj_by_os_index(t, (unsigned)pu));
                assert_true(hwloc_bitmap_isincluded(core->cpuset, s));
            }
            for (int b = 0; b < a; b++) assert_false(hwloc_bitmap_intersects(s, p->ranks[b].cpuset));
        }
        assert_true(weight <= 32);
        if (n == 16) for (int a = 0; a < n; a++) assert_int_equal(hwloc_bitmap_weight(p->ranks[a].cpuset), 2);
        pp_placement_destroy(p);
    }
    printf("1..16 ranks on 16 cores x 2 PUs: pairwise disjoint whole-core cpusets\n");
    /* more ranks than cores: still placed, with a warning */
    pp_placement *p = plan(t, 1, 2, 10, params, NULL, 1);
    printf("20 ranks: warning '%s'\n", p->warning);
    assert_true(p->oversubscribed);
    assert_non_null(strstr(p->warning, "20 ranks share 16 cores"));
    for (int a = 0; a < 20; a++) assert_false(hwloc_bitmap_iszero(p->ranks[a].cpuset));
    pp_placement_destroy(p);
    pp_topology_destroy(t);
}

static void test_xml_gpus(void **state)
{
    (void)state;
    pp_topology *t = load_xml_machine();
    pp_error err = {0};
    static const char *busids[4] = {"0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0"};
    assert_int_equal(pp_topology_ngpus(t), 4);
    for (int i = 0; i < 4; i++) {
        pp_pci_locality loc;
        assert_int_equal(pp_topology_gpu(t, i, &loc, &err), PP_OK);
        assert_string_equal(loc.busid, busids[i]);
        assert_int_equal(loc.vendor, 0x10de);
        assert_int_equal(loc.package, i / 2);
        assert_int_equal(loc.numa, i / 2);
        assert_string_equal(loc.cpus, i < 2 ? "0-7,16-23" : "8-15,24-31");
        assert_string_equal(loc.nic, i < 2 ? "mlx5_0" : "mlx5_1");
    }
    pp_pci_locality loc;
    assert_int_equal(pp_topology_pci_find(t, "00000000:84:00.0", &loc, &err), PP_OK);  /* CUDA's form */
    assert_string_equal(loc.busid, "0000:84:00.0");
    assert_int_equal(loc.numa, 1);
    assert_int_equal(pp_topology_pci_find(t, "0000:05:00.0", &loc, &err), PP_OK);     /* the NIC */
    assert_int_equal(loc.class_id, 0x0207);
    assert_int_equal(pp_topology_pci_find(t, "65:00", &loc, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "bad PCI bus id '65:00'"));
    assert_int_equal(pp_topology_pci_find(t, "0000:99:00.0", &loc, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "no PCI device 0000:99:00.0"));
    assert_int_equal(pp_topology_gpu(t, 4, &loc, &err), PP_ERR_INVALID_ARG);

    /* pp 2 x dp 2 on the machine: GPUs 0,1 share a switch, as do 2,3.
     * stage-major: pipes (0,1) (2,3) in switches: 2 x 2*1e6*8 = 32e6; rings (0,2) (1,3)
     * across packages: 2 stages x 2 links x P. replica-major: the other way round. */
    int64_t sends[2] = {1000000, 0};
    for (int k = 0; k < 2; k++) {
        int64_t P = k ? 20000000 : 4000000, params[2] = {P, P};
        pp_placement *p = plan(t, 1, 2, 2, params, sends, 8);
        double want[2][PP_LINK_COUNT] = {{32e6, 0, 4.0 * P, 0}, {4.0 * P, 0, 32e6, 0}}, maxdiff = 0;
        for (int o = 0; o < 2; o++)
            for (int l = 0; l < PP_LINK_COUNT; l++)
                maxdiff = fmax(maxdiff, fabs(p->traffic[o].level[l] - want[o][l]));
        printf("XML machine, params %lld: chose %s, traffic max diff vs hand %g\n", (long long)P,
               p->order ? "replica-major" : "stage-major", maxdiff);
        assert_true(maxdiff == 0);
        assert_int_equal(p->order, k ? PP_GRID_REPLICA_MAJOR : PP_GRID_STAGE_MAJOR);
        for (int r = 0; r < 4; r++) {
            const pp_rank_place *rp = &p->ranks[r];
            assert_int_equal(rp->gpu, r);
            assert_string_equal(rp->gpu_busid, busids[r]);
            /* nearest cores: inside the GPU's package, and not shared with the other rank there */
            unsigned dom, bus, dev, fn;
            assert_int_equal(sscanf(rp->gpu_busid, "%x:%x:%x.%x", &dom, &bus, &dev, &fn), 4);
            hwloc_obj_t g = hwloc_get_pcidev_by_busid(t, dom, bus, dev, fn);
            assert_true(hwloc_bitmap_isincluded(rp->cpuset, hwloc_get_non_io_ancestor_obj(t, g)->cpuset));
            assert_int_equal(hwloc_bitmap_weight(rp->cpuset), 8);
            for (int q = 0; q < r; q++) assert_false(hwloc_bitmap_intersects(rp->cpuset, p->ranks[q].cpuset));
        }
        pp_placement_destroy(p);
    }
    /* 6 ranks on 4 GPUs: shared, warned; CPU placement ignores the GPUs */
    int64_t params[3] = {1, 1, 1};
    pp_placement *p = plan(t, 1, 3, 2, params, NULL, 1);
    assert_true(p->oversubscribed);
    assert_int_equal(p->ranks[4].gpu, 0);
    /* ranks 0, 1, 4, 5 (GPUs 0, 1, 0, 1) split package 0: 2 cores x 2 PUs each */
    assert_int_equal(hwloc_bitmap_weight(p->ranks[4].cpuset), 4);
    assert_false(hwloc_bitmap_intersects(p->ranks[4].cpuset, p->ranks[0].cpuset));
    assert_true(hwloc_bitmap_isincluded(p->ranks[4].cpuset, p->ranks[1].cpuset) == 0);
    pp_placement_destroy(p);
    pp_topology *topo[1] = {t};
    pp_placement_input in = {.pp = 2, .dp = 1, .param_bytes = params, .microbatches = 1, .nhosts = 1,
                             .topology = topo, .order = -1, .device = PP_PLACE_CPU};
    assert_int_equal(pp_placement_plan(&in, &p, &err), PP_OK);
    assert_int_equal(p->ranks[0].gpu, -1);
    assert_string_equal(p->ranks[0].cpus, "0-7,16-23");
    assert_string_equal(p->ranks[1].cpus, "8-15,24-31");
    pp_placement_destroy(p);
    pp_topology_destroy(t);
}

static void test_json(void **state)
{
    (void)state;
    pp_topology *t = load_xml_machine();
    int64_t params[2] = {4000000, 4000000}, sends[2] = {1000000, 0};
    pp_placement *p = plan(t, 2, 2, 4, params, sends, 8);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pp_json j;
    pp_json_init(&j, f, 0);
    pp_placement_write_json(p, &j);
    pp_json_finish(&j);
    fclose(f);
    pp_jvalue *v = NULL;
    pp_error err = {0};
    assert_int_equal(pp_json_parse(buf, &v, &err), PP_OK);
    const pp_jvalue *ranks = pp_json_get(v, "ranks"), *tr = pp_json_get(pp_json_get(v, "traffic"), "stage-major");
    assert_int_equal(ranks->n, 8);
    assert_string_equal(pp_json_get(v, "order")->str, p->order ? "replica-major" : "stage-major");
    assert_string_equal(pp_json_get(&ranks->items[5], "gpu_busid")->str, p->ranks[5].gpu_busid);
    assert_true(pp_json_get(tr, "network")->num == p->traffic[0].inter);
    printf("JSON: %zu bytes, 8 ranks, stage-major network %.0f\n", len, pp_json_get(tr, "network")->num);
    pp_json_free(v);
    free(buf);
    pp_placement_destroy(p);
    pp_topology_destroy(t);
}

static void test_bind(void **state)
{
    (void)state;
    pp_topology *t = load(NULL, NULL), *syn = load(NULL, "package:1 core:2 pu:1");
    int64_t params[1] = {1};
    pp_placement *p = plan(t, 1, 1, 1, params, NULL, 1), *ps = plan(syn, 1, 1, 1, params, NULL, 1);
    pp_bind_result res;
    pp_error err = {0};
    assert_int_equal(pp_placement_bind(ps, 0, syn, &res, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "this machine"));
    setenv("PP_BIND", "none", 1);
    assert_int_equal(pp_placement_bind(p, 0, t, &res, &err), PP_OK);
    assert_int_equal(res.kind, PP_BIND_DISABLED);
    unsetenv("PP_BIND");
    assert_int_equal(pp_placement_bind(p, 0, t, &res, &err), PP_OK);
    printf("bind: kind %d, cpus %s (%s)\n", res.kind, res.cpus, res.note);
    assert_true(res.kind == PP_BIND_APPLIED || res.kind == PP_BIND_EXTERNAL);
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();
    assert_int_equal(hwloc_get_cpubind(t, cur, HWLOC_CPUBIND_PROCESS), 0);
    if (res.kind == PP_BIND_APPLIED) assert_true(hwloc_bitmap_isequal(cur, p->ranks[0].cpuset));
    /* now bound to less than the machine (unless it has one core): a second call leaves it */
    if (hwloc_bitmap_weight(cur) < hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(t))) {
        assert_int_equal(pp_placement_bind(p, 0, t, &res, &err), PP_OK);
        assert_int_equal(res.kind, PP_BIND_EXTERNAL);
    }
    hwloc_set_cpubind(t, hwloc_topology_get_allowed_cpuset(t), HWLOC_CPUBIND_PROCESS);
    hwloc_bitmap_free(cur);
    pp_placement_destroy(p);
    pp_placement_destroy(ps);
    pp_topology_destroy(t);
    pp_topology_destroy(syn);
}

static void expect_plan_error(pp_placement_input *in, const char *text)
{
    pp_placement *p = NULL;
    pp_error err = {0};
    assert_int_equal(pp_placement_plan(in, &p, &err), PP_ERR_INVALID_ARG);
    assert_null(p);
    printf("error: %s\n", err.msg);
    assert_non_null(strstr(err.msg, text));
}

static void test_errors(void **state)
{
    (void)state;
    pp_topology *t = NULL;
    pp_error err = {0};
    assert_int_equal(pp_topology_load(NULL, "package:2 corez:4", &t, &err), PP_ERR_INVALID_ARG);
    assert_null(t);
    assert_non_null(strstr(err.msg, "bad synthetic topology 'package:2 corez:4'"));
    assert_int_equal(pp_topology_load("a.xml", "core:2 pu:1", &t, &err), PP_ERR_INVALID_ARG);
    assert_int_not_equal(pp_topology_load("/nonexistent/topo.xml", NULL, &t, &err), PP_OK);
    assert_non_null(strstr(err.msg, "/nonexistent/topo.xml"));

    t = load(NULL, "package:2 core:4 pu:1");
    pp_topology *topo[3] = {t, t, t};
    int64_t params[4] = {1, 1, 1, 1}, bad[4] = {1, -5, 1, 1};
    pp_placement_input in = {.pp = 4, .dp = 2, .param_bytes = params, .microbatches = 1, .nhosts = 3,
                             .topology = topo, .order = -1};
    expect_plan_error(&in, "do not split evenly over 3 hosts");
    int rank_host[8] = {0, 0, 0, 0, 2, 2, 2, 2};
    in.rank_host = rank_host;
    expect_plan_error(&in, "host 1 ('host1') has no ranks");
    rank_host[7] = 3;
    expect_plan_error(&in, "rank 7: host 3 out of range");
    in.rank_host = NULL;
    in.nhosts = 2;
    in.param_bytes = bad;
    expect_plan_error(&in, "stage 1: param bytes -5");
    in.param_bytes = params;
    in.device = PP_PLACE_GPU;
    expect_plan_error(&in, "has no NVIDIA GPU");
    in.device = PP_PLACE_AUTO;
    in.pp = 0;
    expect_plan_error(&in, "pp 0 x dp 2");
    pp_topology_destroy(t);
}

/* Round-robin launch (--map-by node): uneven, interleaved hosts are supported. */
static void test_rank_host_interleaved(void **state)
{
    (void)state;
    pp_topology *t = load(NULL, "package:1 core:4 pu:1");
    pp_topology *topo[2] = {t, t};
    int64_t params[2] = {1000, 1000}, sends[2] = {10, 0};
    int rank_host[4] = {0, 1, 0, 1};
    pp_placement_input in = {.pp = 2, .dp = 2, .param_bytes = params, .send_bytes = sends, .microbatches = 1,
                             .nhosts = 2, .rank_host = rank_host, .topology = topo, .order = -1};
    pp_placement *p = NULL;
    pp_error err = {0};
    assert_int_equal(pp_placement_plan(&in, &p, &err), PP_OK);
    /* stage-major: replica r = ranks 2r, 2r+1 on different hosts: pipes cross (2 x 20);
     * rings (0,2) and (1,3) stay: 2 x 2 x 1000 package. replica-major is the reverse. */
    assert_true(p->traffic[0].inter == 40 && p->traffic[0].level[PP_LINK_PACKAGE] == 4000);
    assert_true(p->traffic[1].inter == 4000 && p->traffic[1].level[PP_LINK_PACKAGE] == 40);
    assert_int_equal(p->order, PP_GRID_STAGE_MAJOR);
    assert_int_equal(p->ranks[3].local, 1);
    assert_int_equal(p->ranks[3].host, 1);
    pp_placement_destroy(p);
    pp_topology_destroy(t);
}

/* How many device communicators this build has (PP_COMM_BACKENDS: none, or nccl). */
#define X(name) +1
enum { NCOMM_BACKENDS = 0 PP_COMM_BACKENDS };
#undef X

/* A rank's device ordinal and the communicator of its buffers: the cpu is device 0 and the
 * MPI world carries its buffers; a GPU rank's ordinal is asked of the communicator backend
 * by bus id (a NCCL build asks CUDA, which sees no GPU of this fictional machine), and a
 * build without a communicator for the device says which device it lacks. */
static void test_device_and_comm(void **state)
{
    (void)state;
    pp_topology *t = load_xml_machine();
    pp_error err = {0};
    int64_t params[2] = {1, 1};
    pp_placement *p = plan(t, 1, 2, 2, params, NULL, 1);
    int index = -1;
    assert_int_equal(pp_placement_device_index(p, 3, PP_DEVICE_CPU, &index, &err), PP_OK);
    assert_int_equal(index, 0);
    pp_status st = pp_placement_device_index(p, 3, PP_DEVICE_CUDA, &index, &err);
    printf("rank 3 on GPU %s: %s (%d device communicator(s) built)\n", p->ranks[3].gpu_busid,
           st == PP_OK ? "its local index" : err.msg, NCOMM_BACKENDS);
    if (NCOMM_BACKENDS == 0) {
        assert_int_equal(st, PP_OK);
        assert_int_equal(index, p->ranks[3].local);
    } else {
        assert_int_equal(st, PP_ERR_DEVICE);
        assert_non_null(strstr(err.msg, p->ranks[3].gpu_busid));
    }
    p->ranks[3].gpu_busid[0] = '\0';   /* hwloc saw no GPUs (a container): the local index */
    assert_int_equal(pp_placement_device_index(p, 3, PP_DEVICE_CUDA, &index, &err), PP_OK);
    assert_int_equal(index, 3);
    assert_int_equal(pp_placement_device_index(p, 4, PP_DEVICE_CPU, &index, &err), PP_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "rank 4 out of range (0..3)"));
    pp_placement_destroy(p);
    pp_topology_destroy(t);

    pp_comm *world = NULL, *link = NULL;
    pp_device *cpu = NULL;
    assert_int_equal(pp_comm_mpi_world(&world, &err), PP_OK);
    assert_int_equal(pp_device_create(PP_DEVICE_CPU, 0, &cpu, &err), PP_OK);
    assert_int_equal(pp_comm_for_device(world, cpu, &link, &err), PP_OK);
    assert_ptr_equal(link, world);
    if (NCOMM_BACKENDS == 0) {
        /* never opened: only its kind and index are read before the refusal */
        pp_device gpu = {.kind = PP_DEVICE_CUDA, .index = 3};
        assert_int_equal(pp_comm_for_device(world, &gpu, &link, &err), PP_ERR_UNSUPPORTED);
        printf("%s\n", err.msg);
        assert_non_null(strstr(err.msg, "rank 0: no communicator for cuda device 3"));
        assert_null(link);
    }
    pp_device_destroy(cpu);
    pp_comm_destroy(world);
}

static void test_hosts_world_of_one(void **state)
{
    (void)state;
    pp_comm *world = NULL;
    pp_error err = {0};
    assert_int_equal(pp_comm_mpi_world(&world, &err), PP_OK);
    int rank_host[1] = {-1}, nhosts = 0;
    char names[1][PP_HOST_NAME_LEN];
    assert_int_equal(pp_placement_hosts(world, rank_host, &nhosts, names, &err), PP_OK);
    printf("hosts: %d, rank 0 on '%s'\n", nhosts, names[0]);
    assert_int_equal(nhosts, 1);
    assert_int_equal(rank_host[0], 0);
    assert_string_equal(names[0], pp_comm_mpi_host());
    pp_comm_destroy(world);
    pp_comm_mpi_finalize();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_vs_brute_force),
        cmocka_unit_test(test_two_hosts_by_hand),
        cmocka_unit_test(test_cpusets_disjoint),
        cmocka_unit_test(test_xml_gpus),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_rank_host_interleaved),
        cmocka_unit_test(test_device_and_comm),
        cmocka_unit_test(test_hosts_world_of_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
