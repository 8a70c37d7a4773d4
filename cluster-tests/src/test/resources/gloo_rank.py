"""One rank of torch.distributed's Gloo all_reduce (float32, SUM) across emulated hosts.

Usage: python3 gloo_rank.py MASTER_HOST:PORT RANK WORLD SIZE_BYTES...
Measured as ../shared/bench/allreduce_gloo.py measures on one host (per-op time = max over ranks
of that op's wall time; median over iterations), but each rank is its own process on its own
host, meeting at MASTER_HOST:PORT. Rank 0 prints one JSON line per size.
"""
import json, statistics, sys, time

import torch
import torch.distributed as dist

BUDGET_S = 2.0
MIN_ITERS, MAX_ITERS = 5, 200


def main():
    master, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sizes = [int(s) for s in sys.argv[4:]]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank, world_size=world)
    t = torch.ones(1024)
    dist.all_reduce(t)
    assert t[0].item() == world, t[0].item()
    for nbytes in sizes:
        x = torch.zeros(nbytes // 4, dtype=torch.float32)
        warm = []
        for _ in range(3):
            t0 = time.perf_counter(); dist.all_reduce(x); warm.append(time.perf_counter() - t0)
        iters = torch.tensor([min(MAX_ITERS, max(MIN_ITERS, int(BUDGET_S / statistics.median(warm))))])
        dist.broadcast(iters, 0)
        n = int(iters.item())
        times = torch.empty(n, dtype=torch.float64)
        dist.barrier()
        start = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter(); dist.all_reduce(x); times[i] = time.perf_counter() - t0
        total = time.perf_counter() - start
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"method": "gloo", "ranks": world, "bytes": nbytes, "iters": n,
                              "median_s": statistics.median(times.tolist()), "mean_s": total / n}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
