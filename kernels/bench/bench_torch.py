#!/usr/bin/env python3
"""Benchmark kernels/train against PyTorch on the same GPU.

Same model (Linear/ReLU MLP, default 784-1024-1024-10), same loss (softmax
cross-entropy), same optimizer (AdamW, lr 1e-3, betas 0.9/0.999, eps 1e-8,
weight decay on weights only), same batch sizes (default 64, launch-bound,
and 4096, compute-bound), FP32 matmuls unless --tf32 (then both sides use
TF32). Each side gathers its batch from a device-resident random dataset by
index every step. PyTorch runs eager and torch.compile'd (model and
optimizer step); the C trainer runs `train --bench`. Prints samples/s,
ms/step, achieved TFLOP/s and the fraction of the GPU's FP32 peak, and the
ratios C / PyTorch.

    make -C kernels && python3 kernels/bench/bench_torch.py
    python3 kernels/bench/bench_torch.py --batches 64,512,4096 --tf32
    python3 kernels/bench/bench_torch.py --c-only --device cpu   # no torch needed

FLOPs per step count the matrix products only: 2*B*in*out for the forward
and the weight gradient of every layer, and for the input gradient of every
layer but the first (the same formula as mlp_step_flops in mlp_cpu.c).
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRAIN = os.path.join(HERE, "..", "train")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", default="1024,1024", help="hidden widths (default 1024,1024)")
    p.add_argument("--input", type=int, default=784, help="input features (784)")
    p.add_argument("--classes", type=int, default=10, help="classes (10)")
    p.add_argument("--batches", default="64,4096", help="batch sizes (64,4096)")
    p.add_argument("--steps", type=int, default=200, help="timed steps per batch size")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (torch)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--tf32", action="store_true", help="TF32 tensor cores on both sides")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a dry run)")
    p.add_argument("--train", default=DEFAULT_TRAIN, help="path of kernels/train")
    p.add_argument("--modes", default="eager,compile", help="torch modes: eager,compile")
    p.add_argument("--c-only", action="store_true", help="skip PyTorch")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="FP32 peak of the GPU (default: from SM count and max SM clock)")
    return p.parse_args()


def dims_of(args):
    hidden = [int(h) for h in args.hidden.split(",") if h and h != "none"]
    return [args.input] + hidden + [args.classes]


def step_flops(dims, batch):
    f = 0.0
    for layer in range(len(dims) - 1):
        mn = float(dims[layer]) * dims[layer + 1]
        f += 2.0 * batch * mn * (2 if layer == 0 else 3)
    return f


BENCH_RE = re.compile(r"^bench \| device (?P<device>.*?) \| model (?P<model>\S+) \| "
                      r"batch (?P<batch>\d+) \| (?P<sps>[0-9.]+) samples/s \| "
                      r"(?P<ms>[0-9.]+) ms/step \| (?P<gflops>[0-9.]+) GFLOP/s")


def run_c(args, batches):
    """Runs `train --bench`; returns {batch: (samples/s, ms/step)} and the device line."""
    cmd = [args.train, "--bench", "--device", args.device, "--hidden", args.hidden,
           "--bench-input", str(args.input), "--bench-classes", str(args.classes),
           "--bench-batches", ",".join(str(b) for b in batches),
           "--bench-steps", str(args.steps), "--lr", repr(args.lr), "--wd", repr(args.wd)]
    if args.tf32:
        cmd.append("--tf32")
    print("$ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        sys.exit("bench_torch: %s exited %d" % (args.train, out.returncode))
    res, device = {}, ""
    for line in out.stdout.splitlines():
        print("  " + line)
        m = BENCH_RE.match(line)
        if m:
            res[int(m["batch"])] = (float(m["sps"]), float(m["ms"]))
            device = m["device"]
    return res, device


def peak_fp32(args, torch):
    """FP32 FLOP/s: SMs x 128 lanes (64 on sm_70/80) x 2 x max SM clock."""
    if args.peak_tflops > 0:
        return args.peak_tflops * 1e12
    if args.device != "cuda":
        return 0.0
    prop = torch.cuda.get_device_properties(0)
    lanes = 64 if (prop.major, prop.minor) in ((7, 0), (7, 5), (8, 0), (6, 0)) else 128
    try:
        mhz = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=clocks.max.sm",
                              "--format=csv,noheader,nounits"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout.split()[0]
        return 2.0 * prop.multi_processor_count * lanes * float(mhz) * 1e6
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return 0.0


def run_torch(args, batches, mode):
    import torch
    import torch.nn.functional as F

    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.manual_seed(1)
    dims = dims_of(args)
    res = {}
    for batch in batches:
        layers = []
        for i in range(len(dims) - 1):
            layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers).to(dev)
        decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
        no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
        n = max(4 * batch, 8192)
        data_x = torch.rand(n, dims[0], device=dev)
        data_y = torch.randint(0, dims[-1], (n,), device=dev)
        fwd = model
        opt_step = opt.step
        if mode == "compile":
            fwd = torch.compile(model)
            opt_step = torch.compile(opt.step)

        def step():
            idx = torch.randint(0, n, (batch,), device=dev)
            x, y = data_x[idx], data_y[idx]
            loss = F.cross_entropy(fwd(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
            return loss

        for _ in range(args.warmup):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                loss = step()
            end.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1000.0
        else:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                loss = step()
            seconds = time.perf_counter() - t0
        if not torch.isfinite(loss):
            sys.exit("bench_torch: torch %s loss is not finite" % mode)
        res[batch] = (batch * args.steps / seconds, seconds * 1000.0 / args.steps)
        print("  torch %-7s batch %5d | %10.0f samples/s | %8.3f ms/step" %
              (mode, batch, res[batch][0], res[batch][1]), flush=True)
    return res


def main():
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    dims = dims_of(args)
    c_res, c_device = run_c(args, batches)
    results = {"C (kernels/train)": c_res}
    peak = args.peak_tflops * 1e12
    if not args.c_only:
        try:
            import torch
        except ImportError:
            sys.exit("bench_torch: PyTorch is not installed here (use --c-only)")
        if args.device == "cuda" and not torch.cuda.is_available():
            sys.exit("bench_torch: torch sees no CUDA device")
        print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)
                                if args.device == "cuda" else "cpu"), flush=True)
        peak = peak_fp32(args, torch)
        for mode in args.modes.split(","):
            results["torch " + mode] = run_torch(args, batches, mode)

    print()
    print("model %s | %s | %s matmuls | device %s | fp32 peak %s" %
          ("-".join(str(d) for d in dims), "AdamW", "TF32" if args.tf32 else "FP32",
           c_device, "%.1f TFLOP/s" % (peak * 1e-12) if peak else "unknown"))
    print("%-20s %6s %12s %10s %10s %8s" % ("", "batch", "samples/s", "ms/step",
                                            "TFLOP/s", "of peak"))
    for name, res in results.items():
        for b in batches:
            if b not in res:
                continue
            sps, ms = res[b]
            tf = step_flops(dims, b) / (ms / 1000.0) * 1e-12
            frac = "%.1f%%" % (100.0 * tf * 1e12 / peak) if peak else "-"
            print("%-20s %6d %12.0f %10.3f %10.3f %8s" % (name, b, sps, ms, tf, frac))
    for name, res in results.items():
        if name.startswith("C "):
            continue
        for b in batches:
            if b in res and b in c_res:
                print("C / %-14s batch %5d: %.2fx samples/s" % (name, b, c_res[b][0] / res[b][0]))


if __name__ == "__main__":
    main()
