// View ops: a new index map onto the same data, never a copy. Affine views
// (permute, expand, slice, select, unsqueeze, unfold, ...) are maps from the view's
// coordinates to its source's. Reshapes (reshapes.cc: view, reshape, _unsafe_view,
// as_strided) are composites: they become `kiln.alias.default` — the same
// memory under new strides — after a `clone` when the source may not be
// contiguous in memory.
#include "codegen/ops/views.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/graph_builder.h"
#include "codegen/limits.h"
#include "codegen/ops/op_table.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::Dim;

// Result dim d reads source dim `source_dim[d]` (-1: a new dim of size 1),
// scaled by `step[d]`, starting at `start`; `pinned` gives fixed source
// coordinates (select) and `dropped` source dims of size 1 (squeeze).
View MakeView(const ir::TensorType& source, const std::vector<int>& source_dim,
              const std::vector<Dim>& sizes, const std::vector<int64_t>& step,
              const std::vector<int64_t>& start) {
  View view;
  view.type.dtype = source.dtype;
  view.type.requires_grad = source.requires_grad;
  view.type.sizes = sizes;
  const int rank = static_cast<int>(sizes.size());
  view.map.num_variables = rank;
  view.map.coefficients.assign(source.rank(), std::vector<int64_t>(rank, 0));
  view.map.offsets = start;
  for (int d = 0; d < rank; ++d) {
    if (source_dim[d] >= 0) view.map.coefficients[source_dim[d]][d] = step[d];
  }
  // Strides of the view over the source's memory, for the declared type.
  for (int d = 0; d < rank; ++d) {
    ir::SymExpr stride;
    for (int r = 0; r < source.rank(); ++r) {
      stride += source.strides[r] * view.map.coefficients[r][d];
    }
    view.type.strides.push_back(source_dim[d] >= 0 ? stride : ir::SymExpr::Constant(1));
  }
  return view;
}

View Identity(const ir::TensorType& source) {
  std::vector<int> dims(source.rank());
  std::iota(dims.begin(), dims.end(), 0);
  return MakeView(source, dims, source.sizes, std::vector<int64_t>(source.rank(), 1),
                  std::vector<int64_t>(source.rank(), 0));
}

absl::StatusOr<View> Permute(const ir::Node& node, const ir::TensorType& source) {
  const int64_t rank = source.rank();
  std::vector<int> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (node.op == "aten.permute.default") {
    const std::vector<int64_t> dims = IntListArg(node, "dims");
    if (static_cast<int64_t>(dims.size()) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("dims has ", dims.size(), " entries for a tensor of rank ", rank));
    }
    std::vector<bool> seen(rank, false);
    for (int64_t d = 0; d < rank; ++d) {
      ASSIGN_OR_RETURN(perm[d], WrapDim(dims[d], rank));
      if (seen[perm[d]])
        return absl::InvalidArgumentError(absl::StrCat("dims repeats dim ", perm[d]));
      seen[perm[d]] = true;
    }
  } else if (node.op == "aten.t.default") {
    if (rank > 2)
      return absl::InvalidArgumentError(absl::StrCat("t() expects rank <= 2, got ", rank));
    if (rank == 2) std::swap(perm[0], perm[1]);
  } else if (rank > 0) {  // transpose.int
    ASSIGN_OR_RETURN(const int dim0, WrapDim(IntArg(node, "dim0"), rank));
    ASSIGN_OR_RETURN(const int dim1, WrapDim(IntArg(node, "dim1"), rank));
    std::swap(perm[dim0], perm[dim1]);
  }
  std::vector<Dim> sizes;
  for (int d : perm) sizes.push_back(source.sizes[d]);
  return MakeView(source, perm, sizes, std::vector<int64_t>(rank, 1),
                  std::vector<int64_t>(rank, 0));
}

absl::StatusOr<View> Expand(const ir::Node& node, const ir::TensorType& source) {
  const std::vector<ir::SymExpr> size = SizeListArg(node, "size");
  const int rank = static_cast<int>(size.size());
  if (rank < source.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot expand rank ", source.rank(), " to rank ", rank));
  }
  const int lead = rank - static_cast<int>(source.rank());
  std::vector<int> source_dim(rank, -1);
  std::vector<Dim> sizes(rank);
  for (int d = 0; d < rank; ++d) {
    const int s = d - lead;
    const Dim have = s >= 0 ? source.sizes[s] : Dim::Constant(1);
    // -1 keeps the dim; a symbolic size names the symbol it has or becomes
    // (a size-1 dim broadcast to [B, H, S, S]).
    if (size[d] == -1 && s < 0) {
      return absl::InvalidArgumentError(absl::StrCat("dim ", d, " is new: it cannot be -1"));
    }
    if (size[d] != -1 && !size[d].IsDim()) {
      return absl::UnimplementedError(absl::StrCat(
          "expanding dim ", d, " to ", ir::ToString(size[d], ir::Graph()), " (not a size)"));
    }
    const Dim want = size[d] == -1 && s >= 0 ? have : size[d].ToDim();
    if (have != want && have != Dim::Constant(1)) {
      if (have.is_symbolic() || want.is_symbolic()) {
        return absl::UnimplementedError(absl::StrCat(
            "expanding dim ", d, " of size ", ir::ToString(ir::SymExpr::Of(have), ir::Graph()),
            " to ", ir::ToString(ir::SymExpr::Of(want), ir::Graph())));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("cannot expand dim ", d, " of size ", have.constant, " to ", want.constant));
    }
    sizes[d] = want;
    if (s >= 0 && have == want) source_dim[d] = s;  // expanded dims read coordinate 0
  }
  View view = MakeView(source, source_dim, sizes, std::vector<int64_t>(rank, 1),
                       std::vector<int64_t>(source.rank(), 0));
  for (int d = 0; d < rank; ++d) {
    if (source_dim[d] < 0) view.type.strides[d] = ir::SymExpr::Constant(0);
  }
  return view;
}

absl::StatusOr<View> Unsqueeze(const ir::Node& node, const ir::TensorType& source) {
  ASSIGN_OR_RETURN(const int at, WrapDim(IntArg(node, "dim"), source.rank() + 1));
  std::vector<int> source_dim;
  std::vector<Dim> sizes;
  for (int d = 0; d <= source.rank(); ++d) {
    if (d == at) {
      source_dim.push_back(-1);
      sizes.push_back(Dim::Constant(1));
    }
    if (d < source.rank()) {
      source_dim.push_back(d);
      sizes.push_back(source.sizes[d]);
    }
  }
  return MakeView(source, source_dim, sizes, std::vector<int64_t>(sizes.size(), 1),
                  std::vector<int64_t>(source.rank(), 0));
}

absl::StatusOr<View> Squeeze(const ir::Node& node, const ir::TensorType& source) {
  std::vector<bool> drop(source.rank(), false);
  auto it = node.args.find("dim");
  if (it == node.args.end() || std::holds_alternative<ir::None>(it->second)) {
    for (int64_t d = 0; d < source.rank(); ++d) drop[d] = source.sizes[d] == Dim::Constant(1);
  } else {
    std::vector<int64_t> dims;
    if (const auto* one = std::get_if<int64_t>(&it->second)) dims = {*one};
    if (const auto* list = std::get_if<std::vector<int64_t>>(&it->second)) dims = *list;
    for (int64_t dim : dims) {
      if (source.rank() == 0) continue;
      ASSIGN_OR_RETURN(const int d, WrapDim(dim, source.rank()));
      drop[d] = source.sizes[d] == Dim::Constant(1);  // squeezing a non-1 dim is a no-op
    }
  }
  std::vector<int> source_dim;
  std::vector<Dim> sizes;
  for (int d = 0; d < source.rank(); ++d) {
    if (drop[d]) continue;
    source_dim.push_back(d);
    sizes.push_back(source.sizes[d]);
  }
  return MakeView(source, source_dim, sizes, std::vector<int64_t>(sizes.size(), 1),
                  std::vector<int64_t>(source.rank(), 0));
}

// A slice bound that names a symbol ([:T]), if it does.
std::optional<ir::SymExpr> SymbolicBound(const ir::Node& node, const char* name) {
  if (!Present(node, name)) return std::nullopt;
  const ir::SymExpr bound = SizeArg(node, name);
  if (bound.is_constant()) return std::nullopt;
  return bound;
}

// Python slicing of one dim: [start:end:step], clamped. A symbolic end
// ([:T]: position ids or a causal mask cut to a sequence's length) takes
// start 0 and step 1, and the graph's bounds keep it within the dim
// (CheckSliceBounds): a call past them gets a static specialization, which
// clamps as eager does.
absl::StatusOr<View> Slice(const ir::Node& node, const ir::TensorType& source) {
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), source.rank()));
  if (source.sizes[dim].is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat("slicing a symbolic dim (", dim, ") is not supported yet"));
  }
  const int64_t size = source.sizes[dim].constant;
  if (SymbolicBound(node, "start").has_value()) {
    return absl::UnimplementedError("a slice from a symbolic start is not supported yet");
  }
  auto bound = [&](const char* name, int64_t fallback) {
    if (!Present(node, name)) return fallback;
    int64_t value = SizeArg(node, name).constant();
    if (value < 0) value += size;
    return std::min(std::max<int64_t>(value, 0), size);
  };
  const int64_t start = bound("start", 0);
  int64_t step = IntArg(node, "step");
  if (step <= 0) return absl::InvalidArgumentError("slice step must be positive");
  std::vector<int> source_dim(source.rank());
  std::iota(source_dim.begin(), source_dim.end(), 0);
  std::vector<Dim> sizes = source.sizes;
  std::vector<int64_t> steps(source.rank(), 1), starts(source.rank(), 0);
  if (const std::optional<ir::SymExpr> end = SymbolicBound(node, "end")) {
    if (start != 0 || step != 1) {
      return absl::UnimplementedError(
          absl::StrCat("a slice to a symbolic end (", ir::ToString(*end, ir::Graph()),
                       ") takes start 0 and step 1, not ", start, " and ", step));
    }
    if (!end->IsDim()) {
      return absl::UnimplementedError(
          absl::StrCat("a slice to a symbolic end ", ir::ToString(*end, ir::Graph()),
                       ", which is not a size (a constant times symbols, like 2*s0)"));
    }
    sizes[dim] = end->ToDim();
    return MakeView(source, source_dim, sizes, steps, starts);
  }
  const int64_t end = bound("end", size);
  // A step past the dim's size takes at most one element, whatever it is:
  // capped, it cannot overflow offsets when views of views compose.
  step = std::min(step, std::max<int64_t>(size, 1));
  sizes[dim] = Dim::Constant(end > start ? (end - start - 1) / step + 1 : 0);
  steps[dim] = step;
  starts[dim] = start;
  return MakeView(source, source_dim, sizes, steps, starts);
}

// An index into a symbolic dim is within it only if the graph's bounds keep
// the dim larger.
absl::Status CheckSelectBounds(const ir::Graph& graph, const ir::Node& node,
                               const InputTypes& inputs) {
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), inputs[0]->rank()));
  const Dim& size = inputs[0]->sizes[dim];
  if (!size.is_symbolic()) return absl::OkStatus();
  int64_t smallest = size.multiplier;
  std::vector<int> symbols = size.times;
  symbols.push_back(size.symbol);
  for (int symbol : symbols) {
    smallest = limits::CheckedMul(smallest, graph.bounds[symbol].min).value_or(INT64_MAX);
  }
  const int64_t index = IntArg(node, "index");
  if (index < smallest) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("selects index ", index, " of dim ", dim, ", whose size ",
                   ir::ToString(ir::SymExpr::Of(size), graph), " may be as small as ", smallest,
                   ": state a larger lower bound in the graph's relations"));
}

// A slice to a symbolic end reads within its dim only if the graph's
// relations bound the end by the dim's size.
absl::Status CheckSliceBounds(const ir::Graph& graph, const ir::Node& node,
                              const InputTypes& inputs) {
  const std::optional<ir::SymExpr> end = SymbolicBound(node, "end");
  if (!end.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), inputs[0]->rank()));
  const int64_t size = inputs[0]->sizes[dim].constant;
  const Dim length = end->ToDim();  // Slice checked IsDim
  std::optional<int64_t> largest = length.multiplier;
  std::vector<int> symbols = length.times;
  symbols.push_back(length.symbol);
  for (int symbol : symbols) {
    const int64_t max = graph.bounds[symbol].max;
    largest = max == 0 || !largest ? std::nullopt : limits::CheckedMul(*largest, max);
  }
  if (largest.has_value() && *largest <= size) return absl::OkStatus();
  const std::string shown = ir::ToString(*end, graph);
  return absl::InvalidArgumentError(absl::StrCat(
      "slices dim ", dim, " (size ", size, ") to ", shown,
      ", which the graph's relations do not keep within ", size, ": state \"", shown, " <= ", size,
      "\" in its relations (the tracer does when it makes such a slice)"));
}

// x[:, i]. In a symbolic dim, i counts from the start (x[:, 0], a
// sequence's first token), and the graph's bounds keep it below the dim's
// smallest size (CheckSelectBounds).
absl::StatusOr<View> Select(const ir::Node& node, const ir::TensorType& source) {
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), source.rank()));
  int64_t index = IntArg(node, "index");
  if (source.sizes[dim].is_symbolic()) {
    if (index < 0) {
      return absl::UnimplementedError(
          absl::StrCat("selecting index ", index, " of a symbolic dim (", dim,
                       ") counts from its end, which is not supported yet: select from the start"));
    }
  } else {
    const int64_t size = source.sizes[dim].constant;
    if (index < -size || index >= size) {
      return absl::InvalidArgumentError(
          absl::StrCat("index ", index, " is out of range for size ", size));
    }
    if (index < 0) index += size;
  }
  std::vector<int> source_dim;
  std::vector<Dim> sizes;
  for (int d = 0; d < source.rank(); ++d) {
    if (d == dim) continue;
    source_dim.push_back(d);
    sizes.push_back(source.sizes[d]);
  }
  std::vector<int64_t> starts(source.rank(), 0);
  starts[dim] = index;
  return MakeView(source, source_dim, sizes, std::vector<int64_t>(sizes.size(), 1), starts);
}

// unfold(dimension, size, step): the windows of `size` elements along
// `dimension`, `step` apart, as a new last dim: element [.., i, .., k] is
// the source's [.., i * step + k, ..] (overlapping windows read the same
// elements).
absl::StatusOr<View> Unfold(const ir::Node& node, const ir::TensorType& source) {
  if (source.rank() == 0) {  // as one element: [x] or []
    RETURN_IF_ERROR(WrapDim(IntArg(node, "dimension"), 1).status());
    const int64_t size = IntArg(node, "size");
    if (size < 0 || size > 1 || IntArg(node, "step") <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window size ", size, " and step ", IntArg(node, "step"), " do not fit a 0-dim tensor"));
    }
    return MakeView(source, {-1}, {Dim::Constant(size)}, {1}, {});
  }
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dimension"), source.rank()));
  if (source.sizes[dim].is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat("unfolding a symbolic dim (", dim, ") is not supported yet"));
  }
  const int64_t length = source.sizes[dim].constant;
  const int64_t size = IntArg(node, "size");
  int64_t step = IntArg(node, "step");
  if (size < 0 || size > length) {
    return absl::InvalidArgumentError(
        absl::StrCat("window size ", size, " does not fit dim ", dim, " of size ", length));
  }
  if (step <= 0) return absl::InvalidArgumentError(absl::StrCat("step ", step, " is not positive"));
  const int64_t windows = (length - size) / step + 1;
  // With one window the step is never taken: capped, as slice's.
  if (windows == 1) step = 1;
  std::vector<int> source_dim(source.rank());
  std::iota(source_dim.begin(), source_dim.end(), 0);
  source_dim.push_back(dim);
  std::vector<Dim> sizes = source.sizes;
  sizes[dim] = Dim::Constant(windows);
  sizes.push_back(Dim::Constant(size));
  std::vector<int64_t> steps(source.rank() + 1, 1);
  steps[dim] = step;
  return MakeView(source, source_dim, sizes, steps, std::vector<int64_t>(source.rank(), 0));
}

// split.Tensor / split_with_sizes: several slices of one dim.
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> SplitRanges(const ir::Node& node,
                                                                     const ir::TensorType& source,
                                                                     int* dim) {
  ASSIGN_OR_RETURN(*dim, WrapDim(IntArg(node, "dim"), source.rank()));
  if (source.sizes[*dim].is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat("splitting a symbolic dim (", *dim, ") is not supported yet"));
  }
  const int64_t size = source.sizes[*dim].constant;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (node.op == "aten.split.Tensor") {
    const int64_t chunk = IntArg(node, "split_size");
    if (chunk <= 0) return absl::InvalidArgumentError("split_size must be positive");
    RETURN_IF_ERROR(limits::CheckCount(size / chunk, limits::kMaxResultsPerNode,
                                       "kMaxResultsPerNode", "the split"));
    for (int64_t start = 0; start < size || (size == 0 && ranges.empty()); start += chunk) {
      ranges.push_back({start, start + std::min(size - start, chunk)});
      if (size == 0) break;
    }
  } else {
    int64_t start = 0;
    for (int64_t length : IntListArg(node, "split_sizes")) {
      const std::optional<int64_t> end = limits::CheckedAdd(start, length);
      if (length < 0 || !end || *end > size) {
        return absl::InvalidArgumentError(
            absl::StrCat("split size ", length, " does not fit the dim's size ", size));
      }
      ranges.push_back({start, *end});
      start = *end;
    }
    if (start != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("split sizes add up to ", start, ", not the dim's size ", size));
    }
  }
  return ranges;
}

// split.Tensor / split_with_sizes: several slices of one dim.
absl::StatusOr<std::vector<View>> SplitViews(const ir::Node& node, const ir::TensorType& source) {
  int dim = 0;
  ASSIGN_OR_RETURN(const auto ranges, SplitRanges(node, source, &dim));
  std::vector<View> result;
  std::vector<int> source_dim(source.rank());
  std::iota(source_dim.begin(), source_dim.end(), 0);
  for (const auto& [start, end] : ranges) {
    std::vector<Dim> sizes = source.sizes;
    sizes[dim] = Dim::Constant(end - start);
    std::vector<int64_t> starts(source.rank(), 0);
    starts[dim] = start;
    result.push_back(
        MakeView(source, source_dim, sizes, std::vector<int64_t>(source.rank(), 1), starts));
  }
  return result;
}

// unbind(dim): one select per index of `dim`.
absl::StatusOr<std::vector<View>> UnbindViews(const ir::Node& node, const ir::TensorType& source) {
  ASSIGN_OR_RETURN(const int dim, WrapDim(IntArg(node, "dim"), source.rank()));
  if (source.sizes[dim].is_symbolic()) {
    return absl::UnimplementedError(
        absl::StrCat("unbinding a symbolic dim (", dim, ") is not supported"));
  }
  RETURN_IF_ERROR(limits::CheckCount(source.sizes[dim].constant, limits::kMaxResultsPerNode,
                                     "kMaxResultsPerNode", "the unbind"));
  std::vector<View> result;
  for (int64_t index = 0; index < source.sizes[dim].constant; ++index) {
    ir::Node select = node;
    select.args = {{"dim", int64_t{dim}}, {"index", index}};
    ASSIGN_OR_RETURN(View view, Select(select, source));
    result.push_back(std::move(view));
  }
  return result;
}

// A view op with several results.
void AddMultiView(OpTable& table, const std::string& op, std::vector<ArgSpec> args, ViewsFn views,
                  decltype(OpDef::check_bounds) check_bounds = nullptr) {
  AffineViews()[op] = views;
  OpDef def;
  def.check_bounds = std::move(check_bounds);
  def.name = op;
  def.family = "view";
  def.dtypes = kAllTypes;
  def.args = std::move(args);
  def.infer = [views](const ir::Node& node,
                      const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    ASSIGN_OR_RETURN(const auto parts, views(node, *inputs[0]));
    std::vector<ir::TensorType> types;
    for (const View& view : parts) types.push_back(view.type);
    return types;
  };
  def.lower = [views](const ir::Graph& graph,
                      const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ASSIGN_OR_RETURN(const auto parts, views(node, graph.values[node.inputs[0]]));
    std::vector<ir::Definition> definitions;
    for (const View& view : parts) {
      ir::Definition definition;
      definition.kind = ir::Definition::Kind::kView;
      definition.source = node.inputs[0];
      definition.map = view.map;
      definitions.push_back(std::move(definition));
    }
    return definitions;
  };
  table.Add(std::move(def));
}

// A view op with one result.
void AddView(OpTable& table, const std::string& op, std::vector<ArgSpec> args, ViewFn fn,
             decltype(OpDef::check_bounds) check_bounds = nullptr) {
  AddMultiView(
      table, op, std::move(args),
      [fn](const ir::Node& node,
           const ir::TensorType& source) -> absl::StatusOr<std::vector<View>> {
        ASSIGN_OR_RETURN(View view, fn(node, source));
        return std::vector<View>{std::move(view)};
      },
      std::move(check_bounds));
}

}  // namespace

void RegisterViewOps(OpTable& table) {
  const ArgSpec dim{"dim", ArgKind::kInt, std::nullopt};
  AddView(table, "aten.permute.default", {{"dims", ArgKind::kIntList, std::nullopt}}, Permute);
  AddView(table, "aten.t.default", {}, Permute);
  AddView(table, "aten.transpose.int",
          {{"dim0", ArgKind::kInt, std::nullopt}, {"dim1", ArgKind::kInt, std::nullopt}}, Permute);
  AddView(table, "aten.expand.default",
          {{"size", ArgKind::kSizeList, std::nullopt},
           {"implicit", ArgKind::kBool, ir::ArgValue(false)}},
          Expand);
  AddView(table, "aten.unsqueeze.default", {dim}, Unsqueeze);
  AddView(table, "aten.squeeze.default", {}, Squeeze);
  AddView(table, "aten.squeeze.dim", {dim}, Squeeze);
  AddView(table, "aten.squeeze.dims", {{"dim", ArgKind::kIntList, std::nullopt}}, Squeeze);
  AddView(table, "aten.slice.Tensor",
          {{"dim", ArgKind::kInt, ir::ArgValue(int64_t{0})},
           {"start", ArgKind::kSize, ir::ArgValue(ir::None{})},
           {"end", ArgKind::kSize, ir::ArgValue(ir::None{})},
           {"step", ArgKind::kInt, ir::ArgValue(int64_t{1})}},
          Slice, CheckSliceBounds);
  AddView(table, "aten.select.int", {dim, {"index", ArgKind::kInt, std::nullopt}}, Select,
          CheckSelectBounds);
  AddView(table, "aten.unfold.default",
          {{"dimension", ArgKind::kInt, std::nullopt},
           {"size", ArgKind::kInt, std::nullopt},
           {"step", ArgKind::kInt, std::nullopt}},
          Unfold);
  for (const char* identity :
       {"aten.alias.default", "aten.detach.default", "aten.lift_fresh.default"}) {
    AddView(table, identity, {},
            [](const ir::Node&, const ir::TensorType& source) -> absl::StatusOr<View> {
              return Identity(source);
            });
  }
  const ArgSpec dim_zero{"dim", ArgKind::kInt, ir::ArgValue(int64_t{0})};
  AddMultiView(table, "aten.split.Tensor", {{"split_size", ArgKind::kInt, std::nullopt}, dim_zero},
               SplitViews);
  AddMultiView(table, "aten.split_with_sizes.default",
               {{"split_sizes", ArgKind::kIntList, std::nullopt}, dim_zero}, SplitViews);
  AddMultiView(table, "aten.unbind.int", {dim_zero}, UnbindViews);
  RegisterReshapeOps(table);
}

}  // namespace kiln::ops
