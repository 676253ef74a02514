#!/usr/bin/env python3
"""A minimal serving worker on Kiln (docs/PYTHON.md).

    examples/serve_worker.py --save layer.kiln   # once: trace and save the layer
    examples/serve_worker.py layer.kiln          # a worker: answers lines on stdin

The layer is the public transformer encoder layer (d_model 64, 4 heads),
saved with its sequence and batch dims symbolic. A worker loads the package
with kiln.load: no model code, no trace, and on a machine where kilnd has
compiled it before, no compile and no round trip. Each request is a line
"SEQ BATCH"; the answer is the sum of |output| of the layer on a seeded input
of that shape. On its first answer the worker says how long it took from
`import torch` done.
"""
import sys
import time

import torch

TORCH_READY = time.perf_counter()

import kiln  # noqa: E402


def save(path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128).eval()
    with torch.no_grad():
        kiln.save(layer, [torch.randn(16, 2, 64)], path, dynamic={0: {0: "S", 1: "B"}})
    print(f"saved {path}")


def serve(path):
    layer = kiln.load(path)
    first = True
    for line in sys.stdin:
        seq, batch = (int(word) for word in line.split())
        x = torch.randn(seq, batch, 64, generator=torch.Generator().manual_seed(seq * 1000 + batch))
        with torch.no_grad():
            y = layer(x)
        answer = f"{seq} {batch}: |y| = {float(y.abs().sum()):.2f}"
        if first:
            first = False
            answer += f"  (first answer {1e3 * (time.perf_counter() - TORCH_READY):.1f} ms " \
                      f"after import torch)"
        print(answer, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--save":
        save(sys.argv[2])
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        serve(sys.argv[1])
    else:
        sys.exit(__doc__)
