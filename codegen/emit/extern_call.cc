// GEMM and convolution calls through the runtime table; the other externs by their files.
#include "codegen/emit/extern_call.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/attention_call.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/emit/c_text.h"
#include "codegen/emit/check_call.h"
#include "codegen/emit/fft_call.h"
#include "codegen/emit/functions.h"
#include "codegen/emit/linalg_call.h"
#include "codegen/emit/random_call.h"
#include "codegen/emit/reduction.h"
#include "codegen/emit/select_call.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// A convolution ("conv") or transposed convolution ("conv_transpose")
// through the runtime table, inline in kiln_run: its shape and every
// operand's strides in a kiln_conv (kiln_abi.h; a transposed one's
// output_padding is implied by its output size).
absl::StatusOr<std::string> EmitConvolutionCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::TensorType& out = graph.values[kernel.value];
  // The operands as the convolution sees them (reads[i] is the realized
  // value under them, through any view).
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const ir::TensorType& src = graph.values[definition.operands[0]];
  const ir::TensorType& weights = graph.values[definition.operands[1]];
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  const int64_t spatial = out.rank() - 2;
  // "pointer + offset" and the operand's strides.
  std::vector<std::string> pointers;
  std::vector<std::vector<std::string>> strides;
  for (const Access& access : kernel.reads) {
    const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
    pointers.push_back(
        absl::StrCat(StorageName(in.plan.storage_of[access.value]), " + ", SymC(offset.constant)));
    strides.emplace_back();
    for (const ir::SymExpr& stride : offset.coefficients) strides.back().push_back(SymC(stride));
  }
  if (kernel.reads.size() == 3 && strides[2][0] != "1") {
    return absl::InternalError(absl::StrCat("a convolution's bias has stride ", strides[2][0]));
  }
  std::vector<std::string> dst_strides;
  for (const ir::SymExpr& stride : ir::ContiguousStrides(out.sizes)) {
    dst_strides.push_back(SymC(stride));
  }
  auto per_dim = [&](const std::vector<std::string>& values) {
    return absl::StrCat("{", absl::StrJoin(values, ", "), "}");
  };
  auto spatial_sizes = [&](const ir::TensorType& type) {
    std::vector<std::string> sizes;
    for (int64_t d = 0; d < spatial; ++d) sizes.push_back(Extent(type.sizes[2 + d]));
    return per_dim(sizes);
  };
  auto argument = [&](const char* name) {
    std::vector<int64_t> values = ops::IntListArg(node, name);
    if (values.size() == 1) values.assign(spatial, values[0]);
    return absl::StrCat("{", absl::StrJoin(values, ", "), "}");
  };
  return absl::StrCat("  {\n    const kiln_conv conv = {", spatial, ", ", Extent(out.sizes[0]),
                      ", ", Extent(src.sizes[1]), ", ", Extent(out.sizes[1]), ", ",
                      ops::IntArg(node, "groups"), ",\n", "      ", spatial_sizes(src), ", ",
                      spatial_sizes(out), ", ", spatial_sizes(weights), ",\n", "      ",
                      argument("stride"), ", ", argument("padding"), ", ", argument("dilation"),
                      ",\n", "      ", per_dim(strides[0]), ", ", per_dim(strides[1]), ", ",
                      per_dim(dst_strides), ", ", definition.function == "conv_transpose" ? 1 : 0,
                      "};\n", "    if (rt->conv_f32(rt->context, &conv, ", pointers[0], ", ",
                      pointers[1], ", ", kernel.reads.size() == 3 ? pointers[2] : "0", ", ",
                      StorageName(in.plan.storage_of[kernel.value]), ") != 0) return 2;\n  }\n");
}

// A lookup's bounds check (ops/index_check.cc), inline in kiln_run: every
// entry of the index in [0, size) (or [-size, size)), else
// the runtime's index_error and KILN_RUN_INDEX_ERROR.
absl::StatusOr<std::string> EmitIndexCheck(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  if (kernel.reads.size() != 1) {
    return absl::InternalError(
        absl::StrCat("an index check reads ", kernel.reads.size(), " operands, not 1"));
  }
  // The index as the check reads it (a view of the realized value under
  // it: the access map's variables are the index's dims).
  const Access& access = kernel.reads[0];
  const ir::TensorType& index = graph.values[node.inputs[0]];
  const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
  // Entry i's offset: its coordinates from i, innermost dim first.
  std::string count = "1", position = SymC(offset.constant);
  for (int64_t d = index.rank() - 1; d >= 0; --d) {
    const std::string extent = Extent(index.sizes[d]);
    absl::StrAppend(&position, " + (i / (", count, ")) % (", extent, ") * (",
                    SymC(offset.coefficients[d]), ")");
    count = absl::StrCat(count, " * (", extent, ")");
  }
  const std::string size = SymC(ops::SizeArg(node, "size"));
  const std::string lowest =
      ops::BoolArg(node, "from_the_end") ? absl::StrCat("-(", size, ")") : "0";
  return absl::StrCat(
      "  for (kiln_int64 i = 0; i < ", count,
      "; ++i) {\n    const kiln_int64 entry = ", StorageName(in.plan.storage_of[access.value]), "[",
      position, "];\n    if ((entry < ", lowest, ") | (entry >= ", size,
      ")) {\n      rt->index_error(rt->context, \"", std::get<std::string>(ops::Arg(node, "op")),
      "\", ", ops::IntArg(node, "dim"), ", entry, ", size,
      ");\n      return KILN_RUN_INDEX_ERROR;\n    }\n  }\n  ",
      StorageName(in.plan.storage_of[kernel.value]), "[0] = 0;\n");
}

}  // namespace

// An extern kernel: a GEMM call through the runtime table, inline in kiln_run
// (bmm: one call for the batch, which the runtime spreads across its pool).
absl::StatusOr<std::string> EmitExternCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::LoopProgram& program = in.program;
  const BufferPlan& plan = in.plan;
  const ir::Definition& definition = program.definitions[kernel.value];
  if (definition.function == "conv" || definition.function == "conv_transpose") {
    return EmitConvolutionCall(kernel, in);
  }
  if (definition.function == "fft") return EmitFftCall(kernel, in);
  if (definition.function == "linalg") return EmitLinalgCall(kernel, in);
  if (definition.function == "linalg_check") return EmitLinalgCheck(kernel, in);
  if (definition.function == "index_check") return EmitIndexCheck(kernel, in);
  if (definition.function == "check") return EmitCheck(kernel, in);
  if (definition.function == "select_rows") return EmitSelectCall(kernel, in);
  if (definition.function == "attention") return EmitAttentionCall(kernel, in);
  if (definition.function == "random") return EmitRandomCall(kernel, in);
  if (definition.function != "mm" && definition.function != "bmm") {
    return absl::InternalError(absl::StrCat("unknown extern '", definition.function, "'"));
  }
  const bool batched = definition.function == "bmm";
  const ir::TensorType& type = graph.values[kernel.value];
  const bool single = type.dtype == ir::DType::kFloat32;
  const int first = batched ? 1 : 0;
  const std::string batch = batched ? Extent(type.sizes[0]) : "1";
  const std::string m = Extent(type.sizes[first]);
  const std::string n = Extent(type.sizes[first + 1]);
  const std::string k = Extent(graph.values[definition.operands[0]].sizes[first + 1]);
  // "pointer + offset, [batch stride, ]row stride, column stride"
  auto operand = [&](const Access& access) {
    const Linear offset = Offset(MemoryLayout(graph, program, access.value), access.map);
    return absl::StrCat(StorageName(plan.storage_of[access.value]), " + ", SymC(offset.constant),
                        ", ", batched ? absl::StrCat(SymC(offset.coefficients[0]), ", ") : "",
                        SymC(offset.coefficients[first]), ", ",
                        SymC(offset.coefficients[first + 1]));
  };
  // x @ x.T: one operand read twice, transposed the second time. A
  // symmetric rank-k update does half the multiplies.
  const Access& left = kernel.reads[0];
  const Access& right = kernel.reads[1];
  if (!batched && single && left.value == right.value) {
    const Layout layout = MemoryLayout(graph, program, left.value);
    const Linear a = Offset(layout, left.map), b = Offset(layout, right.map);
    if (a.constant == b.constant && a.coefficients[0] == b.coefficients[1] &&
        a.coefficients[1] == b.coefficients[0]) {
      return absl::StrCat("  rt->syrk_f32(rt->context, ", m, ", ", k, ", ",
                          StorageName(plan.storage_of[left.value]), " + ", SymC(a.constant), ", ",
                          SymC(a.coefficients[0]), ", ", SymC(a.coefficients[1]), ", ",
                          StorageName(plan.storage_of[kernel.value]), ", ", n, ");\n");
    }
  }
  const std::string c = StorageName(plan.storage_of[kernel.value]);
  if (!batched) {
    return absl::StrCat("  rt->", single ? "gemm_f32" : "gemm_f64", "(rt->context, ", m, ", ", n,
                        ", ", k, ", ", EmitLiteral(1.0, type.dtype), ", ", operand(kernel.reads[0]),
                        ", ", operand(kernel.reads[1]), ", ", EmitLiteral(0.0, type.dtype), ", ", c,
                        ", ", n, ");\n");
  }
  return absl::StrCat(
      "  rt->", single ? "bmm_f32" : "bmm_f64", "(rt->context, ", batch, ", ", m, ", ", n, ", ", k,
      ", ", operand(kernel.reads[0]), ", ", operand(kernel.reads[1]), ", ", c, ", ",
      SymC(ir::SymExpr::Of(type.sizes[first]) * ir::SymExpr::Of(type.sizes[first + 1])), ", ", n,
      ");\n");
}

}  // namespace kiln
