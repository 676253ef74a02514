"""View ops (permute, expand, slice, select, split, reshapes, as_strided,
...) and cat, in every dtype: each view returned as it is (a copy to a
contiguous output) and consumed by a pointwise op (read through the view's
index map), on contiguous, transposed and sliced sources."""
import torch
import torch.nn.functional as F

from cases_common import (ERROR, EXACT, NAMES, Case, claimed, generator, random, refused,
                          with_edges)

A = torch.ops.aten


def reshape_alias(view, shape):
    """_reshape_alias of view(x) to `shape`, at the strides eager's reshape
    gives it."""
    return lambda x: A._reshape_alias(view(x), shape, view(x).reshape(shape).stride())


def consume(result):
    """A pointwise consumer of a view: exact in every dtype."""
    if isinstance(result, (tuple, list)):
        return [r + r for r in result]
    return result + result


# op -> [(variant, source shape, view function)]
VIEWS = {
    "aten.permute.default": [("3d", (3, 4, 5), lambda x: x.permute(2, 0, 1)),
                             ("negative", (3, 4, 5), lambda x: x.permute(-1, -3, -2))],
    "aten.t.default": [("2d", (4, 5), lambda x: x.t()), ("1d", (7,), lambda x: x.t())],
    "aten.transpose.int": [("01", (3, 4, 5), lambda x: x.transpose(0, 1)),
                           ("negative", (3, 4, 5), lambda x: x.transpose(-1, -3))],
    "aten.expand.default": [("row", (1, 5), lambda x: x.expand(4, 5)),
                            ("new_dims", (5,), lambda x: x.expand(3, 4, 5)),
                            ("middle", (3, 1, 5), lambda x: x.expand(3, 4, 5)),
                            ("minus_one", (3, 1), lambda x: x.expand(-1, 6))],
    "aten.unsqueeze.default": [("front", (4, 5), lambda x: x.unsqueeze(0)),
                               ("back", (4, 5), lambda x: x.unsqueeze(-1)),
                               ("middle", (4, 5), lambda x: x.unsqueeze(1))],
    "aten.squeeze.default": [("all", (1, 4, 1, 5), lambda x: x.squeeze())],
    "aten.squeeze.dim": [("ones", (1, 4, 1, 5), lambda x: x.squeeze(2)),
                         ("not_one", (1, 4, 1, 5), lambda x: x.squeeze(1)),
                         ("negative", (1, 4, 1, 5), lambda x: x.squeeze(-4))],
    "aten.slice.Tensor": [("rows", (6, 5), lambda x: x[1:4]),
                          ("step", (6, 9), lambda x: x[:, 1::2]),
                          ("negative", (6, 5), lambda x: x[-3:]),
                          ("past_end", (6, 5), lambda x: x[:, 2:100:3]),
                          ("empty", (6, 5), lambda x: x[4:2])],
    "aten.select.int": [("row", (4, 5), lambda x: x[1]), ("column", (4, 5), lambda x: x[:, -1]),
                        ("last_dim", (3, 4, 5), lambda x: x[..., 2])],
    # Overlapping windows, windows with gaps, a whole dim, one window whose
    # step is never taken, and frames of a signal (audio framing).
    "aten.unfold.default": [("overlapping", (4, 10), lambda x: x.unfold(1, 4, 2)),
                            ("gaps", (3, 11, 2), lambda x: x.unfold(1, 2, 4)),
                            ("whole_dim", (5, 3), lambda x: x.unfold(0, 5, 1)),
                            ("one_window", (4, 6), lambda x: x.unfold(-1, 5, 100)),
                            ("frames", (2, 20), lambda x: x.unfold(-1, 8, 3).transpose(1, 2)),
                            # a 0-dim tensor unfolds as one element: [x], or []
                            ("0d", (), lambda x: x.unfold(0, 1, 2)),
                            ("0d_empty", (), lambda x: x.unfold(-1, 0, 1))],
    "aten.alias.default": [("2d", (4, 5), lambda x: A.alias(x))],
    "aten.detach.default": [("2d", (4, 5), lambda x: x.detach())],
    "aten.split.Tensor": [("even", (4, 6), lambda x: x.split(2, 1)),
                          ("uneven", (5, 3), lambda x: x.split(2, 0))],
    "aten.split_with_sizes.default": [("dim1", (4, 6), lambda x: x.split([1, 3, 2], 1))],
    "aten.unbind.int": [("dim0", (3, 5), lambda x: x.unbind(0)),
                        ("dim1", (3, 4), lambda x: x.unbind(1))],
    "aten.view.default": [("flat", (4, 5), lambda x: x.view(-1)),
                          ("split_dim", (4, 6), lambda x: x.view(4, 2, 3)),
                          ("rows_of_slice", (6, 5), lambda x: x[1:4].view(15))],
    "aten._unsafe_view.default": [("2d", (4, 6), lambda x: A._unsafe_view(x, [6, 4])),
                                  # not viewable: a copy, then a view of it
                                  ("of_transposed", (6, 4), lambda x: x.t().reshape(24))],
    # Reshapes of views that are viewable (Kiln aliases the viewed memory
    # under strides it computes itself, as eager's view does: no copy).
    # make_fx records reshape as view: the op is called as such.
    "aten._reshape_alias.default": [("2d", (4, 6), lambda x: A._reshape_alias(x, [3, 8], [8, 1])),
                                    ("of_transposed_split", (6, 4),
                                     reshape_alias(lambda x: x.t(), [2, 2, 6])),
                                    ("of_expanded", (1, 6),
                                     reshape_alias(lambda x: x.expand(4, 6), [2, 2, 6])),
                                    ("of_rows", (6, 5), reshape_alias(lambda x: x[1:5], [2, 10]))],
    "aten.as_strided.default": [
        ("windows", (4, 5), lambda x: x.as_strided((3, 3), (1, 1))),
        ("transposing", (4, 5), lambda x: x.as_strided((5, 4), (1, 5))),
        ("offset", (4, 5), lambda x: x.as_strided((2, 2), (5, 1), 7)),
        ("of_transpose", (4, 5), lambda x: x.t().as_strided((2, 3), (1, 5), 1)),
        ("of_slice", (4, 5), lambda x: x[1:].as_strided((2, 2), (2, 1)))],
    "aten.lift_fresh_copy.default": [("2d", (4, 5), lambda x: A.lift_fresh_copy(x))],
}
# Ops make_fx's fake tensors (float16 cases) do not record as themselves:
# lift_fresh_copy recurses forever, detach is recorded as alias. By hand.
NOT_FAKE_TRACED = {"aten.lift_fresh_copy.default", "aten.detach.default"}
RESHAPES = {"aten.view.default", "aten._unsafe_view.default", "aten._reshape_alias.default"}
# Views make_fx never emits (CompositeImplicit ones): one node built by hand;
# eager's reference from the equivalent calls.
MANUAL = {
    "aten.reshape.default": [("contiguous", (4, 6), [("size", [2, -1])],
                              lambda x: x.reshape(2, -1))],
    "aten.squeeze.dims": [("two", (1, 4, 1, 5), [("dim", [0, 2])],
                           lambda x: x.squeeze(0).squeeze(1))],
    "aten.lift_fresh.default": [("2d", (4, 5), [], lambda x: x.clone())],
    "aten.contiguous.default": [("contiguous", (4, 5), [], lambda x: x.clone())],
}


def view_cases(claims):
    for op, views in VIEWS.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for variant, shape, view in views:
                x = with_edges(shape, dtype, g) if dtype != torch.bool else random(shape, dtype, g)
                if op in NOT_FAKE_TRACED and dtype == torch.float16:
                    yield Case(op, dtype, variant, lambda x: x.clone(), [x], EXACT,
                               manual=(op, []))
                    continue
                yield Case(op, dtype, variant, view, [x], EXACT)
                yield Case(op, dtype, f"{variant}_consumed", consumed(view), [x], EXACT)
            # The first view again, of a transposed (non-contiguous) source
            # (eager refuses to view that as another shape).
            variant, shape, view = views[0]
            if (len(shape) == 2 and op not in RESHAPES and op != "aten.lift_fresh_copy.default"
                    and not (op in NOT_FAKE_TRACED and dtype == torch.float16)):
                yield Case(op, dtype, "of_transposed", of_transposed(view),
                           [random(shape[::-1], dtype, g)], EXACT)
    for op, views in MANUAL.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for variant, shape, args, reference in views:
                yield Case(op, dtype, variant, reference, [random(shape, dtype, g)], EXACT,
                           manual=(op, args))


def consumed(view):
    return lambda x: consume(view(x))


def of_transposed(view):
    return lambda x: view(x.t())


def cat_cases(claims):
    op = "aten.cat.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        parts = [random((3, 4), dtype, g) for _ in range(3)]
        yield Case(op, dtype, "dim0", lambda a, b: torch.cat([a, b]), parts[:2], EXACT)
        yield Case(op, dtype, "dim1_three", lambda a, b, c: torch.cat([a, b, c], 1), parts, EXACT)
        yield Case(op, dtype, "negative_dim", lambda a, b: torch.cat([a, b], -1), parts[:2], EXACT)
        # rotate_half, as rotary embeddings write it.
        yield Case(op, dtype, "rotate_half",
                   lambda x: torch.cat([x[..., 2:] + x[..., 2:], x[..., :2]], -1),
                   [random((3, 4), dtype, g)], EXACT)
        yield Case(op, dtype, "transposed", lambda a, b: torch.cat([a.t(), b], 0),
                   [random((4, 3), dtype, g), parts[0]], EXACT)
        yield Case(op, dtype, "stride0", lambda a, b: torch.cat([a.expand(3, 4), b], 1),
                   [random((1, 4), dtype, g), parts[0]], EXACT)
        yield Case(op, dtype, "unequal", lambda a, b, c: torch.cat([a, b, c], 1),
                   [parts[0], random((3, 2), dtype, g), random((3, 5), dtype, g)], EXACT)
        yield Case(op, dtype, "with_empty", lambda a, b: torch.cat([a, b], 0),
                   [parts[0], random((0, 4), dtype, g)], EXACT)
        # A part of shape [0] joins parts of any rank: left out, as eager.
        yield Case(op, dtype, "legacy_empty_part", lambda e, a, b: torch.cat([e, a, e, b], 1),
                   [random((0,), dtype, g), parts[0], parts[1]], EXACT)
    op = "aten.stack.default"
    for dtype in claimed(claims, op):
        g = generator(op, NAMES[dtype])
        parts = [random((3, 4), dtype, g) for _ in range(3)]
        yield Case(op, dtype, "dim1", lambda a, b: torch.stack([a, b], 1), parts[:2], EXACT)
        yield Case(op, dtype, "dim0_three", lambda a, b, c: torch.stack([a, b, c]), parts, EXACT)
        yield Case(op, dtype, "last_transposed", lambda a, b: torch.stack([a.t(), b], -1),
                   [random((4, 3), dtype, g), parts[0]], EXACT)
    op = "aten.cat.default"
    g = generator(op, "promote")
    yield Case(op, torch.float32, "promote_float64", lambda a, b: torch.cat([a, b]),
               [random((3, 4), torch.float32, g), random((3, 4), torch.float64, g)], EXACT)
    yield Case(op, torch.float32, "promote_by_a_legacy_empty_part", lambda e, a: torch.cat([e, a]),
               [random((0,), torch.float64, g), random((3, 4), torch.float32, g)], EXACT)


# op -> (variant, fn, input shape): 4-d and 3-d, factors 2 and 3, a
# transposed input, and a round trip.
PIXEL_SHUFFLES = {
    "aten.pixel_shuffle.default": [
        ("factor2", lambda x: F.pixel_shuffle(x, 2), (2, 8, 3, 5)),
        ("factor3_3d", lambda x: F.pixel_shuffle(x, 3), (18, 2, 4)),
        ("transposed", lambda x: F.pixel_shuffle(x.transpose(2, 3), 2), (1, 4, 5, 3))],
    "aten.pixel_unshuffle.default": [
        ("factor2", lambda x: F.pixel_unshuffle(x, 2), (2, 3, 6, 4)),
        ("factor3_3d", lambda x: F.pixel_unshuffle(x, 3), (2, 6, 9)),
        ("round_trip", lambda x: F.pixel_shuffle(F.pixel_unshuffle(x, 2) * 2, 2), (1, 2, 4, 6))],
}


def pixel_shuffle_cases(claims):
    for op, variants in PIXEL_SHUFFLES.items():
        for dtype in claimed(claims, op):
            g = generator(op, NAMES[dtype])
            for variant, fn, shape in variants:
                yield Case(op, dtype, variant, fn, [random(shape, dtype, g)], EXACT)


def chain_cases():
    """Views of views, and outputs that are inputs or returned twice."""
    g = generator("view chains")
    x = with_edges((4, 6), torch.float32, g)
    chains = {
        "aten.t.default": ("slice_expand", lambda x: x.t()[1:5].unsqueeze(0).expand(2, 4, 4) * 2),
        "aten.select.int": ("of_permute_of_slice", lambda x: x[:, 1:].permute(1, 0)[2] + 1),
        "aten.unfold.default": ("moving_average", lambda x: x.t().unfold(0, 3, 1).mean(-1)),
        "aten.expand.default": ("returned_twice", lambda x: (x.expand(2, 4, 6), x.expand(2, 4, 6))),
        "aten.alias.default": ("input_and_alias", lambda x: (x, A.alias(x), x + 1)),
        "aten.view.default": ("of_computed", lambda x: (x * 2).view(3, 8).t() + 1),
    }
    for op, (variant, fn) in chains.items():
        yield Case(op, torch.float32, f"chain_{variant}", fn, [x], EXACT)


def cases(claims):
    op = "aten.unfold.default"
    x = random((4, 6), torch.float32, generator(op, "refused"))
    yield refused(op, torch.float32, lambda x: torch.empty(4, 0, 7), [x],
                  [("dimension", 1), ("size", 7), ("step", 1)],
                  "window size 7 does not fit dim 1 of size 6")
    yield from view_cases(claims)
    yield from chain_cases()
    yield from cat_cases(claims)
    yield from pixel_shuffle_cases(claims)
