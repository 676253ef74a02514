"""Writes that touch only what they write (docs/ARCHITECTURE.md, "Outputs
that are inputs"): index_copy_, x[:, :, pos] = k, index_put_ with and
without accumulate and scatter_ write only the elements they name, in the
buffer's own storage, with out-of-range positions an IndexError; and a
GPT-style decoder with a static cache (decoding.py) generates eager's
tokens, writing the same bytes per step at any cache length.

Runs under pytest (the checkout's .venv) on a real kilnd (conftest.py); each
test case is counted by the test command through the JUnit XML written to
$XML_OUTPUT_FILE.
"""
import copy
import os
import re
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
from conftest import assert_matches, compiles  # noqa: E402
from decoding import (PAGE, Decoder, PagedDecoder, PagesWritten, greedy,  # noqa: E402
                      page_aligned_zeros)


class Cache(torch.nn.Module):
    """A [1, heads, positions, width] cache written at `position` by `write`."""

    def __init__(self, write, heads=4, positions=512, width=64):
        super().__init__()
        self.write = write
        self.register_buffer("cache", page_aligned_zeros(1, heads, positions, width))

    def forward(self, rows, position):
        self.write(self.cache, rows, position)
        return self.cache.sum(-1)


WRITES = {
    "index_copy_": lambda cache, rows, position: cache.index_copy_(2, position, rows),
    "setitem": lambda cache, rows, position: cache.__setitem__(
        (slice(None), slice(None), position), rows),
    "scatter_": lambda cache, rows, position: cache.scatter_(
        2, position.view(1, 1, -1, 1).expand(rows.shape), rows),
}


def rows_written_in_place(compiled):
    """How many kernels write rows into a buffer's own storage: scatter-writes
    (loops over the rows, not the buffer) whose output the planner put in
    its input's storage."""
    explained = kiln.explain(compiled)
    writes = re.findall(r"kernel \d+: scatter-write along dim \d+ %(\d+)", explained)
    in_place = re.findall(r"output \d+ \(input \d+'s storage\): \d+ bytes, holds %\d+, %(\d+)",
                          explained)
    return len(set(writes) & set(in_place))


def compiled_cache(write):
    torch.manual_seed(0)
    module = Cache(write)
    eager = copy.deepcopy(module)
    with torch.no_grad():
        compiled = kiln.compile(module, (torch.randn(1, 4, 1, 64), torch.tensor([0])),
                                strict=True)
    return module, eager, compiled


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_write_at_a_position_writes_only_its_rows_in_the_buffer(name):
    module, eager, compiled = compiled_cache(WRITES[name])
    with torch.no_grad():
        for position in (3, 0, 511, 3):
            rows, at = torch.randn(1, 4, 1, 64), torch.tensor([position])
            storage = module.cache.data_ptr()
            with PagesWritten([module.cache]) as pages:
                assert_matches(compiled(rows, at), eager(rows, at))
                # One 256-byte row in each of the 4 heads' planes: 4 pages,
                # of the cache's 128.
                assert pages.bytes() == 4 * PAGE, kiln.explain(compiled)
            assert_matches(module.cache, eager.cache)
            assert module.cache.data_ptr() == storage
    assert compiled.artifact()["signature"]["output_aliases"] == [{"output": 1, "input": 2}]
    assert rows_written_in_place(compiled) == 1, kiln.explain(compiled)


def test_a_position_out_of_range_is_an_index_error_and_writes_nothing():
    module, _, compiled = compiled_cache(WRITES["index_copy_"])
    before = module.cache.clone()
    with torch.no_grad(), pytest.raises(IndexError) as error:
        compiled(torch.randn(1, 4, 1, 64), torch.tensor([512]))
    assert str(error.value) == "index_copy: index 512 is out of bounds for dim 2 with size 512"
    torch.testing.assert_close(module.cache, before, rtol=0, atol=0)
    with torch.no_grad():  # and a call in range after it runs as before
        compiled(torch.ones(1, 4, 1, 64), torch.tensor([7]))
    assert torch.equal(module.cache[0, :, 7], torch.ones(4, 64))


class Rows(torch.nn.Module):
    """x[positions] = values (or += with accumulate) on an [8, 16] buffer."""

    def __init__(self, accumulate):
        super().__init__()
        self.accumulate = accumulate
        self.register_buffer("x", torch.arange(128.0).view(8, 16))

    def forward(self, values, positions):
        self.x.index_put_((positions,), values, accumulate=self.accumulate)
        return self.x * 1


def test_repeated_positions_add_up_with_accumulate_and_the_last_wins_without():
    values = torch.randn(5, 16)
    positions = torch.tensor([1, 6, 1, -1, 1])  # -1 is row 7, as in eager
    for accumulate in (True, False):
        module, eager = Rows(accumulate), Rows(accumulate)
        with torch.no_grad():
            compiled = kiln.compile(module, (values, positions), strict=True)
            module.x.copy_(eager.x)
            assert_matches(compiled(values, positions), eager(values, positions))
        expected = torch.arange(128.0).view(8, 16)
        if accumulate:
            expected[1] += values[0] + values[2] + values[4]
            expected[6] += values[1]
            expected[7] += values[3]
        else:  # deterministic in Kiln: the last of the repeated positions
            expected[1], expected[6], expected[7] = values[4], values[1], values[3]
        torch.testing.assert_close(module.x, expected, rtol=1e-6, atol=1e-5)


def test_a_decoder_with_a_static_cache_generates_eagers_tokens():
    torch.manual_seed(0)
    decoder = Decoder(positions=64).eval()
    eager = copy.deepcopy(decoder)
    with torch.no_grad():
        compiled = kiln.compile(decoder, (torch.tensor([0]), torch.tensor([0])), strict=True)
        for cache in decoder.caches():
            cache.zero_()
        assert greedy(compiled, 1, 0, 64) == greedy(eager, 1, 0, 64)
        for got, want in zip(decoder.caches(), eager.caches()):
            assert_matches(got, want)
    assert rows_written_in_place(compiled) == len(decoder.caches()), kiln.explain(compiled)


def test_a_decoder_compiled_by_dynamo_writes_its_caches_and_generates_eagers_tokens():
    """torch.compile(backend=kiln.backend): Dynamo's graph writes the caches
    with index_copy_ calls whose results nothing reads; they are kept."""
    torch.manual_seed(0)
    decoder = Decoder(positions=64).eval()
    eager = copy.deepcopy(decoder)
    compiled = torch.compile(decoder, backend=kiln.backend)
    with torch.no_grad():
        assert greedy(compiled, 1, 0, 64) == greedy(eager, 1, 0, 64)
    for got, want in zip(decoder.caches(), eager.caches()):
        assert_matches(got, want)


def test_a_transformers_static_cache_decodes_eagers_tokens_through_dynamo():
    """Hugging Face's StaticCache (index_copy_ at cache_position) of a tiny
    random Llama, each step torch.compile(backend=kiln.backend)'d: eager's
    16 greedy tokens, and eager's cache contents."""
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()

    def step(token, cache, position):
        return model(input_ids=token, past_key_values=cache, cache_position=position,
                     use_cache=True).logits

    def generate(step):
        cache, token, tokens = StaticCache(config=config, max_cache_len=32), torch.tensor([[1]]), []
        for position in range(16):
            token = step(token, cache, torch.tensor([position]))[:, -1].argmax(-1, keepdim=True)
            tokens.append(int(token))
        return tokens, cache

    compiled_before = compiles()
    with torch.no_grad():
        (got, cache), (want, eager_cache) = generate(torch.compile(step, backend=kiln.backend)), \
            generate(step)
    assert got == want
    assert compiles() > compiled_before
    for layer, eager_layer in zip(cache.layers, eager_cache.layers):
        assert_matches(layer.keys, eager_layer.keys)
        assert_matches(layer.values, eager_layer.values)


def test_a_decoding_step_writes_the_same_bytes_at_any_cache_length():
    """decode_bytes_written_per_step: pages one step writes in its caches,
    counted by the kernel (PagesWritten): each layer's keys and values get
    one row per head, one page each, however long the cache."""
    written = {}
    for positions in (256, 2048):
        torch.manual_seed(0)
        decoder = Decoder(positions=positions).eval()
        with torch.no_grad():
            compiled = kiln.compile(decoder, (torch.tensor([0]), torch.tensor([0])), strict=True)
            greedy(compiled, 1, 0, 4)
            with PagesWritten(decoder.caches()) as pages:
                compiled(torch.tensor([3]), torch.tensor([100]))
                written[positions] = pages.bytes()
        assert rows_written_in_place(compiled) == len(decoder.caches()), kiln.explain(compiled)
    layers, heads = 2, 4
    assert written == {256: 2 * layers * heads * PAGE, 2048: 2 * layers * heads * PAGE}


def test_a_paged_decoder_serves_sequences_joining_and_leaving_with_eagers_tokens():
    """Continuous batching: sequences at their own lengths, through a block
    table into one pool, joining and leaving a symbolic batch; 64 greedy
    steps, eager's tokens, one compile."""
    torch.manual_seed(0)
    decoder = PagedDecoder().eval()
    eager = copy.deepcopy(decoder)
    table = torch.randperm(64).to(torch.int32).view(4, 16)  # 16 blocks of 16 each
    dynamic = {0: {0: "B"}, 1: {0: "B"}, 2: {0: "B"}}
    with torch.no_grad():
        compiled = kiln.compile(decoder, (torch.tensor([0, 0]), torch.tensor([0, 0]), table[:2]),
                                dynamic=dynamic, strict=True)
        for cache in decoder.caches():
            cache.zero_()
        compiled_before = compiles()
        lengths, tokens = {0: 0, 1: 9, 2: 40}, {0: 1, 1: 2, 2: 3}
        for step in range(64):
            if step == 20:
                lengths[3], tokens[3] = 0, 4  # joins
            if step == 40:
                del lengths[1], tokens[1]  # leaves
            active = sorted(lengths)
            inputs = (torch.tensor([tokens[s] for s in active]),
                      torch.tensor([lengths[s] for s in active]), table[active])
            got, want = compiled(*inputs).argmax(-1), eager(*inputs).argmax(-1)
            assert got.tolist() == want.tolist(), step
            for s, token in zip(active, got.tolist()):
                tokens[s], lengths[s] = token, lengths[s] + 1
        assert compiles() == compiled_before
        for got, want in zip(decoder.caches(), eager.caches()):
            assert_matches(got, want)
    assert rows_written_in_place(compiled) == len(decoder.caches()), kiln.explain(compiled)


def test_a_paged_step_reads_the_pool_through_the_table_up_to_each_length():
    """pool[table] is not gathered: the attention kernel reads each
    sequence's blocks through the table (kiln.attention_to_length with
    block=16), up to its length, with eager's logits."""
    torch.manual_seed(0)
    decoder = PagedDecoder(blocks=16, layers=1).eval()
    eager = copy.deepcopy(decoder)
    table = torch.randperm(16).to(torch.int32).view(2, 8)
    inputs = (torch.tensor([3, 5]), torch.tensor([0, 70]), table)
    with torch.no_grad():
        compiled = kiln.compile(decoder, inputs, strict=True)
        core = kiln.explain(compiled).split("== core graph ==")[1].split("== loop IR ==")[0]
        assert "aten.index_select" not in core, core
        assert re.search(r"kiln\.attention_to_length\.default\([^)]*block=16, blocks=8", core), core
        for cache in decoder.caches():
            cache.copy_(torch.randn(cache.shape))
        for got, want in zip(decoder.caches(), eager.caches()):
            want.copy_(got)
        for lengths in ([0, 70], [127, 1], [64, 15]):
            at = (inputs[0], torch.tensor(lengths), table)
            assert_matches(compiled(*at), eager(*at))


class Attend(torch.nn.Module):
    """The new token's attention over a [1, 4, positions, 64] cache, read up to
    `position` by a mask, as Block.forward attends."""

    def __init__(self, positions):
        super().__init__()
        self.register_buffer("keys", torch.randn(1, 4, positions, 64))
        self.register_buffer("values", torch.randn(1, 4, positions, 64))

    def forward(self, query, position):
        seen = (torch.arange(self.keys.shape[2]) <= position).view(1, 1, 1, -1)
        return torch.nn.functional.scaled_dot_product_attention(
            query, self.keys, self.values, attn_mask=seen)


def compiled_attend(positions):
    torch.manual_seed(0)
    module = Attend(positions)
    with torch.no_grad():
        compiled = kiln.compile(module, (torch.randn(1, 4, 1, 64), torch.tensor([0])),
                                strict=True)
    assert "kiln_attention_f32(rt, &call)" in kiln.explain(compiled)
    return module, compiled


def test_single_query_attention_is_one_pass_over_the_cache_and_matches_eager():
    """At 2,048 positions the kernel splits each head's keys across threads
    and merges: position 0 leaves the later ranges fully masked. A position
    of -1 masks every key, which gives zeros, as eager's kernel does."""
    module, compiled = compiled_attend(2048)
    query = torch.randn(1, 4, 1, 64)
    with torch.no_grad():
        for position in (0, 1, 700, 2047, -1):
            at = torch.tensor([position])
            torch.testing.assert_close(compiled(query, at), module(query, at), rtol=1e-5,
                                       atol=1e-6)
        assert torch.equal(compiled(query, torch.tensor([-1])), torch.zeros(1, 4, 1, 64))


def test_keys_and_values_past_the_position_are_never_read():
    """NaNs past the position stay out of the result: the masked keys are
    skipped, not multiplied by zero. (Eager's kernel multiplies its zero
    weights by the values, so there NaNs reach every head's result.)"""
    module, compiled = compiled_attend(256)
    query = torch.randn(1, 4, 1, 64)
    with torch.no_grad():
        for position in (100, 1, 0):  # each position's NaNs lie past the next's
            clean = torch.nn.functional.scaled_dot_product_attention(
                query, module.keys[:, :, :position + 1], module.values[:, :, :position + 1])
            module.keys[:, :, position + 1:] = float("nan")
            module.values[:, :, position + 1:] = float("nan")
            at = torch.tensor([position])
            assert module(query, at).isnan().all()
            torch.testing.assert_close(compiled(query, at), clean, rtol=1e-5, atol=1e-6)


def test_a_position_mask_becomes_the_bound_the_kernel_reads():
    """The mask `arange(n) <= position` is neither built nor scanned: the
    kernel reads the position (kiln.attention_to_length) and stops there.
    Positions past the cache keep every key, -1 none (zeros), as eager."""
    module, compiled = compiled_attend(2048)
    explained = kiln.explain(compiled)
    assert "kiln.attention_to_length.default" in explained, explained
    assert "aten.where" not in explained.split("== core graph ==")[1], explained
    query = torch.randn(1, 4, 1, 64)
    with torch.no_grad():
        for position in (0, 1, 700, 2046, 2047, 5000, -1, -3):
            at = torch.tensor([position])
            torch.testing.assert_close(compiled(query, at), module(query, at), rtol=1e-5,
                                       atol=1e-6)


class AttendToLengths(torch.nn.Module):
    """A batch of sequences, each attending to its first lengths[b] positions
    of a [batch, 4, positions, 64] cache, as PagedBlock masks them."""

    def __init__(self, batch, positions):
        super().__init__()
        self.register_buffer("keys", torch.randn(batch, 4, positions, 64))
        self.register_buffer("values", torch.randn(batch, 4, positions, 64))

    def forward(self, query, lengths):
        places = torch.arange(self.keys.shape[2])
        seen = (places.view(1, -1) < lengths.view(-1, 1)).view(-1, 1, 1, self.keys.shape[2])
        return torch.nn.functional.scaled_dot_product_attention(
            query, self.keys, self.values, attn_mask=seen)


def test_per_sequence_lengths_bound_each_row_and_a_zero_length_is_eagers():
    torch.manual_seed(0)
    module = AttendToLengths(3, 512)
    query = torch.randn(3, 4, 1, 64)
    with torch.no_grad():
        compiled = kiln.compile(module, (query, torch.tensor([1, 1, 1])), strict=True)
        assert "kiln.attention_to_length.default" in kiln.explain(compiled)
        for lengths in ([1, 300, 512], [0, 17, 600], [512, 0, 2]):
            at = torch.tensor(lengths)
            torch.testing.assert_close(compiled(query, at), module(query, at), rtol=1e-5,
                                       atol=1e-6)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
