"""Decoding workloads: a GPT-style decoder that generates one token per call
with its key/value caches preallocated as module buffers and written in
place by index_copy_ at a position tensor, as Hugging Face's StaticCache
writes them, and one whose caches are blocks of a shared pool. Used by
decode_test.py and //tools/bench:python.
"""
import ctypes
import math
import mmap
import os
import tempfile

import torch
import torch.nn.functional as F

PAGE = mmap.PAGESIZE


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
        self.register_buffer("keys", page_aligned_zeros(*cache))
        self.register_buffer("values", page_aligned_zeros(*cache))

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


class PagedBlock(torch.nn.Module):
    """Block's attention and MLP for a batch of sequences whose keys and
    values live in a pool shared by all, in blocks of `block` positions:
    slot s of the pool is position s % block of block s // block. A
    sequence's block table row lists its blocks in order."""

    def __init__(self, width, heads, blocks, block):
        super().__init__()
        self.heads, self.head_width, self.block = heads, width // heads, block
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
        self.register_buffer("keys", page_aligned_zeros(blocks * block, heads, width // heads))
        self.register_buffer("values", page_aligned_zeros(blocks * block, heads, width // heads))

    def forward(self, x, lengths, table):
        batch = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).view(batch, 3, self.heads, self.head_width).unbind(1)
        # The new token's slot: position lengths[b] of sequence b.
        slots = table.gather(1, (lengths // self.block).view(-1, 1)).view(-1) * self.block \
            + lengths % self.block
        self.keys.index_copy_(0, slots, k)
        self.values.index_copy_(0, slots, v)
        # Each sequence's blocks, in table order, as vLLM's reference reads
        # them (pool[table]); the mask keeps each sequence's own positions,
        # up to its length. Kiln reads the pool through the table instead.
        # (The positions by number, not -1: an empty batch has none to infer.)
        positions = table.shape[1] * self.block
        keys, values = (pool.view(-1, self.block, self.heads, self.head_width)[table]
                        .view(batch, positions, self.heads, self.head_width).transpose(1, 2)
                        for pool in (self.keys, self.values))
        places = torch.arange(positions)
        seen = (places.view(1, -1) <= lengths.view(-1, 1)).view(batch, 1, 1, positions)
        attended = F.scaled_dot_product_attention(
            q.view(batch, self.heads, 1, self.head_width), keys, values, attn_mask=seen)
        x = x + self.out(attended.reshape(batch, self.heads * self.head_width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class PagedDecoder(torch.nn.Module):
    """Decoder over a paged cache: decoder(tokens [B], lengths [B], table
    [B, blocks] int32) -> [B, vocab], each sequence's new token at position
    lengths[b], its keys and values written to the slot its table names."""

    def __init__(self, vocab=64, width=64, heads=4, layers=2, blocks=64, block=16,
                 positions=1024):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, width)
        self.places = torch.nn.Embedding(positions, width)
        self.blocks = torch.nn.ModuleList(
            PagedBlock(width, heads, blocks, block) for _ in range(layers))
        self.norm, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab)

    def forward(self, tokens, lengths, table):
        x = self.tokens(tokens) + self.places(lengths)
        table = table.to(torch.int64)
        for block in self.blocks:
            x = block(x, lengths, table)
        return self.head(self.norm(x))

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


def page_aligned_zeros(*shape):
    """A float32 tensor of zeros in memory of its own, page-aligned (an
    anonymous mapping), whose writes PagesWritten can count."""
    count = math.prod(shape)
    memory = mmap.mmap(-1, max(count * 4, 1))
    return torch.frombuffer(memory, dtype=torch.float32, count=count).view(shape)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_PROT_READ_WRITE, _MAP_PRIVATE_FIXED = 0x1 | 0x2, 0x02 | 0x10


class PagesWritten:
    """Measures the bytes a call writes into page-aligned tensors
    (page_aligned_zeros), by the kernel's own count: each tensor's pages
    are mapped, in place, privately (copy-on-write) from a file holding
    their bytes, so the first write to a page copies it into anonymous
    memory, which /proc/self/smaps counts per mapping. Reads copy nothing;
    every alias of the memory (a compiled module's) sees the same pages.
    Page granularity: a write of one byte counts its whole page."""

    def __init__(self, tensors):
        self._ranges = []
        for tensor in tensors:
            start, size = tensor.data_ptr(), tensor.numel() * tensor.element_size()
            if start % PAGE or size % PAGE or not tensor.is_contiguous():
                raise ValueError("PagesWritten counts contiguous tensors of whole pages: make "
                                 "them with page_aligned_zeros")
            self._ranges.append((tensor, start, size))

    def __enter__(self):
        with tempfile.TemporaryFile(prefix="kiln-pages") as file:
            for tensor, start, size in self._ranges:
                offset = file.seek(0, os.SEEK_END)
                file.write(tensor.detach().numpy().tobytes())
                file.flush()
                mapped = _libc.mmap(start, size, _PROT_READ_WRITE, _MAP_PRIVATE_FIXED,
                                    file.fileno(), offset)
                if mapped != start:
                    raise OSError(ctypes.get_errno(), "mmap over a tensor's pages failed")
        return self

    def bytes(self):
        """The bytes of the pages written since __enter__."""
        written, current = 0, False
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                    low, high = (int(bound, 16) for bound in fields[0].split("-"))
                    current = any(low < start + size and start < high
                                  for _, start, size in self._ranges)
                elif current and fields[0] == "Anonymous:":
                    written += int(fields[1]) * 1024
        return written

    def __exit__(self, *exc):
        return False
