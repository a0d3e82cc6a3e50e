"""FullyShardedDataParallel over "weft" trains a model to the parameters one process gets.

Run under torchrun with build/python on PYTHONPATH. Torch 1.13's FSDP needs fsdp_cpu (imported
first) to run on CPU at all; Gloo cannot serve it there (no reduce_scatter). The model is nested
FSDP units (every Linear its own, the root holding the rest), FULL_SHARD, so every step
all-gathers parameters before forward and backward (_all_gather_base) and reduce-scatters
gradients (_reduce_scatter_base); the shards are uneven (padded). Rank r trains on batch r of
each step; every rank also trains the same model alone on all ranks' batches together, which is
the same computation, and the gathered FSDP parameters must match it within float rounding.
"""

import sys
import warnings

import fsdp_cpu  # noqa: F401  (before FSDP is used)
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import weft_torch  # noqa: F401  (registers the "weft" backend)

STEPS = 5
BATCH = 8


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 33), nn.Tanh(),
                         nn.Linear(33, 7))


def batches(world):
    """Every step's batch of every rank: (x, y) of BATCH rows each."""
    generator = torch.Generator().manual_seed(7)
    return [[(torch.randn(BATCH, 20, generator=generator),
              torch.randn(BATCH, 7, generator=generator)) for _ in range(world)]
            for _ in range(STEPS)]


def train(model, data):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def main():
    warnings.filterwarnings("ignore", message="Module is put on CPU")
    warnings.filterwarnings("ignore", message=".*is a private function and will be deprecated")
    dist.init_process_group("weft")
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = batches(world)

    model = make_model()
    for i in (0, 2, 4):
        model[i] = FSDP(model[i])
    sharded = FSDP(model)
    full_size = sum(p.numel() for p in make_model().parameters())
    local_size = sum(p.numel() for p in sharded.parameters())
    assert local_size * world < full_size + world * 8, f"not sharded: {local_size} of {full_size}"
    train(sharded, [step[rank] for step in steps])
    with FSDP.summon_full_params(sharded):
        got = [p.detach().clone() for p in sharded.parameters()]

    alone = make_model()
    train(alone, [(torch.cat([x for x, _ in step]), torch.cat([y for _, y in step]))
                  for step in steps])
    want = [p.detach() for p in alone.parameters()]
    assert len(got) == len(want), (len(got), len(want))
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, (i, a.shape, b.shape)
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"parameter {i}: FSDP over weft differs from one process by "
                                 f"{(a - b).abs().max().item()}")
    dist.destroy_process_group()
    print(f"rank {rank}: FSDP over weft matches one process after {STEPS} steps ({world} ranks)")


if __name__ == "__main__":
    sys.exit(main())
