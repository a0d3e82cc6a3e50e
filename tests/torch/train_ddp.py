"""DistributedDataParallel trains the same model twice in one job, over "weft" and over "gloo".

Run under torchrun with build/python on PYTHONPATH. The default group is Weft's; a second group of
the same ranks is Gloo's. Each model starts from the same seed and sees the same batches (different
on every rank); gradients travel in several buckets (small bucket_cap_mb), so all-reduces overlap
the backward pass and complete through their futures; BatchNorm's buffers are broadcast from rank 0
every step. A third pair of models trains with the fp16 compression hook, whose all-reduces are
Python futures chained with then(). After the steps, every Weft parameter must equal its Gloo twin
(exactly on 2 ranks, where a sum of two is the same in any order; within float32's or, with the
hook, float16's rounding otherwise), and all ranks must hold the same parameters (the BatchNorm
statistics of the last forward stay per rank).
"""

import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import weft_torch  # noqa: F401  (registers the "weft" backend)

STEPS = 6


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64),
                         nn.ReLU(), nn.Linear(64, 8))


def train(model, rank):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1000 + rank)
    for _ in range(STEPS):
        x = torch.randn(16, 32, generator=generator)
        y = torch.randn(16, 8, generator=generator)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    # Parameters, then buffers (BatchNorm's running statistics, which stay per rank).
    return [p.detach().clone() for p in model.module.parameters()], [
        b.detach().clone() for b in model.module.buffers()]


def compare(name, weft, gloo, exact, tolerance):
    for i, (a, b) in enumerate(zip(weft, gloo)):
        same = torch.equal(a, b) if exact else torch.allclose(a, b, rtol=tolerance, atol=tolerance)
        if not same:
            raise AssertionError(f"{name}: tensor {i} differs between weft and gloo by "
                                 f"{(a.double() - b.double()).abs().max().item()}")


def main():
    dist.init_process_group("weft")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    results = {}
    for backend, group in (("weft", None), ("gloo", gloo)):
        plain = DDP(make_model(), process_group=group, bucket_cap_mb=0.01)
        hooked = DDP(make_model(), process_group=group, bucket_cap_mb=0.01)
        hooked.register_comm_hook(group, default_hooks.fp16_compress_hook)
        results[backend] = (train(plain, rank), train(hooked, rank))
    exact = world == 2
    # Partial sums round differently in another order: to float32's or float16's precision.
    for i, (name, tolerance) in enumerate((("DDP", 1e-5), ("DDP with fp16_compress_hook", 1e-3))):
        for j, what in enumerate(("parameters", "buffers")):
            compare(f"{name}, {what}", results["weft"][i][j], results["gloo"][i][j], exact,
                    tolerance)
    # Every rank holds the same parameters.
    for t in results["weft"][0][0]:
        copies = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(copies, t)
        assert all(torch.equal(c, copies[0]) for c in copies), "ranks disagree"
    dist.destroy_process_group()
    print(f"rank {rank}: DDP over weft matches gloo after {STEPS} steps ({world} ranks)")


if __name__ == "__main__":
    sys.exit(main())
