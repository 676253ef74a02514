"""Convolution nets beyond the public workloads, from torchvision (the
checkout's .venv) with random weights (nothing can be downloaded), in eval
mode. Same conventions as workloads.py: FACTORY() returns
(fn, example_inputs). Traced by //tests/workloads:traced_models and
timed by //tools/bench:kernels (resnet18_b8)."""
import torch


def _seeded(*shapes):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=g) for s in shapes]


def resnet18_b8():
    """The public resnet18 at a serving batch: 8 images of 128x128."""
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).eval()
    return (lambda x: m(x)), _seeded((8, 3, 128, 128))


def mobilenet_v3_small():
    """A depthwise-separable network: depthwise convolutions, squeeze and
    excitation (pooling, 1x1 convolutions, hardsigmoid), hardswish."""
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v3_small(weights=None).eval()
    return (lambda x: m(x)), _seeded((2, 3, 96, 96))


WORKLOADS = {fn.__name__: fn for fn in (resnet18_b8, mobilenet_v3_small)}
