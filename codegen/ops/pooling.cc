// Pooling over the last two dims of a 3-D or 4-D input (max pooling with
// its indices, average and adaptive average pooling), as eager's CPU
// kernels compute them. A window reaches past the input where there is
// padding, or in ceil_mode's last window: those positions are bounded loads
// (loop_ir.h) that read -inf for a max and 0 for a sum, never memory.
//
// The public ops and their backward ops are composites over three
// internal ones:
//   kiln.pool2d(x; kernel_size, stride, padding, dilation, ceil_mode, mode):
//     one reduction over each window: mode "max" its maximum (eager's rule:
//     ties keep the first, the last NaN wins), "argmax" that element's
//     flat position h * W + w in the input plane, "sum" its sum in the
//     compute type;
//   kiln.avg_pool2d_divisor: each window's divisor, [OH, OW], where they
//     differ (windows clipped by the input or by ceil_mode);
//   kiln.pool2d_backward: the input gradient, gathered (not scattered) in
//     blocks whose loads are affine.
#include "codegen/ops/pooling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace pooling {

using ir::DType;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// ATen's pooling_output_shape: with ceil_mode the last window must start
// inside the input or its left padding.
int64_t OutputSize(const Window& w, bool ceil_mode) {
  const int64_t span = w.input + 2 * w.padding - w.dilation * (w.kernel - 1) - 1;
  int64_t output = FloorDiv(span + (ceil_mode ? w.stride - 1 : 0), w.stride) + 1;
  if (ceil_mode && (output - 1) * w.stride >= w.input + w.padding) --output;
  return output;
}

// A 2-element list argument; one element stands for both (kernel_size=3).
absl::StatusOr<std::vector<int64_t>> Pair(const ir::Node& node, const std::string& name,
                                          std::vector<int64_t> if_empty = {}) {
  std::vector<int64_t> values = IntListArg(node, name);
  if (values.empty()) values = std::move(if_empty);
  if (values.size() == 1) values.push_back(values[0]);
  if (values.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be one int or two, got ", values.size()));
  }
  return values;
}

// A 3-D or 4-D input whose pooled dims are static, and (as eager
// requires) whose dims after the batch are not empty.
absl::Status CheckInput(const ir::TensorType& input) {
  if (input.rank() != 3 && input.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("expects a 3-D or 4-D input, got ", input.rank(), "-D"));
  }
  for (int64_t d = input.rank() - 2; d < input.rank(); ++d) {
    if (input.sizes[d].is_symbolic()) {
      return absl::UnimplementedError(
          absl::StrCat("pooling over a symbolic size (dim ", d, ") is not supported yet"));
    }
  }
  for (int64_t d = input.rank() - 3; d < input.rank(); ++d) {
    if (input.sizes[d] == ir::Dim::Constant(0)) {
      return absl::InvalidArgumentError(absl::StrCat("dim ", d, " of the input is empty"));
    }
  }
  return absl::OkStatus();
}

// The windows of a node with kernel_size, stride, padding, (dilation,)
// ceil_mode over `input`, checked as eager checks them.
absl::StatusOr<Pool2d> PoolOf(const ir::Node& node, const ir::TensorType& input) {
  RETURN_IF_ERROR(CheckInput(input));
  ASSIGN_OR_RETURN(const std::vector<int64_t> kernel, Pair(node, "kernel_size"));
  ASSIGN_OR_RETURN(const std::vector<int64_t> stride, Pair(node, "stride", kernel));
  ASSIGN_OR_RETURN(const std::vector<int64_t> padding, Pair(node, "padding"));
  std::vector<int64_t> dilation = {1, 1};
  if (node.args.count("dilation")) {
    ASSIGN_OR_RETURN(dilation, Pair(node, "dilation"));
  }
  Pool2d pool;
  pool.ceil_mode = BoolArg(node, "ceil_mode");
  Window* windows[2] = {&pool.height, &pool.width};
  for (int i = 0; i < 2; ++i) {
    Window& w = *windows[i];
    w = Window{input.sizes[input.rank() - 2 + i].constant, kernel[i], stride[i], padding[i],
               dilation[i]};
    if (w.kernel <= 0 || w.stride <= 0 || w.dilation <= 0) {
      return absl::InvalidArgumentError(
          "kernel_size, stride and dilation must be positive (as eager requires)");
    }
    if (std::max({w.kernel, w.stride, w.padding, w.dilation}) > kMaxWindowArgument) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel_size, stride, padding and dilation must be at most ", kMaxWindowArgument));
    }
    if (w.padding < 0 || w.padding > w.kernel / 2) {
      return absl::InvalidArgumentError(absl::StrCat("padding ", w.padding,
                                                     " must be between 0 and half the kernel size ",
                                                     w.kernel, " (as eager requires)"));
    }
    w.output = OutputSize(w, pool.ceil_mode);
    if (w.output < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the pooled dim of size ", w.input, " would have ", w.output, " elements"));
    }
  }
  return pool;
}

// The node arguments that describe `pool` to kiln.pool2d.
Args PoolArgs(const Pool2d& pool, const std::string& mode) {
  const Window& h = pool.height;
  const Window& w = pool.width;
  return {{"kernel_size", std::vector<int64_t>{h.kernel, w.kernel}},
          {"stride", std::vector<int64_t>{h.stride, w.stride}},
          {"padding", std::vector<int64_t>{h.padding, w.padding}},
          {"dilation", std::vector<int64_t>{h.dilation, w.dilation}},
          {"ceil_mode", pool.ceil_mode},
          {"mode", mode}};
}

std::vector<ir::Dim> PooledSizes(const ir::TensorType& input, const Pool2d& pool) {
  std::vector<ir::Dim> sizes = input.sizes;
  sizes[sizes.size() - 2] = ir::Dim::Constant(pool.height.output);
  sizes[sizes.size() - 1] = ir::Dim::Constant(pool.width.output);
  return sizes;
}

// Loop variable `variable` times `factor`, in int64.
int Scaled(ExprBuilder& b, int variable, int64_t factor) {
  const int index = b.Index(variable, DType::kInt64);
  if (factor == 1) return index;
  return b.Call("mul", {index, b.Constant(factor, DType::kInt64)}, DType::kInt64);
}

// The first input coordinate of output variable `o`'s window, in int64.
int WindowStart(ExprBuilder& b, int o, const Window& w) {
  const int scaled = Scaled(b, o, w.stride);
  if (w.padding == 0) return scaled;
  return b.Call("add", {scaled, b.Constant(-w.padding, DType::kInt64)}, DType::kInt64);
}

// Max pooling's index along one dim: input coordinate o * stride - padding
// + k * dilation of output variable `o` and window variable `k`, in int64,
// raised to the window's first coordinate inside the input. A winner is
// inside already; the start (k = 0), where eager's index stays when nothing
// beats -inf, becomes the first inside, as eager's.
int IndexCoordinate(ExprBuilder& b, int o, int k, const Window& w) {
  const DType i64 = DType::kInt64;
  const int start = WindowStart(b, o, w);
  const int at = b.Call("add", {start, Scaled(b, k, w.dilation)}, i64);
  if (w.padding == 0) return at;  // every window starts inside
  // start + ceil(-start / dilation) * dilation when start < 0 (C's division
  // truncates: the quotient is <= 0 otherwise, and clamped to 0).
  const int zero = b.Constant(0, i64);
  int first = b.Call("maximum", {start, zero}, i64);
  if (w.dilation > 1) {
    const int skipped =
        b.Call("maximum",
               {b.Call("div",
                       {b.Call("sub", {b.Constant(w.dilation - 1, i64), start}, i64),
                        b.Constant(w.dilation, i64)},
                       i64),
                zero},
               i64);
    first = b.Call("add", {start, b.Call("mul", {skipped, b.Constant(w.dilation, i64)}, i64)}, i64);
  }
  return b.Call("maximum", {at, first}, i64);
}

// kiln.pool2d: a reduction over [kernel_h, kernel_w] whose variables are the
// result's coordinates, then (kh, kw).
void AddPool2d(OpTable& table) {
  OpDef def;
  def.name = "kiln.pool2d.default";
  def.family = "pooling";
  def.dtypes = kFloatTypes;
  def.args = {{"kernel_size", ArgKind::kIntList, std::nullopt},
              {"stride", ArgKind::kIntList, std::nullopt},
              {"padding", ArgKind::kIntList, std::nullopt},
              {"dilation", ArgKind::kIntList, std::nullopt},
              {"ceil_mode", ArgKind::kBool, std::nullopt},
              {"mode", ArgKind::kString, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes(inputs, kFloatTypes, {}));
    ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, *inputs[0]));
    const std::string& mode = std::get<std::string>(Arg(node, "mode"));
    DType dtype = inputs[0]->dtype;
    if (mode == "argmax") {
      dtype = DType::kInt64;
    } else if (mode == "sum") {
      dtype = ComputeType(dtype);
    } else if (mode != "max") {
      return absl::InvalidArgumentError(absl::StrCat("unknown pooling mode '", mode, "'"));
    }
    return std::vector<ir::TensorType>{ContiguousType(dtype, PooledSizes(*inputs[0], pool))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& input = graph.values[node.inputs[0]];
    ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, input));
    const std::string& mode = std::get<std::string>(Arg(node, "mode"));
    const int rank = static_cast<int>(input.rank());
    const int h = rank - 2, w = rank - 1;  // the pooled dims and output variables
    const int kh = rank, kw = rank + 1;    // the window variables
    ir::AffineMap map;
    map.num_variables = rank + 2;
    map.coefficients.assign(rank, std::vector<int64_t>(rank + 2, 0));
    map.offsets.assign(rank, 0);
    for (int d = 0; d < h; ++d) map.coefficients[d][d] = 1;
    map.coefficients[h][h] = pool.height.stride;
    map.coefficients[h][kh] = pool.height.dilation;
    map.offsets[h] = -pool.height.padding;
    map.coefficients[w][w] = pool.width.stride;
    map.coefficients[w][kw] = pool.width.dilation;
    map.offsets[w] = -pool.width.padding;
    ExprBuilder b(ir::Definition::Kind::kReduction);
    const int element = b.BoundedLoad(node.inputs[0], std::move(map), ComputeType(input.dtype),
                                      mode == "sum" ? 0.0 : -INFINITY);
    int position = -1;
    if (mode == "argmax") {
      const DType i64 = DType::kInt64;
      const int row = IndexCoordinate(b, h, kh, pool.height);
      const int column = IndexCoordinate(b, w, kw, pool.width);
      position = b.Call(
          "add", {b.Call("mul", {row, b.Constant(pool.width.input, i64)}, i64), column}, i64);
    }
    ir::Definition definition = b.Finish(element);
    definition.reduction_sizes = {ir::Dim::Constant(pool.height.kernel),
                                  ir::Dim::Constant(pool.width.kernel)};
    definition.combiner = mode == "max" ? "pool_max" : mode == "argmax" ? "pool_argmax" : "sum";
    definition.position = position;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// Average pooling's divisor along one dim for output position o: the
// window's length inside the padded input (count_include_pad) or inside
// the input.
int64_t AverageFactor(const Window& w, int64_t o, bool count_include_pad) {
  const int64_t start = w.Start(o);
  const int64_t end = std::min(start + w.kernel, w.input + w.padding);
  if (count_include_pad) return end - start;
  return std::min(end, w.input) - std::max<int64_t>(start, 0);
}

// The same as an int64 expression of output variable `o`.
int AverageFactorExpr(ExprBuilder& b, int o, const Window& w, bool count_include_pad) {
  const DType i64 = DType::kInt64;
  const int start = WindowStart(b, o, w);
  const int end = b.Call("minimum",
                         {b.Call("add", {start, b.Constant(w.kernel, i64)}, i64),
                          b.Constant(w.input + w.padding, i64)},
                         i64);
  if (count_include_pad) return b.Call("sub", {end, start}, i64);
  return b.Call("sub",
                {b.Call("minimum", {end, b.Constant(w.input, i64)}, i64),
                 b.Call("maximum", {start, b.Constant(0, i64)}, i64)},
                i64);
}

// kiln.avg_pool2d_divisor(; input_size, kernel_size, stride, padding,
// ceil_mode, count_include_pad, dtype): [OH, OW], each window's divisor.
void AddAverageDivisor(OpTable& table) {
  OpDef def;
  def.name = "kiln.avg_pool2d_divisor.default";
  def.family = "pooling";
  def.dtypes = kFloatTypes;
  def.min_inputs = def.max_inputs = 0;
  def.args = {{"input_size", ArgKind::kIntList, std::nullopt},
              {"kernel_size", ArgKind::kIntList, std::nullopt},
              {"stride", ArgKind::kIntList, std::nullopt},
              {"padding", ArgKind::kIntList, std::nullopt},
              {"ceil_mode", ArgKind::kBool, std::nullopt},
              {"count_include_pad", ArgKind::kBool, std::nullopt},
              {"dtype", ArgKind::kDType, std::nullopt}};
  // The input's pooled dims stand for the input: the windows depend on
  // nothing else.
  auto pool_of = [](const ir::Node& node) -> absl::StatusOr<Pool2d> {
    const std::vector<int64_t> size = IntListArg(node, "input_size");
    if (size.size() != 2) return absl::InvalidArgumentError("input_size must have 2 entries");
    ir::TensorType plane = ContiguousType(
        DType::kFloat32,
        {ir::Dim::Constant(1), ir::Dim::Constant(size[0]), ir::Dim::Constant(size[1])});
    return PoolOf(node, plane);
  };
  def.infer = [pool_of](const ir::Node& node,
                        const InputTypes&) -> absl::StatusOr<std::vector<ir::TensorType>> {
    ASSIGN_OR_RETURN(const Pool2d pool, pool_of(node));
    return std::vector<ir::TensorType>{ContiguousType(
        DTypeArg(node, DType::kFloat32),
        {ir::Dim::Constant(pool.height.output), ir::Dim::Constant(pool.width.output)})};
  };
  def.lower = [pool_of](const ir::Graph& graph,
                        const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ASSIGN_OR_RETURN(const Pool2d pool, pool_of(node));
    const bool count_include_pad = BoolArg(node, "count_include_pad");
    const DType dtype = ComputeType(graph.values[node.outputs[0]].dtype);
    ExprBuilder b;
    const int product = b.Call("mul",
                               {AverageFactorExpr(b, 0, pool.height, count_include_pad),
                                AverageFactorExpr(b, 1, pool.width, count_include_pad)},
                               DType::kInt64);
    return std::vector<ir::Definition>{b.Finish(b.Cast(product, dtype))};
  };
  table.Add(std::move(def));
}

// max_pool2d_with_indices: the values and the indices, two reductions
// (an inference graph that drops the indices keeps one).
absl::StatusOr<std::vector<int>> MaxPoolWithIndices(GraphBuilder& b, const ir::Node& node) {
  const int x = node.inputs[0];
  ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, b.type(x)));
  ASSIGN_OR_RETURN(const int values, b.Add("kiln.pool2d.default", {x}, PoolArgs(pool, "max")));
  ASSIGN_OR_RETURN(const int indices, b.Add("kiln.pool2d.default", {x}, PoolArgs(pool, "argmax")));
  return std::vector<int>{values, indices};
}

// `value` ([..., OH, OW], in the compute type) divided by each window's
// divisor as avg_pool2d counts it (node: count_include_pad,
// divisor_override): a literal where every window has the same, else
// kiln.avg_pool2d_divisor.
absl::StatusOr<int> DivideByWindowSizes(GraphBuilder& b, int value, const Pool2d& pool,
                                        const ir::Node& node) {
  const bool count_include_pad = BoolArg(node, "count_include_pad");
  std::optional<int64_t> divisor;
  if (Present(node, "divisor_override")) {
    divisor = IntArg(node, "divisor_override");
    if (*divisor == 0) return absl::InvalidArgumentError("divisor_override must not be 0");
  } else {
    // Past kMaxScannedWindows the divisors (always right) are not looked at.
    auto uniform = [&](const Window& w) -> std::optional<int64_t> {
      if (w.output > kMaxScannedWindows) return std::nullopt;
      const int64_t first = AverageFactor(w, 0, count_include_pad);
      for (int64_t o = 1; o < w.output; ++o) {
        if (AverageFactor(w, o, count_include_pad) != first) return std::nullopt;
      }
      return first;
    };
    const std::optional<int64_t> rows = uniform(pool.height), columns = uniform(pool.width);
    if (rows && columns) divisor = *rows * *columns;
  }
  if (divisor) {
    return b.Add("aten.div.Tensor", {value}, {{"other", static_cast<double>(*divisor)}});
  }
  Args args = PoolArgs(pool, "");
  args.erase("mode");
  args.erase("dilation");
  args["input_size"] = std::vector<int64_t>{pool.height.input, pool.width.input};
  args["count_include_pad"] = count_include_pad;
  args["dtype"] = b.type(value).dtype;
  ASSIGN_OR_RETURN(const int divisors, b.Add("kiln.avg_pool2d_divisor.default", {}, args));
  return b.Add("aten.div.Tensor", {value, divisors});
}

// avg_pool2d: the window sums over their divisors.
absl::StatusOr<std::vector<int>> AveragePool(GraphBuilder& b, const ir::Node& node) {
  const int x = node.inputs[0];
  ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, b.type(x)));
  ASSIGN_OR_RETURN(const int sum, b.Add("kiln.pool2d.default", {x}, PoolArgs(pool, "sum")));
  ASSIGN_OR_RETURN(int result, DivideByWindowSizes(b, sum, pool, node));
  ASSIGN_OR_RETURN(result, b.Cast(result, b.type(x).dtype));
  return std::vector<int>{result};
}

// Adaptive average pooling: output position i along a dim of `input`
// elements pooled to `output` averages [floor(i * input / output),
// ceil((i + 1) * input / output)), divided by the two lengths in turn
// (eager's sum / kh / kw). Windows repeat every output / g positions
// (g = gcd(input, output)), shifted by input / g: each of those window
// shapes is a regular pooling with stride input / g over a slice, and the
// parts are stacked back in order. Equal windows (input % output == 0) are
// one part.
struct AdaptiveDim {
  int64_t input = 0, output = 0, period = 1, shift = 0;

  static AdaptiveDim Of(int64_t input, int64_t output) {
    const int64_t g = std::gcd(input, output);
    return {input, output, output / g, input / g};
  }
  int64_t Begin(int64_t i) const { return i * input / output; }
  int64_t End(int64_t i) const { return ((i + 1) * input + output - 1) / output; }
};

absl::StatusOr<std::vector<int>> AdaptiveAveragePool(GraphBuilder& b, const ir::Node& node) {
  const int x = node.inputs[0];
  const ir::TensorType type = b.type(x);
  RETURN_IF_ERROR(CheckInput(type));
  const std::vector<int64_t> output_size = IntListArg(node, "output_size");
  if (output_size.size() != 2 || output_size[0] < 1 || output_size[1] < 1) {
    return absl::InvalidArgumentError("output_size must be two positive sizes");
  }
  const int64_t rank = type.rank();
  const AdaptiveDim rows = AdaptiveDim::Of(type.sizes[rank - 2].constant, output_size[0]);
  const AdaptiveDim columns = AdaptiveDim::Of(type.sizes[rank - 1].constant, output_size[1]);
  if (rows.period > kMaxAdaptiveParts / columns.period) {
    return absl::UnimplementedError(
        absl::StrCat("adaptive pooling of ", rows.input, "x", columns.input, " to ", rows.output,
                     "x", columns.output, " has windows of ", rows.period, " by ", columns.period,
                     " sizes and places, over the limit of ", kMaxAdaptiveParts,
                     " (sizes that divide evenly have one)"));
  }
  // One part: windows (i, j) = (a * period_h + bh, c * period_w + bw) over
  // all a, c, averaged.
  auto part = [&](int64_t bh, int64_t bw) -> absl::StatusOr<int> {
    int sliced = x;
    const AdaptiveDim* dims[2] = {&rows, &columns};
    const int64_t offsets[2] = {bh, bw};
    std::vector<int64_t> kernel, stride;
    for (int i = 0; i < 2; ++i) {
      const AdaptiveDim& dim = *dims[i];
      const int64_t begin = dim.Begin(offsets[i]);
      kernel.push_back(dim.End(offsets[i]) - begin);
      stride.push_back(dim.shift);
      if (begin > 0) {
        ASSIGN_OR_RETURN(sliced, b.Add("aten.slice.Tensor", {sliced},
                                       {{"dim", rank - 2 + i}, {"start", begin}}));
      }
    }
    Pool2d pool;
    const ir::TensorType part_input = b.type(sliced);
    pool.height = Window{part_input.sizes[rank - 2].constant, kernel[0], stride[0]};
    pool.width = Window{part_input.sizes[rank - 1].constant, kernel[1], stride[1]};
    ASSIGN_OR_RETURN(int result, b.Add("kiln.pool2d.default", {sliced}, PoolArgs(pool, "sum")));
    for (int64_t length : kernel) {
      ASSIGN_OR_RETURN(
          result, b.Add("aten.div.Tensor", {result}, {{"other", static_cast<double>(length)}}));
    }
    return result;
  };
  // Stack a row of parts along a new last dim, then the rows along a new
  // dim before the last; each stack reads as the interleaved positions.
  std::vector<int> stacked_rows;
  for (int64_t bh = 0; bh < rows.period; ++bh) {
    std::vector<int> parts;
    for (int64_t bw = 0; bw < columns.period; ++bw) {
      ASSIGN_OR_RETURN(const int one, part(bh, bw));
      parts.push_back(one);
    }
    if (parts.size() == 1) {
      stacked_rows.push_back(parts[0]);
      continue;
    }
    ASSIGN_OR_RETURN(const int stacked, b.Add("kiln.stack.default", parts, {{"dim", rank}}));
    std::vector<ir::SymExpr> sizes;
    for (int64_t d = 0; d + 1 < rank; ++d)
      sizes.push_back(ir::SymExpr::Of(b.type(stacked).sizes[d]));
    sizes.push_back(ir::SymExpr::Constant(columns.output));
    ASSIGN_OR_RETURN(const int row, b.Add("aten.view.default", {stacked}, {{"size", sizes}}));
    stacked_rows.push_back(row);
  }
  int result = stacked_rows[0];
  if (stacked_rows.size() > 1) {
    ASSIGN_OR_RETURN(const int stacked,
                     b.Add("kiln.stack.default", stacked_rows, {{"dim", rank - 1}}));
    std::vector<ir::SymExpr> sizes;
    for (int64_t d = 0; d + 2 < rank; ++d) sizes.push_back(ir::SymExpr::Of(type.sizes[d]));
    sizes.push_back(ir::SymExpr::Constant(rows.output));
    sizes.push_back(ir::SymExpr::Constant(columns.output));
    ASSIGN_OR_RETURN(result, b.Add("aten.view.default", {stacked}, {{"size", sizes}}));
  }
  ASSIGN_OR_RETURN(result, b.Cast(result, type.dtype));
  return std::vector<int>{result};
}

void AddForwardOps(OpTable& table) {
  AddPool2d(table);
  AddAverageDivisor(table);
  const ArgSpec kernel{"kernel_size", ArgKind::kIntList, std::nullopt};
  const ArgSpec stride{"stride", ArgKind::kIntList, ir::ArgValue(std::vector<int64_t>{})};
  const ArgSpec padding{"padding", ArgKind::kIntList, ir::ArgValue(std::vector<int64_t>{0})};
  const ArgSpec ceil_mode{"ceil_mode", ArgKind::kBool, ir::ArgValue(false)};
  AddComposite(table, "aten.max_pool2d_with_indices.default", 1, 1,
               {kernel,
                stride,
                padding,
                {"dilation", ArgKind::kIntList, ir::ArgValue(std::vector<int64_t>{1})},
                ceil_mode},
               MaxPoolWithIndices, kFloatTypes, {}, "pooling");
  AddComposite(table, "aten.avg_pool2d.default", 1, 1,
               {kernel,
                stride,
                padding,
                ceil_mode,
                {"count_include_pad", ArgKind::kBool, ir::ArgValue(true)},
                {"divisor_override", ArgKind::kInt, ir::ArgValue(ir::None{})}},
               AveragePool, kFloatTypes, {}, "pooling");
  AddComposite(table, "aten._adaptive_avg_pool2d.default", 1, 1,
               {{"output_size", ArgKind::kIntList, std::nullopt}}, AdaptiveAveragePool, kFloatTypes,
               {}, "pooling");
}

}  // namespace pooling

void RegisterPoolingOps(OpTable& table) {
  pooling::AddForwardOps(table);
  pooling::AddBackwardOps(table);
}

}  // namespace kiln::ops
