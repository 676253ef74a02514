#include "codegen/passes/attention_lengths.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/passes/canonicalize.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr char kAttention[] = "aten._scaled_dot_product_flash_attention_for_cpu.default";

std::vector<ir::Dim> Squeezed(const ir::TensorType& type) {
  std::vector<ir::Dim> sizes;
  for (const ir::Dim& size : type.sizes) {
    if (size != ir::Dim::Constant(1)) sizes.push_back(size);
  }
  return sizes;
}

// The value `value` views with its elements in the same order, only dims of
// size 1 added or dropped (through kiln.alias nodes): itself when no alias
// produces it; nullopt when an alias reorders, skips or offsets.
std::optional<int> Unsqueezed(const ir::Graph& graph, int value) {
  int base = value;
  while (graph.producer[base] >= 0 &&
         graph.nodes[graph.producer[base]].op == "kiln.alias.default") {
    const ir::Node& alias = graph.nodes[graph.producer[base]];
    const ir::TensorType& type = graph.values[alias.outputs[0]];
    const std::vector<ir::SymExpr> strides = ops::SizeListArg(alias, "stride");
    const std::vector<ir::SymExpr> contiguous = ir::ContiguousStrides(Squeezed(type));
    if (ops::IntArg(alias, "storage_offset") != 0) return std::nullopt;
    for (size_t d = 0, kept = 0; d < type.sizes.size(); ++d) {
      if (type.sizes[d] == ir::Dim::Constant(1)) continue;
      if (!(strides[d] == contiguous[kept++])) return std::nullopt;
    }
    base = alias.inputs[0];  // an alias addresses its source's storage
  }
  const ir::TensorType& source = graph.values[base];
  if (base != value &&
      (!source.IsContiguous() || Squeezed(source) != Squeezed(graph.values[value]))) {
    return std::nullopt;
  }
  return base;
}

// Whether `value` is a 0-d or all-ones scalar_tensor of `constant`.
bool ScalarOf(const ir::Graph& graph, int value, double constant) {
  const int producer = graph.producer[value];
  if (producer < 0 || !Squeezed(graph.values[value]).empty()) return false;
  const ir::Node& node = graph.nodes[producer];
  return node.op == "aten.scalar_tensor.default" && ops::ScalarArgAsDouble(node, "s") == constant;
}

// Whether `value` is arange(n) from 0 by 1, with only dims of size 1 beside.
bool ArangeTo(const ir::Graph& graph, int value, const ir::Dim& n) {
  if (Squeezed(graph.values[value]) != std::vector<ir::Dim>{n}) return false;
  const std::optional<int> base = Unsqueezed(graph, value);
  if (!base || graph.producer[*base] < 0) return false;
  const ir::Node& node = graph.nodes[graph.producer[*base]];
  if (node.op != "aten.arange.default" && node.op != "aten.arange.start" &&
      node.op != "aten.arange.start_step") {
    return false;
  }
  const auto is = [&](const char* name, double expected) {
    auto it = node.args.find(name);
    if (it == node.args.end()) return true;
    if (const auto* size = std::get_if<ir::SymExpr>(&it->second)) {
      return size->is_constant() && size->constant() == expected;
    }
    return ops::ScalarArgAsDouble(node, name) == expected;
  };
  return graph.values[*base].dtype == ir::DType::kInt64 && is("start", 0) && is("step", 1);
}

struct Bound {
  int position;    // the tensor the keys are compared with
  bool inclusive;  // keys <= position (else <)
};

// The bound of `mask` on the scores [batch, heads, 1, keys], if it is a
// prefix mask of a position tensor (the header's rule).
std::optional<Bound> MatchBound(const ir::Graph& graph, int mask, const ir::Dim& batch,
                                const ir::Dim& keys) {
  const int where = graph.producer[mask];
  if (where < 0 || graph.nodes[where].op != "aten.where.self") return std::nullopt;
  const ir::Node& select = graph.nodes[where];
  if (!ScalarOf(graph, select.inputs[1], 0.0) || !ScalarOf(graph, select.inputs[2], -INFINITY)) {
    return std::nullopt;
  }
  // The mask's dims, right-aligned with the scores': only batch and keys
  // may be other than 1.
  const ir::TensorType& type = graph.values[mask];
  const int rank = static_cast<int>(type.rank());
  if (graph.values[select.inputs[0]].sizes != type.sizes || rank == 0) return std::nullopt;
  for (int d = 0; d + 1 < rank; ++d) {
    if (type.sizes[d] != ir::Dim::Constant(1) && d != rank - 4) return std::nullopt;
  }
  const std::optional<int> condition = Unsqueezed(graph, select.inputs[0]);
  if (!condition || graph.producer[*condition] < 0) return std::nullopt;
  const ir::Node& compare = graph.nodes[graph.producer[*condition]];
  const ir::TensorType& compared = graph.values[*condition];
  // keys <= position: le(arange, p) or ge(p, arange); < likewise.
  int arange_side;
  bool inclusive;
  if (compare.op == "aten.le.Tensor" || compare.op == "aten.lt.Tensor") {
    arange_side = 0, inclusive = compare.op == "aten.le.Tensor";
  } else if (compare.op == "aten.ge.Tensor" || compare.op == "aten.gt.Tensor") {
    arange_side = 1, inclusive = compare.op == "aten.ge.Tensor";
  } else {
    return std::nullopt;
  }
  const int position = compare.inputs[1 - arange_side];
  const ir::TensorType& p = graph.values[position];
  if (!ArangeTo(graph, compare.inputs[arange_side], keys) || p.dtype != ir::DType::kInt64 ||
      p.rank() > 2 || compared.rank() > 2 || compared.sizes.back() != keys) {
    return std::nullopt;
  }
  // The position: constant along the keys, and at most a batch dim that is
  // the scores' batch, as the compared values' first dim.
  if (p.rank() >= 1 && p.sizes.back() != ir::Dim::Constant(1)) return std::nullopt;
  if (p.rank() == 2 && p.sizes[0] != ir::Dim::Constant(1)) {
    if (compared.rank() != 2 || rank != 4 || type.sizes[0] != p.sizes[0] || p.sizes[0] != batch) {
      return std::nullopt;
    }
  }
  return Bound{position, inclusive};
}

}  // namespace

absl::StatusOr<ir::Graph> AttentionLengths(const ir::Graph& graph) {
  std::vector<std::optional<Bound>> bounds(graph.nodes.size());
  bool any = false;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    if (node.op != kAttention || node.inputs.size() != 4) continue;
    const ir::TensorType& query = graph.values[node.inputs[0]];
    const ir::TensorType& key = graph.values[node.inputs[1]];
    bounds[n] = MatchBound(graph, node.inputs[3], query.sizes[0], key.sizes[2]);
    any = any || bounds[n].has_value();
  }
  if (!any) return graph;

  std::vector<int> new_value;
  ir::Graph result = ir::WithInputsOf(graph, new_value);
  result.symbols = graph.symbols;
  result.bounds = graph.bounds;
  GraphBuilder builder(result);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    if (!bounds[n]) {
      result.AppendCopy(graph, node, new_value);
      continue;
    }
    builder.set_name_prefix(node.name.empty() ? node.op : node.name);
    ASSIGN_OR_RETURN(
        const std::vector<int> outputs,
        builder.AddNode("kiln.attention_to_length.default",
                        {new_value[node.inputs[0]], new_value[node.inputs[1]],
                         new_value[node.inputs[2]], new_value[bounds[n]->position]},
                        {{"scale", node.args.at("scale")}, {"inclusive", bounds[n]->inclusive}}));
    for (size_t k = 0; k < outputs.size(); ++k) new_value[node.outputs[k]] = outputs[k];
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return Canonicalize(result);  // drops the masks
}

}  // namespace kiln
