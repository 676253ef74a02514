// Convolutions: calls through the runtime table (kiln_runtime.conv_f32),
// which reaches oneDNN, the library eager PyTorch convolves with on CPUs
// (client/runtime/convolution.h).
//
// The core ops are kiln.convolution and kiln.conv_transpose (torch's
// transposed convolution, oneDNN's deconvolution: weights [in, out /
// groups, kernel...], and output_padding), both float32, 1 to 3 spatial
// dims, any stride, padding, dilation and groups; aten.convolution is a
// composite over them, so that 16-bit floats convolve in float32 and round
// once. The bias is added by oneDNN; what follows a convolution (batch
// norm in eval, ReLU, a residual add) is pointwise, and the scheduler fuses
// it into one pass over the convolution's output.
#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// A per-spatial-dim argument, a single value standing for every dim as
// torch allows.
absl::StatusOr<std::vector<int64_t>> PerDim(const ir::Node& node, const char* name, int64_t spatial,
                                            int64_t least) {
  std::vector<int64_t> values = IntListArg(node, name);
  if (values.size() == 1) values.assign(spatial, values[0]);
  if (static_cast<int64_t>(values.size()) != spatial) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " has ", values.size(), " values for a convolution over ", spatial, " spatial dims"));
  }
  for (int64_t value : values) {
    if (value < least) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be at least ", least, ", got ", value));
    }
  }
  return values;
}

// What both kinds require of (input, weight, bias?): ranks, one dtype,
// static channels and spatial sizes.
absl::Status CheckOperands(const InputTypes& inputs) {
  const ir::TensorType& input = *inputs[0];
  const ir::TensorType& weight = *inputs[1];
  const int64_t spatial = input.rank() - 2;
  if (spatial < 1 || spatial > 3 || weight.rank() != input.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution expects an input of rank 3 to 5 and a weight of the same rank, "
                     "got input ",
                     Shape(input), " and weight ", Shape(weight)));
  }
  for (const ir::TensorType* operand : inputs) {
    if (operand->dtype != input.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("operands have dtypes ",
                                                     ir::DTypeName(input.dtype), " and ",
                                                     ir::DTypeName(operand->dtype)));
    }
  }
  for (int64_t d = 1; d < input.rank(); ++d) {
    if (input.sizes[d].is_symbolic() || weight.sizes[d].is_symbolic() ||
        weight.sizes[0].is_symbolic()) {
      return absl::UnimplementedError(absl::StrCat(
          "convolutions with symbolic channels or spatial sizes are not supported yet (input ",
          Shape(input), "); only the batch may be symbolic"));
    }
  }
  return absl::OkStatus();
}

// The result type of convolution(input, weight, bias?).
absl::StatusOr<std::vector<ir::TensorType>> InferConvolution(const ir::Node& node,
                                                             const InputTypes& inputs) {
  RETURN_IF_ERROR(CheckOperands(inputs));
  const ir::TensorType& input = *inputs[0];
  const ir::TensorType& weight = *inputs[1];
  const int64_t spatial = input.rank() - 2;
  const int64_t groups = IntArg(node, "groups");
  const int64_t in_channels = input.sizes[1].constant;
  const int64_t out_channels = weight.sizes[0].constant;
  if (groups < 1 || in_channels != weight.sizes[1].constant * groups ||
      out_channels % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a weight ", Shape(weight), " in ", groups, " groups does not fit an input ", Shape(input),
        ": the input needs weight[1] * groups channels, and weight[0] must divide by groups"));
  }
  if (inputs.size() == 3 && (inputs[2]->rank() != 1 || inputs[2]->sizes[0] != weight.sizes[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bias ", Shape(*inputs[2]), " for ", out_channels, " output channels"));
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> stride, PerDim(node, "stride", spatial, 1));
  ASSIGN_OR_RETURN(const std::vector<int64_t> padding, PerDim(node, "padding", spatial, 0));
  ASSIGN_OR_RETURN(const std::vector<int64_t> dilation, PerDim(node, "dilation", spatial, 1));
  std::vector<ir::Dim> sizes = {input.sizes[0], weight.sizes[0]};
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t extent = dilation[d] * (weight.sizes[2 + d].constant - 1) + 1;
    const int64_t padded = input.sizes[2 + d].constant + 2 * padding[d];
    if (padded < extent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spatial dim ", d, " of the input is ", padded, " with padding, smaller than the ",
          extent, " the kernel spans ", Shape(input), " ", Shape(weight)));
    }
    sizes.push_back(ir::Dim::Constant((padded - extent) / stride[d] + 1));
  }
  return std::vector<ir::TensorType>{ContiguousType(input.dtype, std::move(sizes))};
}

// The result type of conv_transpose(input, weight, bias?): weight is [in,
// out / groups, kernel...], and each spatial size (in - 1) * stride - 2 *
// padding + dilation * (kernel - 1) + output_padding + 1, as torch's.
absl::StatusOr<std::vector<ir::TensorType>> InferConvTranspose(const ir::Node& node,
                                                               const InputTypes& inputs) {
  RETURN_IF_ERROR(CheckOperands(inputs));
  const ir::TensorType& input = *inputs[0];
  const ir::TensorType& weight = *inputs[1];
  const int64_t spatial = input.rank() - 2;
  const int64_t groups = IntArg(node, "groups");
  const int64_t in_channels = input.sizes[1].constant;
  if (groups < 1 || weight.sizes[0].constant != in_channels || in_channels % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a transposed weight ", Shape(weight), " in ", groups, " groups does not fit an input ",
        Shape(input), ": the input needs weight[0] channels, and they must divide by groups"));
  }
  const int64_t out_channels = weight.sizes[1].constant * groups;
  if (inputs.size() == 3 &&
      (inputs[2]->rank() != 1 || inputs[2]->sizes[0] != ir::Dim::Constant(out_channels))) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bias ", Shape(*inputs[2]), " for ", out_channels, " output channels"));
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> stride, PerDim(node, "stride", spatial, 1));
  ASSIGN_OR_RETURN(const std::vector<int64_t> padding, PerDim(node, "padding", spatial, 0));
  ASSIGN_OR_RETURN(const std::vector<int64_t> dilation, PerDim(node, "dilation", spatial, 1));
  ASSIGN_OR_RETURN(const std::vector<int64_t> output_padding,
                   PerDim(node, "output_padding", spatial, 0));
  std::vector<ir::Dim> sizes = {input.sizes[0], ir::Dim::Constant(out_channels)};
  for (int64_t d = 0; d < spatial; ++d) {
    // Eager refuses these too: past stride and dilation, output_padding
    // would add positions no input position reaches.
    if (output_padding[d] >= stride[d] && output_padding[d] >= dilation[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output_padding ", output_padding[d], " of spatial dim ", d,
          " must be smaller than its stride ", stride[d], " or its dilation ", dilation[d]));
    }
    const int64_t size = (input.sizes[2 + d].constant - 1) * stride[d] - 2 * padding[d] +
                         dilation[d] * (weight.sizes[2 + d].constant - 1) + output_padding[d] + 1;
    if (size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("spatial dim ", d, " of a transposed convolution's result would be ", size,
                       " long: padding ", padding[d], " cuts more than the input ", Shape(input),
                       " and kernel ", Shape(weight), " give"));
    }
    sizes.push_back(ir::Dim::Constant(size));
  }
  return std::vector<ir::TensorType>{ContiguousType(input.dtype, std::move(sizes))};
}

const std::vector<ArgSpec> kCoreArgs = {
    {"stride", ArgKind::kIntList, std::nullopt},
    {"padding", ArgKind::kIntList, std::nullopt},
    {"dilation", ArgKind::kIntList, std::nullopt},
    {"groups", ArgKind::kInt, ir::ArgValue(int64_t{1})},
    {"bias", ArgKind::kOptionalTensor, ir::ArgValue(true)},
};

// kiln.conv_transpose also takes output_padding.
std::vector<ArgSpec> TransposedArgs() {
  std::vector<ArgSpec> args = kCoreArgs;
  args.insert(args.begin() + 2, {"output_padding", ArgKind::kIntList, std::nullopt});
  return args;
}

// A core op: one extern call, `function` ("conv" or "conv_transpose"; the
// emitter fills a kiln_conv from the node's arguments).
void AddCoreOp(OpTable& table, const std::string& name, const std::string& function,
               std::vector<ArgSpec> args, decltype(OpDef::infer) infer) {
  OpDef def;
  def.name = name;
  def.family = "convolution";
  def.dtypes = {DType::kFloat32};
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.args = std::move(args);
  def.infer = std::move(infer);
  def.lower = [function](const ir::Graph&,
                         const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = function;
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// aten.convolution: a core op (kiln.conv_transpose when `transposed`), in
// float32 for 16-bit floats.
absl::StatusOr<std::vector<int>> Convolution(GraphBuilder& b, const ir::Node& node) {
  const bool transposed = BoolArg(node, "transposed");
  const DType dtype = b.type(node.inputs[0]).dtype;
  auto to_type = [&](int value, DType to) -> absl::StatusOr<int> {
    if (b.type(value).dtype == to) return value;
    return b.Add("aten._to_copy.default", {value}, {{"dtype", to}});
  };
  std::map<std::string, ir::ArgValue> args;
  for (const char* name : {"stride", "padding", "dilation", "groups", "bias"}) {
    args[name] = Arg(node, name);
  }
  if (transposed) {
    // aten.convolution's default output_padding, [], is no padding.
    std::vector<int64_t> output_padding = IntListArg(node, "output_padding");
    if (output_padding.empty()) output_padding = {0};
    args["output_padding"] = ir::ArgValue(std::move(output_padding));
  }
  std::vector<int> inputs;
  for (int input : node.inputs) {
    ASSIGN_OR_RETURN(const int converted, to_type(input, DType::kFloat32));
    inputs.push_back(converted);
  }
  ASSIGN_OR_RETURN(
      const int result,
      b.Add(transposed ? "kiln.conv_transpose.default" : "kiln.convolution.default", inputs, args));
  ASSIGN_OR_RETURN(const int rounded, to_type(result, dtype));
  return std::vector<int>{rounded};
}

}  // namespace

void RegisterConvolutionOps(OpTable& table) {
  AddCoreOp(table, "kiln.convolution.default", "conv", kCoreArgs, InferConvolution);
  AddCoreOp(table, "kiln.conv_transpose.default", "conv_transpose", TransposedArgs(),
            InferConvTranspose);
  std::vector<ArgSpec> args = kCoreArgs;
  args.push_back({"transposed", ArgKind::kBool, ir::ArgValue(false)});
  args.push_back({"output_padding", ArgKind::kIntList, ir::ArgValue(std::vector<int64_t>{})});
  AddComposite(table, "aten.convolution.default", 2, 3, args, Convolution,
               {DType::kFloat32, DType::kFloat16, DType::kBFloat16},
               {DType::kBool, DType::kInt64, DType::kInt32}, "convolution");
}

}  // namespace kiln::ops
