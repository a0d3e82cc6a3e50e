"""Every collective of the "weft" torch.distributed backend, checked against values computed here.

Run under torchrun (python3 -m torch.distributed.run, as tests/torch/CMakeLists.txt does) with
build/python on PYTHONPATH. Each rank's data depends on its rank, and every expected result is
computed locally from that rule: dtypes, reduce ops, list and tensor forms, pieces of unequal sizes,
async work objects and futures, batch_isend_irecv, non-contiguous tensors, subgroups, and the
errors the backend must raise. Exits 0 when every check passed.
"""

import datetime
import os
import sys
import warnings

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401  (registers the "weft" backend)

REDUCIBLE = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
             torch.int32, torch.int64]


def data(rank, n, dtype, scale=1):
    """Rank `rank`'s contribution: small integers, exact in every dtype and in their sums."""
    return ((torch.arange(n) % 5 + rank + 1) * scale).to(dtype)


def check(name, got, want):
    if got.dtype != want.dtype or not torch.equal(got, want):
        raise AssertionError(f"{name}: got {got.tolist()} want {want.tolist()}")


def expect_error(name, text, fn):
    try:
        fn()
    except RuntimeError as error:
        if text not in str(error):
            raise AssertionError(f"{name}: error {error!r} lacks {text!r}") from error
        return str(error)
    raise AssertionError(f"{name}: no error")


def reductions(rank, world):
    for dtype in REDUCIBLE:
        n = 37
        ranks = [data(r, n, dtype) for r in range(world)]
        stacked = torch.stack([t.to(torch.float64) for t in ranks])
        wants = {
            "sum": (dist.ReduceOp.SUM, stacked.sum(0)),
            "product": (dist.ReduceOp.PRODUCT, torch.stack([(t % 2 + 1) for t in stacked]).prod(0)),
            "min": (dist.ReduceOp.MIN, stacked.min(0).values),
            "max": (dist.ReduceOp.MAX, stacked.max(0).values),
        }
        for name, (op, want) in wants.items():
            t = data(rank, n, dtype)
            if name == "product":
                t = t % 2 + 1
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dtype} {name}", t, want.to(dtype))
        if dtype.is_floating_point:
            t = data(rank, n, dtype) * world
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            check(f"all_reduce {dtype} avg", t, (stacked.sum(0)).to(dtype))
        root = world - 1
        t = data(rank, n, dtype)
        dist.reduce(t, dst=root)
        if rank == root:
            check(f"reduce {dtype}", t, stacked.sum(0).to(dtype))
        # Reduce-scatter, tensor and list forms: rank r gets block r of the sum.
        blocks = [data(rank, 5, dtype, scale=b + 1) for b in range(world)]
        want = sum(data(r, 5, torch.float64, scale=rank + 1) for r in range(world)).to(dtype)
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(blocks))
        check(f"reduce_scatter_tensor {dtype}", out, want)
        out = torch.empty(5, dtype=dtype)
        with warnings.catch_warnings():  # "a private function and will be deprecated"
            warnings.simplefilter("ignore")
            dist._reduce_scatter_base(out, torch.cat(blocks))
        check(f"_reduce_scatter_base {dtype}", out, want)
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter(out, blocks)
        check(f"reduce_scatter {dtype}", out, want)


def movements(rank, world):
    for dtype in REDUCIBLE + [torch.int16, torch.bool, torch.complex64]:
        n = 11

        def mine(r):
            return data(r, n, torch.int64).to(dtype)

        t = mine(rank)
        dist.broadcast(t, src=world - 1)
        check(f"broadcast {dtype}", t, mine(world - 1))
        outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, mine(rank))
        for r in range(world):
            check(f"all_gather {dtype} from {r}", outs[r], mine(r))
        out = torch.empty(world * n, dtype=dtype)
        dist.all_gather_into_tensor(out, mine(rank))
        check(f"all_gather_into_tensor {dtype}", out, torch.cat([mine(r) for r in range(world)]))
        # All-to-all: block j of rank r is data(r * world + j); rank r receives block r of all.
        send = torch.cat([mine(rank * world + j) for j in range(world)])
        out = torch.empty_like(send)
        dist.all_to_all_single(out, send)
        check(f"all_to_all_single {dtype}", out,
               torch.cat([mine(r * world + rank) for r in range(world)]))
        outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_to_all(outs, [mine(rank * world + j) for j in range(world)])
        for r in range(world):
            check(f"all_to_all {dtype} from {r}", outs[r], mine(r * world + rank))
    # Point to point around the ring.
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(9, dtype=torch.bfloat16)
    if rank % 2 == 0:
        dist.send(data(rank, 9, torch.bfloat16), dst=right, tag=3)
        dist.recv(got, src=left, tag=3)
    else:
        dist.recv(got, src=left, tag=3)
        dist.send(data(rank, 9, torch.bfloat16), dst=right, tag=3)
    check("send/recv", got, data(left, 9, torch.bfloat16))
    # batch_isend_irecv: every rank sends first, with messages larger than the links buffer;
    # the batch is one Weft group, so the order does not matter.
    n = 4 << 20
    got = torch.empty(n)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, data(rank, n, torch.float32), right),
                                    dist.P2POp(dist.irecv, got, left)])
    for work in works:
        work.wait()
    check("batch_isend_irecv", got, data(left, n, torch.float32))
    dist.barrier()


def uneven(rank, world):
    """The list forms and all_to_all with pieces of different sizes (Weft's V collectives)."""
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        mine = data(rank, rank + 1, dtype)
        outs = [torch.empty(r + 1, dtype=dtype) for r in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            check(f"uneven all_gather {dtype} from {r}", outs[r], data(r, r + 1, dtype))

        def rows(src, dst):  # rows rank src sends rank dst: 3 columns each
            return data(src * world + dst, 3 * (src + dst + 1), dtype).reshape(-1, 3)

        out = torch.empty(sum(src + rank + 1 for src in range(world)), 3, dtype=dtype)
        dist.all_to_all_single(out, torch.cat([rows(rank, j) for j in range(world)]),
                               output_split_sizes=[src + rank + 1 for src in range(world)],
                               input_split_sizes=[rank + j + 1 for j in range(world)])
        check(f"all_to_all_single with splits {dtype}", out,
              torch.cat([rows(src, rank) for src in range(world)]))
        outs = [torch.empty(src + rank + 1, 3, dtype=dtype) for src in range(world)]
        dist.all_to_all(outs, [rows(rank, j) for j in range(world)])
        for src in range(world):
            check(f"uneven all_to_all {dtype} from {src}", outs[src], rows(src, rank))
    for dtype in (torch.float32, torch.int64):
        blocks = [data(rank, b + 2, dtype, scale=b + 1) for b in range(world)]
        out = torch.empty(rank + 2, dtype=dtype)
        dist.reduce_scatter(out, blocks, op=dist.ReduceOp.MAX)
        check(f"uneven reduce_scatter {dtype}", out,
              data(world - 1, rank + 2, dtype, scale=rank + 1))


def asynchronous(rank, world):
    total = sum(data(r, 1000, torch.float32) for r in range(world))
    tensors = [data(rank, 1000, torch.float32) for _ in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futures = [w.get_future() for w in works]
    chained = futures[-1].then(lambda f: f.value()[0] * 2)
    for work, t in zip(works, tensors):
        work.wait()
        assert work.is_completed()
        check("async all_reduce", t, total)
    for fut, t in zip(futures, tensors):
        check("future value", fut.wait()[0], t)
    check("future then", chained.wait(), total * 2)
    big = data(rank, 1 << 20, torch.float32)
    fut = dist.all_reduce(big, async_op=True).get_future()
    check("future of a large all_reduce", fut.wait()[0],
          sum(data(r, 1 << 20, torch.float32) for r in range(world)))
    out = torch.empty(world * 3, dtype=torch.float16)
    work = dist.all_gather_into_tensor(out, data(rank, 3, torch.float16), async_op=True)
    work.wait()
    check("async all_gather_into_tensor", work.result()[0],
          torch.cat([data(r, 3, torch.float16) for r in range(world)]))


def non_contiguous(rank, world):
    base = data(rank, 24, torch.float32).reshape(4, 6)
    t = base.t()  # a transposed view: Weft works on a copy that is copied back
    dist.all_reduce(t)
    check("all_reduce of a transposed view", base,
          sum(data(r, 24, torch.float32) for r in range(world)).reshape(4, 6))
    strided = torch.zeros(2 * world * 3)[::2]
    dist.all_gather_into_tensor(strided, data(rank, 3, torch.float32))
    check("all_gather_into_tensor into a strided view", strided,
          torch.cat([data(r, 3, torch.float32) for r in range(world)]))


def errors(rank, world):
    expect_error("BAND", "does not support ReduceOp.BAND",
                 lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND))
    expect_error("int16 sum", "cannot reduce dtype Short",
                 lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)))
    expect_error("wrong output size", "expected",
                 lambda: dist.all_gather_into_tensor(torch.empty(world * 4 + 1), torch.ones(4)))
    # A mismatched collective fails on every rank with Weft's message (and leaves that group
    # unusable, so it runs in a group of its own).
    group = dist.new_group(backend="weft", timeout=datetime.timedelta(seconds=30))
    message = expect_error("mismatch", "weft: ",
                           lambda: dist.all_reduce(torch.ones(1000 + 1000 * rank), group=group))
    assert "all_reduce" in message, message
    if rank == 0:
        print(f"a mismatched all_reduce fails with: {message}")


def main():
    dist.init_process_group("weft")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == int(os.environ["WORLD_SIZE"]) and dist.get_backend() == "weft"
    reductions(rank, world)
    movements(rank, world)
    uneven(rank, world)
    asynchronous(rank, world)
    non_contiguous(rank, world)
    # A subgroup of the even ranks, its own communicator.
    evens = dist.new_group(ranks=list(range(0, world, 2)), backend="weft")
    if rank % 2 == 0:
        t = torch.ones(3)
        dist.all_reduce(t, group=evens)
        check("subgroup all_reduce", t, torch.full((3,), float((world + 1) // 2)))
    errors(rank, world)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: collectives OK")


if __name__ == "__main__":
    sys.exit(main())
