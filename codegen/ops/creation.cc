// Ops that make tensors from scalars or copy them: full/zeros/ones (and the
// _like and new_ forms), scalar_tensor, arange, tril/triu, clone, _to_copy,
// flip.
// Pointwise definitions: a constant or index expression, inlined into their
// consumers like any other pointwise value. Sizes may be symbolic (a causal
// mask ones(T, T) over a symbolic T); so may arange's end.
#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// The dtype of a fill value: float32 for floats, int64 for ints, bool.
DType ScalarType(const ir::ArgValue& value) {
  if (std::holds_alternative<bool>(value)) return DType::kBool;
  if (std::holds_alternative<int64_t>(value)) return DType::kInt64;
  return DType::kFloat32;
}

// A factory's `size`: constants, or symbolic sizes that a trace named
// (ones(T, T), a causal mask over a symbolic T).
absl::StatusOr<std::vector<ir::Dim>> Sizes(const ir::Node& node) {
  const std::vector<ir::SymExpr> sizes = SizeListArg(node, "size");
  std::vector<ir::Dim> dims;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d].IsDim()) {
      dims.push_back(sizes[d].ToDim());
      continue;
    }
    const std::string entry = ir::ToString(sizes[d], ir::Graph());
    if (sizes[d].is_constant()) {
      return absl::InvalidArgumentError(
          absl::StrCat("size entry ", d, " is ", entry, ": a size cannot be negative"));
    }
    return absl::UnimplementedError(absl::StrCat(
        "size entry ", d, " is ", entry, ", not a size (a constant times symbols, like 2*s0)"));
  }
  return dims;
}

using ShapeFn = std::function<absl::StatusOr<ir::TensorType>(const ir::Node&, const InputTypes&)>;
using ElementFn =
    std::function<int(ExprBuilder&, const ir::Graph&, const ir::Node&, DType compute)>;

void AddCreation(OpTable& table, const std::string& op, int inputs, std::vector<ArgSpec> args,
                 ShapeFn shape, ElementFn element, std::vector<DType> dtypes = kAllTypes) {
  OpDef def;
  def.name = op;
  def.family = "creation";
  def.dtypes = dtypes;
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
    const int root =
        builder.Cast(element(builder, graph, node, ComputeType(result)), ComputeType(result));
    return std::vector<ir::Definition>{builder.Finish(root)};
  };
  table.Add(std::move(def));
}

const ArgSpec kDTypeArg{"dtype", ArgKind::kDType, ir::ArgValue(ir::None{})};
const ArgSpec kSizeArg{"size", ArgKind::kSizeList, std::nullopt};

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

// An arange's start, end and step (absent ones 0 and 1), and whether all
// three are Python ints (then the default dtype is int64).
struct Range {
  double start = 0, end = 0, step = 1;
  bool integral = true;
  // The ones that are symbolic sizes, by name (arange(T) over a symbolic T:
  // positions, a causal mask's rows); their doubles above are unused.
  std::map<std::string, ir::SymExpr> symbolic;
};

Range RangeOf(const ir::Node& node) {
  Range range;
  auto read = [&](const char* name, double* value) {
    auto it = node.args.find(name);
    if (it == node.args.end()) return;
    if (const auto* size = std::get_if<ir::SymExpr>(&it->second)) {
      // A symbol specialized to a value leaves a constant size: an int.
      if (size->is_constant()) {
        *value = static_cast<double>(size->constant());
      } else {
        range.symbolic.emplace(name, size->Canonicalized());
      }
      return;
    }
    *value = ScalarArgAsDouble(node, name);
    range.integral = range.integral && std::holds_alternative<int64_t>(it->second);
  };
  read("start", &range.start);
  read("end", &range.end);
  read("step", &range.step);
  return range;
}

// arange(end) with `end` symbolic counts to it: only from 0 by 1, where the
// count is the end itself (any other count is no size Kiln can name).
absl::StatusOr<ir::Dim> SymbolicCount(const Range& range) {
  for (const auto& [name, size] : range.symbolic) {
    if (name != "end") {
      return absl::UnimplementedError(absl::StrCat("arange with a symbolic ", name, " (",
                                                   ir::ToString(size, ir::Graph()),
                                                   "): only its end may be symbolic"));
    }
  }
  const ir::SymExpr& end = range.symbolic.at("end");
  if (range.start != 0 || range.step != 1) {
    return absl::UnimplementedError(
        absl::StrCat("arange from ", range.start, " by ", range.step, " to a symbolic end (",
                     ir::ToString(end, ir::Graph()), "): a symbolic end needs start 0 and step 1"));
  }
  if (!end.IsDim()) {
    return absl::UnimplementedError(
        absl::StrCat("arange to a symbolic end ", ir::ToString(end, ir::Graph()),
                     ", which is not a size (a constant times symbols, like 2*s0)"));
  }
  return end.ToDim();
}

absl::StatusOr<ir::TensorType> ArangeType(const ir::Node& node, const InputTypes&) {
  const Range range = RangeOf(node);
  if (range.step == 0) return absl::InvalidArgumentError("arange step must not be 0");
  const DType dtype = DTypeArg(node, range.integral ? DType::kInt64 : DType::kFloat32);
  if (dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        "arange does not make bool tensors (neither does eager PyTorch)");
  }
  if (!range.symbolic.empty()) {
    ASSIGN_OR_RETURN(const ir::Dim count, SymbolicCount(range));
    return ContiguousType(dtype, {count});
  }
  const int64_t count =
      std::max<int64_t>(0, static_cast<int64_t>(std::ceil((range.end - range.start) / range.step)));
  return ContiguousType(dtype, {ir::Dim::Constant(count)});
}

// start + step * i; the type rule has refused a symbolic start or step.
int ArangeElement(ExprBuilder& b, const ir::Graph&, const ir::Node& node, DType compute) {
  const Range range = RangeOf(node);
  const DType math = compute == DType::kFloat32 ? DType::kFloat64 : compute;
  const int i = b.Index(0, math);
  const int offset = b.Call("mul", {b.Constant(range.step, math), i}, math);
  return b.Call("add", {b.Constant(range.start, math), offset}, math);
}

// Which dims of `input` flip's `dims` names (each at most once, as eager).
absl::StatusOr<std::vector<bool>> FlippedDims(const ir::Node& node, const ir::TensorType& input) {
  std::vector<bool> flipped(input.rank(), false);
  for (int64_t dim : IntListArg(node, "dims")) {
    ASSIGN_OR_RETURN(const int d, WrapDim(dim, std::max<int64_t>(input.rank(), 1)));
    if (input.rank() == 0) continue;
    if (flipped[d]) return absl::InvalidArgumentError(absl::StrCat("dims names dim ", d, " twice"));
    flipped[d] = true;
  }
  return flipped;
}

// kiln.concat(parts, dim): parts of equal shape but for `dim`, one after
// another along it (other dims may be symbolic; along `dim` the parts must
// add up to a size: constants, or 2*T from two T). Lowers to a concat
// definition: a loop per part.
// Internal: cat decomposes into it (composites.cc).
void AddConcat(OpTable& table) {
  OpDef def;
  def.name = "kiln.concat.default";
  def.family = "creation";
  def.dtypes = kAllTypes;
  def.min_inputs = 1;
  def.max_inputs = 1 << 16;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& first = *inputs[0];
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), first.rank()));
    std::vector<ir::Dim> sizes = first.sizes;
    ir::SymExpr total;  // along `dim`
    ir::DType dtype = first.dtype;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ir::TensorType& part = *inputs[i];
      if (part.rank() != first.rank()) {
        return absl::InvalidArgumentError("cat needs parts of the same rank");
      }
      for (int64_t d = 0; d < part.rank(); ++d) {
        if (d != dim && part.sizes[d] != first.sizes[d]) {
          return absl::InvalidArgumentError(
              absl::StrCat("cat parts differ in dim ", d, ", which is not the cat dim"));
        }
      }
      total += ir::SymExpr::Of(part.sizes[dim]);
      dtype = PromoteTensors(dtype, part.dtype);
    }
    if (!total.IsDim()) {
      return absl::UnimplementedError(absl::StrCat(
          "cat's parts along dim ", dim, " add up to ", ir::ToString(total, ir::Graph()),
          ", which is not a size (a constant times symbols, like 2*s0)"));
    }
    sizes[dim] = total.ToDim();
    return std::vector<ir::TensorType>{ContiguousType(dtype, std::move(sizes))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kConcat;
    definition.operands = node.inputs;
    ASSIGN_OR_RETURN(definition.axis,
                     WrapDim(IntArg(node, "dim"), graph.values[node.inputs[0]].rank()));
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

// kiln.stack(parts, dim): parts of one shape stacked on a new dim `dim`:
// element [.., k, ..] is part k's element, chosen by a `where` over the
// new coordinate. Every part is read at the other coordinates only, so no
// load is out of bounds. Internal: stack decomposes into it (composites.cc).
void AddStack(OpTable& table) {
  OpDef def;
  def.name = "kiln.stack.default";
  def.family = "creation";
  def.dtypes = kAllTypes;
  def.min_inputs = 1;
  def.max_inputs = 1 << 16;
  def.args = {{"dim", ArgKind::kInt, std::nullopt}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    std::vector<ir::Dim> sizes = inputs[0]->sizes;
    DType dtype = inputs[0]->dtype;
    for (const ir::TensorType* part : inputs) {
      RETURN_IF_ERROR(RequireStatic(*part, "a part"));
      if (part->sizes != sizes) return absl::InvalidArgumentError("stacked parts differ in shape");
      dtype = PromoteTensors(dtype, part->dtype);
    }
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), inputs[0]->rank() + 1));
    sizes.insert(sizes.begin() + dim, ir::Dim::Constant(static_cast<int64_t>(inputs.size())));
    return std::vector<ir::TensorType>{ContiguousType(dtype, std::move(sizes))};
  };
  def.lower = [](const ir::Graph& graph,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    const ir::TensorType& result = graph.values[node.outputs[0]];
    const int rank = static_cast<int>(result.rank());
    ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), rank));
    const DType compute = ComputeType(result.dtype);
    // Part coordinates from the result's: every variable but `dim`.
    ir::AffineMap map;
    map.num_variables = rank;
    map.coefficients.assign(rank - 1, std::vector<int64_t>(rank, 0));
    map.offsets.assign(rank - 1, 0);
    for (int d = 0; d + 1 < rank; ++d) map.coefficients[d][d < dim ? d : d + 1] = 1;
    ExprBuilder b;
    const int k = b.Index(dim, DType::kInt64);
    int element = b.LoadAt(node.inputs.back(), map, compute);
    for (int part = static_cast<int>(node.inputs.size()) - 2; part >= 0; --part) {
      const int selected = b.Call("eq", {k, b.Constant(part, DType::kInt64)}, DType::kBool);
      element =
          b.Call("where", {selected, b.LoadAt(node.inputs[part], map, compute), element}, compute);
    }
    return std::vector<ir::Definition>{b.Finish(element)};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterCreationOps(OpTable& table) {
  AddStack(table);
  AddConcat(table);
  // From a size.
  auto sized = [](DType fallback) -> ShapeFn {
    return [fallback](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
      ASSIGN_OR_RETURN(std::vector<ir::Dim> sizes, Sizes(node));
      return ContiguousType(DTypeArg(node, fallback), std::move(sizes));
    };
  };
  AddCreation(table, "aten.zeros.default", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32),
              Fill(0));
  AddCreation(table, "aten.ones.default", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32),
              Fill(1));
  AddCreation(table, "aten.empty.memory_format", 0, {kSizeArg, kDTypeArg}, sized(DType::kFloat32),
              Fill(0));
  // An empty tensor's values are unspecified, and Kiln's tensors are
  // contiguous: the strides and the physical layout asked for are not kept.
  AddCreation(table, "aten.empty_strided.default", 0,
              {kSizeArg, {"stride", ArgKind::kSizeList, std::nullopt}, kDTypeArg},
              sized(DType::kFloat32), Fill(0));
  AddCreation(table, "aten.empty_permuted.default", 0,
              {kSizeArg, {"physical_layout", ArgKind::kIntList, std::nullopt}, kDTypeArg},
              sized(DType::kFloat32), Fill(0));
  AddCreation(
      table, "aten.full.default", 0,
      {kSizeArg, {"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg},
      [](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
        ASSIGN_OR_RETURN(std::vector<ir::Dim> sizes, Sizes(node));
        return ContiguousType(DTypeArg(node, ScalarType(node.args.at("fill_value"))),
                              std::move(sizes));
      },
      FillArg("fill_value"));
  // A symbolic size as a 0-d tensor (a mean's count over a symbolic dim):
  // what decompositions divide by when the count is not a literal.
  AddCreation(
      table, "kiln.size.default", 0, {{"size", ArgKind::kSize, std::nullopt}, kDTypeArg},
      [](const ir::Node& node, const InputTypes&) -> absl::StatusOr<ir::TensorType> {
        return ContiguousType(DTypeArg(node, DType::kFloat32), {});
      },
      [](ExprBuilder& b, const ir::Graph&, const ir::Node& node, DType compute) {
        return b.Size(SizeArg(node, "size"), compute);
      },
      kFloatTypes);
  AddCreation(
      table, "aten.scalar_tensor.default", 0, {{"s", ArgKind::kScalar, std::nullopt}, kDTypeArg},
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
              {{"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg}, like,
              FillArg("fill_value"));
  auto new_sized = [](const ir::Node& node,
                      const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
    ASSIGN_OR_RETURN(std::vector<ir::Dim> sizes, Sizes(node));
    return ContiguousType(DTypeArg(node, inputs[0]->dtype), std::move(sizes));
  };
  AddCreation(table, "aten.new_zeros.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(0));
  AddCreation(table, "aten.new_ones.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(1));
  AddCreation(table, "aten.new_empty.default", 1, {kSizeArg, kDTypeArg}, new_sized, Fill(0));
  AddCreation(table, "aten.new_full.default", 1,
              {kSizeArg, {"fill_value", ArgKind::kScalar, std::nullopt}, kDTypeArg}, new_sized,
              FillArg("fill_value"));

  // arange(end), arange(start, end), arange(start, end, step): start + step
  // * i, computed as eager does: in double for float32 results (float for
  // 16-bit ones, int64 for integers). The end may be a symbolic size when
  // counting from 0 by 1 (SymbolicCount); a symbolic start or step is
  // refused by name, not as a mistyped argument.
  const ArgSpec start{"start", ArgKind::kScalarOrSize, std::nullopt};
  const ArgSpec end{"end", ArgKind::kScalarOrSize, std::nullopt};
  const ArgSpec step{"step", ArgKind::kScalarOrSize, ir::ArgValue(int64_t{1})};
  AddCreation(table, "aten.arange.default", 0, {end, kDTypeArg}, ArangeType, ArangeElement,
              kNoBool);
  AddCreation(table, "aten.arange.start", 0, {start, end, kDTypeArg}, ArangeType, ArangeElement,
              kNoBool);
  AddCreation(table, "aten.arange.start_step", 0, {start, end, step, kDTypeArg}, ArangeType,
              ArangeElement, kNoBool);

  // fill(self, value): self's shape and dtype, every element `value`
  // (converted to the dtype: 2.7 fills an int64 tensor with 2); fill.Tensor
  // takes the value as a 0-dim tensor.
  auto same = [](const ir::Node&, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
    return ContiguousType(inputs[0]->dtype, inputs[0]->sizes);
  };
  AddCreation(table, "aten.fill.Scalar", 1, {{"value", ArgKind::kScalar, std::nullopt}}, same,
              FillArg("value"));
  AddCreation(
      table, "aten.fill.Tensor", 2, {},
      [](const ir::Node&, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
        if (inputs[1]->rank() != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("fill takes a 0-dim value tensor, got one of rank ", inputs[1]->rank()));
        }
        return ContiguousType(inputs[0]->dtype, inputs[0]->sizes);
      },
      [](ExprBuilder& b, const ir::Graph& graph, const ir::Node& node, DType compute) {
        const int rank = static_cast<int>(graph.values[node.outputs[0]].rank());
        return b.Load(graph, node.inputs[1], rank, compute);
      });

  // Copies.
  auto copy = [](ExprBuilder& b, const ir::Graph& graph, const ir::Node& node, DType compute) {
    return b.Load(graph, node.inputs[0], static_cast<int>(graph.values[node.inputs[0]].rank()),
                  compute);
  };
  AddCreation(table, "aten.clone.default", 1, {}, like, copy);
  AddCreation(table, "aten.lift_fresh_copy.default", 1, {}, like, copy);
  AddCreation(table, "aten.contiguous.default", 1, {}, like, copy);
  AddCreation(table, "aten._to_copy.default", 1, {kDTypeArg}, like, copy);
  AddCreation(table, "prims.convert_element_type.default", 1,
              {{"dtype", ArgKind::kDType, std::nullopt}}, like, copy);
  // flip(x, dims): a copy read backwards along `dims` (eager copies too):
  // element i of a flipped dim of size n reads n - 1 - i. Inlined into its
  // consumers like any copy; a flipped symbolic dim has no constant n.
  AddCreation(
      table, "aten.flip.default", 1, {{"dims", ArgKind::kIntList, std::nullopt}},
      [](const ir::Node& node, const InputTypes& inputs) -> absl::StatusOr<ir::TensorType> {
        ASSIGN_OR_RETURN(const std::vector<bool> flipped, FlippedDims(node, *inputs[0]));
        for (size_t d = 0; d < flipped.size(); ++d) {
          if (flipped[d] && inputs[0]->sizes[d].is_symbolic()) {
            return absl::UnimplementedError(
                absl::StrCat("flipping a symbolic dim (", d, ") is not supported yet"));
          }
        }
        return ContiguousType(inputs[0]->dtype, inputs[0]->sizes);
      },
      [](ExprBuilder& b, const ir::Graph& graph, const ir::Node& node, DType compute) {
        const ir::TensorType& input = graph.values[node.inputs[0]];
        const std::vector<bool> flipped = *FlippedDims(node, input);  // the type rule checked
        ir::AffineMap map = ir::AffineMap::Identity(static_cast<int>(input.rank()));
        for (size_t d = 0; d < flipped.size(); ++d) {
          if (!flipped[d]) continue;
          map.coefficients[d][d] = -1;
          map.offsets[d] = input.sizes[d].constant - 1;
        }
        return b.LoadAt(node.inputs[0], std::move(map), compute);
      });

  // tril/triu: keep x[i][j] where j - i <= diagonal (tril) / >= (triu).
  for (const char* which : {"tril", "triu"}) {
    const bool lower = std::string(which) == "tril";
    AddCreation(
        table, absl::StrCat("aten.", which, ".default"), 1,
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
          const int diagonal =
              b.Constant(static_cast<double>(IntArg(node, "diagonal")), DType::kInt64);
          const int keep = b.Call(lower ? "le" : "ge", {offset, diagonal}, DType::kBool);
          return b.Call("where", {keep, x, b.Constant(0, compute)}, compute);
        });
  }
}

}  // namespace kiln::ops
