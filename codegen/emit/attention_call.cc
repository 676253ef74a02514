#include "codegen/emit/attention_call.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/c_text.h"
#include "codegen/ops/op_table.h"

namespace kiln {
namespace {

// "{s0, s1, ...}": the element strides of operand `type`, read by `access`,
// at its dims `dims`: 0 for a dim of size 1 (broadcast) or one it lacks (-1).
std::string Strides(const ir::TensorType& type, const Access& access, const EmitInputs& in,
                    const std::vector<int>& dims) {
  const Linear offset = Offset(MemoryLayout(in.graph, in.program, access.value), access.map);
  std::vector<std::string> strides;
  for (int dim : dims) {
    const bool broadcast = dim < 0 || type.sizes[dim] == ir::Dim::Constant(1);
    strides.push_back(broadcast ? "0" : SymC(offset.coefficients[dim]));
  }
  return absl::StrCat("{", absl::StrJoin(strides, ", "), "}");
}

// Whether any node, or the graph's outputs, read `value`.
bool Read(const ir::Graph& graph, int value) {
  for (const ir::Node& node : graph.nodes) {
    for (int input : node.inputs) {
      if (input == value) return true;
    }
  }
  for (int output : graph.outputs) {
    if (output == value) return true;
  }
  return false;
}

std::string Pointer(const Access& access, const EmitInputs& in, const char* type = "const float") {
  const Linear offset = Offset(MemoryLayout(in.graph, in.program, access.value), access.map);
  return absl::StrCat("(", type, "*)", StorageName(in.plan.storage_of[access.value]), " + ",
                      SymC(offset.constant));
}

// The element stride of operand `type`, read by `access`, along its dim
// `dim` (-1: "0", one element for all).
std::string Stride(const ir::TensorType& type, const Access& access, const EmitInputs& in,
                   int dim) {
  if (dim < 0) return "0";
  const std::string strides = Strides(type, access, in, {dim});
  return strides.substr(1, strides.size() - 2);
}

}  // namespace

absl::StatusOr<std::string> EmitAttentionCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  if (kernel.reads.size() != node.inputs.size() || kernel.reads.size() < 3 ||
      node.outputs.size() != 2) {
    return absl::InternalError(absl::StrCat("an attention call reads ", kernel.reads.size(),
                                            " operands of ", node.inputs.size()));
  }
  const ir::TensorType& query = graph.values[node.inputs[0]];
  const ir::TensorType& key = graph.values[node.inputs[1]];
  const ir::TensorType& value = graph.values[node.inputs[2]];
  const double scale = ops::Present(node, "scale")
                           ? ops::ScalarArgAsDouble(node, "scale")
                           : 1.0 / std::sqrt(static_cast<double>(query.sizes[3].constant));
  std::string mask_pointer = "0", mask_strides = "{0, 0, 0}", length = "0, 0, 0";
  std::string paged = "0, 0, 0, 0, 0, 0, 0", keys = Extent(key.sizes[2]);
  std::vector<int> key_dims = {0, 1, 2, 3};  // the kernel's k[0..3]
  if (node.op == "kiln.attention_to_length.default") {
    // The position, [batch, 1] or broadcast: one per batch row.
    const ir::TensorType& position = graph.values[node.inputs[3]];
    length = absl::StrCat(Pointer(kernel.reads[3], in, "const kiln_int64"), ", ",
                          Stride(position, kernel.reads[3], in, position.rank() == 2 ? 0 : -1),
                          ", ", ops::BoolArg(node, "inclusive") ? 1 : 0);
    const int64_t block = ops::IntArg(node, "block"), blocks = ops::IntArg(node, "blocks");
    if (block > 0) {  // pools [pool blocks, block, heads, width]
      key_dims = {0, 2, 1, 3};
      keys = absl::StrCat(block * blocks);
      paged = absl::StrCat(Pointer(kernel.reads[4], in, "const kiln_int64"), ", ",
                           Pointer(kernel.reads[5], in, "const kiln_int64"), ", ",
                           Stride(graph.values[node.inputs[4]], kernel.reads[4], in, 0), ", ",
                           Stride(graph.values[node.inputs[5]], kernel.reads[5], in, 0), ", ",
                           block, ", ", blocks, ", ", Extent(key.sizes[0]));
    }
  } else if (kernel.reads.size() == 4) {
    // The mask's dims, right-aligned with the scores' [batch, heads, 1, keys].
    const Access& mask = kernel.reads[3];
    const int rank = graph.values[mask.value].rank();
    std::vector<int> dims;
    for (int d : {0, 1, 3}) dims.push_back(d - (4 - rank));
    mask_pointer = Pointer(mask, in);
    mask_strides = Strides(graph.values[node.inputs[3]], mask, in, dims);
  }
  // The result this kernel writes; the other is its own kernel's.
  const Linear written = Offset(MemoryLayout(graph, in.program, kernel.value),
                                ir::AffineMap::Identity(graph.values[kernel.value].rank()));
  const std::string result = absl::StrCat("(float*)", StorageName(in.plan.storage_of[kernel.value]),
                                          " + ", SymC(written.constant));
  const auto stride = [&](int dim) { return SymC(written.coefficients[dim]); };
  const bool writes_out = kernel.value == node.outputs[0];
  if (!writes_out && !Read(graph, kernel.value)) return std::string();  // lse unused
  const std::string value_width = Extent(value.sizes[3]);
  return absl::StrCat(
      "  {\n    kiln_attention call = {", Extent(query.sizes[0]), ", ", Extent(query.sizes[1]),
      ", ", keys, ", ", Extent(query.sizes[3]), ", ", value_width, ", ",
      absl::StrFormat("(float)%a", static_cast<double>(static_cast<float>(scale))), ",\n      ",
      Pointer(kernel.reads[0], in), ", ", Pointer(kernel.reads[1], in), ",\n      ",
      Pointer(kernel.reads[2], in), ", ", mask_pointer, ",\n      ", writes_out ? result : "0",
      ", ", writes_out ? "0" : result, ",\n      ", Strides(query, kernel.reads[0], in, {0, 1, 3}),
      ", ", Strides(key, kernel.reads[1], in, key_dims), ", ",
      Strides(value, kernel.reads[2], in, key_dims), ", ", mask_strides, ",\n      {",
      writes_out ? absl::StrCat(stride(0), ", ", stride(1), ", ", stride(3)) : "0, 0, 0", "}, {",
      writes_out ? "0, 0" : absl::StrCat(stride(0), ", ", stride(1)), "}, 1, 0, ", length,
      ",\n      ", paged, "};\n    kiln_attention_f32(rt, &call);\n  }\n");
}

}  // namespace kiln
