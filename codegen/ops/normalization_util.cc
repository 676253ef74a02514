#include "codegen/ops/normalization_util.h"

#include "absl/strings/str_cat.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops::normalization {

using ir::DType;

absl::StatusOr<std::map<std::string, int>> TensorInputs(const ir::Node& node,
                                                        const std::vector<std::string>& required,
                                                        const std::vector<std::string>& optional) {
  std::map<std::string, int> inputs;
  size_t next = 0;
  auto take = [&](const std::string& name) -> absl::Status {
    if (next >= node.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "has ", node.inputs.size(), " tensor inputs, too few for '", name, "' (present)"));
    }
    inputs[name] = node.inputs[next++];
    return absl::OkStatus();
  };
  for (const std::string& name : required) RETURN_IF_ERROR(take(name));
  for (const std::string& name : optional) {
    if (Present(node, name)) RETURN_IF_ERROR(take(name));
  }
  if (next != node.inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("has ", node.inputs.size(), " tensor inputs, but its arguments say ", next));
  }
  return inputs;
}

int Find(const std::map<std::string, int>& inputs, const std::string& name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? -1 : it->second;
}

absl::StatusOr<int> Sum(GraphBuilder& b, int value, const std::vector<int64_t>& dims) {
  if (dims.empty()) return value;
  return b.Add("aten.sum.dim_IntList", {value}, {{"dim", dims}, {"keepdim", false}});
}

absl::StatusOr<int> Binary(GraphBuilder& b, const char* op, int x, int y) {
  return b.Add(op, {x, y});
}

absl::StatusOr<int> AlongChannels(GraphBuilder& b, int value, int64_t rank) {
  for (int64_t d = 2; d < rank; ++d) {
    ASSIGN_OR_RETURN(value, b.Add("aten.unsqueeze.default", {value}, {{"dim", int64_t{-1}}}));
  }
  return value;
}

absl::StatusOr<int> InverseStd(GraphBuilder& b, int variance, double eps) {
  ASSIGN_OR_RETURN(const int shifted, b.Add("aten.add.Tensor", {variance}, {{"other", eps}}));
  ASSIGN_OR_RETURN(const int root, b.Add("aten.sqrt.default", {shifted}));
  return b.Add("aten.reciprocal.default", {root});
}

absl::StatusOr<int> ScaleAndShift(GraphBuilder& b, int x, int scale, int shift) {
  const int64_t rank = b.type(x).rank();
  ASSIGN_OR_RETURN(scale, AlongChannels(b, scale, rank));
  ASSIGN_OR_RETURN(shift, AlongChannels(b, shift, rank));
  ASSIGN_OR_RETURN(const int scaled, Binary(b, "aten.mul.Tensor", x, scale));
  return Binary(b, "aten.add.Tensor", scaled, shift);
}

absl::StatusOr<int> Shift(GraphBuilder& b, int bias, int mean, int scale) {
  ASSIGN_OR_RETURN(const int product, Binary(b, "aten.mul.Tensor", mean, scale));
  if (bias < 0) return b.Add("aten.rsub.Scalar", {product}, {{"other", 0.0}});
  return Binary(b, "aten.sub.Tensor", bias, product);
}

std::vector<int64_t> Spatial(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

absl::Status CheckInput(const ir::TensorType& input) {
  if (input.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "needs an input of rank 2 or more (batch, channels, ...), got rank ", input.rank()));
  }
  return absl::OkStatus();
}

absl::Status CheckParameter(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                            const std::string& name, const std::vector<ir::Dim>& want, bool mixed) {
  const int value = Find(inputs, name);
  if (value < 0) return absl::OkStatus();
  const ir::TensorType input = b.type(inputs.at("input"));
  const ir::TensorType parameter = b.type(value);
  if (parameter.sizes != want) {
    const ir::TensorType expected{parameter.dtype, want, {}};
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' has shape ", ir::ToString(parameter, b.graph()),
                     " but the input has ", ir::ToString(expected, b.graph()), " channels"));
  }
  const bool half = ComputeType(input.dtype) != input.dtype;
  if (parameter.dtype != input.dtype && !(mixed && half && parameter.dtype == DType::kFloat32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is ", ir::DTypeName(parameter.dtype), " but the input is ",
                     ir::DTypeName(input.dtype), ", a mix eager PyTorch refuses too"));
  }
  return absl::OkStatus();
}

ir::DType StatisticsType(const GraphBuilder& b, const std::map<std::string, int>& inputs,
                         const std::vector<std::string>& parameters) {
  const DType input = b.type(inputs.at("input")).dtype;
  if (input == DType::kFloat16) return DType::kFloat32;
  for (const std::string& name : parameters) {
    const int value = Find(inputs, name);
    if (value >= 0 && b.type(value).dtype == DType::kFloat32) return b.type(value).dtype;
  }
  return input;
}

absl::StatusOr<std::map<std::string, int>> Converted(GraphBuilder& b,
                                                     const std::map<std::string, int>& inputs,
                                                     DType compute) {
  std::map<std::string, int> converted;
  for (const auto& [name, value] : inputs) {
    ASSIGN_OR_RETURN(converted[name], b.Cast(value, compute));
  }
  return converted;
}

ArgSpec OptionalTensor(const char* name) {
  return {name, ArgKind::kOptionalTensor, ir::ArgValue(true)};
}

ArgSpec EpsArg() { return {"eps", ArgKind::kFloat, std::nullopt}; }

ArgSpec OutputMaskArg() { return {"output_mask", ArgKind::kBoolList, std::nullopt}; }

const std::vector<DType>& Refused() {
  static const auto* const refused = new std::vector<DType>{DType::kInt64, DType::kBool};
  return *refused;
}

}  // namespace kiln::ops::normalization
