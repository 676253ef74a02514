#include "codegen/passes/attention_lengths.h"

#include <algorithm>
#include <cmath>
#include <map>
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

struct Paged {
  int pool, index;  // [pool blocks, block, heads, width] and int64 [batch * blocks]
  int64_t block, blocks;
};

// `value` ([batch, heads, keys, width]) as index_select(pool, 0, index)
// viewed [batch, blocks * block, heads, width] and transposed, as
// pool[table].view(batch, -1, heads, width).transpose(1, 2) traces: row n's
// key j is pool[index[n * blocks + j / block], j % block].
std::optional<Paged> MatchPaged(const ir::Graph& graph, int value) {
  const int transpose = graph.producer[value];
  if (transpose < 0 || graph.nodes[transpose].op != "aten.transpose.int") return std::nullopt;
  const ir::Node& swap = graph.nodes[transpose];
  const int64_t dim0 = ops::IntArg(swap, "dim0"), dim1 = ops::IntArg(swap, "dim1");
  if (std::min(dim0, dim1) != 1 || std::max(dim0, dim1) != 2) return std::nullopt;
  const int viewed_value = swap.inputs[0];  // [batch, blocks * block, heads, width]
  const int producer = graph.producer[viewed_value];
  if (producer < 0 || graph.nodes[producer].op != "kiln.alias.default") return std::nullopt;
  const ir::Node& alias = graph.nodes[producer];
  if (ops::IntArg(alias, "storage_offset") != 0) return std::nullopt;
  int base = alias.inputs[0];  // an alias addresses its source's storage
  while (graph.producer[base] >= 0 &&
         graph.nodes[graph.producer[base]].op == "kiln.alias.default") {
    if (ops::IntArg(graph.nodes[graph.producer[base]], "storage_offset") != 0) return std::nullopt;
    base = graph.nodes[graph.producer[base]].inputs[0];
  }
  if (graph.producer[base] < 0) return std::nullopt;
  const ir::Node& select = graph.nodes[graph.producer[base]];
  if (select.op != "aten.index_select.default" || ops::IntArg(select, "dim") != 0) {
    return std::nullopt;
  }
  const ir::TensorType& type = graph.values[value];
  const ir::TensorType& rows = graph.values[base];
  const ir::TensorType& pool = graph.values[select.inputs[0]];
  const ir::TensorType& index = graph.values[select.inputs[1]];
  if (rows.rank() != 4 || pool.rank() != 4 || index.rank() != 1 ||
      index.dtype != ir::DType::kInt64 || !rows.IsContiguous()) {
    return std::nullopt;
  }
  for (int d = 1; d < 4; ++d) {
    if (rows.sizes[d].is_symbolic() || rows.sizes[d] != pool.sizes[d]) return std::nullopt;
  }
  const int64_t block = rows.sizes[1].constant, heads = rows.sizes[2].constant,
                width = rows.sizes[3].constant;
  if (type.sizes[2].is_symbolic() || block == 0 || type.sizes[2].constant % block != 0) {
    return std::nullopt;
  }
  const int64_t blocks = type.sizes[2].constant / block;
  const std::vector<ir::Dim> viewed = {type.sizes[0], ir::Dim::Constant(blocks * block),
                                       ir::Dim::Constant(heads), ir::Dim::Constant(width)};
  if (type.sizes != std::vector<ir::Dim>{viewed[0], viewed[2], viewed[1], viewed[3]} ||
      graph.values[viewed_value].sizes != viewed ||
      ops::SizeListArg(alias, "stride") != ir::ContiguousStrides(viewed) ||
      !(ir::SymExpr::Of(rows.sizes[0]) == ir::SymExpr::Of(type.sizes[0]) * blocks)) {
    return std::nullopt;
  }
  return Paged{select.inputs[0], select.inputs[1], block, blocks};
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
    std::vector<int> inputs = {new_value[node.inputs[0]], new_value[node.inputs[1]],
                               new_value[node.inputs[2]], new_value[bounds[n]->position]};
    std::map<std::string, ir::ArgValue> args = {{"scale", node.args.at("scale")},
                                                {"inclusive", bounds[n]->inclusive}};
    const std::optional<Paged> key = MatchPaged(graph, node.inputs[1]);
    const std::optional<Paged> value = MatchPaged(graph, node.inputs[2]);
    if (key && value && key->block == value->block && key->blocks == value->blocks) {
      // Paged: the kernel reads the pools through the block indexes.
      inputs = {new_value[node.inputs[0]],      new_value[key->pool],  new_value[value->pool],
                new_value[bounds[n]->position], new_value[key->index], new_value[value->index]};
      args["block"] = key->block;
      args["blocks"] = key->blocks;
    }
    ASSIGN_OR_RETURN(
        const std::vector<int> outputs,
        builder.AddNode("kiln.attention_to_length.default", std::move(inputs), std::move(args)));
    for (size_t k = 0; k < outputs.size(); ++k) new_value[node.outputs[k]] = outputs[k];
  }
  for (int output : graph.outputs) result.outputs.push_back(new_value[output]);
  return Canonicalize(result);  // drops the masks
}

}  // namespace kiln
