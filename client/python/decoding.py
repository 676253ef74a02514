"""Decoding workloads: a GPT-style decoder that generates one token per call
with its key/value caches preallocated as module buffers and written in
place by index_copy_ at a position tensor, as Hugging Face's StaticCache
writes them. Used by decode_test.py and //tools/bench:python.
"""
import os
import tempfile

import numpy
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    """A pre-norm decoder block: attention of the new token over the cache
    (read up to `position` by a mask), then an MLP."""

    def __init__(self, width, heads, positions):
        super().__init__()
        self.heads, self.head_width = heads, width // heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
        cache = (1, heads, positions, width // heads)
        self.register_buffer("keys", torch.zeros(cache))
        self.register_buffer("values", torch.zeros(cache))

    def forward(self, x, position):
        q, k, v = self.qkv(self.norm1(x)).view(1, 1, 3, self.heads, self.head_width) \
            .permute(2, 0, 3, 1, 4)
        self.keys.index_copy_(2, position, k)
        self.values.index_copy_(2, position, v)
        seen = (torch.arange(self.keys.shape[2]) <= position).view(1, 1, 1, -1)
        attended = F.scaled_dot_product_attention(q, self.keys, self.values, attn_mask=seen)
        x = x + self.out(attended.transpose(1, 2).reshape(1, 1, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(torch.nn.Module):
    """Token and position embeddings, `layers` blocks, a final norm and the
    vocabulary's logits: decoder(token [1], position [1]) -> [1, vocab]."""

    def __init__(self, vocab=64, width=64, heads=4, layers=2, positions=256):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, width)
        self.places = torch.nn.Embedding(positions, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads, positions) for _ in range(layers))
        self.norm, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab)

    def forward(self, token, position):
        x = (self.tokens(token) + self.places(position)).view(1, 1, -1)
        for block in self.blocks:
            x = block(x, position)
        return self.head(self.norm(x)).view(1, -1)

    def caches(self):
        return [cache for block in self.blocks for cache in (block.keys, block.values)]


def greedy(step, first_token, start, steps):
    """The tokens `step(token, position)` generates greedily from
    `first_token` at positions start .. start + steps - 1."""
    token, tokens = torch.tensor([first_token]), []
    for position in range(start, start + steps):
        token = step(token, torch.tensor([position])).argmax(-1)
        tokens.append(int(token))
    return tokens


class PagesWritten:
    """Measures the bytes a call writes into tensors, by the kernel's own
    count: each tensor's storage is moved onto a private (copy-on-write)
    mapping of a file holding its bytes, so the first write to a page
    copies it into anonymous memory, which /proc/self/smaps counts per
    mapping. Reads copy nothing. Page granularity: a write of one byte
    counts its whole page."""

    def __init__(self, tensors):
        self._tensors = tensors
        self._mappings = []

    def __enter__(self):
        self._directory = tempfile.TemporaryDirectory(prefix="kiln-pages")
        for i, tensor in enumerate(self._tensors):
            path = os.path.join(self._directory.name, str(i))
            tensor.detach().numpy().tofile(path)
            mapping = numpy.memmap(path, dtype=numpy.float32, mode="c", shape=tuple(tensor.shape))
            with torch.no_grad():
                tensor.set_(torch.from_numpy(mapping))
            self._mappings.append(mapping)
        return self

    def bytes(self):
        """The bytes of the pages written since __enter__."""
        starts = {mapping.ctypes.data for mapping in self._mappings}
        written, current = 0, False
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                    low, high = (int(bound, 16) for bound in fields[0].split("-"))
                    current = any(low <= start < high for start in starts)
                elif current and fields[0] == "Anonymous:":
                    written += int(fields[1]) * 1024
        return written

    def __exit__(self, *exc):
        for tensor, mapping in zip(self._tensors, self._mappings):
            with torch.no_grad():
                tensor.set_(torch.from_numpy(numpy.array(mapping)))
        self._mappings.clear()
        self._directory.cleanup()
