#include "codegen/emit/fft_call.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/c_text.h"
#include "codegen/ops/op_table.h"

namespace kiln {

absl::StatusOr<std::string> EmitFftCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::TensorType& out = graph.values[kernel.value];
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  const int64_t kind = ops::IntArg(node, "kind");  // 0 c2c, 1 r2c, 2 c2r
  const std::vector<int64_t> dims = ops::IntListArg(node, "dim");
  const bool complex_in = kind != 1, complex_out = kind != 2;

  // Strides in elements of each side's type: a complex side's in pairs,
  // whose parts must be adjacent.
  const Access& read = kernel.reads[0];
  const Linear source = Offset(MemoryLayout(graph, in.program, read.value), read.map);
  std::vector<ir::SymExpr> in_strides = source.coefficients;
  std::vector<ir::SymExpr> out_strides = ir::ContiguousStrides(out.sizes);
  auto to_pairs = [](std::vector<ir::SymExpr>& strides) -> absl::Status {
    if (strides.back() != 1) return absl::InternalError("an FFT operand's parts are not adjacent");
    strides.pop_back();
    for (ir::SymExpr& stride : strides) {
      std::optional<ir::SymExpr> half = ir::DivideExactly(stride, ir::SymExpr::Constant(2));
      if (!half) return absl::InternalError("an FFT operand's pairs are not aligned");
      stride = *half;
    }
    return absl::OkStatus();
  };
  if (complex_in) {
    const absl::Status status = to_pairs(in_strides);
    if (!status.ok()) return status;
  }
  if (complex_out) {
    const absl::Status status = to_pairs(out_strides);
    if (!status.ok()) return status;
  }
  const std::vector<ir::Dim> sizes(out.sizes.begin(), out.sizes.end() - (complex_out ? 1 : 0));

  // The transformed dims in `dim`'s order (the halved one last), lengths on
  // the real side; every other dim is a batch dim.
  const ir::TensorType& operand = graph.values[in.program.definitions[kernel.value].operands[0]];
  std::vector<std::string> lengths, transform_in, transform_out;
  std::vector<std::string> batch, batch_in, batch_out;
  double points = 1;
  for (int64_t dim : dims) {
    const int64_t length = kind == 2 ? sizes[dim].constant : operand.sizes[dim].constant;
    points *= static_cast<double>(length);
    lengths.push_back(absl::StrCat(length));
    transform_in.push_back(SymC(in_strides[dim]));
    transform_out.push_back(SymC(out_strides[dim]));
  }
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    batch.push_back(Extent(sizes[d]));
    batch_in.push_back(SymC(in_strides[d]));
    batch_out.push_back(SymC(out_strides[d]));
  }
  const int64_t normalization = ops::IntArg(node, "normalization");
  const double scale = normalization == 0   ? 1.0
                       : normalization == 1 ? 1.0 / std::sqrt(points)
                                            : 1.0 / points;
  const int sign = kind == 1 || (kind == 0 && ops::BoolArg(node, "forward")) ? -1 : 1;
  auto list = [](const std::vector<std::string>& values) {
    return absl::StrCat("{", values.empty() ? "0" : absl::StrJoin(values, ", "), "}");
  };
  const bool single = out.dtype == ir::DType::kFloat32;
  return absl::StrCat("  {\n    const kiln_fft fft = {", kind, ", ", sign, ", ", dims.size(), ", ",
                      batch.size(), ",\n      ", list(lengths), ", ", list(transform_in), ", ",
                      list(transform_out), ",\n      ", list(batch), ", ", list(batch_in), ", ",
                      list(batch_out), ",\n      ", absl::StrFormat("%a", scale),
                      "};\n    if (rt->", single ? "fft_f32" : "fft_f64", "(rt->context, &fft, ",
                      StorageName(in.plan.storage_of[read.value]), " + ", SymC(source.constant),
                      ", ", StorageName(in.plan.storage_of[kernel.value]),
                      ") != 0) return 2;\n  }\n");
}

}  // namespace kiln
