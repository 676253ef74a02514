// Ops that make tensors from scalars or copy them: full/zeros/ones (and the
// _like and new_ forms), scalar_tensor, arange, tril/triu, clone, _to_copy.
// Pointwise definitions: a constant or index expression, inlined into their
// consumers like any other pointwise value.
#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// The dtype argument if given, else `fallback`.
DType DTypeArg(const ir::Node& node, DType fallback) {
  auto it = node.args.find("dtype");
  if (it != node.args.end() && std::holds_alternative<DType>(it->second)) {
    return std::get<DType>(it->second);
  }
  return fallback;
}

// The dtype of a fill value: float32 for floats, int64 for ints, bool.
DType ScalarType(const ir::ArgValue& value) {
  if (std::holds_alternative<bool>(value)) return DType::kBool;
  if (std::holds_alternative<int64_t>(value)) return DType::kInt64;
  return DType::kFloat32;
}

std::vector<ir::Dim> Sizes(const std::vector<int64_t>& sizes) {
  std::vector<ir::Dim> dims;
  for (int64_t s : sizes) dims.push_back(ir::Dim::Constant(s));
  return dims;
}

using ShapeFn = std::function<absl::StatusOr<ir::TensorType>(const ir::Node&, const InputTypes&)>;
using ElementFn = std::function<int(ExprBuilder&, const ir::Graph&, const ir::Node&, DType compute)>;

void AddCreation(OpTable& table, const std::string& op, int inputs, std::vector<ArgSpec> args,
                 ShapeFn shape, ElementFn element) {
  OpDef def;
  def.name = op;
  def.family = "creation";
  def.dtypes = kAllTypes;
  def.min_inputs = def.max_inputs = inputs;
  def.args = std::move(args);
  def.infer = [shape](const ir::Node& node,
                      const InputTypes& types) -> absl::StatusOr<std::vector<ir::TensorType>> {
    ASSIGN_OR_RETURN(ir::TensorType type, shape(node, types));
    return std::vector<ir::TensorType>{std::move(type)};
  };
  def.lower = [element](const ir::Graph& graph,
                        const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const DType result = graph.values[node.outputs[0]].dtype;
    ExprBuilder builder;
    const int root = builder.Cast(element(builder, graph, node, ComputeType(result)),
                                  ComputeType(result));
    return std::vector<ir::Definition>{builder.Finish(root)};
  };
  table.Add(std::move(def));
}

const ArgSpec kDTypeArg{"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})};
const ArgSpec kSizeArg{"size", ArgKind::kIntList, std::nullopt};

ElementFn Fill(double value) {
  return [value](ExprBuilder& b, const ir::Graph&, const ir::Node&, DType compute) {
    return b.Constant(value, compute);
  };
}

ElementFn FillArg(const std::string& name) {
  return [name](ExprBuilder& b, const ir::Graph&, const ir::Node& node, DType compute) {
    return b.Constant(ScalarArgAsDouble(node, name), compute);
  };
}

}  // namespace

void RegisterCreationOps(OpTable& table) {
  // From a size.
  auto sized = [](DType fallback) -> ShapeFn {
    return [fallback](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
      return ContiguousType(DTypeArg(node, fallback), Sizes(IntListArg(node, "size")));
    };
  };
  AddCreation(table, "aten.zeros.default", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32), Fill(0));
  AddCreation(table, "aten.ones.default", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32), Fill(1));
  AddCreation(table, "aten.empty.memory_format", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32),
              Fill(0));
  AddCreation(table, "aten.full.default", 0,
              {kSizeArg, {"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg},
              [](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
                return ContiguousType(DTypeArg(node, ScalarType(node.args.at("fill_value"))),
                                      Sizes(IntListArg(node, "size")));
              },
              FillArg("fill_value"));
  AddCreation(table, "aten.scalar_tensor.default", 0, {{"s", ArgKind::kScalar, std::nullopt}, kDTypeArg},
              [](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
                return ContiguousType(DTypeArg(node, DType::kFloat32), {});
              },
              FillArg("s"));

  // Shaped like their input.
  auto like = [](const ir::Node& node, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
    return ContiguousType(DTypeArg(node, inputs[0]->dtype), inputs[0]->sizes);
  };
  AddCreation(table, "aten.zeros_like.default", 1, {kDTypeArg}, like, Fill(0));
  AddCreation(table, "aten.ones_like.default", 1, {kDTypeArg}, like, Fill(1));
  AddCreation(table, "aten.empty_like.default", 1, {kDTypeArg}, like, Fill(0));
  AddCreation(table, "aten.full_like.default", 1,
              {{"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg}, like, FillArg("fill_value"));
  auto new_sized = [](const ir::Node& node, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
    return ContiguousType(DTypeArg(node, inputs[0]->dtype), Sizes(IntListArg(node, "size")));
  };
  AddCreation(table, "aten.new_zeros.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(0));
  AddCreation(table, "aten.new_ones.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(1));
  AddCreation(table, "aten.new_empty.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(0));
  AddCreation(table, "aten.new_full.default", 1,
              {kSizeArg, {"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg}, new_sized,
              FillArg("fill_value"));

  // arange(start, end, step): start + step * i.
  AddCreation(table, "aten.arange.start_step", 0,
              {{"start", ArgKind::kScalar, std::nullopt},
               {"end", ArgKind::kScalar, std::nullopt},
               {"step", ArgKind::kScalar, ir::ArgValue(int64_t{1})},
               kDTypeArg},
              [](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
                const double start = ScalarArgAsDouble(node, "start");
                const double end = ScalarArgAsDouble(node, "end");
                const double step = ScalarArgAsDouble(node, "step");
                if (step == 0) return absl::InvalidArgumentError("arange step must not be 0");
                const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
                const bool integral = std::holds_alternative<int64_t>(node.args.at("start")) &&
                                      std::holds_alternative<int64_t>(node.args.at("end")) &&
                                      std::holds_alternative<int64_t>(node.args.at("step"));
                return ContiguousType(DTypeArg(node, integral ? DType::kInt64 : DType::kFloat32),
                                      {ir::Dim::Constant(count)});
              },
              [](ExprBuilder& b, const ir::Graph&, const ir::Node& node, DType compute) {
                const int i = b.Index(0, compute);
                const int step = b.Call("mul", {i, b.Constant(ScalarArgAsDouble(node, "step"), compute)}, compute);
                return b.Call("add", {b.Constant(ScalarArgAsDouble(node, "start"), compute), step}, compute);
              });

  // Copies.
  auto copy = [](ExprBuilder& b, const ir::Graph& graph, const ir::Node& node, DType compute) {
    return b.Load(graph, node.inputs[0], static_cast<int>(graph.values[node.inputs[0]].rank()), compute);
  };
  AddCreation(table, "aten.clone.default", 1, {}, like, copy);
  AddCreation(table, "aten._to_copy.default", 1, {kDTypeArg}, like, copy);
  AddCreation(table, "prims.convert_element_type.default", 1,
              {{"dtype", ArgKind::kDType, std::nullopt}}, like, copy);

  // tril/triu: keep x[i][j] where j - i <= diagonal (tril) / >= (triu).
  for (const char* which : {"tril", "triu"}) {
    const bool lower = std::string(which) == "tril";
    AddCreation(table, absl::StrCat("aten.", which, ".default"), 1,
                {{"diagonal", ArgKind::kInt, ir::ArgValue(int64_t{0})}},
                [](const ir::Node& node, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
                  if (inputs[0]->rank() < 2) {
                    return absl::InvalidArgumentError("tril/triu need at least 2 dims");
                  }
                  return ContiguousType(inputs[0]->dtype, inputs[0]->sizes);
                },
                [lower](ExprBuilder& b, const ir::Graph& graph, const ir::Node& node, DType compute) {
                  const int rank = static_cast<int>(graph.values[node.inputs[0]].rank());
                  const int x = b.Load(graph, node.inputs[0], rank, compute);
                  const int row = b.Index(rank - 2, DType::kInt64);
                  const int column = b.Index(rank - 1, DType::kInt64);
                  const int offset = b.Call("sub", {column, row}, DType::kInt64);
                  const int diagonal = b.Constant(static_cast<double>(IntArg(node, "diagonal")), DType::kInt64);
                  const int keep = b.Call(lower ? "le" : "ge", {offset, diagonal}, DType::kBool);
                  return b.Call("where", {keep, x, b.Constant(0, compute)}, compute);
                });
  }
}

}  // namespace kiln::ops
