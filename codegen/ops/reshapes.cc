// Reshapes (view, reshape, _unsafe_view, _reshape_alias, as_strided) and kiln.alias.
#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/limits.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "codegen/ops/views.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::Dim;

// The target sizes of a reshape, with one -1 inferred.
absl::StatusOr<std::vector<int64_t>> ReshapeSizes(std::vector<int64_t> size, int64_t elements) {
  int64_t known = 1;
  int infer = -1;
  auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", elements, " elements to sizes whose product overflows"));
  };
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("only one dim may be -1");
      infer = static_cast<int>(d);
    } else if (size[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative size ", size[d]));
    } else {
      const std::optional<int64_t> product = limits::CheckedMul(known, size[d]);
      if (!product) return too_large();
      known = *product;
    }
  }
  if (infer >= 0 && known != 0) size[infer] = elements / known;
  int64_t total = 1;
  for (int64_t s : size) {
    const std::optional<int64_t> product = limits::CheckedMul(total, s);
    if (!product) return too_large();
    total = *product;
  }
  if (total != elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", elements, " elements to ", total));
  }
  return size;
}

// Whether monomial `a` divides monomial `b` (coefficients and symbols).
bool Divides(const ir::SymExpr& a, const ir::SymExpr& b) {
  if (a.terms.size() != 1 || b.terms.size() != 1 || a.terms[0].coefficient == 0 ||
      b.terms[0].coefficient % a.terms[0].coefficient != 0) {
    return false;
  }
  return std::includes(b.terms[0].symbols.begin(), b.terms[0].symbols.end(),
                       a.terms[0].symbols.begin(), a.terms[0].symbols.end());
}

// The sizes of a reshape of a symbolic type to `size` (entries constants,
// multiples of one symbol, or one -1): dims regroup like eager's, by equal
// products — (s, 5) -> [5 * s], (2, 4, S, 32) -> [8, S, 32], (16, B, 64) ->
// [16, 4 * B, 16] — and a -1 is what the elements leave, when that is a
// size.
absl::StatusOr<std::vector<Dim>> ReshapeSymbolic(const ir::TensorType& type,
                                                 const std::vector<ir::SymExpr>& size) {
  const std::string unsupported = "a reshape regrouping elements across a symbolic size";
  ir::SymExpr total = ir::SymExpr::Constant(1), known = ir::SymExpr::Constant(1);
  for (const Dim& dim : type.sizes) total = total * ir::SymExpr::Of(dim);
  int infer = -1;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("only one dim may be -1");
      infer = static_cast<int>(d);
    } else if (!size[d].IsDim() || size[d] == 0) {
      return absl::UnimplementedError(
          absl::StrCat("a reshape of symbolic sizes to size ", ir::ToString(size[d], ir::Graph())));
    } else {
      known = known * size[d];
    }
  }
  if (total.terms.size() != 1)
    return absl::UnimplementedError("a reshape of an empty symbolic tensor");
  std::vector<Dim> dims;
  for (size_t d = 0; d < size.size(); ++d) {
    if (static_cast<int>(d) != infer) {
      dims.push_back(size[d].ToDim());
      continue;
    }
    // total / known, when that is a dim.
    if (!Divides(known, total)) return absl::UnimplementedError(unsupported);
    ir::SymExpr::Term quotient{total.terms[0].coefficient / known.terms[0].coefficient, {}};
    std::set_difference(total.terms[0].symbols.begin(), total.terms[0].symbols.end(),
                        known.terms[0].symbols.begin(), known.terms[0].symbols.end(),
                        std::back_inserter(quotient.symbols));
    const ir::SymExpr inferred{{quotient}};
    if (!inferred.IsDim()) return absl::UnimplementedError(unsupported);
    dims.push_back(inferred.ToDim());
  }
  // Groups of source and target dims with equal products, left to right.
  size_t from = 0, to = 0;
  const auto& sizes = type.sizes;
  while (from < sizes.size() && to < dims.size()) {
    ir::SymExpr a = ir::SymExpr::Of(sizes[from++]), b = ir::SymExpr::Of(dims[to++]);
    while (a != b) {
      if (Divides(a, b) && from < sizes.size()) {
        a = a * ir::SymExpr::Of(sizes[from++]);
      } else if (Divides(b, a) && to < dims.size()) {
        b = b * ir::SymExpr::Of(dims[to++]);
      } else {
        return absl::UnimplementedError(unsupported);
      }
    }
  }
  auto ones = [](auto begin, auto end) {
    return std::all_of(begin, end, [](const Dim& dim) { return dim == Dim::Constant(1); });
  };
  if (!ones(sizes.begin() + from, sizes.end()) || !ones(dims.begin() + to, dims.end())) {
    return absl::UnimplementedError(unsupported);
  }
  return dims;
}

// The sizes of a reshape of `type` to `size` (one entry may be -1).
absl::StatusOr<std::vector<Dim>> ReshapeDims(const ir::TensorType& type,
                                             const std::vector<ir::SymExpr>& size) {
  const bool constant_size =
      std::all_of(size.begin(), size.end(), [](const ir::SymExpr& s) { return s.is_constant(); });
  if (!type.is_static() || !constant_size) return ReshapeSymbolic(type, size);
  std::vector<int64_t> constants;
  for (const ir::SymExpr& s : size) constants.push_back(s.constant());
  ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, ReshapeSizes(constants, type.NumElements()));
  std::vector<Dim> dims;
  for (int64_t s : sizes) dims.push_back(Dim::Constant(s));
  return dims;
}

std::vector<ir::SymExpr> ToSymExprs(const std::vector<Dim>& dims) {
  std::vector<ir::SymExpr> result;
  for (const Dim& dim : dims) result.push_back(ir::SymExpr::Of(dim));
  return result;
}

// Whether `value` is certainly contiguous memory Kiln owns or was given: a
// contiguous input, or the result of an op that writes its own buffer.
bool ContiguousInMemory(const ir::Graph& graph, int value) {
  const ir::TensorType& type = graph.values[value];
  if (!type.IsContiguous()) return false;
  const int producer = graph.producer[value];
  if (producer < 0) return true;
  const OpDef* op = OpTable::Get().Find(graph.nodes[producer].op);
  return op != nullptr && op->family != "view";
}

// Where a static view's elements are: in the memory of `base` (a graph
// input, or the result of an op that writes its own buffer), element c at
// offset + sum strides[d] * c[d]. Composed from the views' maps and the
// base's own layout (the input's guards, or contiguous), never from the
// declared strides of view results, which a re-typed graph may omit.
struct StorageView {
  int base;
  ir::SymExpr offset;
  std::vector<ir::SymExpr> strides;
};

absl::StatusOr<StorageView> FindStorage(const ir::Graph& graph, int value) {
  const int rank = static_cast<int>(graph.values[value].rank());
  StorageView result{value, ir::SymExpr(), std::vector<ir::SymExpr>(rank)};
  // Coordinates in `result.base` = map(coordinates in `value`).
  ir::AffineMap map = ir::AffineMap::Identity(rank);
  // Memory strides of the coordinates `map` lands in; applies the map.
  auto place = [&](const std::vector<ir::SymExpr>& strides) {
    for (size_t r = 0; r < strides.size(); ++r) {
      result.offset += strides[r] * map.offsets[r];
      for (int d = 0; d < rank; ++d) result.strides[d] += strides[r] * map.coefficients[r][d];
    }
  };
  while (graph.producer[result.base] >= 0) {
    const ir::Node& node = graph.nodes[graph.producer[result.base]];
    if (node.op == "kiln.alias.default") {
      // An alias addresses its source's memory directly; aliases of aliases
      // add their offsets.
      place(SizeListArg(node, "stride"));
      result.offset += ir::SymExpr::Constant(IntArg(node, "storage_offset"));
      result.base = node.inputs[0];
      while (graph.producer[result.base] >= 0 &&
             graph.nodes[graph.producer[result.base]].op == "kiln.alias.default") {
        const ir::Node& inner = graph.nodes[graph.producer[result.base]];
        result.offset += ir::SymExpr::Constant(IntArg(inner, "storage_offset"));
        result.base = inner.inputs[0];
      }
      return result;
    }
    auto fn = AffineViews().find(node.op);
    if (fn == AffineViews().end()) {
      // A view not decomposed yet (a reshape from this round) is no buffer.
      const OpDef* op = OpTable::Get().Find(node.op);
      if (op != nullptr && op->family == "view") {
        return absl::UnimplementedError(absl::StrCat("a view of ", node.op));
      }
      break;
    }
    const ir::TensorType& source = graph.values[node.inputs[0]];
    ASSIGN_OR_RETURN(const std::vector<View> views, fn->second(node, source));
    const size_t k =
        std::find(node.outputs.begin(), node.outputs.end(), result.base) - node.outputs.begin();
    map = views[k].map.After(map);
    result.base = node.inputs[0];
  }
  const ir::TensorType& base = graph.values[result.base];
  place(graph.producer[result.base] < 0 ? base.strides : ir::ContiguousStrides(base.sizes));
  return result;
}

// The strides under which `sizes` views the elements of a tensor of
// `old_sizes` and `old_strides` in order without a copy, or nullopt when
// no strides do (as eager's view): each run of old dims that is contiguous
// in memory may be split or merged freely. Symbolic sizes work alike, as
// products compared exactly (ReshapeDims has already matched the symbols).
std::optional<std::vector<ir::SymExpr>> ViewStrides(const std::vector<Dim>& old_dims,
                                                    const std::vector<ir::SymExpr>& old_strides,
                                                    const std::vector<Dim>& dims) {
  const std::vector<ir::SymExpr> old_sizes = ToSymExprs(old_dims), sizes = ToSymExprs(dims);
  const bool empty = std::any_of(old_sizes.begin(), old_sizes.end(),
                                 [](const ir::SymExpr& size) { return size == 0; });
  if (empty || old_sizes.empty()) {
    return std::vector<ir::SymExpr>(sizes.size(), ir::SymExpr::Constant(1));
  }
  std::vector<ir::SymExpr> strides(sizes.size());
  int view_d = static_cast<int>(sizes.size()) - 1;
  ir::SymExpr base_stride = old_strides.back();
  ir::SymExpr old_run = ir::SymExpr::Constant(1), new_run = ir::SymExpr::Constant(1);
  for (int d = static_cast<int>(old_sizes.size()) - 1; d >= 0; --d) {
    old_run = old_run * old_sizes[d];
    // A run of old dims ends where the next one out is not laid out right
    // after it.
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != old_run * base_stride)) {
      // Take view dims until they cover the run (an overshoot never
      // matches, so it ends in nullopt below), and size-1 dims after.
      while (view_d >= 0 && (new_run != old_run || sizes[view_d] == 1)) {
        strides[view_d] = new_run * base_stride;
        new_run = new_run * sizes[view_d];
        --view_d;
      }
      if (new_run != old_run) return std::nullopt;
      if (d > 0) {
        base_stride = old_strides[d - 1];
        old_run = new_run = ir::SymExpr::Constant(1);
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

// view/reshape/_unsafe_view/_reshape_alias: the source's elements in order
// under new sizes: an alias of the source's memory — of the storage an
// affine view chain reads, under strides that walk it in order, when there
// are such strides (q.transpose(-2, -1) reshaped for bmm: no copy, at
// static or symbolic sizes) — or of a clone. as_strided addresses the
// source's *storage*: an alias of the base the source views, at
// storage_offset (when absent, the source's own offset, as eager).
absl::StatusOr<std::vector<int>> DecomposeReshape(GraphBuilder& builder, const ir::Node& node) {
  int source = node.inputs[0];
  const ir::TensorType type = builder.type(source);
  std::vector<ir::SymExpr> sizes, strides;
  ir::SymExpr offset;
  if (node.op == "aten.as_strided.default") {
    sizes = SizeListArg(node, "size");
    strides = SizeListArg(node, "stride");
    ASSIGN_OR_RETURN(const StorageView storage, FindStorage(builder.graph(), source));
    source = storage.base;
    offset = storage.offset;
    if (Present(node, "storage_offset")) {
      offset = ir::SymExpr::Constant(IntArg(node, "storage_offset"));
    }
  } else {
    ASSIGN_OR_RETURN(const std::vector<Dim> dims, ReshapeDims(type, SizeListArg(node, "size")));
    sizes = ToSymExprs(dims);
    strides = ir::ContiguousStrides(dims);
    if (!ContiguousInMemory(builder.graph(), source)) {
      // The viewed storage, when strides walk it in order.
      std::optional<std::vector<ir::SymExpr>> view_strides;
      absl::StatusOr<StorageView> storage = FindStorage(builder.graph(), source);
      if (storage.ok() && storage->offset.is_constant()) {
        view_strides = ViewStrides(type.sizes, storage->strides, dims);
      }
      if (view_strides.has_value()) {
        source = storage->base;
        offset = storage->offset;
        strides = *std::move(view_strides);
      } else {
        ASSIGN_OR_RETURN(source, builder.Add("aten.clone.default", {source}));
      }
    }
  }
  if (!offset.is_constant()) {
    return absl::UnimplementedError("a view at a symbolic storage offset");
  }
  ASSIGN_OR_RETURN(
      const int alias,
      builder.Add("kiln.alias.default", {source},
                  {{"size", sizes}, {"stride", strides}, {"storage_offset", offset.constant()}}));
  return std::vector<int>{alias};
}

void AddReshape(OpTable& table, const std::string& op, std::vector<ArgSpec> args) {
  OpDef def;
  def.name = op;
  def.family = "view";
  def.dtypes = kAllTypes;
  def.args = std::move(args);
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    if (node.op == "aten.as_strided.default") {
      RETURN_IF_ERROR(RequireStatic(*inputs[0], "input 0"));
      ir::TensorType type;
      type.dtype = inputs[0]->dtype;
      for (int64_t s : IntListArg(node, "size")) type.sizes.push_back(Dim::Constant(s));
      for (int64_t s : IntListArg(node, "stride")) type.strides.push_back(ir::SymExpr::Constant(s));
      if (type.sizes.size() != type.strides.size()) {
        return absl::InvalidArgumentError("size and stride differ in length");
      }
      return std::vector<ir::TensorType>{std::move(type)};
    }
    ASSIGN_OR_RETURN(std::vector<Dim> dims, ReshapeDims(*inputs[0], SizeListArg(node, "size")));
    return std::vector<ir::TensorType>{ContiguousType(inputs[0]->dtype, std::move(dims))};
  };
  def.decompose = DecomposeReshape;
  table.Add(std::move(def));
}

// How many elements a value's memory spans: its declared strides may be
// those of an input that is not contiguous (stride 0, gaps).
int64_t StorageExtent(const ir::TensorType& type) {
  int64_t extent = 1;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (type.sizes[d].constant == 0) return 0;
    extent += (type.sizes[d].constant - 1) * type.strides[d].constant();
  }
  return extent;
}

// kiln.alias: the source's memory under explicit sizes, strides and offset.
// Only decompositions create it: over a clone, over an input or an op's
// own result (the base a viewable reshape reads, under any strides), or
// over the storage as_strided names.
void AddAlias(OpTable& table) {
  OpDef def;
  def.name = "kiln.alias.default";
  def.family = "view";
  def.dtypes = kAllTypes;
  def.args = {{"size", ArgKind::kSizeList, std::nullopt},
              {"stride", ArgKind::kSizeList, std::nullopt},
              {"storage_offset", ArgKind::kInt, ir::ArgValue(int64_t{0})}};
  def.infer = [](const ir::Node& node,
                 const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const std::vector<ir::SymExpr> symbolic_sizes = SizeListArg(node, "size"),
                                   symbolic_strides = SizeListArg(node, "stride");
    if (symbolic_sizes.size() != symbolic_strides.size()) {
      return absl::InvalidArgumentError("size and stride differ in length");
    }
    auto constant = [](const std::vector<ir::SymExpr>& list) {
      return std::all_of(list.begin(), list.end(),
                         [](const ir::SymExpr& e) { return e.is_constant(); });
    };
    if (!inputs[0]->is_static() || !constant(symbolic_sizes) || !constant(symbolic_strides)) {
      // Symbolic sizes (a reshape of them, or of a static tensor expanded
      // to them): exact, from a decomposition — verify refuses kiln.* ops
      // from a graph, so these are never a user's.
      ir::TensorType type;
      type.dtype = inputs[0]->dtype;
      for (const ir::SymExpr& size : symbolic_sizes) {
        if (!size.IsDim()) return absl::InvalidArgumentError("an alias size is not a dim");
        type.sizes.push_back(size.ToDim());
      }
      type.strides = symbolic_strides;
      return std::vector<ir::TensorType>{std::move(type)};
    }
    std::vector<int64_t> sizes, strides;
    for (const ir::SymExpr& size : symbolic_sizes) sizes.push_back(size.constant());
    for (const ir::SymExpr& stride : symbolic_strides) strides.push_back(stride.constant());
    // Every element it addresses must lie within the source.
    std::optional<int64_t> last = IntArg(node, "storage_offset");
    if (*last < 0) return absl::InvalidArgumentError("a negative storage offset");
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] < 0) return absl::InvalidArgumentError("negative sizes are not supported");
      if (sizes[d] == 0) last = -1;
      if (strides[d] < 0) return absl::InvalidArgumentError("negative strides are not supported");
      if (last && *last >= 0) {
        const std::optional<int64_t> reach = limits::CheckedMul(sizes[d] - 1, strides[d]);
        last = reach ? limits::CheckedAdd(*last, *reach) : std::nullopt;
      }
    }
    if (!last) {
      return absl::InvalidArgumentError("as_strided reaches past any storage (int64 overflow)");
    }
    if (*last >= StorageExtent(*inputs[0])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "as_strided reaches element ", *last, " of a storage of ", StorageExtent(*inputs[0])));
    }
    ir::TensorType type;
    type.dtype = inputs[0]->dtype;
    for (size_t d = 0; d < sizes.size(); ++d) {
      type.sizes.push_back(Dim::Constant(sizes[d]));
      type.strides.push_back(ir::SymExpr::Constant(strides[d]));
    }
    return std::vector<ir::TensorType>{std::move(type)};
  };
  def.lower = [](const ir::Graph&,
                 const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kAlias;
    definition.source = node.inputs[0];
    definition.strides = SizeListArg(node, "stride");
    definition.offset = IntArg(node, "storage_offset");
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(def));
}

}  // namespace

void RegisterReshapeOps(OpTable& table) {
  const ArgSpec size{"size", ArgKind::kSizeList, std::nullopt};
  AddReshape(table, "aten.view.default", {size});
  AddReshape(table, "aten.reshape.default", {size});
  AddReshape(table, "aten._unsafe_view.default", {size});
  // _reshape_alias's strides are the view's: Kiln derives them itself, and a
  // traced symbolic one (s * s) need not be stated.
  AddReshape(table, "aten._reshape_alias.default",
             {size, {"stride", ArgKind::kSizeList, ir::ArgValue(ir::None{})}});
  AddReshape(table, "aten.as_strided.default",
             {{"size", ArgKind::kIntList, std::nullopt},
              {"stride", ArgKind::kIntList, std::nullopt},
              {"storage_offset", ArgKind::kInt, ir::ArgValue(ir::None{})}});
  AddAlias(table);
}

}  // namespace kiln::ops
