// View ops: a new index map onto the same data, never a copy. Affine views
// (permute, expand, slice, select, unsqueeze, unfold, ...) are maps from the view's
// coordinates to its source's. Reshapes (view, reshape, _unsafe_view,
// as_strided) are composites: they become `kiln.alias.default` — the same
// memory under new strides — after a `clone` when the source may not be
// contiguous in memory.
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

// A view: its result type, and the map from its coordinates to the source's.
struct View {
  ir::TensorType type;
  ir::AffineMap map;
};
using ViewFn = std::function<absl::StatusOr<View>(const ir::Node&, const ir::TensorType&)>;
// The views of every result of a view op (split has several).
using ViewsFn =
    std::function<absl::StatusOr<std::vector<View>>(const ir::Node&, const ir::TensorType&)>;

// Every affine view op by name: as_strided follows them to the storage
// they share (filled while the table is built, read-only after).
std::map<std::string, ViewsFn>& AffineViews() {
  static auto* const views = new std::map<std::string, ViewsFn>();
  return *views;
}

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

// --- Reshapes -------------------------------------------------------------

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
