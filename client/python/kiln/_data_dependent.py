"""Ops whose result's size depends on their input's values (nonzero and
argwhere, masked_select, unique, unique_consecutive) compiled by Kiln when
their results are the graph's outputs.

Each such op is replaced in the traced graph by Kiln's form of it: its
results at their largest size (nonzero: a row per element of its input),
the rows that hold the result first, and the count of those rows as one
more graph output (a 0-d int64 tensor, before the outputs written back).
Compiled.__call__ returns each result cut to its count (narrowed). The
artifact depends on the input's shape only, so one artifact serves every
count. The forms are O(n) but for unique's sort: the k-th kept element's
position is scattered to row k (a cumulative sum of the kept ones gives k),
and the values are gathered from the positions.

An op whose result other ops read stays as traced: kilnd refuses it
(strict), or it is a segment of its own and the ops after it another, the
count their symbol (kiln/_partition.py).
"""
import operator

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ._decompositions import DECOMPOSITIONS

aten = torch.ops.aten


def _positions(keep):
    """(row k holds the flat position of the k-th true element of the 1-D
    bool `keep`, the rows past the count 0; the count as a 0-d tensor).
    Positions not kept add into a last row, which is dropped."""
    n = keep.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.int64), keep.sum()
    slot = torch.where(keep, torch.cumsum(keep.long(), 0) - 1, n)
    rows = torch.zeros(n + 1, dtype=torch.int64).scatter_add(0, slot, torch.arange(n) * keep)
    return rows[:n], keep.sum()


def _nonzero(x):
    """nonzero(x): [x.numel(), x.dim()] coordinates, and the count."""
    keep = (x != 0).reshape(-1)
    position, count = _positions(keep)
    if x.numel() == 0:
        return torch.zeros((0, x.dim()), dtype=torch.int64), count
    coordinates = []
    stride = x.numel()
    for length in x.shape:
        stride //= length
        coordinates.append(torch.remainder(torch.floor_divide(position, stride), length))
    if not coordinates:  # 0-d: one row of no coordinates
        return torch.zeros((keep.shape[0], 0), dtype=torch.int64), count
    return torch.stack(coordinates, 1), count


def _masked_select(x, mask):
    """masked_select(x, mask): x's elements where mask is true, in
    row-major order of their broadcast shape, and the count."""
    x, mask = torch.broadcast_tensors(x, mask)
    flat = x.reshape(-1)
    position, count = _positions(mask.reshape(-1))
    return (flat[position] if flat.numel() else flat), count


def _groups(rows, order=None):
    """(distinct rows, inverse, counts, the count) of the 2-D `rows` whose
    equal rows are adjacent; `order`: the positions in the input that the
    rows came from (a sort's), for the inverse."""
    n = rows.shape[0]
    if n == 0:
        empty = torch.zeros(0, dtype=torch.int64)
        return rows, empty, empty, empty.sum()
    starts = torch.cat([torch.ones(1, dtype=torch.bool), (rows[1:] != rows[:-1]).any(1)])
    group = torch.cumsum(starts.long(), 0) - 1
    position, count = _positions(starts)
    ones = torch.ones(n, dtype=torch.int64)
    counts = torch.zeros(n, dtype=torch.int64).scatter_add(0, group, ones)
    inverse = group if order is None else torch.zeros(n, dtype=torch.int64).scatter(0, order, group)
    return rows[position], inverse, counts, count


def _unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    """unique_consecutive: runs of equal elements (or slices along dim)."""
    if dim is not None:
        return _rows_unique(x, dim, sort=False)
    values, inverse, counts, count = _groups(x.reshape(-1, 1))
    return _unique_results(x, values.reshape(-1), inverse, counts, count, return_inverse,
                           return_counts)


def _unique2(x, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique on the CPU sorts whatever `sorted` says."""
    flat, order = torch.sort(x.reshape(-1), stable=True)
    values, inverse, counts, count = _groups(flat.reshape(-1, 1), order)
    return _unique_results(x, values.reshape(-1), inverse, counts, count, return_inverse,
                           return_counts)


def _unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique along a dim: eager sorts and returns all three results."""
    return _rows_unique(x, dim, sort=True)


def _rows_unique(x, dim, sort):
    """unique along `dim` (of the slices x.select(dim, i)), sorted in
    lexicographic order or consecutive: eager gives the inverse and the
    counts whatever it is asked."""
    rows = x.movedim(dim, 0)
    sizes = list(rows.shape)
    rows = rows.reshape(sizes[0], -1)
    order = None
    if sort:  # lexicographic: stable sorts by each column, the last first
        order = torch.arange(sizes[0])
        for column in reversed(range(rows.shape[1])):
            order = order[torch.sort(rows[order, column], stable=True)[1]]
        rows = rows[order]
    values, inverse, counts, count = _groups(rows, order)
    return values.reshape(sizes).movedim(0, dim), inverse, counts, count


def _unique_results(x, values, inverse, counts, count, return_inverse, return_counts):
    """unique's three results as eager gives them: the ones not asked for
    empty."""
    empty = torch.zeros(0, dtype=torch.int64)
    return (values, inverse.reshape(x.shape) if return_inverse else empty,
            counts if return_counts else empty, count)


def _unique_cut(return_counts_at, dim_at):
    """The results of a unique cut to the count, {index: dim}: the values
    (along the op's dim when it has one) and the counts when there are."""
    def cut(args):
        dim = args[dim_at] if dim_at is not None else None
        if dim is not None:
            return {0: dim % args[0].meta["val"].dim(), 2: 0}
        return {0: 0, 2: 0} if args[return_counts_at] else {0: 0}
    return cut


# op -> (Kiln's form, {index: dim} of the results it cuts to the count
# along dim, given the op's arguments).
FORMS = {
    aten.nonzero.default: (_nonzero, lambda args: {0: 0}),
    aten.masked_select.default: (_masked_select, lambda args: {0: 0}),
    aten._unique2.default: (_unique2, _unique_cut(3, None)),
    aten.unique_consecutive.default: (_unique_consecutive, _unique_cut(2, 3)),
    aten.unique_dim.default: (_unique_dim, _unique_cut(4, 1)),
}


def _formed(node):
    """The form of `node` (a call of an op in FORMS) as a function of its
    tensor arguments, those arguments, and {index: dim} of its results cut
    to the count along dim; None when a form does not take its arguments."""
    form, cut = FORMS[node.target]
    schema = node.target._schema.arguments
    given = list(node.args) + [node.kwargs.get(a.name, a.default_value)
                               for a in schema[len(node.args):]]
    dim = {aten.unique_consecutive.default: 3, aten.unique_dim.default: 1}.get(node.target)
    if dim is not None and given[dim] is not None and (
            given[0].meta["val"].dim() == 0 or given[0].meta["val"].numel() == 0):
        return None  # eager's error, or rows of no elements
    tensors = [arg for arg in given if isinstance(arg, torch.fx.Node)]

    def call(*values):
        values = iter(values)
        return form(*[next(values) if isinstance(arg, torch.fx.Node) else arg for arg in given])
    return call, tensors, cut(given)


def formable(node):
    """Whether `node` calls an op in FORMS with arguments its form takes."""
    return node.op == "call_function" and node.target in FORMS and _formed(node) is not None


def _results(node):
    """[(result index, the node that reads it)] of `node`'s results, or
    None when something else reads them too."""
    if isinstance(node.meta.get("val"), torch.Tensor):
        return [(0, node)]
    if any(user.target is not operator.getitem for user in node.users):
        return None
    return [(user.args[1], user) for user in node.users]


def bound(gm, written):
    """Replaces the calls in gm of ops in FORMS whose results only gm's
    output reads by Kiln's forms (their results at their largest size);
    the counts are outputs after gm's results and before the `written`
    outputs written back. Returns (the number of results, [(result
    position, count position, the dim cut)]) over the outputs the call
    returns (the results, then the counts); None when gm has no such call."""
    graph = gm.graph
    output = next(node for node in graph.nodes if node.op == "output")
    cut_at = {}  # a result of a form -> (the index of its count, the dim cut)
    counts = []
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in FORMS:
            continue
        results = _results(node)
        if results is None or any(set(reader.users) - {output} for _, reader in results):
            continue
        formed = _formed(node)
        if formed is None:
            continue
        form, tensors, indices = formed
        examples = [torch.zeros(t.meta["val"].shape, dtype=t.meta["val"].dtype) for t in tensors]
        traced = make_fx(form, decomposition_table=DECOMPOSITIONS)(*examples)
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        with graph.inserting_before(node):
            made = graph.graph_copy(traced.graph, dict(zip(placeholders, tensors)))
        made = list(made) if isinstance(made, (tuple, list)) else [made]
        for index, reader in results:
            reader.replace_all_uses_with(made[index])
            if index in indices:
                cut_at[made[index]] = (len(counts), indices[index])
        counts.append(made[-1])
        for _, reader in results:
            if reader is not node:
                graph.erase_node(reader)
        graph.erase_node(node)
    if not counts:
        return None
    outputs = list(output.args[0])
    kept = len(outputs) - len(written)
    output.args = (outputs[:kept] + counts + outputs[kept:],)
    gm.recompile()
    return kept, [(position, kept + cut_at[value][0], cut_at[value][1])
                  for position, value in enumerate(outputs[:kept]) if value in cut_at]


def cut(outputs, bounds):
    """The outputs kiln_run gave for a graph `bound` rewrote: each bounded
    result cut to its count along its dim (a copy when that keeps less than
    half of it), the counts dropped."""
    kept, cuts = bounds
    outputs = list(outputs)
    for position, count, dim in cuts:
        rows = int(outputs[count])
        result = outputs[position].narrow(dim, 0, rows)
        outputs[position] = result.clone() if 2 * rows < outputs[position].shape[dim] else result
    return outputs[:kept]

