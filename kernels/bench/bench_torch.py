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
    python3 kernels/bench/bench_torch.py --models 784-1024-1024-10,4096-4096-4096-10 \
        --json out.json       # several models in one run; every row also as JSON

The fraction of peak is against the FP32 (CUDA core) peak for FP32 runs and
the dense TF32 tensor-core peak for --tf32 runs: SMs x lanes x 2 x max SM
clock, and SMs x 2048 FLOP/clock x max SM clock on sm_80/sm_90 (1024 on
sm_86/89); --peak-tflops overrides either.

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
    p.add_argument("--modes", default="eager,compile",
                   help="torch modes: eager, compile, compile-ro (mode=reduce-overhead)")
    p.add_argument("--c-only", action="store_true", help="skip PyTorch")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="peak of the GPU for this precision (default: from SM count and max SM clock)")
    p.add_argument("--models", default="",
                   help="several models IN-H1-..-CLASSES, comma-separated (overrides "
                        "--input/--hidden/--classes)")
    p.add_argument("--json", default="", help="also write every row to this JSON file")
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


def peak_flops(args, torch):
    """FLOP/s the GPU can do at most for this precision: FP32, SMs x 128
    lanes (64 on sm_60/70/75/80) x 2 x max SM clock; TF32 (dense, tensor
    cores), SMs x 2048 (sm_80, sm_90) or 1024 (sm_86, sm_89) x max SM clock."""
    if args.peak_tflops > 0:
        return args.peak_tflops * 1e12
    if args.device != "cuda":
        return 0.0
    prop = torch.cuda.get_device_properties(0)
    cc = (prop.major, prop.minor)
    if args.tf32:
        per_clock = {(8, 0): 2048, (9, 0): 2048, (8, 6): 1024, (8, 9): 1024}.get(cc, 0)
    else:
        per_clock = 2 * (64 if cc in ((7, 0), (7, 5), (8, 0), (6, 0)) else 128)
    try:
        mhz = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=clocks.max.sm",
                              "--format=csv,noheader,nounits"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout.split()[0]
        return float(per_clock) * prop.multi_processor_count * float(mhz) * 1e6
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
        elif mode == "compile-ro":  # reduce-overhead: torch's own CUDA graphs
            fwd = torch.compile(model, mode="reduce-overhead")
            opt_step = torch.compile(opt.step, mode="reduce-overhead")

        def step():
            if mode == "compile-ro":  # a new step: the graphs' last outputs may go
                torch.compiler.cudagraph_mark_step_begin()
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


def bench_model(args, batches, torch_ok, peak, rows):
    dims = dims_of(args)
    model = "-".join(str(d) for d in dims)
    c_res, c_device = run_c(args, batches)
    results = {"C (kernels/train)": c_res}
    if torch_ok:
        for mode in args.modes.split(","):
            try:
                results["torch " + mode] = run_torch(args, batches, mode)
            except Exception as ex:  # one failing peer does not lose the others
                print("  torch %s failed: %s: %s" % (mode, type(ex).__name__, ex), flush=True)
    print()
    print("model %s | %s | %s matmuls | device %s | %s peak %s" %
          (model, "AdamW", "TF32" if args.tf32 else "FP32", c_device,
           "tf32" if args.tf32 else "fp32", "%.1f TFLOP/s" % (peak * 1e-12) if peak else "unknown"))
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
            rows.append({"model": model, "precision": "tf32" if args.tf32 else "fp32",
                         "side": name, "batch": b, "samples_per_s": sps, "ms_per_step": ms,
                         "tflops": tf, "of_peak": tf * 1e12 / peak if peak else None,
                         "device": c_device})
    for name, res in results.items():
        if name.startswith("C "):
            continue
        for b in batches:
            if b in res and b in c_res:
                print("C / %-14s batch %5d: %.2fx samples/s" % (name, b, c_res[b][0] / res[b][0]))


def main():
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    peak = args.peak_tflops * 1e12
    torch_ok = not args.c_only
    if torch_ok:
        try:
            import torch
        except ImportError:
            sys.exit("bench_torch: PyTorch is not installed here (use --c-only)")
        if args.device == "cuda" and not torch.cuda.is_available():
            sys.exit("bench_torch: torch sees no CUDA device")
        print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)
                                if args.device == "cuda" else "cpu"), flush=True)
        peak = peak_flops(args, torch)
    rows = []
    models = [m for m in args.models.split(",") if m] or [None]
    for m in models:
        if m:
            try:
                dims = [int(d) for d in m.split("-")]
            except ValueError:
                dims = []
            if len(dims) < 2 or min(dims) < 1:
                sys.exit("bench_torch: --models: '%s' is not IN-...-CLASSES" % m)
            args.input, args.classes = dims[0], dims[-1]
            args.hidden = ",".join(str(d) for d in dims[1:-1]) or "none"
        bench_model(args, batches, torch_ok, peak, rows)
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
