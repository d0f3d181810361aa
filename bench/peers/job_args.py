"""The job options every peer script takes (bench/peers/*.py): the model, the dataset, the
steps and batch, AdamW's rate and decay. Only argparse is imported here, so a script
parses its options, and sets its thread counts, before torch or onnxruntime load."""
import argparse


def job_parser(attention=False):
    """A parser with the shared options; attention: also --attention sdpa|matmul."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--microbatches", type=int, default=16)
    if attention:
        ap.add_argument("--attention", choices=("sdpa", "matmul"), default="sdpa")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    return ap
