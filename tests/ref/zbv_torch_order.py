"""Writes PyTorch's ScheduleZBVZeroBubble compute order for a few (pp, microbatches) as
compute_only CSV files (PyTorch's own _dump_csv), the fixtures tests/test_schedule_zbv.c
compares onnxpipe's zb-v with. Needs torch >= 2.6 (torch.distributed.pipelining with
ZB-V); run once, in a throwaway venv, and check the files in:

usage: zbv_torch_order.py OUT_DIR"""
import os
import sys

import torch
from torch.distributed.pipelining.schedules import ScheduleZBVZeroBubble

# (pp, microbatches): m < 2p-1 (PyTorch leaves out the padded microbatches), m = 2p-1,
# and m > 2p-1
CASES = [(1, 3), (2, 2), (2, 3), (2, 8), (3, 4), (4, 4), (4, 7), (4, 8), (4, 13), (8, 16)]


def order(pp, m):
    """The compute order from torch's own code, without a process group: the constructor
    needs real stages, so the instance gets only what _calculate_single_rank_operations
    and _dump_csv read."""
    s = object.__new__(ScheduleZBVZeroBubble)
    s.pp_group_size, s._n_microbatches, s.num_stages = pp, m, 2 * pp
    s.pipeline_order = {r: s._calculate_single_rank_operations(r) for r in range(pp)}
    return s


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for pp, m in CASES:
        order(pp, m)._dump_csv(os.path.join(out, f"torch_zbv_p{pp}_m{m}.csv"), format="compute_only")
    with open(os.path.join(out, "SOURCE"), "w") as f:
        f.write(f"torch {torch.__version__}: ScheduleZBVZeroBubble compute order, written by "
                "tests/ref/zbv_torch_order.py (PyTorch's _dump_csv, format compute_only)\n")


if __name__ == "__main__":
    main()
