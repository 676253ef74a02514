"""Bad inputs of the decoding workloads (decoding.py), as a hostile or
careless caller passes them: a static-cache step, a paged step through a
block table, and attention over a batch at per-sequence lengths. Each runs
through eager and through Kiln: where eager raises, Kiln raises the same
exception type with a message that names the problem, and nothing is
written outside a buffer; where eager runs (an empty batch, a sequence of length 0),
Kiln gives eager's result.

Runs under pytest (the checkout's .venv) on a real kilnd (conftest.py); each
test case is counted by the test command through the JUnit XML written to
$XML_OUTPUT_FILE.
"""
import copy
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches  # noqa: E402
from decoding import Decoder, PagedDecoder  # noqa: E402
from decode_test import AttendToLengths  # noqa: E402

BATCH = {0: {0: "B"}, 1: {0: "B"}, 2: {0: "B"}}


def compiled(module, example, **options):
    """The module, an eager copy of it and the module compiled."""
    eager = copy.deepcopy(module)
    with torch.no_grad():
        return module, eager, kiln.compile(module, example, strict=True, **options)


def paged():
    """A paged decoder (a pool of 16 blocks of 16 positions), compiled for a
    symbolic batch; every call runs sequences 0 and 1 of TABLE."""
    torch.manual_seed(0)
    return compiled(PagedDecoder(blocks=16, layers=2).eval(),
                    (torch.tensor([3, 5]), torch.tensor([0, 0]), TABLE), dynamic=BATCH)


def static():
    """A decoder whose caches hold 64 positions, written at a position tensor."""
    torch.manual_seed(0)
    return compiled(Decoder(positions=64).eval(), (torch.tensor([0]), torch.tensor([0])))


def batched():
    """Attention of 2 sequences over 128 positions each, to their lengths."""
    torch.manual_seed(0)
    return compiled(AttendToLengths(2, 128), (torch.randn(2, 4, 1, 64), torch.tensor([1, 1])))


TABLE = torch.randperm(16, generator=torch.Generator().manual_seed(1)).to(torch.int32).view(2, 8)


def table_with(row, block, entry):
    table = TABLE.clone()
    table[row, block] = entry
    return table


TOKENS = torch.tensor([3, 5])
# name: (workload, inputs, eager's exception type and message (a regex), Kiln's message).
# Sequence 1 is at length 70, in its table's block 4; sequence 0 at 20, in block 1.
BAD = {
    "a table entry past the pool": (
        paged, (TOKENS, torch.tensor([20, 70]), table_with(0, 7, 16)),
        IndexError, r"index 16 is out of bounds for dimension 0 with size 16",
        "index: index 16 is out of bounds for dim 0 with size 16"),
    "a negative table entry past the pool": (
        paged, (TOKENS, torch.tensor([20, 70]), table_with(1, 6, -17)),
        IndexError, r"index -17 is out of bounds for dimension 0 with size 16",
        "index: index -17 is out of bounds for dim 0 with size 16"),
    "a table entry past the pool where the new token goes": (
        paged, (TOKENS, torch.tensor([20, 70]), table_with(1, 4, 16)),
        IndexError, r"index_copy_\(\): index 262 is out of bounds for dimension 0 with size 256",
        "index_copy: index 262 is out of bounds for dim 0 with size 256"),
    "a length at the table's capacity": (
        paged, (TOKENS, torch.tensor([20, 128]), TABLE),
        RuntimeError, r"index 8 is out of bounds for dimension 1 with size 8",
        "gather: index 8 is out of bounds for dim 1 with size 8"),
    "a length past the table's capacity": (
        paged, (TOKENS, torch.tensor([500, 20]), TABLE),
        RuntimeError, r"index 31 is out of bounds for dimension 1 with size 8",
        "gather: index 31 is out of bounds for dim 1 with size 8"),
    "a length past the positions embedded": (
        paged, (TOKENS, torch.tensor([20, 1024]), TABLE),
        IndexError, r"index out of range in self",
        "embedding: index 1024 is out of bounds for dim 0 with size 1024"),
    "a negative length": (
        paged, (TOKENS, torch.tensor([-1, 20]), TABLE),
        IndexError, r"index out of range in self",
        "embedding: index -1 is out of bounds for dim 0 with size 1024"),
    "more lengths than table rows": (
        paged, (torch.tensor([3, 5, 7]), torch.tensor([20, 70, 1]), TABLE),
        RuntimeError, r"Size does not match at dimension 0",
        "input 2 'arg2_1': dim 0 makes s0 = 2, but another input made it 3"),
    "more table rows than lengths": (
        paged, (TOKENS, torch.tensor([20, 70]), torch.cat([TABLE, TABLE[:1]])),
        RuntimeError, r"shape '\[2, 128, 4, 16\]' is invalid for input of size 24576",
        "input 2 'arg2_1': dim 0 makes s0 = 3, but another input made it 2"),
    "a position past the cache": (
        static, (torch.tensor([1]), torch.tensor([64])),
        IndexError, r"index out of range in self",
        "index_copy: index 64 is out of bounds for dim 2 with size 64"),
    "a negative position": (
        static, (torch.tensor([1]), torch.tensor([-1])),
        IndexError, r"index out of range in self",
        "index_copy: index -1 is out of bounds for dim 2 with size 64"),
    "a position tensor with several values": (
        static, (torch.tensor([1]), torch.tensor([3, 4])),
        RuntimeError, r"expected input with shape \[\*, 64\]",
        "input 1 'arg1_1': dim 0 has size 2; the graph was compiled for 1 (static shapes)"),
    "lengths of another batch than the queries": (
        batched, (torch.randn(2, 4, 1, 64), torch.tensor([1, 2, 3])),
        RuntimeError, r"The size of tensor a \(2\) must match the size of tensor b \(3\)",
        "input 1 'arg1_1': dim 0 has size 3; the graph was compiled for 2 (static shapes)"),
}


def buffers(module):
    return [buffer.clone() for buffer in module.buffers()]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_decoding_input_raises_as_eager(name):
    """Kiln's error is eager's type, and its message names the op and the
    index that is out of bounds, or the input its guards refuse. Every
    index is checked before the write or read it makes, so nothing lands
    outside a buffer; as in eager, rows a step wrote before the error stay
    written."""
    workload, inputs, eager_type, eager_message, message = BAD[name]
    _, eager, step = workload()
    with torch.no_grad():
        with pytest.raises(eager_type, match=eager_message):
            eager(*inputs)
        with pytest.raises(eager_type) as error:
            step(*inputs)
    assert str(error.value) == message


def test_an_empty_batch_and_a_sequence_of_length_0_decode_as_eager():
    """An empty batch gives an empty result and writes nothing; a sequence
    at length 0 attends to its new token only."""
    module, eager, step = paged()
    before = buffers(module)
    with torch.no_grad():
        empty = (TOKENS[:0], torch.tensor([], dtype=torch.int64), TABLE[:0])
        got = step(*empty)
        assert got.shape == (0, 64) and eager(*empty).shape == (0, 64)
        for buffer, unchanged in zip(module.buffers(), before):
            assert torch.equal(buffer, unchanged)
        for inputs in ((TOKENS, torch.tensor([0, 0]), TABLE),
                       (TOKENS[:1], torch.tensor([1]), TABLE[:1])):
            assert_matches(step(*inputs), eager(*inputs))
            for got, want in zip(module.buffers(), eager.buffers()):
                assert_matches(got, want)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
