#!/usr/bin/env python3
"""One MLP training step in numpy: the CPU peer of `train --bench`.

The same work per step as kernels/train's --bench on the CPU: gather a
batch by index from a random dataset (max(4*B, 8192) examples, features
uniform in [0, 1), random labels), forward through Linear/ReLU layers
(default 784-1024-1024-10, FP32, W as [out][in] like nn.Linear, initialised
U(-1/sqrt(fan_in), 1/sqrt(fan_in))), mean softmax cross-entropy, backward
(no input gradient for the first layer), and AdamW (lr 1e-3, betas
0.9/0.999, eps 1e-8, decoupled weight decay 0.01 on weights only) over one
flat parameter buffer. Written the way a careful numpy user would: every
temporary preallocated, in-place ufuncs with out=, matmuls through BLAS
(np.matmul with out=).

Prints one line per batch size, in the format of `train --bench`:

    bench | device numpy | model 784-1024-1024-10 | batch 64 | 1234 samples/s | ...

Pin BLAS to one thread for the usual comparison (bench_cpu.sh does):
    OPENBLAS_NUM_THREADS=1 python3 bench/bench_numpy.py --batches 64,4096
"""
import argparse
import sys
import time

import numpy as np


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", default="1024,1024", help="hidden widths (1024,1024)")
    p.add_argument("--input", type=int, default=784, help="input features (784)")
    p.add_argument("--classes", type=int, default=10, help="classes (10)")
    p.add_argument("--batches", default="64,4096", help="batch sizes (64,4096)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per batch size (3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (1)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def step_flops(dims, batch):
    """Matmul FLOPs of one step (mlp_step_flops in mlp_cpu.c)."""
    f = 0.0
    for layer in range(len(dims) - 1):
        f += 2.0 * batch * dims[layer] * dims[layer + 1] * (2 if layer == 0 else 3)
    return f


class MLP:
    def __init__(self, dims, batch, rng):
        self.dims = dims
        n_layers = len(dims) - 1
        n_w = sum(dims[l] * dims[l + 1] for l in range(n_layers))
        n_p = n_w + sum(dims[1:])
        self.n_w = n_w
        f32 = np.float32
        self.p = np.empty(n_p, f32)
        self.g = np.empty(n_p, f32)
        self.m = np.zeros(n_p, f32)
        self.v = np.zeros(n_p, f32)
        self.t1 = np.empty(n_p, f32)
        self.t2 = np.empty(n_p, f32)
        self.W, self.b, self.gW, self.gb = [], [], [], []
        off_w, off_b = 0, n_w
        for l in range(n_layers):
            i, o = dims[l], dims[l + 1]
            bound = 1.0 / np.sqrt(i)
            self.W.append(self.p[off_w:off_w + o * i].reshape(o, i))
            self.gW.append(self.g[off_w:off_w + o * i].reshape(o, i))
            self.b.append(self.p[off_b:off_b + o])
            self.gb.append(self.g[off_b:off_b + o])
            self.W[l][...] = rng.uniform(-bound, bound, (o, i))
            self.b[l][...] = rng.uniform(-bound, bound, o)
            off_w += o * i
            off_b += o
        # activations (post-ReLU) and gradient buffers, per layer
        self.acts = [np.empty((batch, dims[l + 1]), f32) for l in range(n_layers)]
        self.dacts = [np.empty((batch, dims[l]), f32) for l in range(n_layers)]
        self.rows = np.arange(batch)

    def step(self, x, y, t, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
        n_layers = len(self.dims) - 1
        B = x.shape[0]
        h = x
        for l in range(n_layers):
            a = self.acts[l]
            np.matmul(h, self.W[l].T, out=a)
            a += self.b[l]
            if l < n_layers - 1:
                np.maximum(a, 0, out=a)
            h = a
        # softmax cross-entropy: the gradient overwrites the logits
        logits = self.acts[-1]
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        s = logits.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - np.log(logits[self.rows, y])))
        logits /= s
        logits[self.rows, y] -= 1.0
        logits *= np.float32(1.0 / B)
        d = logits
        for l in range(n_layers - 1, -1, -1):
            inp = x if l == 0 else self.acts[l - 1]
            if l < n_layers - 1:
                d *= self.acts[l] > 0
            np.sum(d, axis=0, out=self.gb[l])
            np.matmul(d.T, inp, out=self.gW[l])
            if l > 0:
                dn = self.dacts[l]
                np.matmul(d, self.W[l], out=dn)
                d = dn
        # AdamW over the flat buffer
        g, m, v, p, t1, t2 = self.g, self.m, self.v, self.p, self.t1, self.t2
        bc1 = 1.0 - b1 ** t
        bc2 = 1.0 - b2 ** t
        m *= np.float32(b1)
        np.multiply(g, np.float32(1.0 - b1), out=t1)
        m += t1
        v *= np.float32(b2)
        np.multiply(g, g, out=t1)
        t1 *= np.float32(1.0 - b2)
        v += t1
        np.multiply(v, np.float32(1.0 / bc2), out=t1)
        np.sqrt(t1, out=t1)
        t1 += np.float32(eps)
        np.multiply(m, np.float32(1.0 / bc1), out=t2)
        t2 /= t1
        p[:self.n_w] *= np.float32(1.0 - lr * wd)
        t2 *= np.float32(lr)
        p -= t2
        return loss


def bench(args, dims, batch):
    rng = np.random.default_rng(args.seed)
    n = max(4 * batch, 8192)
    X = rng.random((n, dims[0]), dtype=np.float32)
    Y = rng.integers(0, dims[-1], n).astype(np.intp)
    model = MLP(dims, batch, rng)
    xb = np.empty((batch, dims[0]), np.float32)
    perm = rng.permutation(n)
    pos = 0
    t0 = 0.0
    loss = 0.0
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            t0 = time.perf_counter()
        if pos + batch > n:
            perm = rng.permutation(n)
            pos = 0
        idx = perm[pos:pos + batch]
        pos += batch
        np.take(X, idx, axis=0, out=xb)
        loss = model.step(xb, Y[idx], i + 1, args.lr, args.wd)
    dt = time.perf_counter() - t0
    if not np.isfinite(loss):
        sys.exit("bench_numpy: loss is not finite")
    return batch * args.steps / dt, dt * 1000.0 / args.steps, step_flops(dims, batch) * args.steps / dt


def main():
    args = parse_args()
    hidden = [int(h) for h in args.hidden.split(",") if h and h != "none"]
    dims = [args.input] + hidden + [args.classes]
    model_s = "-".join(str(d) for d in dims)
    for b in (int(s) for s in args.batches.split(",")):
        sps, ms, flops = bench(args, dims, b)
        print("bench | device numpy %s | model %s | batch %d | %.0f samples/s | %.3f ms/step | "
              "%.2f GFLOP/s" % (np.__version__, model_s, b, sps, ms, flops * 1e-9), flush=True)


if __name__ == "__main__":
    main()
