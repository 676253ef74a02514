"""A make_fx graph module as a kiln.v1.Graph: each FX node an ATen node with its
tensor operands, its scalar arguments by schema name and its results' types
(to_kiln), and what the graph declares beside its nodes (relations, output
aliases).
"""
import itertools
import operator

import torch
from google.protobuf import json_format

from . import _checks  # noqa: F401 (defines kiln_check.check)
from ._decompositions import TraceError
from .graph_pb2 import (Argument, Dim, Graph, Input, Node, OutputAlias, SymbolRelation, SymExpr,
                        TensorType)

DTYPES = {
    torch.float32: "FLOAT32", torch.float64: "FLOAT64", torch.float16: "FLOAT16",
    torch.bfloat16: "BFLOAT16", torch.int64: "INT64", torch.int32: "INT32", torch.bool: "BOOL",
    torch.int8: "INT8", torch.uint8: "UINT8", torch.int16: "INT16",
    torch.complex64: "COMPLEX64", torch.complex128: "COMPLEX128",
}
# Arguments that never change what Kiln computes on the CPU.
IGNORED_ARGS = {"layout", "device", "pin_memory", "memory_format", "non_blocking"}

# Ops that return nothing and raise eager's error when a value they read says
# so (linalg.inv's check of its info result, a singular matrix): dead-code
# elimination keeps them, and so does Kiln (codegen/ops/linalg_check.cc).
CHECKS = frozenset([torch.ops.aten._linalg_check_errors.default,
                    torch.ops.kiln_check.check.default])  # kiln/_checks.py


def _is_view(node):
    """Whether node's result aliases its first argument (slice, view, ...)."""
    schema = getattr(node.target, "_schema", None)
    alias = schema.returns[0].alias_info if schema is not None and schema.returns else None
    return alias is not None and not alias.is_write


def dtype_name(dtype, what, advice="convert it to one of those first (x.float(), x.long())"):
    """The graph's name of `dtype`, which `what` has."""
    if dtype not in DTYPES:
        raise TraceError(f"{what} is {dtype}: Kiln compiles tensors of "
                         f"{', '.join(str(t).removeprefix('torch.') for t in DTYPES)}; {advice}")
    return DTYPES[dtype]


def tensor_type(t, symbols=None, what="a tensor"):
    """The TensorType of a tensor (`what`, for errors); `symbols` maps dim
    index -> symbol name. A fake tensor's symbolic sizes (torch.SymInt:
    torch.export's) are the symbols they name (sym_dim)."""
    symbols = symbols or {}
    sizes = [Dim(symbol=symbols[d]) if d in symbols else sym_dim(s, f"dim {d} of {what}")
             for d, s in enumerate(t.shape)]
    result = TensorType(dtype=dtype_name(t.dtype, what), sizes=sizes,
                        requires_grad=t.requires_grad)
    if not symbols and all(size.HasField("constant") for size in sizes):
        result.strides.extend(Dim(constant=int(s)) for s in t.stride())
    return result


def sym_terms(size, what):
    """The SymExpr of an int or a torch.SymInt (a fake tensor's symbolic
    size, an argument computed from one): a sum of integer coefficients
    times products of symbols, named as torch names them (s0); TraceError
    for any other expression (a division, a remainder)."""
    import sympy
    expr = sympy.expand(size.node.expr) if isinstance(size, torch.SymInt) else sympy.Integer(size)
    terms = []
    for term in sympy.Add.make_args(expr):
        coefficient, product = term.as_coeff_Mul()
        symbols = []
        for factor in sympy.Mul.make_args(product):
            if factor == 1:
                continue
            base, power = factor.as_base_exp()
            if not coefficient.is_Integer or not isinstance(base, sympy.Symbol) or \
                    not power.is_Integer or power < 1:
                raise TraceError(f"{what} is {expr}: Kiln takes symbolic sizes that are integers "
                                 f"times products of symbols (2*s0, s0*s1), and sums of them in "
                                 f"arguments")
            symbols += [str(base)] * int(power)
        terms.append(SymExpr.Term(coefficient=int(coefficient), symbols=symbols))
    return SymExpr(terms=terms if expr != 0 else [])


def sym_dim(size, what):
    """The Dim of an int or a torch.SymInt size: a constant, or a positive
    multiplier times one symbol and the further symbols (`times`) it is
    multiplied by."""
    if not isinstance(size, torch.SymInt):
        return Dim(constant=int(size))
    terms = sym_terms(size, what).terms
    if not terms:
        return Dim(constant=0)
    if len(terms) == 1 and not terms[0].symbols:
        return Dim(constant=terms[0].coefficient)
    if len(terms) != 1 or terms[0].coefficient < 1:
        raise TraceError(f"{what} is {size}: a Kiln size is a constant, or a constant times "
                         f"symbols (2*s0, s0*s1), not a sum; export that dim static, or pad it "
                         f"to such a size")
    return _symbolic_dim(terms[0])


def _symbolic_dim(term):
    """The Dim of a SymExpr.Term with symbols: its coefficient times them."""
    first, *times = term.symbols
    return Dim(symbol=first, multiplier=term.coefficient if term.coefficient != 1 else 0,
               times=times)


def scalar_arg(name, value, node="a node"):
    """The Argument for a non-tensor value of `node` (for errors)."""
    if value is None:
        return Argument(name=name, none=True)
    if isinstance(value, bool):
        return Argument(name=name, bool_value=value)
    if isinstance(value, int):
        return Argument(name=name, int_value=value)
    if isinstance(value, float):
        return Argument(name=name, float_value=value)
    if isinstance(value, torch.dtype):
        return Argument(name=name, dtype_value=dtype_name(value, f"the {name} of {node}",
                                                          "compute in one of those"))
    if isinstance(value, str):
        return Argument(name=name, string_value=value)
    if isinstance(value, torch.SymInt):
        expr = sym_terms(value, f"the {name} of {node}")
        if any(term.symbols for term in expr.terms):
            return Argument(name=name, sym_int=expr)
        return Argument(name=name, int_value=int(value))
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, torch.SymInt) for v in value):
            return Argument(name=name, sym_int_list=Argument.SymIntList(values=[
                sym_terms(v, f"the {name} of {node}") for v in value]))
        if all(isinstance(v, bool) for v in value) and value:
            return Argument(name=name, bool_list=Argument.BoolList(values=value))
        if all(isinstance(v, int) for v in value):
            return Argument(name=name, int_list=Argument.IntList(values=value))
        if all(isinstance(v, (int, float)) for v in value):
            return Argument(name=name, float_list=Argument.FloatList(values=value))
    if isinstance(value, torch.device):
        return None
    raise TraceError(f"argument {name}={value!r} of type {type(value).__name__} is not supported")


BATCH_NORM = torch.ops.aten.native_batch_norm.default
LAYER_NORM = torch.ops.aten.native_layer_norm.default
NORMALIZATIONS = (BATCH_NORM, LAYER_NORM, torch.ops.aten.native_group_norm.default)


def _float32_statistics(node, tensors):
    """The results of a float16 normalization with its statistics (mean and
    inverse standard deviation) float32, as Kiln's ops give them (torch's
    meta kernels declare them float16; an eval-mode batch norm's, empty in
    eager, are [C] in Kiln's op)."""
    if node.target is BATCH_NORM and not node.args[5]:
        statistics = [torch.empty(tensors[0].shape[1], dtype=torch.float32, device="meta")] * 2
    else:
        statistics = [torch.empty(t.shape, dtype=torch.float32, device="meta") for t in tensors[1:]]
    return tensors[:1] + statistics


def _with_dropped_results(node, tensors, results):
    """`tensors`, the results of `node`, with each None its output_mask
    dropped replaced by what the op gives with the mask all True, computed
    on fake tensors (only the types are used; eager cannot compute some of
    them, a group norm's weight gradient without a weight)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    names = [argument.name for argument in node.target._schema.arguments]
    if "output_mask" not in names:
        raise TraceError(f"node '{node.name}' ({node.target}) returns None results")
    position = names.index("output_mask")
    args = list(torch.fx.node.map_arg(node.args, lambda n: results[n]))
    kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda n: results[n]))
    if position < len(args):
        args[position] = [True] * len(args[position])
    else:
        kwargs["output_mask"] = [True] * len(kwargs["output_mask"])
    values = [v for v in itertools.chain(args, kwargs.values()) if isinstance(v, torch.Tensor)]
    if any(isinstance(v, FakeTensor) for v in values):  # a float16 trace: its fake mode is on
        full = node.target(*args, **kwargs)
    else:
        with FakeTensorMode() as mode:
            def fake(v):
                return mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
            full = node.target(*[fake(a) for a in args],
                               **{k: fake(v) for k, v in kwargs.items()})
    return [t if t is not None else f for t, f in zip(tensors, full)]


def node_results(gm, inputs):
    """Runs the graph eagerly and returns {node: result}."""
    results = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            results[n] = value
            return value

    Recorder(gm).run(*inputs)
    return results


def to_kiln(gm, inputs, name, symbols=None, results=None):
    """The kiln.v1.Graph of a make_fx graph module. `results` ({node:
    value}) types the graph instead of running it on `inputs`: fake tensors
    with symbolic sizes, and the sizes nodes computing sizes give
    (torch.export's graphs), which their users take as arguments."""
    symbols = symbols or {}
    results = node_results(gm, inputs) if results is None else results
    ids = {}
    statistics = set()  # ids of float16 normalizations' float32 statistics
    graph = Graph(name=name)
    next_id = 0
    for index, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        ids[node] = next_id
        graph.inputs.append(Input(value=next_id, name=node.name,
                                  type=tensor_type(results[node], symbols.get(index),
                                                   f"input '{node.name}'")))
        next_id += 1

    def as_argument(node):  # a size a node computed is its value
        return node if isinstance(results[node], (torch.Tensor, tuple, list)) else results[node]

    for node in gm.graph.nodes:
        if node.target in CHECKS:  # no result: Kiln's is a 0-dim int32 nothing reads
            results[node] = torch.zeros((), dtype=torch.int32)
        if node.op != "call_function" or not isinstance(results[node], (torch.Tensor, tuple, list)):
            continue  # sizes, and runtime asserts on them (None)
        if node.target is operator.getitem:
            source, index = node.args
            ids[node] = ids[source][index]
            continue
        if not hasattr(node.target, "_schema"):
            raise TraceError(f"node '{node.name}' calls {node.target}, not an ATen op")
        schema = node.target._schema
        op_name = str(node.target)
        kiln_node = Node(name=node.name, op=op_name)
        bound = {}
        for position, value in enumerate(node.args):
            bound[schema.arguments[position].name] = value
        bound.update(node.kwargs)
        for argument in schema.arguments:
            if argument.name not in bound and argument.kwarg_only and str(argument.type) in (
                    "Optional[Tensor]", "Tensor?"):  # left out: absent (segment_reduce's offsets)
                kiln_node.args.append(Argument(name=argument.name, none=True))
            if argument.name not in bound or argument.name in IGNORED_ARGS:
                continue
            value = torch.fx.node.map_arg(bound[argument.name], as_argument)
            type_text = str(argument.type)
            if isinstance(value, torch.fx.Node):
                kiln_node.inputs.append(ids[value])
            elif isinstance(value, (list, tuple)) and value and all(
                    isinstance(v, torch.fx.Node) for v in value):
                kiln_node.inputs.extend(ids[v] for v in value)
            elif value is None and "Tensor" in type_text:
                kiln_node.args.append(Argument(name=argument.name, none=True))
            else:
                arg = scalar_arg(argument.name, value, f"node '{node.name}' ({node.target})")
                if arg is not None:
                    kiln_node.args.append(arg)
        result = results[node]
        tensors = list(result) if isinstance(result, (tuple, list)) else [result]
        if any(t is None for t in tensors):
            tensors = _with_dropped_results(node, tensors, results)
        widened = []  # the results that are float32 statistics
        if node.target in NORMALIZATIONS and tensors[0].dtype == torch.float16 and any(
                t.dtype != torch.float32 for t in tensors[1:]):
            tensors = _float32_statistics(node, tensors)
            widened = tensors[1:]
        elif _is_view(node) and kiln_node.inputs and kiln_node.inputs[0] in statistics:
            # A view of one (training graphs save them through an alias).
            tensors = widened = [torch.empty(t.shape, dtype=torch.float32, device="meta")
                                 for t in tensors]
        node_ids = []
        for tensor in tensors:
            kiln_node.outputs.append(next_id)
            kiln_node.output_types.append(
                tensor_type(tensor, what=f"the result of node '{node.name}' ({node.target})"))
            node_ids.append(next_id)
            if any(tensor is w for w in widened):
                statistics.add(next_id)
            next_id += 1
        ids[node] = node_ids if isinstance(result, (tuple, list)) else node_ids[0]
        graph.nodes.append(kiln_node)
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outputs = list(output) if isinstance(output, (tuple, list)) else [output]
    graph.outputs.extend(ids[o] for o in outputs)
    return graph


def alias_writes(graph, writes):
    """Marks the graph's last outputs, the new values of the inputs at
    `writes`, as those inputs' (Graph.output_aliases): Kiln writes each in
    its input's storage when it can (docs/ARCHITECTURE.md, "Outputs that are
    inputs"), and copies it back otherwise."""
    first = len(graph.outputs) - len(writes)
    graph.ClearField("output_aliases")
    graph.output_aliases.extend(OutputAlias(output=first + j, input=position)
                                for j, position in enumerate(writes))


def to_kiln_half(gm, inputs, name):
    """The graph of a float16 trace: its types come from fake tensors, since
    the real float16 kernels are missing."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:  # every input goes through from_tensor
        fakes = [mode.from_tensor(t) for t in inputs]
        return to_kiln(gm, fakes, name)


def parse_relation(text):
    """A kiln.v1.SymbolRelation from "s0 % 8 == 0", "2 <= s0 <= 512",
    "s0 <= 512", "s0 >= 16" or "a == b"; ValueError otherwise."""
    tokens = text.replace("%", " % ").replace("<=", " <= ").replace(">=", " >= ") \
                 .replace("==", " == ").split()
    def number(token):
        return token.lstrip("-").isdigit()
    if len(tokens) == 5 and tokens[1] == "%" and tokens[3:] == ["==", "0"] and number(tokens[2]):
        return SymbolRelation(divisible=SymbolRelation.Divisible(symbol=tokens[0],
                                                                 divisor=int(tokens[2])))
    if len(tokens) == 3 and tokens[1] == "==" and not number(tokens[0]) and not number(tokens[2]):
        return SymbolRelation(equal=SymbolRelation.Equal(lhs=tokens[0], rhs=tokens[2]))
    if len(tokens) == 5 and tokens[1] == tokens[3] == "<=" and number(tokens[0]) and \
            number(tokens[4]):
        return SymbolRelation(range=SymbolRelation.Range(symbol=tokens[2], min=int(tokens[0]),
                                                         max=int(tokens[4])))
    if len(tokens) == 3 and tokens[1] in ("<=", ">=") and number(tokens[2]):
        bound = "max" if tokens[1] == "<=" else "min"
        return SymbolRelation(range=SymbolRelation.Range(symbol=tokens[0],
                                                         **{bound: int(tokens[2])}))
    raise ValueError(f"cannot read relation '{text}': want 'S % N == 0', 'LO <= S <= HI', "
                     "'S <= HI', 'S >= LO' or 'A == B'")


def to_json(graph):
    """A graph file's text: the protobuf JSON mapping of `graph` with the
    proto's field names (snake_case), as every Kiln graph file and --json
    output spells them."""
    return json_format.MessageToJson(graph, preserving_proto_field_name=True, indent=1) + "\n"
