// Random numbers drawn as torch's CPU generator draws them (client/runtime/
// random.h), its state a tensor: torch.get_rng_state()'s 5056 bytes, uint8.
//
// The core ops, each lowered to the runtime's random call (one extern
// kernel per result, each from the state it is given):
//   kiln_rng.seed(state, seed) -> state                  torch.manual_seed
//   kiln_rng.uniform(state, size, dtype, low, high) -> (values, state)
//   kiln_rng.normal(state, size, dtype, mean, std) -> (values, state)
//   kiln_rng.serial_normal(state, size, dtype, mean, std) -> (values, state)
//       float64, one value at a time at any count (log_normal_'s)
//   kiln_rng.integers(state, size, range) -> (values, state)
//       int64 in [0, range), range the uint64 bits (0: 2^64; randint's)
// The tracer (client/python/kiln/_random.py) threads the state through them
// in program order, from a graph input to a graph output.
#include "abi/kiln_abi.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

constexpr int64_t kStateBytes = 5056;

absl::Status CheckState(const ir::TensorType& state, const std::string& op) {
  if (state.dtype != ir::DType::kUInt8 || state.rank() != 1 ||
      state.sizes[0] != ir::Dim::Constant(kStateBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, "'s state is ", ir::DTypeName(state.dtype), Shape(state),
        ", not torch's CPU generator state (uint8[", kStateBytes, "], torch.get_rng_state())"));
  }
  return absl::OkStatus();
}

ir::TensorType StateType() {
  return ContiguousType(ir::DType::kUInt8, {ir::Dim::Constant(kStateBytes)});
}

OpDef RandomOp(const std::string& name, int64_t distribution, std::vector<ArgSpec> args) {
  OpDef def;
  def.name = name;
  def.family = "random";
  def.dtypes = {ir::DType::kFloat32, ir::DType::kFloat64};
  def.min_inputs = def.max_inputs = 1;
  def.args = std::move(args);
  // The runtime's distribution, which the random call's emitter reads.
  def.args.push_back({"distribution", ArgKind::kInt, ir::ArgValue(distribution)});
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    std::vector<ir::Definition> definitions(node.outputs.size());
    for (ir::Definition& definition : definitions) {
      definition.kind = ir::Definition::Kind::kExtern;
      definition.function = "random";
      definition.operands = node.inputs;
    }
    return definitions;
  };
  return def;
}

// The seed is torch's uint64 seed, as the int64 of its bits.
absl::StatusOr<std::vector<ir::TensorType>> InferSeed(const ir::Node& node,
                                                      const InputTypes& inputs) {
  RETURN_IF_ERROR(CheckState(*inputs[0], node.op));
  return std::vector<ir::TensorType>{StateType()};
}

// The values of `dtype` and the state after them, of a draw's static size.
absl::StatusOr<std::vector<ir::TensorType>> DrawTypes(const ir::Node& node,
                                                      const InputTypes& inputs, ir::DType dtype) {
  RETURN_IF_ERROR(CheckState(*inputs[0], node.op));
  std::vector<ir::Dim> dims;
  for (const ir::SymExpr& size : SizeListArg(node, "size")) {
    if (!size.IsDim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          node.op, "'s size entry ", ir::ToString(size, ir::Graph()), " is not a size"));
    }
    dims.push_back(size.ToDim());
  }
  return std::vector<ir::TensorType>{ContiguousType(dtype, std::move(dims)), StateType()};
}

absl::StatusOr<std::vector<ir::TensorType>> InferDraw(const ir::Node& node,
                                                      const InputTypes& inputs) {
  const ir::DType dtype = DTypeArg(node, ir::DType::kFloat32);
  if (dtype != ir::DType::kFloat32 && dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat(node.op, " of ", ir::DTypeName(dtype), ": float32 and float64 only"));
  }
  return DrawTypes(node, inputs, dtype);
}

absl::StatusOr<std::vector<ir::TensorType>> InferSerialNormal(const ir::Node& node,
                                                              const InputTypes& inputs) {
  const ir::DType dtype = DTypeArg(node, ir::DType::kFloat32);
  if (dtype != ir::DType::kFloat64) {
    return absl::UnimplementedError(
        absl::StrCat(node.op, " of ", ir::DTypeName(dtype), ": float64 only"));
  }
  return DrawTypes(node, inputs, dtype);
}

absl::StatusOr<std::vector<ir::TensorType>> InferIntegers(const ir::Node& node,
                                                          const InputTypes& inputs) {
  return DrawTypes(node, inputs, ir::DType::kInt64);
}

}  // namespace

void RegisterRandomOps(OpTable& table) {
  OpDef seed =
      RandomOp("kiln_rng.seed.default", KILN_RANDOM_SEED, {{"seed", ArgKind::kInt, std::nullopt}});
  seed.infer = InferSeed;
  table.Add(std::move(seed));
  const std::vector<std::pair<std::string, int64_t>> draws = {
      {"kiln_rng.uniform.default", KILN_RANDOM_UNIFORM},
      {"kiln_rng.normal.default", KILN_RANDOM_NORMAL}};
  for (const auto& [name, distribution] : draws) {
    OpDef draw = RandomOp(name, distribution,
                          {{"size", ArgKind::kSizeList, std::nullopt},
                           {"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})},
                           {"a", ArgKind::kFloat, std::nullopt},
                           {"b", ArgKind::kFloat, std::nullopt}});
    draw.infer = InferDraw;
    table.Add(std::move(draw));
  }
  OpDef serial_normal = RandomOp("kiln_rng.serial_normal.default", KILN_RANDOM_SERIAL_NORMAL,
                                 {{"size", ArgKind::kSizeList, std::nullopt},
                                  {"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})},
                                  {"a", ArgKind::kFloat, std::nullopt},
                                  {"b", ArgKind::kFloat, std::nullopt}});
  serial_normal.dtypes = {ir::DType::kFloat64};
  serial_normal.infer = InferSerialNormal;
  table.Add(std::move(serial_normal));
  OpDef integers = RandomOp(
      "kiln_rng.integers.default", KILN_RANDOM_INTEGER,
      {{"size", ArgKind::kSizeList, std::nullopt}, {"range", ArgKind::kInt, std::nullopt}});
  integers.dtypes = {ir::DType::kInt64};
  integers.infer = InferIntegers;
  table.Add(std::move(integers));
}

}  // namespace kiln::ops
