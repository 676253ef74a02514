// Fractional max pooling (aten.fractional_max_pool2d / 3d), as eager's CPU
// kernels compute it. Each plane's window starts along a pooled dim come
// from its random sample u in [0, 1) (random_samples, [N, C, D], drawn by
// the caller):
//   alpha = (input - kernel) / (output - 1), in the input's dtype,
//   start(i) = int((i + u) * alpha) - int(u * alpha) for i < output - 1,
//   start(output - 1) = input - kernel,
// so every window lies inside the input. The maximum of a window follows
// max pooling's rule (ties keep the first, the last NaN wins); its index is
// the flat position in the input plane (h * W + w, or t * H * W + h * W + w).
//
// The public ops are composites over one internal op:
//   kiln.fractional_max_pool(x, random_samples; input_size, kernel_size,
//     output_size, sample_columns, mode): x is the input with its pooled
//     dims flattened into one, [..., P]; a reduction over each window whose
//     load's flat position is computed from the samples; mode "max" gives
//     the maximum, "argmax" its flat position. sample_columns names the
//     sample that drives each pooled dim: eager's 2-D kernel takes sample 0
//     for the width and 1 for the height, the 3-D one 0, 1, 2 for time,
//     height and width.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

const std::vector<DType> kPoolTypes = {DType::kFloat32, DType::kFloat64};

struct Pooling {
  int leading = 0;  // the dims before the pooled ones: [C] or [N, C]
  std::vector<int64_t> input, kernel, output, sample_columns;
};

// The pooling a node describes over an input of pooled sizes `input`,
// checked as eager checks it.
absl::StatusOr<Pooling> PoolingOf(const ir::Node& node, int leading, std::vector<int64_t> input) {
  Pooling pool;
  pool.leading = leading;
  pool.input = std::move(input);
  pool.kernel = IntListArg(node, "kernel_size");
  pool.output = IntListArg(node, "output_size");
  const size_t dims = pool.input.size();
  const std::string name = absl::StrCat("fractional_max_pool", dims, "d");
  if (pool.kernel.size() != dims || pool.output.size() != dims) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": kernel_size and output_size must have ",
                                                   dims, " entries, got ", pool.kernel.size(),
                                                   " and ", pool.output.size()));
  }
  const char* dim_names[] = {"time", "height", "width"};
  for (size_t d = 0; d < dims; ++d) {
    const char* dim_name = dim_names[3 - dims + d];
    if (pool.kernel[d] <= 0 || pool.output[d] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": kernel_size and output_size must be positive"));
    }
    // Eager's 3-D kernel keeps one position more free than its 2-D one.
    const int64_t span = pool.output[d] + pool.kernel[d] - 1;
    if (dims == 2 ? span > pool.input[d] : span >= pool.input[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, dims == 2 ? "()" : "_out()", ": pool ", dim_name, " ", pool.kernel[d],
                       " too large relative to input ", dim_name, " ", pool.input[d]));
    }
  }
  if (node.args.count("sample_columns")) {
    pool.sample_columns = IntListArg(node, "sample_columns");
  } else if (dims == 2) {
    pool.sample_columns = {1, 0};
  } else {
    pool.sample_columns = {0, 1, 2};
  }
  return pool;
}

// The window start along pooled dim `d` of output variable `o`, in int64,
// from the plane's sample `sample` (in `compute`).
int WindowStart(ExprBuilder& b, const Pooling& pool, size_t d, int o, int sample, DType compute) {
  const DType i64 = DType::kInt64;
  const int last = b.Constant(pool.input[d] - pool.kernel[d], i64);
  if (pool.output[d] == 1) return last;
  // alpha in the input's dtype, as eager's kernel divides.
  const double alpha =
      compute == DType::kFloat32
          ? static_cast<double>(static_cast<float>(pool.input[d] - pool.kernel[d]) /
                                static_cast<float>(pool.output[d] - 1))
          : static_cast<double>(pool.input[d] - pool.kernel[d]) /
                static_cast<double>(pool.output[d] - 1);
  const int scale = b.Constant(alpha, compute);
  const int shifted = b.Call("add", {b.Index(o, compute), sample}, compute);
  const int start = b.Call("sub",
                           {b.Cast(b.Call("mul", {shifted, scale}, compute), i64),
                            b.Cast(b.Call("mul", {sample, scale}, compute), i64)},
                           i64);
  const int is_last =
      b.Call("eq", {b.Index(o, i64), b.Constant(pool.output[d] - 1, i64)}, DType::kBool);
  return b.Call("where", {is_last, last, start}, i64);
}

void AddFractionalMaxPool(OpTable& table) {
  OpDef def;
  def.name = "kiln.fractional_max_pool.default";
  def.family = "pooling";
  def.dtypes = kPoolTypes;
  def.min_inputs = def.max_inputs = 2;
  def.args = {{"input_size", ArgKind::kIntList, std::nullopt},
              {"kernel_size", ArgKind::kIntList, std::nullopt},
              {"output_size", ArgKind::kIntList, std::nullopt},
              {"sample_columns", ArgKind::kIntList, std::nullopt},
              {"mode", ArgKind::kString, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes(inputs, kPoolTypes, {}));
    const ir::TensorType& x = *inputs[0];
    if (x.rank() < 2) return absl::InternalError("the flattened input needs a channel dim");
    ASSIGN_OR_RETURN(const Pooling pool, PoolingOf(node, static_cast<int>(x.rank()) - 1,
                                                   IntListArg(node, "input_size")));
    const std::string& mode = std::get<std::string>(Arg(node, "mode"));
    if (mode != "max" && mode != "argmax") {
      return absl::InvalidArgumentError(absl::StrCat("unknown pooling mode '", mode, "'"));
    }
    std::vector<ir::Dim> sizes(x.sizes.begin(), x.sizes.end() - 1);
    for (int64_t size : pool.output) sizes.push_back(ir::Dim::Constant(size));
    return std::vector<ir::TensorType>{
        ContiguousType(mode == "max" ? x.dtype : DType::kInt64, std::move(sizes))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const int x = node.inputs[0], samples = node.inputs[1];
    const ir::TensorType& input = graph.values[x];
    const int leading = static_cast<int>(input.rank()) - 1;
    ASSIGN_OR_RETURN(const Pooling pool, PoolingOf(node, leading, IntListArg(node, "input_size")));
    const int dims = static_cast<int>(pool.input.size());
    const int rank = leading + dims;  // the result's; then one variable per window dim
    const DType compute = input.dtype;
    const DType i64 = DType::kInt64;
    ExprBuilder b(ir::Definition::Kind::kReduction);
    // Sample [n or 0, c, column] of the plane (the leading variables).
    auto sample = [&](int64_t column) {
      ir::AffineMap map;
      map.num_variables = rank + dims;
      map.coefficients.assign(3, std::vector<int64_t>(rank + dims, 0));
      map.offsets = {0, 0, column};
      if (leading == 2) map.coefficients[0][0] = 1;
      map.coefficients[1][leading - 1] = 1;
      return b.LoadAt(samples, std::move(map), compute);
    };
    int position = b.Constant(0, i64);
    int64_t stride = 1;
    for (int d = dims - 1; d >= 0; --d) {
      const int start =
          WindowStart(b, pool, d, leading + d, sample(pool.sample_columns[d]), compute);
      const int coordinate = b.Call("add", {start, b.Index(rank + d, i64)}, i64);
      position =
          b.Call("add", {position, b.Call("mul", {coordinate, b.Constant(stride, i64)}, i64)}, i64);
      stride *= pool.input[d];
    }
    ir::AffineMap map;
    map.num_variables = rank + dims;
    map.coefficients.assign(leading + 1, std::vector<int64_t>(rank + dims, 0));
    map.offsets.assign(leading + 1, 0);
    for (int d = 0; d < leading; ++d) map.coefficients[d][d] = 1;
    const int element = b.GatheredLoad(x, std::move(map), leading, position, compute, -INFINITY);
    ir::Definition definition = b.Finish(element);
    for (int64_t size : pool.kernel) definition.reduction_sizes.push_back(ir::Dim::Constant(size));
    const bool argmax = std::get<std::string>(Arg(node, "mode")) == "argmax";
    definition.combiner = argmax ? "pool_argmax" : "pool_max";
    if (argmax) definition.position = position;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// aten.fractional_max_pool{2,3}d(self, kernel_size, output_size,
// random_samples) -> (values, indices): the pooled dims of self flattened,
// then the internal op twice (an inference graph that drops the indices
// keeps one).
Decomposition FractionalMaxPool(int dims) {
  return [dims](GraphBuilder& b, const ir::Node& node) -> absl::StatusOr<std::vector<int>> {
    const int x = node.inputs[0], samples = node.inputs[1];
    const ir::TensorType input = b.type(x);
    const std::string name = absl::StrCat("fractional_max_pool", dims, "d");
    if (static_cast<int>(input.rank()) != dims + 1 && static_cast<int>(input.rank()) != dims + 2) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": expects a ", dims + 1, "-D or ",
                                                     dims + 2, "-D input, got ", input.rank(),
                                                     "-D"));
    }
    const int leading = static_cast<int>(input.rank()) - dims;
    std::vector<int64_t> pooled;
    for (int d = leading; d < static_cast<int>(input.rank()); ++d) {
      if (input.sizes[d].is_symbolic()) {
        return absl::UnimplementedError(absl::StrCat(name, " over a symbolic size (dim ", d,
                                                     ") is not supported yet: trace it static"));
      }
      pooled.push_back(input.sizes[d].constant);
    }
    for (int d = 0; d < static_cast<int>(input.rank()); ++d) {
      if (input.sizes[d] == ir::Dim::Constant(0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": dim ", d, " of the input is empty (eager refuses it too)"));
      }
    }
    RETURN_IF_ERROR(PoolingOf(node, leading, pooled).status());
    const ir::TensorType& sample_type = b.type(samples);
    const ir::Dim batch = leading == 2 ? input.sizes[0] : ir::Dim::Constant(1);
    if (sample_type.dtype != input.dtype || sample_type.rank() != 3 ||
        sample_type.sizes[0] != batch || sample_type.sizes[1] != input.sizes[leading - 1] ||
        sample_type.sizes[2] != ir::Dim::Constant(dims)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": random_samples must be ", ir::DTypeName(input.dtype),
                       " of shape [batch (1 unbatched), channels, ", dims, "]"));
    }
    std::vector<ir::SymExpr> flat;
    for (int d = 0; d < leading; ++d) flat.push_back(ir::SymExpr::Of(input.sizes[d]));
    int64_t plane = 1;
    for (int64_t size : pooled) plane *= size;
    flat.push_back(ir::SymExpr::Constant(plane));
    ASSIGN_OR_RETURN(const int flattened, b.Add("aten.reshape.default", {x}, {{"size", flat}}));
    const std::vector<int64_t> columns =
        dims == 2 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1, 2};
    auto pool = [&](const char* mode) {
      return b.Add("kiln.fractional_max_pool.default", {flattened, samples},
                   {{"input_size", pooled},
                    {"kernel_size", IntListArg(node, "kernel_size")},
                    {"output_size", IntListArg(node, "output_size")},
                    {"sample_columns", columns},
                    {"mode", std::string(mode)}});
    };
    ASSIGN_OR_RETURN(const int values, pool("max"));
    ASSIGN_OR_RETURN(const int indices, pool("argmax"));
    return std::vector<int>{values, indices};
  };
}

}  // namespace

void RegisterFractionalMaxPoolOps(OpTable& table) {
  AddFractionalMaxPool(table);
  for (int dims : {2, 3}) {
    AddComposite(table, absl::StrCat("aten.fractional_max_pool", dims, "d.default"), 2, 2,
                 {{"kernel_size", ArgKind::kIntList, std::nullopt},
                  {"output_size", ArgKind::kIntList, std::nullopt}},
                 FractionalMaxPool(dims), kPoolTypes, {}, "pooling");
  }
}

}  // namespace kiln::ops
