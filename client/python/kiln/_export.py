"""torch.export's ExportedProgram into a Kiln graph: Kiln's counterpart of
AOTInductor's aoti_compile_and_package (kiln.compile(ep), kiln.save(ep,
path); kiln.load reads the package without this module).

The program is decomposed with torch's core ATen table plus Kiln's own
(ep.run_decompositions). Its graph is then typed by its fake tensors, not
run: a size torch made symbolic (s0, 2*s0: a Dim, or one derived from a
Dim) is that symbol in Kiln's types, view sizes and arguments, and each
Dim's range (ep.range_constraints) is a relation of the graph. Its user
inputs are the graph's first inputs, in the order the call passes them
(kiln._arguments); its parameters, buffers and lifted constants follow,
in the graph signature's order. Its user outputs are the graph's outputs,
and the buffers and inputs it mutates follow them, written back after each
call as kiln.compile's trace writes them.

A program Kiln cannot compile whole (an op Kiln lacks, one that draws random
numbers) is partitioned as kiln.compile partitions a function: ep.module()
traced with its example inputs, each Dim's dims a Kiln symbol of its name
bounded by its range (dims_and_ranges).
"""
import torch
from torch._guards import detect_fake_mode
from torch.export import default_decompositions
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree
from torch.utils._sympy.numbers import int_oo

from . import _arguments, _functionalize, _graph, _symbols, _tracing
from ._decompositions import DECOMPOSITIONS
from .graph_pb2 import SymbolRelation


def _decomposition_table():
    table = default_decompositions()  # core ATen
    table.update(DECOMPOSITIONS)
    return table


def trace(ep, name):
    """(graph, lifted, weight names, structure, writes, layout) of an
    ExportedProgram: as _tracing.trace_graph gives, with the name of the
    module attribute each lifted tensor is (None for a constant) and how a
    call holds the user inputs (an _arguments.Layout, from
    ep.example_inputs). TraceError for a program Kiln cannot take."""
    if ep.example_inputs is None:
        raise _tracing.TraceError("the ExportedProgram keeps no example inputs: export it with "
                                  "torch.export.export, which records them")
    program = ep.run_decompositions(_decomposition_table())
    gm = program.graph_module
    specs = program.graph_signature.input_specs
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    by_name = {node.name: node for node in placeholders}
    _tracing._refuse_random(gm)

    # User inputs first, in the order kiln's call takes the call's tensors.
    args, kwargs = ep.example_inputs
    tensors, layout = _arguments.flatten(_arguments.signature_of(ep.module().forward), args, kwargs)
    leaves = pytree.tree_leaves(ep.example_inputs)
    users = [spec for spec in specs if spec.kind == InputKind.USER_INPUT]
    user_nodes = {}  # id(example tensor) -> placeholder
    for spec, leaf in zip(users, leaves):
        node = by_name[spec.arg.name]
        if isinstance(leaf, torch.Tensor):
            user_nodes[id(leaf)] = node
        elif node.users:
            raise _tracing.TraceError(f"input '{spec.arg.name}' is a {type(leaf).__name__} the "
                                      f"program computes with: Kiln takes tensors as inputs, "
                                      f"and plain values as the constants they were exported with")
        else:
            gm.graph.erase_node(node)  # a constant the program was specialized to
    state = [spec for spec in specs if spec.kind != InputKind.USER_INPUT]
    for spec in state:
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            raise _tracing.TraceError(f"input '{spec.arg.name}' is a {spec.kind.name}: Kiln takes "
                                      f"parameters, buffers and constant tensors")
    order = [user_nodes[id(t)] for t in tensors] + [by_name[spec.arg.name] for spec in state]
    first_op = next(node for node in gm.graph.nodes if node.op != "placeholder")
    for node in order:
        first_op.prepend(node)
    positions = {node.name: i for i, node in enumerate(order)}
    lifted = [(program.state_dict if spec.target in program.state_dict else program.constants)
              [spec.target].detach() for spec in state]
    names = [spec.target if spec.kind != InputKind.CONSTANT_TENSOR else None for spec in state]

    # User outputs first, then the new values of what the program mutates.
    output = gm.graph.output_node()
    returned = list(output.args[0])
    user_outputs, written, writes = [], [], []
    for spec, value in zip(program.graph_signature.output_specs, returned):
        if spec.kind == OutputKind.USER_OUTPUT:
            user_outputs.append(value)
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            target = spec.target if spec.kind == OutputKind.USER_INPUT_MUTATION else next(
                s.arg.name for s in state if s.target == spec.target)
            written.append(value)
            writes.append(positions[target])
        else:
            raise _tracing.TraceError(f"output '{spec.arg.name}' is a {spec.kind.name}: Kiln "
                                      f"returns user outputs and writes mutated buffers and inputs")
    result = pytree.tree_unflatten(
        [value.meta["val"] if isinstance(value, torch.fx.Node) else value
         for value in user_outputs],
        ep.call_spec.out_spec)
    _, structure = _tracing.flatten_outputs(result)
    output.args = ([value for value in user_outputs if isinstance(value, torch.fx.Node)]
                   + written,)
    gm.graph.eliminate_dead_code()
    _functionalize._scalars_second(gm)

    # Kiln compiles inference: parameters' fake tensors require grad, the graph's do not. A node
    # with no fake value (an op that returns nothing, such as _assert_tensor_metadata; one that
    # _scalars_second added) gets one from its inputs' fake values.
    results = {}
    with detect_fake_mode([node.meta["val"] for node in order]):
        for node in gm.graph.nodes:
            if node.op == "output":
                continue
            if "val" not in node.meta:
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), results.__getitem__)
                node.meta["val"] = node.target(*args, **kwargs)
            results[node] = pytree.tree_map_only(torch.Tensor, torch.Tensor.detach,
                                                 node.meta["val"])
    graph = _graph.to_kiln(gm, None, name, results=results)
    _symbols._selects_from_the_end(graph)  # x[:, -1] in a symbolic dim
    symbols = {size.symbol for entry in graph.inputs for size in entry.type.sizes
               if size.HasField("symbol")}
    for symbol, bound in program.range_constraints.items():
        if str(symbol) not in symbols:  # derived sizes (2*s0), symbols no input has
            continue
        relation = SymbolRelation.Range(symbol=str(symbol))
        if bound.lower > 0:  # else sizes 0 and 1 get static specializations, as Kiln's do
            relation.min = int(bound.lower)
        if bound.upper != int_oo:  # a Dim with a max
            relation.max = int(bound.upper)
        if relation.min or relation.max:
            graph.relations.append(SymbolRelation(range=relation))
    _graph.alias_writes(graph, writes)
    return graph, lifted, names, structure, writes, layout


def dims_and_ranges(ep):
    """(kiln.compile's `dynamic`, its `relations`) of ep's user inputs: each
    dim whose size is a Dim's symbol, and those symbols' ranges."""
    by_name = {node.name: node for node in ep.graph.nodes if node.op == "placeholder"}
    users = [spec for spec in ep.graph_signature.input_specs
             if spec.kind == InputKind.USER_INPUT]
    values = [by_name[spec.arg.name].meta.get("val") for spec in users]
    dynamic = {}
    for position, value in enumerate(v for v in values if isinstance(v, torch.Tensor)):
        for dim, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                dynamic.setdefault(position, {})[dim] = str(size.node.expr)
    named = {symbol for dims in dynamic.values() for symbol in dims.values()}
    relations = []
    for symbol, bound in ep.range_constraints.items():
        if str(symbol) in named and bound.lower > 0:
            relations.append(f"{symbol} >= {int(bound.lower)}")
        if str(symbol) in named and bound.upper != int_oo:
            relations.append(f"{symbol} <= {int(bound.upper)}")
    return dynamic, relations
