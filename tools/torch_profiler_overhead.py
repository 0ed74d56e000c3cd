#!/usr/bin/env python3
"""The PyTorch profiler's step-time overhead on the same loop as train_mlp
(the reference for trainscope's CUPTI overhead in tools/gpu-check.sh).

  torch_profiler_overhead.py --steps 300 --batch 512 --hidden 4096 --trace OUT.json

Runs the MLP loop (Linear-ReLU-Linear-ReLU-Linear, Adam, MSE, a host read of
the loss every 10 steps) without and with torch.profiler (CPU + CUDA
activities), prints the mean step time of each and their ratio, and exports
the profiled run's Kineto trace to --trace for `trainscope analyze`.
"""
import argparse
import time

import torch


def run(steps, batch, hidden, device, profiler=None):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    x = torch.randn(batch * 64, 32)
    w = torch.randn(32, 1)
    y = x @ w + 0.1 * torch.randn(batch * 64, 1)
    warmup = 20
    start = None
    for i in range(steps + warmup):
        if i == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        begin = (i * batch) % (x.shape[0] - batch + 1)
        xb = x[begin:begin + batch].to(device, non_blocking=True)
        yb = y[begin:begin + batch].to(device, non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (i + 1) % 10 == 0:
            loss.item()
        if profiler is not None:
            profiler.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--trace", default="")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    plain = run(args.steps, args.batch, args.hidden, device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    # A schedule makes step() emit ProfilerStep#N annotations (iterations).
    schedule = torch.profiler.schedule(wait=0, warmup=0, active=args.steps + 100)
    with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        profiled = run(args.steps, args.batch, args.hidden, device, prof)
    if args.trace:
        prof.export_chrome_trace(args.trace)
    print(f"torch.profiler reference on {device}: {plain:.3f} ms/step without, "
          f"{profiled:.3f} ms/step with the profiler: ratio {profiled / plain:.3f}")


if __name__ == "__main__":
    main()
