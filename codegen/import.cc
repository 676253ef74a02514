#include "codegen/import.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/limits.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

absl::StatusOr<ir::DType> ImportDType(kiln::v1::DType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT32:
      return ir::DType::kFloat32;
    case kiln::v1::FLOAT64:
      return ir::DType::kFloat64;
    case kiln::v1::FLOAT16:
      return ir::DType::kFloat16;
    case kiln::v1::BFLOAT16:
      return ir::DType::kBFloat16;
    case kiln::v1::INT64:
      return ir::DType::kInt64;
    case kiln::v1::INT32:
      return ir::DType::kInt32;
    case kiln::v1::BOOL:
      return ir::DType::kBool;
    case kiln::v1::INT8:
      return ir::DType::kInt8;
    case kiln::v1::UINT8:
      return ir::DType::kUInt8;
    case kiln::v1::INT16:
      return ir::DType::kInt16;
    case kiln::v1::COMPLEX64:
      return ir::DType::kComplex64;
    case kiln::v1::COMPLEX128:
      return ir::DType::kComplex128;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown or unset dtype ", static_cast<int>(dtype)));
}

// The index of symbol `name` in `graph`, added if new; InvalidArgument past
// kMaxNameLength or kMaxSymbols (checked as symbols are added, so a graph
// cannot make the linear lookup quadratic first).
absl::StatusOr<int> SymbolIndex(const std::string& name, ir::Graph& graph) {
  if (name.empty()) return absl::InvalidArgumentError("empty symbol name");
  RETURN_IF_ERROR(limits::CheckNameLength(name, "a symbol name"));
  const int index = graph.SymbolIndex(name);
  RETURN_IF_ERROR(limits::CheckCount(static_cast<int64_t>(graph.symbols.size()),
                                     limits::kMaxSymbols, "kMaxSymbols", "the graph's symbols"));
  return index;
}

absl::StatusOr<ir::Dim> ImportDim(const kiln::v1::Dim& dim, ir::Graph& graph) {
  if (dim.has_symbol()) {
    if (dim.multiplier() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative multiplier of ", dim.symbol()));
    }
    ASSIGN_OR_RETURN(const int first, SymbolIndex(dim.symbol(), graph));
    ir::SymExpr::Term term{dim.multiplier() == 0 ? 1 : dim.multiplier(), {first}};
    for (const std::string& symbol : dim.times()) {
      ASSIGN_OR_RETURN(const int index, SymbolIndex(symbol, graph));
      term.symbols.push_back(index);
    }
    return ir::SymExpr{{term}}.Canonicalized().ToDim();
  }
  if (dim.times_size() > 0) {
    return absl::InvalidArgumentError("a constant dimension with symbols to multiply by");
  }
  if (dim.constant() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative dimension ", dim.constant()));
  }
  return ir::Dim::Constant(dim.constant());
}

absl::StatusOr<ir::SymExpr> ImportSymExpr(const kiln::v1::SymExpr& expr, ir::Graph& graph) {
  ir::SymExpr result;
  for (const auto& term : expr.terms()) {
    ir::SymExpr::Term converted{term.coefficient(), {}};
    for (const std::string& symbol : term.symbols()) {
      ASSIGN_OR_RETURN(const int index, SymbolIndex(symbol, graph));
      converted.symbols.push_back(index);
    }
    result.terms.push_back(std::move(converted));
  }
  RETURN_IF_ERROR(limits::CheckSymExpr(result, "a symbolic argument"));
  return result;
}

// The length of list argument `name` against kMaxListLength.
absl::Status CheckListLength(int length, const std::string& name) {
  return limits::CheckCount(length, limits::kMaxListLength, "kMaxListLength",
                            absl::StrCat("argument '", name, "'"));
}

absl::StatusOr<ir::ArgValue> ImportArgument(const kiln::v1::Argument& arg, ir::Graph& graph) {
  using A = kiln::v1::Argument;
  switch (arg.value_case()) {
    case A::kIntList:
      RETURN_IF_ERROR(CheckListLength(arg.int_list().values_size(), arg.name()));
      break;
    case A::kFloatList:
      RETURN_IF_ERROR(CheckListLength(arg.float_list().values_size(), arg.name()));
      break;
    case A::kBoolList:
      RETURN_IF_ERROR(CheckListLength(arg.bool_list().values_size(), arg.name()));
      break;
    case A::kSymIntList:
      RETURN_IF_ERROR(CheckListLength(arg.sym_int_list().values_size(), arg.name()));
      break;
    case A::kStringValue:
      RETURN_IF_ERROR(
          limits::CheckNameLength(arg.string_value(), absl::StrCat("argument '", arg.name(), "'")));
      break;
    default:
      break;
  }
  switch (arg.value_case()) {
    case A::kIntValue:
      return ir::ArgValue(arg.int_value());
    case A::kFloatValue:
      return ir::ArgValue(arg.float_value());
    case A::kBoolValue:
      return ir::ArgValue(arg.bool_value());
    case A::kIntList:
      return ir::ArgValue(
          std::vector<int64_t>(arg.int_list().values().begin(), arg.int_list().values().end()));
    case A::kFloatList:
      return ir::ArgValue(
          std::vector<double>(arg.float_list().values().begin(), arg.float_list().values().end()));
    case A::kBoolList:
      return ir::ArgValue(
          std::vector<bool>(arg.bool_list().values().begin(), arg.bool_list().values().end()));
    case A::kSymInt: {
      ASSIGN_OR_RETURN(ir::SymExpr expr, ImportSymExpr(arg.sym_int(), graph));
      return ir::ArgValue(std::move(expr));
    }
    case A::kSymIntList: {
      std::vector<ir::SymExpr> list;
      for (const auto& expr : arg.sym_int_list().values()) {
        ASSIGN_OR_RETURN(ir::SymExpr converted, ImportSymExpr(expr, graph));
        list.push_back(std::move(converted));
      }
      return ir::ArgValue(std::move(list));
    }
    case A::kDtypeValue: {
      ASSIGN_OR_RETURN(ir::DType dtype, ImportDType(arg.dtype_value()));
      return ir::ArgValue(dtype);
    }
    case A::kStringValue:
      return ir::ArgValue(arg.string_value());
    case A::kNone:
      return ir::ArgValue(ir::None{});
    case A::VALUE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("argument '", arg.name(), "' has no value"));
}

std::string NodeLabelFromProto(const kiln::v1::Node& node, int index) {
  return absl::StrCat("node ", index, " '", node.name(), "' (", node.op(), ")");
}

int64_t Gcd(int64_t a, int64_t b) { return b == 0 ? a : Gcd(b, a % b); }

// Per symbol: whether some input size names it (the client binds symbols
// from input sizes only).
std::vector<bool> InputSymbols(const ir::Graph& graph) {
  std::vector<bool> used(graph.symbols.size(), false);
  for (int input : graph.inputs) {
    for (const ir::Dim& dim : graph.values[input].sizes) {
      if (dim.is_symbolic()) used[dim.symbol] = true;
    }
  }
  return used;
}

// Folds the graph's relations into `graph`: symbols stated equal become one
// (the lower-numbered), ranges and divisors become each symbol's bounds. A
// relation may only name symbols that input sizes use.
absl::Status ImportRelations(const kiln::v1::Graph& proto, ir::Graph& graph) {
  const std::vector<bool> in_inputs = InputSymbols(graph);
  auto symbol = [&](const std::string& name, int r) -> absl::StatusOr<int> {
    auto it = std::find(graph.symbols.begin(), graph.symbols.end(), name);
    if (it == graph.symbols.end() || !in_inputs[it - graph.symbols.begin()]) {
      return absl::InvalidArgumentError(
          absl::StrCat("relation ", r, " names symbol '", name, "', which no input size uses"));
    }
    return static_cast<int>(it - graph.symbols.begin());
  };
  std::vector<int> representative(graph.symbols.size());
  for (size_t s = 0; s < representative.size(); ++s) representative[s] = static_cast<int>(s);
  auto find = [&](int s) {
    while (representative[s] != s) s = representative[s];
    return s;
  };
  // Equalities first, so that bounds land on the merged symbol.
  for (int r = 0; r < proto.relations_size(); ++r) {
    const auto& relation = proto.relations(r);
    if (relation.relation_case() == kiln::v1::SymbolRelation::RELATION_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat("relation ", r, " is empty"));
    }
    if (!relation.has_equal()) continue;
    ASSIGN_OR_RETURN(const int lhs, symbol(relation.equal().lhs(), r));
    ASSIGN_OR_RETURN(const int rhs, symbol(relation.equal().rhs(), r));
    const int a = find(lhs), b = find(rhs);
    representative[std::max(a, b)] = std::min(a, b);
  }
  for (int r = 0; r < proto.relations_size(); ++r) {
    const auto& relation = proto.relations(r);
    if (relation.has_range()) {
      const auto& range = relation.range();
      ASSIGN_OR_RETURN(const int s, symbol(range.symbol(), r));
      if (range.max() < 0 ||
          (range.max() != 0 && range.max() < std::max<int64_t>(range.min(), 2))) {
        return absl::InvalidArgumentError(absl::StrCat("relation ", r, ": ", range.min(),
                                                       " <= ", range.symbol(), " <= ", range.max(),
                                                       " admits no size >= 2"));
      }
      ir::SymbolBounds& bounds = graph.bounds[find(s)];
      bounds.min = std::max(bounds.min, range.min());
      if (range.max() != 0) {
        bounds.max = bounds.max == 0 ? range.max() : std::min(bounds.max, range.max());
      }
    } else if (relation.has_divisible()) {
      const auto& divisible = relation.divisible();
      ASSIGN_OR_RETURN(const int s, symbol(divisible.symbol(), r));
      if (divisible.divisor() <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("relation ", r, ": ", divisible.symbol(),
                                                       " % ", divisible.divisor(),
                                                       " == 0 needs a positive divisor"));
      }
      ir::SymbolBounds& bounds = graph.bounds[find(s)];
      int64_t lcm;
      if (__builtin_mul_overflow(bounds.divisor / Gcd(bounds.divisor, divisible.divisor()),
                                 divisible.divisor(), &lcm)) {
        return absl::InvalidArgumentError(absl::StrCat("relation ", r, ": the divisors of '",
                                                       divisible.symbol(), "' overflow 64 bits"));
      }
      bounds.divisor = lcm;
    }
  }
  for (size_t s = 0; s < graph.symbols.size(); ++s) {
    // Some multiple of the divisor must lie in [min, max].
    const ir::SymbolBounds& bounds = graph.bounds[s];
    int64_t lowest;
    const bool overflow = __builtin_add_overflow(
        bounds.min, (bounds.divisor - bounds.min % bounds.divisor) % bounds.divisor, &lowest);
    if (overflow || (bounds.max != 0 && lowest > bounds.max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the relations on symbol '", graph.symbols[s], "' admit no size"));
    }
  }
  ir::ForEachSymbolUse(graph, [&](int& s) { s = find(s); });
  return absl::OkStatus();
}

// Every symbol a symbolic argument of a live node or an input's stride
// names must be bound by some input size: the client learns symbols'
// values from input sizes only. (Dead nodes are dropped before keying.)
absl::Status CheckSymbolsAreBound(const ir::Graph& graph) {
  std::vector<bool> needed(graph.values.size(), false), live(graph.nodes.size(), false);
  for (int output : graph.outputs) needed[output] = true;
  for (int n = static_cast<int>(graph.nodes.size()) - 1; n >= 0; --n) {
    for (int output : graph.nodes[n].outputs) live[n] = live[n] || needed[output];
    if (live[n]) {
      for (int input : graph.nodes[n].inputs) needed[input] = true;
    }
  }
  const std::vector<bool> bound = InputSymbols(graph);
  auto check = [&](const ir::SymExpr& expr, const std::string& where) -> absl::Status {
    for (const auto& term : expr.terms) {
      for (int symbol : term.symbols) {
        if (!bound[symbol]) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, " names symbol '", graph.symbols[symbol], "', which no input size uses"));
        }
      }
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    for (const ir::SymExpr& stride : graph.values[graph.inputs[i]].strides) {
      RETURN_IF_ERROR(check(stride, absl::StrCat("input ", i, "'s stride")));
    }
  }
  for (int n = 0; n < static_cast<int>(graph.nodes.size()); ++n) {
    if (!live[n]) continue;
    for (const auto& [name, value] : graph.nodes[n].args) {
      const std::string where = absl::StrCat(NodeLabel(graph, n), ": argument '", name, "'");
      if (const auto* expr = std::get_if<ir::SymExpr>(&value)) RETURN_IF_ERROR(check(*expr, where));
      if (const auto* list = std::get_if<std::vector<ir::SymExpr>>(&value)) {
        for (const ir::SymExpr& expr : *list) RETURN_IF_ERROR(check(expr, where));
      }
    }
  }
  return absl::OkStatus();
}

// The counts and names of `proto` against limits.h, before anything reads
// further: later errors quote names (a node's, a later node's).
absl::Status ImportOutputAliases(const kiln::v1::Graph& proto, ir::Graph& graph) {
  std::vector<bool> output_taken(graph.outputs.size()), input_taken(graph.inputs.size());
  for (int a = 0; a < proto.output_aliases_size(); ++a) {
    const kiln::v1::OutputAlias& alias = proto.output_aliases(a);
    const std::string where = absl::StrCat("output_aliases[", a, "]");
    if (alias.output() < 0 || alias.output() >= static_cast<int>(graph.outputs.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".output is ", alias.output(),
                                                     "; the graph has ", graph.outputs.size(),
                                                     " outputs"));
    }
    if (alias.input() < 0 || alias.input() >= static_cast<int>(graph.inputs.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".input is ", alias.input(), "; the graph has ", graph.inputs.size(), " inputs"));
    }
    if (output_taken[alias.output()] || input_taken[alias.input()]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " names output ", alias.output(), " or input ", alias.input(),
                       " a second time; each output and input may alias once"));
    }
    output_taken[alias.output()] = input_taken[alias.input()] = true;
    graph.output_aliases.emplace_back(alias.output(), alias.input());
  }
  std::sort(graph.output_aliases.begin(), graph.output_aliases.end());  // canonical
  return absl::OkStatus();
}

absl::Status CheckCountsAndNames(const kiln::v1::Graph& proto) {
  using limits::CheckCount;
  using limits::CheckNameLength;
  RETURN_IF_ERROR(CheckNameLength(proto.name(), "the graph name"));
  RETURN_IF_ERROR(
      CheckCount(proto.nodes_size(), limits::kMaxNodes, "kMaxNodes", "the graph's nodes"));
  RETURN_IF_ERROR(
      CheckCount(proto.inputs_size(), limits::kMaxInputs, "kMaxInputs", "the graph's inputs"));
  RETURN_IF_ERROR(
      CheckCount(proto.outputs_size(), limits::kMaxOutputs, "kMaxOutputs", "the graph's outputs"));
  RETURN_IF_ERROR(CheckCount(proto.relations_size(), limits::kMaxRelations, "kMaxRelations",
                             "the graph's relations"));
  for (int i = 0; i < proto.inputs_size(); ++i) {
    RETURN_IF_ERROR(CheckNameLength(proto.inputs(i).name(), absl::StrCat("input ", i, "'s name")));
  }
  for (int n = 0; n < proto.nodes_size(); ++n) {
    const kiln::v1::Node& node = proto.nodes(n);
    RETURN_IF_ERROR(CheckNameLength(node.name(), absl::StrCat("node ", n, "'s name")));
    RETURN_IF_ERROR(CheckNameLength(node.op(), absl::StrCat("node ", n, "'s op")));
    RETURN_IF_ERROR(CheckCount(node.outputs_size(), limits::kMaxResultsPerNode,
                               "kMaxResultsPerNode", absl::StrCat("node ", n, "'s results")));
    for (const kiln::v1::Argument& arg : node.args()) {
      RETURN_IF_ERROR(CheckNameLength(arg.name(), absl::StrCat("node ", n, "'s argument name")));
    }
  }
  for (int r = 0; r < proto.relations_size(); ++r) {
    const kiln::v1::SymbolRelation& relation = proto.relations(r);
    const std::string what = absl::StrCat("relation ", r, "'s symbol");
    RETURN_IF_ERROR(CheckNameLength(relation.equal().lhs(), what));
    RETURN_IF_ERROR(CheckNameLength(relation.equal().rhs(), what));
    RETURN_IF_ERROR(CheckNameLength(relation.range().symbol(), what));
    RETURN_IF_ERROR(CheckNameLength(relation.divisible().symbol(), what));
  }
  return absl::OkStatus();
}

// Whether the contiguous strides of `sizes`, products of their constants
// and multipliers, fit in int64.
bool ContiguousStridesFit(const std::vector<ir::Dim>& sizes) {
  int64_t product = 1;
  for (const ir::Dim& dim : sizes) {
    const std::optional<int64_t> next =
        limits::CheckedMul(product, dim.is_symbolic() ? dim.multiplier : dim.constant);
    if (!next) return false;
    product = *next;
  }
  return true;
}

}  // namespace

absl::StatusOr<ir::TensorType> ImportTensorType(const kiln::v1::TensorType& type,
                                                ir::Graph& graph) {
  ir::TensorType result;
  ASSIGN_OR_RETURN(result.dtype, ImportDType(type.dtype()));
  RETURN_IF_ERROR(limits::CheckNameLength(type.device(), "the device"));
  if (!type.device().empty() && type.device() != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", type.device(), "' is not supported (only cpu)"));
  }
  for (const auto& dim : type.sizes()) {
    ASSIGN_OR_RETURN(ir::Dim converted, ImportDim(dim, graph));
    result.sizes.push_back(converted);
  }
  if (type.strides_size() == 0) {
    // Contiguous strides multiply the sizes, which may overflow int64 before
    // the caller's limits::CheckTensorType refuses them: left empty then,
    // for that check to refuse (on the element count, before any stride).
    if (ContiguousStridesFit(result.sizes)) result.strides = ir::ContiguousStrides(result.sizes);
  } else {
    if (type.strides_size() != type.sizes_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("has ", type.sizes_size(), " sizes but ", type.strides_size(), " strides"));
    }
    for (const auto& dim : type.strides()) {
      ASSIGN_OR_RETURN(ir::Dim converted, ImportDim(dim, graph));
      result.strides.push_back(ir::SymExpr::Of(converted));
    }
  }
  result.requires_grad = type.requires_grad();
  return result;
}

absl::StatusOr<ir::Graph> ImportGraph(const kiln::v1::Graph& proto) {
  RETURN_IF_ERROR(CheckCountsAndNames(proto));
  ir::Graph graph;
  graph.name = proto.name();
  // Proto value id -> dense value index.
  absl::flat_hash_map<int64_t, int> value_index;
  auto define = [&](int64_t id, const std::string& where) -> absl::Status {
    if (!value_index.emplace(id, static_cast<int>(graph.values.size()) - 1).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " defines value ", id, ", which is already defined"));
    }
    return absl::OkStatus();
  };

  for (int i = 0; i < proto.inputs_size(); ++i) {
    const auto& input = proto.inputs(i);
    const std::string where = absl::StrCat("input ", i, " '", input.name(), "'");
    auto type = ImportTensorType(input.type(), graph);
    if (!type.ok()) {
      return absl::Status(type.status().code(), absl::StrCat(where, ": ", type.status().message()));
    }
    RETURN_IF_ERROR(limits::CheckTensorType(*type, graph, where));
    for (size_t d = 0; d < type->sizes.size(); ++d) {
      if (!type->sizes[d].times.empty()) {  // the client binds a symbol from one input dim
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": dim ", d, " is a product of symbols; an input's sizes name one each"));
      }
    }
    graph.inputs.push_back(graph.AddValue(*std::move(type), -1));
    graph.input_names.push_back(input.name());
    RETURN_IF_ERROR(define(input.value(), where));
  }

  for (int n = 0; n < proto.nodes_size(); ++n) {
    const auto& node_proto = proto.nodes(n);
    const std::string where = NodeLabelFromProto(node_proto, n);
    ir::Node node;
    node.op = node_proto.op();
    node.name = node_proto.name();
    if (node.op.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": op is empty"));
    for (int64_t id : node_proto.inputs()) {
      auto it = value_index.find(id);
      if (it == value_index.end()) {
        // A later node defining `id` means the graph has a cycle or is not
        // in topological order; no definition at all is a dangling id.
        for (int later = n; later < proto.nodes_size(); ++later) {
          const auto& outputs = proto.nodes(later).outputs();
          if (std::find(outputs.begin(), outputs.end(), id) != outputs.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat(where, " uses value ", id, " before ",
                             NodeLabelFromProto(proto.nodes(later), later),
                             " defines it (a cycle, or nodes not in topological order)"));
          }
        }
        return absl::InvalidArgumentError(
            absl::StrCat(where, " uses value ", id, ", which no input or node defines"));
      }
      node.inputs.push_back(it->second);
    }
    for (const auto& arg : node_proto.args()) {
      if (arg.name().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": an argument has no name"));
      }
      auto value = ImportArgument(arg, graph);
      if (!value.ok()) {
        return absl::Status(value.status().code(),
                            absl::StrCat(where, ": ", value.status().message()));
      }
      if (!node.args.emplace(arg.name(), *std::move(value)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": argument '", arg.name(), "' is given twice"));
      }
    }
    if (node_proto.outputs_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, " defines no output value"));
    }
    if (node_proto.output_types_size() != node_proto.outputs_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has ", node_proto.outputs_size(), " outputs but ",
                       node_proto.output_types_size(), " output types"));
    }
    const int node_index = static_cast<int>(graph.nodes.size());
    for (int k = 0; k < node_proto.outputs_size(); ++k) {
      auto type = ImportTensorType(node_proto.output_types(k), graph);
      if (!type.ok()) {
        return absl::Status(type.status().code(),
                            absl::StrCat(where, " output ", k, ": ", type.status().message()));
      }
      RETURN_IF_ERROR(limits::CheckTensorType(*type, graph, absl::StrCat(where, " output ", k)));
      node.outputs.push_back(graph.AddValue(*std::move(type), node_index));
      RETURN_IF_ERROR(define(node_proto.outputs(k), where));
    }
    graph.nodes.push_back(std::move(node));
  }

  if (proto.outputs_size() == 0) return absl::InvalidArgumentError("graph has no outputs");
  for (int64_t id : proto.outputs()) {
    auto it = value_index.find(id);
    if (it == value_index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output ", id, " is not defined by any input or node"));
    }
    graph.outputs.push_back(it->second);
  }
  RETURN_IF_ERROR(ImportOutputAliases(proto, graph));
  RETURN_IF_ERROR(ImportRelations(proto, graph));
  RETURN_IF_ERROR(CheckSymbolsAreBound(graph));
  return graph;
}

kiln::v1::DType ExportDType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFloat32:
      return kiln::v1::FLOAT32;
    case ir::DType::kFloat64:
      return kiln::v1::FLOAT64;
    case ir::DType::kFloat16:
      return kiln::v1::FLOAT16;
    case ir::DType::kBFloat16:
      return kiln::v1::BFLOAT16;
    case ir::DType::kInt64:
      return kiln::v1::INT64;
    case ir::DType::kInt32:
      return kiln::v1::INT32;
    case ir::DType::kBool:
      return kiln::v1::BOOL;
    case ir::DType::kInt8:
      return kiln::v1::INT8;
    case ir::DType::kUInt8:
      return kiln::v1::UINT8;
    case ir::DType::kInt16:
      return kiln::v1::INT16;
    case ir::DType::kComplex64:
      return kiln::v1::COMPLEX64;
    case ir::DType::kComplex128:
      return kiln::v1::COMPLEX128;
  }
  return kiln::v1::DTYPE_UNSPECIFIED;
}

kiln::v1::TensorType ExportTensorType(const ir::TensorType& type, const ir::Graph& graph) {
  kiln::v1::TensorType result;
  result.set_dtype(ExportDType(type.dtype));
  auto export_dim = [&](const ir::Dim& dim, kiln::v1::Dim* out) {
    if (dim.is_symbolic()) {
      out->set_symbol(graph.symbols[dim.symbol]);
      if (dim.multiplier != 1) out->set_multiplier(dim.multiplier);
      for (int symbol : dim.times) out->add_times(graph.symbols[symbol]);
    } else {
      out->set_constant(dim.constant);
    }
  };
  for (const ir::Dim& dim : type.sizes) export_dim(dim, result.add_sizes());
  // Strides that are sums (a view's, over a diagonal) have no wire form:
  // they are left out, which reads back as contiguous. Only a result's
  // declared strides can be sums (informational: lowering derives layouts
  // itself); an input's were imported from wire dims.
  if (std::all_of(type.strides.begin(), type.strides.end(),
                  [](const ir::SymExpr& stride) { return stride.IsDim(); })) {
    for (const ir::SymExpr& stride : type.strides) export_dim(stride.ToDim(), result.add_strides());
  }
  result.set_device("cpu");
  result.set_requires_grad(type.requires_grad);
  return result;
}

std::string NodeLabel(const ir::Graph& graph, int node_index) {
  const ir::Node& node = graph.nodes[node_index];
  return absl::StrCat("node ", node_index, " '", node.name, "' (", node.op, ")");
}

}  // namespace kiln
