"""Symbolic input dims (kiln.compile's dynamic=, kiln_trace.py --symbolic):
the function traced again with each symbol one larger tells which symbols
each size and argument moves with; sizes Kiln cannot name are refused.
"""
import itertools
import math

import torch

from google.protobuf import text_format

from . import _tracing
from ._decompositions import TraceError
from ._graph import _symbolic_dim
from .graph_pb2 import Argument, Dim, Graph, Node, SymbolRelation, SymExpr, TensorType


# Ops whose `size` argument may say -1 for "whatever the element count
# implies" (expand: "keep this dim"), or name symbols.
RESHAPES = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
            "aten._reshape_alias.default", "aten.expand.default"}
# Ops whose `size` argument is their result's shape, which may name symbols
# (torch.ones(T, T), a causal mask over a symbolic T).
FACTORIES = {"aten.zeros.default", "aten.ones.default", "aten.full.default",
             "aten.empty.memory_format", "aten.new_zeros.default", "aten.new_ones.default",
             "aten.new_full.default", "aten.new_empty.default"}
ARANGES = {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}


def monomial(base, grown, values):
    """A size seen as `base` at the traced sizes and as grown[s] when only
    symbol s grew by one, as a SymExpr.Term (coefficient, symbols): a
    constant, or coefficient * a product of powers (up to 3) of the symbols
    it moved with (n * n for a mean over [n, n]). None when it is no such
    product."""
    moved = [s for s in values if grown[s] != base]
    if not moved:
        return SymExpr.Term(coefficient=base)
    for powers in itertools.product(range(1, 4), repeat=len(moved)):
        at = dict(zip(moved, powers))
        product = math.prod(values[s] ** at[s] for s in moved)
        if product == 0 or base % product != 0:
            continue
        k = base // product
        if all(grown[s] == k * (product // values[s] ** at[s]) * (values[s] + 1) ** at[s]
               for s in moved):
            return SymExpr.Term(coefficient=k, symbols=[s for s in moved for _ in range(at[s])])
    return None


def relax_scalar_argument(node, twins, values):
    """Scalar arguments that differ between the traces (a mean's backward
    divides by the element count, torch.arange(T) counts to it) become
    symbolic sizes when they are whole numbers that move as a product of
    symbols. arange's are ints only: a float one makes a float tensor."""
    for i, arg in enumerate(node.args):
        others = [twin.args[i] for twin in twins.values()]
        if all(other == arg for other in others):
            continue
        key = arg.WhichOneof("value")
        if key not in ("int_value", "float_value") or (key == "float_value" and
                                                       node.op in ARANGES):
            continue
        if any(other.WhichOneof("value") != key for other in others):
            continue
        base = float(getattr(arg, key))
        grown = {s: float(getattr(twin.args[i], key)) for s, twin in twins.items()}
        if any(v != int(v) for v in [base, *grown.values()]):
            continue
        term = monomial(int(base), {s: int(v) for s, v in grown.items()}, values)
        if term is None or not term.symbols:
            continue
        symbolic = Argument(name=arg.name, sym_int=SymExpr(terms=[term]))
        for other in [arg, *others]:
            other.CopyFrom(symbolic)


def relax_size_argument(node, twins, values):
    """A reshape, expand or factory whose size list differs between the
    traces: when only a reshape's leading entry does, that entry becomes -1
    (Kiln infers it); otherwise, and always for expand (whose -1 means
    "keep", not "infer") and factories (which have nothing to infer from),
    each entry names the symbols it moves with (a symbolic size list).
    _reshape_alias's strides are dropped when they differ: Kiln derives a
    view's strides itself."""
    def drop(i):
        del node.args[i]
        for twin in twins.values():
            del twin.args[i]
    if node.op == "aten._reshape_alias.default":
        for i in reversed(range(len(node.args))):
            if node.args[i].name == "stride" and any(
                    twin.args[i] != node.args[i] for twin in twins.values()):
                drop(i)
    for i, arg in enumerate(node.args):
        others = {s: twin.args[i] for s, twin in twins.items()}
        if all(other == arg for other in others.values()):
            continue
        if arg.name != "size" or arg.WhichOneof("value") != "int_list" or any(
                other.WhichOneof("value") != "int_list" or
                len(other.int_list.values) != len(arg.int_list.values)
                for other in others.values()):
            continue
        entries = list(arg.int_list.values)
        grown = {s: list(other.int_list.values) for s, other in others.items()}
        differing = {d for d in range(len(entries)) for s in grown if grown[s][d] != entries[d]}
        inferable = node.op in RESHAPES and node.op != "aten.expand.default"
        if differing == {0} and inferable and -1 not in entries:
            for other in [arg, *others.values()]:
                other.int_list.values[0] = -1
            continue
        terms = [monomial(entries[d], {s: grown[s][d] for s in grown}, values)
                 for d in range(len(entries))]
        if any(term is None for term in terms):
            return  # left differing: reported as baked in
        symbolic = Argument(name=arg.name, sym_int_list=Argument.SymIntList(
            values=[SymExpr(terms=[term]) for term in terms]))
        for other in [arg, *others.values()]:
            other.CopyFrom(symbolic)


def baked_in_error(node, twin, symbol):
    """The TraceError for an argument of `node` that moves with `symbol`
    (as in `twin`, traced with only that symbol one larger) in a way Kiln
    cannot name, with advice that fits the op."""
    def shown(arg):
        key = arg.WhichOneof("value")
        value = getattr(arg, key) if key else None
        if hasattr(value, "values"):
            return "[" + ", ".join(text_format.MessageToString(v, as_one_line=True)
                                   if isinstance(v, SymExpr) else str(v)
                                   for v in value.values) + "]"
        if isinstance(value, SymExpr):
            return text_format.MessageToString(value, as_one_line=True)
        return str(value)
    moved = [(a, b) for a, b in zip(node.args, twin.args) if a != b]
    if moved:
        here, grown = moved[0]
        what = (f"argument '{here.name}' ({shown(here)} at the traced sizes, "
                f"{shown(grown)} with '{symbol}' one larger)")
    else:
        here = Argument()
        what = (f"its arguments ({[shown(arg) for arg in node.args]} vs "
                f"{[shown(arg) for arg in twin.args]} with '{symbol}' one larger)")
    if node.op in RESHAPES and here.name == "size":
        advice = "write that entry of the view as -1, or retrace with that dim static"
    elif node.op in FACTORIES and here.name == "size":
        advice = ("Kiln takes a size that is a constant times symbols (T, 2*T, T*B), "
                  "not a sum like T + 1: retrace with that dim static")
    elif node.op in ARANGES:
        advice = ("Kiln takes a symbolic arange only as torch.arange(N), N an int that is a "
                  "constant times symbols (T, 2*T): write arange(1, T + 1) as arange(T) + 1, "
                  "or retrace with that dim static")
    else:
        advice = ("Kiln takes symbolic sizes only as view, expand and factory sizes, arange's "
                  "end and arithmetic's scalar operand: retrace with that dim static")
    return TraceError(f"node '{node.name}' ({node.op}) has a symbolic size baked into "
                      f"{what}: {advice}")


def _slice_length_bound(node, types):
    """For a slice to a symbolic end (c * T: position ids or a causal mask
    cut to a sequence's length), the relation that keeps it within the dim
    it slices, "T <= size // c": Kiln's kernel reads within the dim, and a
    call past it gets a static specialization, which clamps as eager does."""
    if node.op != "aten.slice.Tensor":
        return None
    args = {arg.name: arg for arg in node.args}
    terms = args["end"].sym_int.terms if "end" in args else []
    if len(terms) != 1 or len(terms[0].symbols) != 1:
        return None
    sizes = types[node.inputs[0]].sizes
    size = sizes[(args["dim"].int_value if "dim" in args else 0) % len(sizes)]
    if not size.HasField("constant"):
        return None
    largest = size.constant // terms[0].coefficient
    return SymbolRelation(range=SymbolRelation.Range(symbol=terms[0].symbols[0], max=largest))


def mark_symbolic(fn, inputs, graph, symbolic, name, arguments=None):
    """Makes the listed input dims symbolic, refusing baked-in sizes. One
    more trace per symbol, with only that symbol's dims one larger, tells
    which symbols each size moves with (S * B from S, B, 2 * S)."""
    names = {node.name: i for i, node in enumerate(graph.inputs)}
    marks = {}  # (input position, dim) -> symbol
    values = {}  # symbol -> traced size
    for index, (input_name, dim, *symbol) in enumerate(symbolic):
        # An input by name (the command line's INPUT:DIM) or by position
        # (kiln.compile's dynamic=).
        if isinstance(input_name, int):
            position = input_name if 0 <= input_name < len(inputs) else None
        else:
            position = names.get(input_name, names.get(input_name + "_1"))
        if position is None:
            raise TraceError(f"the symbolic dims name input '{input_name}', which the graph lacks")
        symbol = symbol[0] if symbol else f"s{index}"
        size = inputs[position].shape[dim]
        if size < 2:
            raise TraceError(f"symbol '{symbol}' is traced at size {size}: trace symbolic dims "
                             f"at 2 or more (1 broadcasts, and Kiln specializes it apart)")
        if values.setdefault(symbol, size) != size:
            raise TraceError(f"symbol '{symbol}' is traced at sizes {values[symbol]} and {size}")
        marks[(position, dim)] = symbol
    twins = {}
    for symbol in values:
        grown = [t.clone() for t in inputs]
        for (position, dim), marked in marks.items():
            if marked == symbol:
                sizes = list(grown[position].shape)
                sizes[dim] += 1
                grown[position] = torch.zeros(sizes, dtype=inputs[position].dtype,
                                              requires_grad=inputs[position].requires_grad)
        try:
            twins[symbol] = _tracing.trace_graph(fn, grown, name, arguments=arguments)[0]
        except TraceError:
            raise
        except Exception as error:  # torch's own shape checks
            raise TraceError(f"growing only '{symbol}' fails ({error}): the function ties it to "
                             f"another dim; give those dims one symbol") from error
        def shape(g):
            return [(n.op, [len(t.sizes) for t in n.output_types]) for n in g.nodes]
        if shape(twins[symbol]) != shape(graph):
            raise TraceError(f"growing '{symbol}' traces other ops: the function branches on "
                             f"its size; trace that dim static")
    value_types = {i.value: i.type for i in graph.inputs}
    value_types.update((v, t) for node in graph.nodes
                       for v, t in zip(node.outputs, node.output_types))
    for n, node in enumerate(graph.nodes):
        node_twins = {s: twin.nodes[n] for s, twin in twins.items()}
        if node.op in RESHAPES or node.op in FACTORIES:
            relax_size_argument(node, node_twins, values)
        else:
            relax_scalar_argument(node, node_twins, values)
            bound = _slice_length_bound(node, value_types)
            if bound is not None and bound not in list(graph.relations):
                graph.relations.append(bound)
        for symbol, twin in node_twins.items():
            if list(node.args) != list(twin.args):
                raise baked_in_error(node, twin, symbol)
        for k, types in enumerate(node.output_types):
            for dim, size in enumerate(types.sizes):
                term = monomial(size.constant, {s: twin.output_types[k].sizes[dim].constant
                                                for s, twin in node_twins.items()}, values)
                if term is None:
                    raise TraceError(f"node '{node.name}': dim {dim} depends on a "
                                     f"symbolic size in a way Kiln cannot express")
                if term.symbols:
                    size.CopyFrom(_symbolic_dim(term))
            types.ClearField("strides")
    for (position, dim), symbol in marks.items():
        graph.inputs[position].type.sizes[dim].CopyFrom(Dim(symbol=symbol))
        graph.inputs[position].type.ClearField("strides")
    _selects_from_the_end(graph)


def _selects_from_the_end(graph):
    """x[:, -k] in a symbolic dim (a sequence's last token) as a gather at
    the largest of arange(size), plus 1 - k: a view's offsets are numbers,
    and this one is the dim's size minus k."""
    types = {i.value: i.type for i in graph.inputs}
    types.update((v, t) for node in graph.nodes
                 for v, t in zip(node.outputs, node.output_types))
    next_id = max(types) + 1
    nodes = []
    for node in graph.nodes:
        args = {arg.name: arg for arg in node.args}
        source = types[node.inputs[0]] if node.inputs else None
        if node.op != "aten.select.int" or args["index"].int_value >= 0:
            nodes.append(node)
            continue
        dim = args["dim"].int_value % len(source.sizes)
        size = source.sizes[dim]
        if not size.HasField("symbol"):
            nodes.append(node)
            continue
        term = SymExpr.Term(coefficient=size.multiplier or 1, symbols=[size.symbol, *size.times])
        positions, last, index, picked = range(next_id, next_id + 4)
        next_id += 4
        name = node.name
        kept = [size if d != dim else Dim(constant=1) for d, size in enumerate(source.sizes)]
        one = TensorType(dtype="INT64", sizes=[Dim(constant=1)])
        nodes += [
            Node(name=f"{name}_positions", op="aten.arange.default",
                 args=[Argument(name="end", sym_int=SymExpr(terms=[term]))], outputs=[positions],
                 output_types=[TensorType(dtype="INT64", sizes=[size])]),
            Node(name=f"{name}_last", op="aten.amax.default", inputs=[positions],
                 args=[Argument(name="dim", int_list=Argument.IntList(values=[0])),
                       Argument(name="keepdim", bool_value=True)], outputs=[last],
                 output_types=[one]),
            Node(name=f"{name}_index", op="aten.add.Tensor", inputs=[last],
                 args=[Argument(name="other", int_value=args["index"].int_value + 1)],
                 outputs=[index], output_types=[one]),
            Node(name=f"{name}_picked", op="aten.index_select.default",
                 inputs=[node.inputs[0], index], args=[Argument(name="dim", int_value=dim)],
                 outputs=[picked], output_types=[TensorType(dtype=source.dtype, sizes=kept)]),
            Node(name=name, op="aten.squeeze.dim", inputs=[picked],
                 args=[Argument(name="dim", int_value=dim)], outputs=node.outputs,
                 output_types=node.output_types)]
    if len(nodes) != len(graph.nodes):
        rebuilt = Graph(nodes=nodes)
        graph.ClearField("nodes")
        graph.nodes.extend(rebuilt.nodes)
