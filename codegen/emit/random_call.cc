#include "codegen/emit/random_call.h"

#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/emit/c_text.h"
#include "codegen/emit/functions.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<std::string> EmitRandomCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  if (kernel.reads.size() != 1) {
    return absl::InternalError(
        absl::StrCat("a random call reads ", kernel.reads.size(), " operands, not the state"));
  }
  const Access& state = kernel.reads[0];
  const Linear offset = Offset(MemoryLayout(graph, in.program, state.value), state.map);
  if (SymC(offset.coefficients[0]) != "1") {
    return absl::InternalError(
        absl::StrCat("a random call's state has stride ", SymC(offset.coefficients[0]), ", not 1"));
  }
  const bool seed = node.outputs.size() == 1;
  const bool integers = ops::IntArg(node, "distribution") == KILN_RANDOM_INTEGER;
  const bool is_state = kernel.value == node.outputs.back();
  const std::string written = StorageName(in.plan.storage_of[kernel.value]);
  std::string count = "0", float64 = "0", a = "0.0", b = "0.0", seed_value = "0";
  if (seed) {
    seed_value = absl::StrCat(ops::IntArg(node, "seed"), "LL");
  } else {
    const ir::TensorType& values = graph.values[node.outputs[0]];
    count = "1";
    for (const ir::Dim& size : values.sizes) count = absl::StrCat(count, " * ", Extent(size));
    if (integers) {
      seed_value = absl::StrCat(ops::IntArg(node, "range"), "LL");
    } else {
      float64 = values.dtype == ir::DType::kFloat64 ? "1" : "0";
      a = EmitLiteral(ops::ScalarArgAsDouble(node, "a"), ir::DType::kFloat64);
      b = EmitLiteral(ops::ScalarArgAsDouble(node, "b"), ir::DType::kFloat64);
    }
  }
  return absl::StrCat("  {\n    const kiln_random call = {", ops::IntArg(node, "distribution"),
                      ", ", float64, ", ", count, ", ", seed_value, ", ", a, ", ", b,
                      "};\n    rt->random(rt->context, &call, (const unsigned char*)",
                      StorageName(in.plan.storage_of[state.value]), " + ", SymC(offset.constant),
                      ", ", is_state ? absl::StrCat("(unsigned char*)", written) : "0", ", ",
                      is_state ? "0" : written, ");\n  }\n");
}

}  // namespace kiln
