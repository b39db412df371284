#!/usr/bin/env python3
"""A tiny data-parallel "training" loop on CPU with torch.distributed (gloo).

Run under torchrun (e.g. `torchx run dist.ddp -j 2x1 --script examples/train.py`):
each rank computes a local gradient, the ranks average it with all_reduce, and
every rank applies the same update, so their parameters stay identical. Rank 0
prints the loss; every rank prints its final parameter checksum.
"""
import argparse
import os

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    weight = torch.zeros(4)
    target = torch.arange(4, dtype=torch.float32)

    for step in range(args.steps):
        # Each rank sees a different shard of the "data".
        noise = torch.full((4,), float(rank) - (world - 1) / 2.0)
        grad = 2.0 * (weight - (target + 0.01 * noise))
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        grad /= world
        weight -= args.lr * grad
        loss = float(((weight - target) ** 2).sum())
        if rank == 0:
            print(f"step {step} loss {loss:.6f} world_size {world}", flush=True)

    checksum = torch.tensor([float(weight.sum())])
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    in_sync = all(torch.allclose(g, checksum) for g in gathered)
    print(f"rank {rank}/{world} node {os.environ.get('GROUP_RANK', '?')} "
          f"weights {weight.tolist()} in_sync={in_sync}", flush=True)
    dist.destroy_process_group()
    if not in_sync:
        raise SystemExit("ranks diverged")


if __name__ == "__main__":
    main()
