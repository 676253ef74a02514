// Pooling's backward ops: kiln.pool2d_backward and the gradients built on it.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "codegen/ops/pooling.h"
#include "common/status_macros.h"

namespace kiln::ops::pooling {

using ir::DType;

// The output rows whose windows can reach input row q * stride + r, for
// any r in [0, stride): q + j for j in [first, last].
struct Reach {
  int64_t first = 0, last = 0;

  static Reach Of(const Window& w) {
    return {-FloorDiv(w.dilation * (w.kernel - 1) - w.padding, w.stride),
            FloorDiv(w.stride - 1 + w.padding, w.stride)};
  }
  int64_t count() const { return last - first + 1; }
};

// kiln.pool2d_backward(value[, indices]; input_size, kernel_size, stride,
// padding, dilation, ceil_mode, mode): a pooling's input gradient, in blocks
// [..., ceil(H / sh), sh, ceil(W / sw), sw] (element (q, r, q', r') is input
// position (q * sh + r, q' * sw + r'); reshaped and sliced, it is the
// gradient). Output rows q + j and columns q' + j' can reach that position
// for j, j' in their static Reach: the block sums over those, row by row as
// eager adds, where(reached, value there, 0), with bounded loads beyond the
// output. Reached: mode "max", where the indices name the position; "avg",
// where the window holds it (`value` is then the gradient over the window
// sizes). Positions past H or W are the slice's to drop.
void AddPool2dBackward(OpTable& table) {
  OpDef def;
  def.name = "kiln.pool2d_backward.default";
  def.family = "pooling";
  def.dtypes = kFloatTypes;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.args = {{"input_size", ArgKind::kIntList, std::nullopt},
              {"kernel_size", ArgKind::kIntList, std::nullopt},
              {"stride", ArgKind::kIntList, std::nullopt},
              {"padding", ArgKind::kIntList, std::nullopt},
              {"dilation", ArgKind::kIntList, std::nullopt},
              {"ceil_mode", ArgKind::kBool, std::nullopt},
              {"mode", ArgKind::kString, std::nullopt}};
  // The windows over an input of the value's leading dims and input_size.
  auto pool_of = [](const ir::Node& node, const ir::TensorType& value) -> absl::StatusOr<Pool2d> {
    const std::vector<int64_t> size = IntListArg(node, "input_size");
    if (size.size() != 2 || value.rank() < 2) {
      return absl::InvalidArgumentError("input_size must have 2 entries");
    }
    std::vector<ir::Dim> sizes = value.sizes;
    sizes[sizes.size() - 2] = ir::Dim::Constant(size[0]);
    sizes[sizes.size() - 1] = ir::Dim::Constant(size[1]);
    return PoolOf(node, ContiguousType(value.dtype, std::move(sizes)));
  };
  def.infer = [pool_of](const ir::Node& node,
                        const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    RETURN_IF_ERROR(CheckDTypes({inputs[0]}, kFloatTypes, {}));
    const ir::TensorType& value = *inputs[0];
    ASSIGN_OR_RETURN(const Pool2d pool, pool_of(node, value));
    if (PooledSizes(value, pool) != value.sizes) {
      return absl::InvalidArgumentError("the gradient does not have the pooled shape");
    }
    const bool max = std::get<std::string>(Arg(node, "mode")) == "max";
    if (max != (inputs.size() == 2) ||
        (max && (inputs[1]->dtype != DType::kInt64 || inputs[1]->sizes != value.sizes))) {
      return absl::InvalidArgumentError(
          "mode \"max\" takes int64 indices of the gradient's shape, \"avg\" none");
    }
    std::vector<ir::Dim> sizes(value.sizes.begin(), value.sizes.end() - 2);
    for (const Window* w : {&pool.height, &pool.width}) {
      sizes.push_back(ir::Dim::Constant((w->input + w->stride - 1) / w->stride));
      sizes.push_back(ir::Dim::Constant(w->stride));
    }
    return std::vector<ir::TensorType>{ContiguousType(ComputeType(value.dtype), std::move(sizes))};
  };
  def.lower = [pool_of](const ir::Graph& graph,
                        const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& value = graph.values[node.inputs[0]];
    ASSIGN_OR_RETURN(const Pool2d pool, pool_of(node, value));
    const bool max = std::get<std::string>(Arg(node, "mode")) == "max";
    const int rank = static_cast<int>(value.rank());
    const int lead = rank - 2;
    // Variables: the leading dims, (q, r) per pooled dim, then (j, j').
    const int q[2] = {lead, lead + 2}, r[2] = {lead + 1, lead + 3}, j[2] = {lead + 4, lead + 5};
    const Window* windows[2] = {&pool.height, &pool.width};
    const Reach reach[2] = {Reach::Of(pool.height), Reach::Of(pool.width)};
    ir::AffineMap output;  // the output position q + first + j per pooled dim
    output.num_variables = lead + 6;
    output.coefficients.assign(rank, std::vector<int64_t>(lead + 6, 0));
    output.offsets.assign(rank, 0);
    for (int d = 0; d < lead; ++d) output.coefficients[d][d] = 1;
    for (int i = 0; i < 2; ++i) {
      output.coefficients[lead + i][q[i]] = 1;
      output.coefficients[lead + i][j[i]] = 1;
      output.offsets[lead + i] = reach[i].first;
    }
    const DType compute = ComputeType(value.dtype);
    const DType i64 = DType::kInt64;
    ExprBuilder b(ir::Definition::Kind::kReduction);
    const int element = b.BoundedLoad(node.inputs[0], output, compute, 0.0);
    int reached;
    if (max) {
      // (q * sh + r) * W + q' * sw + r', against the index there.
      int position[2];
      for (int i = 0; i < 2; ++i) {
        position[i] = b.Call("add", {Scaled(b, q[i], windows[i]->stride), b.Index(r[i], i64)}, i64);
      }
      const int flat = b.Call(
          "add",
          {b.Call("mul", {position[0], b.Constant(pool.width.input, i64)}, i64), position[1]}, i64);
      reached = b.Call("eq", {b.BoundedLoad(node.inputs[1], output, i64, -1), flat}, DType::kBool);
    } else {
      // Offset r + padding - (first + j) * stride of the position in the
      // window, inside [0, kernel) along both dims.
      reached = -1;
      for (int i = 0; i < 2; ++i) {
        const Window& w = *windows[i];
        const int offset = b.Call(
            "sub",
            {b.Call("add",
                    {b.Index(r[i], i64), b.Constant(w.padding - reach[i].first * w.stride, i64)},
                    i64),
             Scaled(b, j[i], w.stride)},
            i64);
        const int inside = b.Call("logical_and",
                                  {b.Call("ge", {offset, b.Constant(0, i64)}, DType::kBool),
                                   b.Call("lt", {offset, b.Constant(w.kernel, i64)}, DType::kBool)},
                                  DType::kBool);
        reached = reached < 0 ? inside : b.Call("logical_and", {reached, inside}, DType::kBool);
      }
    }
    const int term = b.Call("where", {reached, element, b.Constant(0, compute)}, compute);
    ir::Definition definition = b.Finish(term);
    definition.reduction_sizes = {ir::Dim::Constant(reach[0].count()),
                                  ir::Dim::Constant(reach[1].count())};
    definition.combiner = "sum";
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// A backward's result from kiln.pool2d_backward's blocks: the blocks
// reshaped to [..., ceil(H / sh) * sh, ceil(W / sw) * sw], sliced to the
// input's [H, W] and in its dtype.
absl::StatusOr<int> FromBlocks(GraphBuilder& b, int blocks, const ir::TensorType& input) {
  const ir::TensorType type = b.type(blocks);
  const int64_t rank = input.rank();
  std::vector<ir::SymExpr> sizes;
  for (int64_t d = 0; d < rank - 2; ++d) sizes.push_back(ir::SymExpr::Of(type.sizes[d]));
  for (int64_t d = rank - 2; d < rank + 2; d += 2) {
    sizes.push_back(ir::SymExpr::Constant(type.sizes[d].constant * type.sizes[d + 1].constant));
  }
  ASSIGN_OR_RETURN(int result, b.Add("aten.view.default", {blocks}, {{"size", sizes}}));
  for (int64_t d = rank - 2; d < rank; ++d) {
    if (b.type(result).sizes[d] == input.sizes[d]) continue;
    ASSIGN_OR_RETURN(result,
                     b.Add("aten.slice.Tensor", {result},
                           {{"dim", d}, {"start", int64_t{0}}, {"end", input.sizes[d].constant}}));
  }
  return b.Cast(result, input.dtype);
}

// The gradient must have the pooled shape of the input.
absl::Status CheckGradient(const ir::TensorType& gradient, const ir::TensorType& input,
                           const Pool2d& pool) {
  if (gradient.sizes != PooledSizes(input, pool)) {
    return absl::InvalidArgumentError("grad_output does not have the pooled input's shape");
  }
  return absl::OkStatus();
}

Args BackwardArgs(const Pool2d& pool, const std::string& mode) {
  Args args = PoolArgs(pool, mode);
  args["input_size"] = std::vector<int64_t>{pool.height.input, pool.width.input};
  return args;
}

// max_pool2d_with_indices_backward(grad_output, self, indices): each
// gradient goes to the position its index names.
absl::StatusOr<std::vector<int>> MaxPoolBackward(GraphBuilder& b, const ir::Node& node) {
  const int gradient = node.inputs[0], indices = node.inputs[2];
  const ir::TensorType input = b.type(node.inputs[1]);
  ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, input));
  RETURN_IF_ERROR(CheckGradient(b.type(gradient), input, pool));
  if (b.type(indices).dtype != DType::kInt64 || b.type(indices).sizes != b.type(gradient).sizes) {
    return absl::InvalidArgumentError("indices must be int64 of grad_output's shape");
  }
  ASSIGN_OR_RETURN(const int blocks, b.Add("kiln.pool2d_backward.default", {gradient, indices},
                                           BackwardArgs(pool, "max")));
  ASSIGN_OR_RETURN(const int result, FromBlocks(b, blocks, input));
  return std::vector<int>{result};
}

// avg_pool2d_backward(grad_output, self): each gradient over its window's
// divisor (eager's grad_delta) goes to every position of the window.
absl::StatusOr<std::vector<int>> AveragePoolBackward(GraphBuilder& b, const ir::Node& node) {
  const ir::TensorType input = b.type(node.inputs[1]);
  ASSIGN_OR_RETURN(const Pool2d pool, PoolOf(node, input));
  RETURN_IF_ERROR(CheckGradient(b.type(node.inputs[0]), input, pool));
  ASSIGN_OR_RETURN(const int gradient, b.Cast(node.inputs[0], ComputeType(input.dtype)));
  ASSIGN_OR_RETURN(const int share, DivideByWindowSizes(b, gradient, pool, node));
  ASSIGN_OR_RETURN(const int blocks,
                   b.Add("kiln.pool2d_backward.default", {share}, BackwardArgs(pool, "avg")));
  ASSIGN_OR_RETURN(const int result, FromBlocks(b, blocks, input));
  return std::vector<int>{result};
}

// _adaptive_avg_pool2d_backward(grad_output, self): windows of one size
// only (input % output == 0 in both dims), where it is avg_pool2d's
// backward with the gradient divided as eager does, by kh then kw.
absl::StatusOr<std::vector<int>> AdaptiveAveragePoolBackward(GraphBuilder& b,
                                                             const ir::Node& node) {
  const ir::TensorType gradient = b.type(node.inputs[0]);
  const ir::TensorType input = b.type(node.inputs[1]);
  RETURN_IF_ERROR(CheckInput(input));
  const int64_t rank = input.rank();
  if (gradient.rank() != rank || gradient.sizes[rank - 2].is_symbolic() ||
      gradient.sizes[rank - 1].is_symbolic()) {
    return absl::InvalidArgumentError("grad_output must be the pooled input's shape");
  }
  Pool2d pool;
  for (int i = 0; i < 2; ++i) {
    const int64_t in = input.sizes[rank - 2 + i].constant;
    const int64_t out = gradient.sizes[rank - 2 + i].constant;
    if (out < 1 || in % out != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "the backward of adaptive pooling is supported for windows of one size only (input "
          "sizes that divide by the output's), not ",
          input.sizes[rank - 2].constant, "x", input.sizes[rank - 1].constant, " to ",
          gradient.sizes[rank - 2].constant, "x", gradient.sizes[rank - 1].constant));
    }
    (i == 0 ? pool.height : pool.width) = Window{in, in / out, in / out, 0, 1, out};
  }
  RETURN_IF_ERROR(CheckGradient(gradient, input, pool));
  ASSIGN_OR_RETURN(int share, b.Cast(node.inputs[0], ComputeType(input.dtype)));
  for (const Window* w : {&pool.height, &pool.width}) {
    ASSIGN_OR_RETURN(
        share, b.Add("aten.div.Tensor", {share}, {{"other", static_cast<double>(w->kernel)}}));
  }
  ASSIGN_OR_RETURN(const int blocks,
                   b.Add("kiln.pool2d_backward.default", {share}, BackwardArgs(pool, "avg")));
  ASSIGN_OR_RETURN(const int result, FromBlocks(b, blocks, input));
  return std::vector<int>{result};
}

void AddBackwardOps(OpTable& table) {
  AddPool2dBackward(table);
  const ArgSpec kernel{"kernel_size", ArgKind::kIntList, std::nullopt};
  // Backward ops: tensors (grad_output, self[, indices]), the forward's
  // arguments. The indices are int64: only the first two are float.
  AddComposite(table, "aten.max_pool2d_with_indices_backward.default", 3, 3,
               {kernel,
                {"stride", ArgKind::kIntList, std::nullopt},
                {"padding", ArgKind::kIntList, std::nullopt},
                {"dilation", ArgKind::kIntList, std::nullopt},
                {"ceil_mode", ArgKind::kBool, std::nullopt}},
               MaxPoolBackward, kFloatTypes, {}, "pooling", /*checked_inputs=*/2);
  AddComposite(table, "aten.avg_pool2d_backward.default", 2, 2,
               {kernel,
                {"stride", ArgKind::kIntList, std::nullopt},
                {"padding", ArgKind::kIntList, std::nullopt},
                {"ceil_mode", ArgKind::kBool, std::nullopt},
                {"count_include_pad", ArgKind::kBool, std::nullopt},
                {"divisor_override", ArgKind::kInt, ir::ArgValue(ir::None{})}},
               AveragePoolBackward, kFloatTypes, {}, "pooling");
  AddComposite(table, "aten._adaptive_avg_pool2d_backward.default", 2, 2, {},
               AdaptiveAveragePoolBackward, kFloatTypes, {}, "pooling");
}

}  // namespace kiln::ops::pooling
