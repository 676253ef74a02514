"""Random numbers drawn natively (kiln/_random.py, client/runtime/random.h):
from the same generator state, a compiled function and eager draw the same
numbers and leave torch's generator in the same state. Through a real kilnd
(conftest.py starts it).
"""
import os
import sys
import warnings

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kiln  # noqa: E402
import opinfo_test  # noqa: E402
from conftest import compiles, fresh_process_result  # noqa: E402


def assert_draws_as_eager(compiled, fn, *inputs, seed=0):
    """compiled(*inputs) and fn(*inputs) from torch's generator seeded with
    `seed`: the same tensors (float32 within a few units in the last place
    of torch's vectorized log, sin and cos) and the same generator state
    after."""
    torch.manual_seed(seed)
    want = fn(*inputs)
    want_state = torch.get_rng_state()
    torch.manual_seed(seed)
    got = compiled(*inputs)
    assert torch.equal(torch.get_rng_state(), want_state)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def draws(x):
    return (torch.rand(3, 4), x + torch.randn_like(x), torch.empty(5).uniform_(-1.0, 2.0),
            torch.empty(37, dtype=torch.float64).normal_(1.0, 2.0),
            torch.randn(20), torch.normal(x, 2.0), torch.rand_like(x, dtype=torch.float64),
            torch.normal(-1.0, 0.5, size=(2, 9)), torch.randn(3, dtype=torch.float64))


def test_draws_as_eager_from_the_same_state_and_leaves_the_same_state():
    x = torch.randn(7)
    compiled = kiln.compile(draws, [x], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    for seed in (0, 1234):
        assert_draws_as_eager(compiled, draws, x, seed=seed)


def test_calls_in_a_row_continue_the_stream():
    x = torch.randn(17)
    compiled = kiln.compile(draws, [x], strict=True)
    torch.manual_seed(5)
    want = [draws(x) for _ in range(3)]
    want_state = torch.get_rng_state()
    torch.manual_seed(5)
    got = [compiled(x) for _ in range(3)]
    assert torch.equal(torch.get_rng_state(), want_state)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got[0][0], got[1][0]), "each call draws again"


def seeded_between_draws(x):
    """Draws, seeds torch's generator (as OpInfo's random entries do), and
    draws again: fewer than 16 normals, then more."""
    before = torch.randn(3)
    torch.manual_seed(42)
    return before, x * torch.rand_like(x), torch.randn(5), torch.randn(40)


def test_a_seed_in_the_function_seeds_at_its_place_among_the_draws():
    x = torch.randn(6)
    compiled = kiln.compile(seeded_between_draws, [x], strict=True)
    assert_draws_as_eager(compiled, seeded_between_draws, x, seed=3)
    # The draw before the seed follows the state at the call.
    torch.manual_seed(4)
    first = compiled(x)[0]
    torch.manual_seed(4)
    torch.testing.assert_close(first, torch.randn(3), rtol=0, atol=0)


def test_a_state_got_and_set_back_is_restored_at_its_place():
    def frozen(x):
        state = torch.get_rng_state()  # as OpInfo's wrapper_set_seed (freeze_rng_state)
        torch.manual_seed(42)
        drawn = x + torch.randn_like(x)
        torch.set_rng_state(state)
        return drawn, torch.rand(2)
    x = torch.randn(5)
    assert_draws_as_eager(kiln.compile(frozen, [x], strict=True), frozen, x, seed=8)


def test_a_negative_seed_and_one_past_2_to_the_63_seed_as_torch_maps_them():
    def seeded(x):
        torch.manual_seed(-5)
        first = x + torch.rand(3)
        torch.manual_seed(0xffff_ffff_0000_0007)
        return first, torch.randn(3)
    x = torch.randn(3)
    assert_draws_as_eager(kiln.compile(seeded, [x], strict=True), seeded, x)


def test_a_graph_with_draws_kiln_lacks_runs_every_draw_through_torch_in_order():
    def mixed(x):
        return torch.rand(4) + torch.poisson(x.abs()), torch.randn(3)
    x = torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the partitioned graph's note
        compiled = kiln.compile(mixed, [x])
        native = kiln.compile(lambda t: torch.rand(4) + t, [x])
    assert not isinstance(compiled, kiln.Compiled) and isinstance(native, kiln.Compiled)
    # rand stays with torch too, where poisson draws.
    with pytest.raises(kiln.UnsupportedOpError,
                       match=r"node 'rand' \(aten.rand.default\) draws random numbers"):
        kiln.compile(mixed, [x], strict=True)
    assert_draws_as_eager(compiled, mixed, x, seed=9)


def bernoulli_and_exponential(p):
    """bernoulli of a float32 and a float64 tensor p (torch's serial
    per-element kernel) and exponential_, between draws Kiln made before."""
    return (torch.bernoulli(p), torch.rand(3), torch.bernoulli(p.double().t().contiguous()),
            torch.empty(5, 7).exponential_(2.5), torch.empty(19, dtype=torch.float64).exponential_())


def test_bernoulli_of_a_tensor_and_exponential_draw_as_eager_and_continue_the_stream():
    p = torch.rand(6, 9)
    compiled = kiln.compile(bernoulli_and_exponential, [p], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    for seed in (0, 77):
        assert_draws_as_eager(compiled, bernoulli_and_exponential, p, seed=seed)
    torch.manual_seed(2)
    want = [bernoulli_and_exponential(p) for _ in range(2)]
    torch.manual_seed(2)
    got = [compiled(p) for _ in range(2)]
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got[0][0], got[1][0]), "each call draws again"


def bernoulli_of(p):
    return torch.bernoulli(p)


def multinomial_of(p):
    return torch.multinomial(p, 2, replacement=True), torch.multinomial(p, 1)


def multinomial_once(p):
    return torch.multinomial(p, 1)


def scalar_bernoulli(x):
    return torch.empty_like(x).bernoulli_(1.5)


@pytest.mark.parametrize("fn, good, bad, error", [
    (bernoulli_of, torch.full((3, 4), 0.5), torch.tensor([[0.5, 1.5, 0.5, 0.5]] * 3),
     r"Expected p_in >= 0 && p_in <= 1 to be true, but got false"),
    (bernoulli_of, torch.full((3, 4), 0.5), torch.full((3, 4), float("nan")),
     r"Expected p_in >= 0 && p_in <= 1 to be true, but got false"),
    (multinomial_of, torch.ones(2, 5), torch.tensor([[1.0, -1.0, 1, 1, 1], [1, 1, 1, 1, 1]]),
     r"invalid multinomial distribution \(encountering probability entry < 0\)"),
    (multinomial_of, torch.ones(2, 5), torch.tensor([[1.0, float("inf"), 1, 1, 1]] * 2),
     r"invalid multinomial distribution \(encountering probability entry = infinity or NaN\)"),
    (multinomial_once, torch.ones(2, 5), torch.tensor([[1.0, -1.0, 1, 1, 1], [1, 1, 1, 1, 1]]),
     r"probability tensor contains either `inf`, `nan` or element < 0"),
    (multinomial_once, torch.ones(2, 5), torch.tensor([[1.0, 1, float("nan"), 1, 1]] * 2),
     r"probability tensor contains either `inf`, `nan` or element < 0"),
    (multinomial_of, torch.ones(2, 5), torch.tensor([[1.0, 1, 1, 1, 1], [0, 0, 0, 0, 0]]),
     r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
])
def test_a_probability_eager_refuses_raises_eager_s_error_from_the_compiled_draw(
        fn, good, bad, error):
    compiled = kiln.compile(fn, [good], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    with pytest.raises(RuntimeError, match=error):
        fn(bad)
    with pytest.raises(RuntimeError, match=error):
        compiled(bad)
    assert_draws_as_eager(compiled, fn, good, seed=3)


def test_a_float_p_eager_refuses_is_eager_s_error_when_traced():
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"):
        kiln.compile(scalar_bernoulli, [torch.ones(3, 4)])


def dropouts(x):
    """Scalar-p bernoulli_ (one float64 uniform per value), as the dropout
    family and attention's dropout draw it."""
    image = x.reshape(2, 3, 4, 5)
    return (torch.nn.functional.dropout(x, 0.25, training=True),
            torch.nn.functional.dropout2d(image, 0.5, training=True),
            torch.nn.functional.dropout3d(image.unsqueeze(0), 0.5, training=True),
            torch.nn.functional.alpha_dropout(x, 0.3, training=True),
            torch.nn.functional.feature_alpha_dropout(image, 0.3, training=True),
            torch.nn.functional.scaled_dot_product_attention(image, image, image, dropout_p=0.2),
            torch.bernoulli(x, 0.6), torch.empty(4, 3, dtype=torch.float64).bernoulli_(0.4))


def test_the_dropout_family_draws_as_eager():
    x = torch.randn(6, 20)
    compiled = kiln.compile(dropouts, [x], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    for seed in (0, 3):
        assert_draws_as_eager(compiled, dropouts, x, seed=seed)


def cauchy_geometric_multinomial(p):
    return (torch.empty(4, 6).cauchy_(1.5, 0.5), torch.empty(30, dtype=torch.float64).cauchy_(),
            torch.empty(3, 8).geometric_(0.3), torch.multinomial(p, 4),
            torch.multinomial(p[0], 1), torch.multinomial(p.double(), 1, replacement=True),
            torch.multinomial(p, 6, replacement=True), torch.multinomial(p[1], 3, True))


def test_cauchy_geometric_and_multinomial_draw_as_eager():
    p = torch.rand(3, 10)
    compiled = kiln.compile(cauchy_geometric_multinomial, [p], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    for seed in (0, 12):
        assert_draws_as_eager(compiled, cauchy_geometric_multinomial, p, seed=seed)


def log_normal_and_integers(x):
    """log_normal_ (value by value at any count), randint's ranges below
    and from 2^28 on (up to 2^64 - 1), randint_like, and random_ with and
    without a bound."""
    return (torch.empty(23).log_normal_(0.5, 0.25), x.clone().log_normal_(),
            torch.randint(-5, 1000, (3, 7)), torch.randint(1 << 40, (6,)),
            torch.randint_like(x, 3, 9), torch.randint(10, (4,), dtype=torch.float64),
            torch.randint(-(1 << 63), (1 << 63) - 1, (5,)), torch.empty(3).random_(),
            torch.empty(4, dtype=torch.float64).random_(7),
            torch.randint(-20, 20, (6,), dtype=torch.int32))


def test_log_normal_and_random_integers_draw_as_eager():
    x = torch.rand(2, 5)
    compiled = kiln.compile(log_normal_and_integers, [x], strict=True)
    assert isinstance(compiled, kiln.Compiled)
    for seed in (0, 31):
        assert_draws_as_eager(compiled, log_normal_and_integers, x, seed=seed)


def test_scalar_bernoulli_stays_with_torch_where_this_torch_draws_it_through_mkl(monkeypatch):
    from kiln import _random_draws
    assert _random_draws.scalar_bernoulli_drawn_as_default(), "this torch draws as the default"
    drawn_as_torch = torch.Tensor.bernoulli_

    def mkl_bernoulli_(self, p=0.5, *, generator=None):
        """As torch's MKL kernel (older torch, Intel CPUs): one seed drawn
        from the generator, the values from a stream of MKL's own."""
        seed = int(torch.randint(1 << 31, (), generator=generator))
        return drawn_as_torch(self, p, generator=torch.Generator().manual_seed(seed))
    monkeypatch.setattr(torch.Tensor, "bernoulli_", mkl_bernoulli_)
    _random_draws.scalar_bernoulli_drawn_as_default.cache_clear()
    try:
        assert not _random_draws.scalar_bernoulli_drawn_as_default()

        def dropped(x):
            return torch.bernoulli(x.sigmoid(), 0.5) + torch.bernoulli(x.sigmoid())
        x = torch.randn(4, 8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the partitioned graph's note
            compiled = kiln.compile(dropped, [x])
        assert not isinstance(compiled, kiln.Compiled)
        assert "(aten.bernoulli.p): " + _random_draws.MKL_BERNOULLI in kiln.explain(compiled)
        with pytest.raises(kiln.UnsupportedOpError,
                           match=r"node 'bernoulli' \(aten.bernoulli.p\) draws random numbers: "
                                 r"this torch draws bernoulli_ of a float p through MKL's "
                                 r"generator on this CPU"):
            kiln.compile(dropped, [x], strict=True)
        # OpInfo's run expects those refusals on such a torch, and only there.
        reason = ("UnsupportedOpError: node 'bernoulli' (aten.bernoulli.p) draws random numbers: "
                  + _random_draws.MKL_BERNOULLI)
        refused = {("nn.functional.dropout", "float32"): {0: ["torch", reason], 1: "pass"}}
        assert opinfo_test.check_run(refused, {}) == []
        monkeypatch.undo()
        assert_draws_as_eager(compiled, dropped, x, seed=4)
    finally:
        _random_draws.scalar_bernoulli_drawn_as_default.cache_clear()
    assert opinfo_test.check_run(refused, {}) == [
        "refused, not in opinfo_refusals.txt: nn.functional.dropout float32 0: " + reason]


def sparse_round_trip_between_draws(x):
    """Draws on both sides of ops Kiln lacks (to_sparse, to_dense)."""
    noisy = x + torch.rand(4, 4)
    return noisy.to_sparse().to_dense() * torch.randn(4, 4)


def test_draws_beside_ops_kiln_lacks_are_drawn_in_kiln_s_segments_in_order():
    x = torch.randn(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the partitioned graph's note
        compiled = kiln.compile(sparse_round_trip_between_draws, [x])
    explained = kiln.explain(compiled)
    assert "2 ops through torch" in explained and "aten.rand" not in explained, explained
    for seed in (0, 1):
        assert_draws_as_eager(compiled, sparse_round_trip_between_draws, x, seed=seed)


def test_a_saved_package_loads_sharing_torch_s_generator(tmp_path):
    x = torch.randn(7)
    kiln.save(draws, [x], str(tmp_path / "draws"))
    loaded = kiln.load(str(tmp_path / "draws"))
    assert_draws_as_eager(loaded, draws, x, seed=21)
    assert_draws_as_eager(loaded, draws, x, seed=22)


FRESH_PROCESS = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import kiln
from random_test import draws
x = torch.arange(7, dtype=torch.float32)
compiled = kiln.compile(draws, [x], strict=True)
torch.manual_seed(11)
got = compiled(x)
print(json.dumps({"compiles": kiln.stats()["daemon"]["compiles"],
                  "state": torch.get_rng_state().tolist(),
                  "got": [t.tolist() for t in got]}))
"""


def test_a_fresh_process_hits_the_cache_and_draws_as_eager():
    x = torch.arange(7, dtype=torch.float32)
    kiln.compile(draws, [x], strict=True)
    before = compiles()
    result = fresh_process_result(FRESH_PROCESS, HERE)
    assert compiles() == before, "the fresh process compiled"
    torch.manual_seed(11)
    want = draws(x)
    assert result["state"] == torch.get_rng_state().tolist()
    for got, expected in zip(result["got"], want):
        torch.testing.assert_close(torch.tensor(got, dtype=expected.dtype), expected,
                                   rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    args = [__file__, "-q", "-p", "no:cacheprovider"]
    if os.environ.get("XML_OUTPUT_FILE"):
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    sys.exit(pytest.main(args))
