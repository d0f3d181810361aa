"""PyTorch 2.x pipeline parallelism (torch.distributed.pipelining) on P processes over
gloo, one thread each: the example GPT cut into stages (Embed + blocks ... blocks + Head),
from the ONNX file's initial weights, the batches onnxpipe reads as M microbatches, one
of torch's schedules, AdamW on each rank's own parameters. One JSON line (bench "peer").

The tied embedding: the LM head's weight is the token embedding, which lives on the
first stage while the head is on the last. torch.distributed.pipelining does not tie
across stages, so each of the two stages holds its own copy, and after every step this
script sums the copies' gradients itself (an all-reduce over the two ranks that hold
them, or an add where one rank holds both, as zb-v's and DualPipeV's V placement puts
stages 0 and 2P-1 on rank 0); both copies then take the same AdamW update.

usage: torch_pipe.py MODEL.onnx DATA_DIR --schedule NAME [--procs P] [--steps S]
       [--batch B] [--microbatches M] [--bind]"""
import os
import socket
import sys

from job_args import job_parser

SCHEDULES = {   # name: (torch class, stages per rank, placement)
    "gpipe": ("ScheduleGPipe", 1, "loop"),
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2, "loop"),
    "looped-bfs": ("ScheduleLoopedBFS", 2, "loop"),
    "interleaved-zb": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zb-v": ("ScheduleZBVZeroBubble", 2, "v"),
    "dualpipe-v": ("ScheduleDualPipeV", 2, "v"),
}

ap = job_parser(attention=True)
ap.add_argument("--schedule", choices=SCHEDULES, required=True)
ap.add_argument("--procs", type=int, default=2)
ap.add_argument("--bind", action="store_true", help="bind rank r to core r (as mpirun --bind-to core)")
a = ap.parse_args()
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.distributed import pipelining  # noqa: E402

from common import Timer, emit, fail, load_gpt, read_data, step_batch  # noqa: E402
from torch_gpt import Stage, adamw  # noqa: E402

NAME = f"torch pipelining {a.schedule} {a.procs} processes"


def stage_indices(rank, procs, per_rank, placement):
    if per_rank == 1:
        return [rank]
    if placement == "v":                        # rank r holds r and 2P-1-r
        return [rank, 2 * procs - 1 - rank]
    return [rank + k * procs for k in range(per_rank)]   # looped: r, r+P, ...


def worker(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if a.bind:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    try:
        run(rank)
    except Exception as e:  # noqa: BLE001
        if rank == 0:
            fail("peer", NAME, f"{type(e).__name__}: {e}")
        out[rank] = 1
        os._exit(1)     # the other rank may be blocked in gloo; do not wait for it
    dist.destroy_process_group()


def run(rank):
    cls, per_rank, placement = SCHEDULES[a.schedule]
    n_stages = a.procs * per_rank
    cfg, w = load_gpt(a.model)
    ids, labels = read_data(a.data)
    V = cfg["vocab"]
    mine = stage_indices(rank, a.procs, per_rank, placement)
    mods = {s: Stage(cfg, w, s, n_stages, a.attention) for s in mine}
    stages = [pipelining.PipelineStage(mods[s], s, n_stages, torch.device("cpu")) for s in mine]

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1))

    sched_cls = getattr(pipelining.schedules, cls)
    sched = sched_cls(stages[0] if per_rank == 1 else stages, a.microbatches, loss_fn=loss_fn)
    params = [p for m in mods.values() for p in m.parameters()]
    opt, opt_kind = adamw(params, a.lr, a.weight_decay)
    first, last = 0 in mods, n_stages - 1 in mods
    # the tied pair: the embedding on stage 0 and the head's copy on the last stage
    tied = [m.embed.wte for m in mods.values() if m.embed is not None] + \
           [m.head.wte for m in mods.values() if m.head is not None]
    holders = [r for r in range(a.procs)
               if {0, n_stages - 1} & set(stage_indices(r, a.procs, per_rank, placement))]
    tie_group = dist.new_group(holders) if len(holders) > 1 else None

    timer, losses = Timer(), []
    for step in range(1, a.steps + 1):
        x, y = step_batch(ids, labels, a.batch, step)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        dist.barrier()
        timer.start()
        opt.zero_grad(set_to_none=False)
        mb_losses = []
        kw = {}
        if last:
            kw.update(target=y, losses=mb_losses)
        if first:
            sched.step(x, **kw)
        else:
            sched.step(**kw)
        # the tied gradient sum (scale_grads has already divided each copy by M)
        if tied:
            g = tied[0].grad.clone()
            for t in tied[1:]:
                g += t.grad
            if tie_group is not None:
                dist.all_reduce(g, group=tie_group)
            for t in tied:
                t.grad.copy_(g)
        opt.step()
        loss = torch.tensor([sum(l.item() for l in mb_losses) / a.microbatches if last else 0.0], dtype=torch.float64)
        dist.all_reduce(loss)
        timer.stop()
        losses.append(float(loss[0]))
    if rank == 0:
        line = {"bench": "peer", "config": NAME, "system": "pytorch " + torch.__version__,
                "mode": f"torch.distributed.pipelining {cls} (gloo)", "schedule": a.schedule,
                "stages": n_stages, "stages_per_rank": per_rank, "placement": placement, "threads": 1,
                "processes": a.procs, "cores": a.procs, "bind": "core" if a.bind else "none",
                "global_batch": a.batch, "microbatches": a.microbatches, "attention": a.attention,
                "optimizer": f"torch.optim.AdamW ({opt_kind})",
                "tied_embedding": "separate copies on the first and last stage; their gradients summed by this "
                                  "script after each step (" + ("all-reduce over ranks " + str(holders)
                                                                if tie_group is not None else "on rank 0") + ")",
                "losses": [round(l, 5) for l in losses], "timing": "rank 0, step start to end after a barrier"}
        line.update(timer.summary(a.batch, cfg["seq"]))
        emit(line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    out, port = ctx.Array("i", a.procs), free_port()
    procs = [ctx.Process(target=worker, args=(r, port, out)) for r in range(a.procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(1 if any(p.exitcode for p in procs) or any(out) else 0)
