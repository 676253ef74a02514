#include "codegen/symbol_independence.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

using ir::SymExpr;

const SymExpr kOne = SymExpr::Constant(1);

// Where the symbol sits in one dim: the dim's size is outer * symbol * inner
// (monomials) and its index (i_outer * symbol + i_symbol) * inner + i_inner.
// A graph input's dims hold it outermost; a reshape merging [S, B] puts B
// inside (outer S). `uniform`: the values do not depend on the position
// along the dim at all (a dim broadcast to the symbol's size), so any layout
// is this one; false is always safe.
struct Carrier {
  SymExpr outer = kOne;
  SymExpr inner = kOne;
  bool uniform = false;

  bool SameLayout(const Carrier& other) const {
    return outer == other.outer && inner == other.inner;
  }
};

// Per dim of a value: where the symbol sits in it, or nullopt when the dim's
// size does not mention the symbol.
using Layout = std::vector<std::optional<Carrier>>;

int Occurrences(const ir::Dim& dim, int symbol) {
  if (!dim.is_symbolic()) return 0;
  return (dim.symbol == symbol) +
         static_cast<int>(std::count(dim.times.begin(), dim.times.end(), symbol));
}

bool Mentions(const SymExpr& expr, int symbol) {
  for (const SymExpr::Term& term : expr.terms) {
    if (std::count(term.symbols.begin(), term.symbols.end(), symbol) > 0) return true;
  }
  return false;
}

bool Mentions(const ir::TensorType& type, int symbol) {
  return std::any_of(type.sizes.begin(), type.sizes.end(),
                     [symbol](const ir::Dim& dim) { return Occurrences(dim, symbol) > 0; });
}

bool Mentions(const ir::ArgValue& value, int symbol) {
  if (const auto* expr = std::get_if<SymExpr>(&value)) return Mentions(*expr, symbol);
  if (const auto* list = std::get_if<std::vector<SymExpr>>(&value)) {
    return std::any_of(list->begin(), list->end(),
                       [symbol](const SymExpr& expr) { return Mentions(expr, symbol); });
  }
  return false;
}

std::vector<SymExpr> Sizes(const ir::TensorType& type) {
  std::vector<SymExpr> sizes;
  for (const ir::Dim& dim : type.sizes) sizes.push_back(SymExpr::Of(dim));
  return sizes;
}

// The product of sizes[begin, end).
SymExpr Product(const std::vector<SymExpr>& sizes, size_t begin, size_t end) {
  SymExpr product = kOne;
  for (size_t d = begin; d < end; ++d) product = product * sizes[d];
  return product;
}

std::vector<int> CarrierDims(const Layout& layout) {
  std::vector<int> dims;
  for (size_t d = 0; d < layout.size(); ++d) {
    if (layout[d]) dims.push_back(static_cast<int>(d));
  }
  return dims;
}

bool IsReshape(const std::string& op) {
  return op == "aten.view.default" || op == "aten.reshape.default" ||
         op == "aten._unsafe_view.default" || op == "aten._reshape_alias.default";
}

// Ops whose result is their first input's shape, each element computed from
// the same element of the inputs (copies, casts, fills).
bool IsElementwiseCopy(const std::string& op) {
  static const auto* const ops = new std::vector<std::string>{
      "aten.clone.default",
      "aten.contiguous.default",
      "aten._to_copy.default",
      "aten.lift_fresh_copy.default",
      "prims.convert_element_type.default",
      "aten.zeros_like.default",
      "aten.ones_like.default",
      "aten.empty_like.default",
      "aten.full_like.default",
      "aten.fill.Scalar",
      "aten.fill.Tensor",
  };
  return std::find(ops->begin(), ops->end(), op) != ops->end();
}

// Views that keep the order of every dim of size other than 1.
bool KeepsDimOrder(const std::string& op) {
  static const auto* const ops = new std::vector<std::string>{
      "aten.unsqueeze.default",  "aten.squeeze.default", "aten.squeeze.dim",
      "aten.squeeze.dims",       "aten.alias.default",   "aten.detach.default",
      "aten.lift_fresh.default",
  };
  return std::find(ops->begin(), ops->end(), op) != ops->end();
}

// The analysis: every value's layout, node by node in topological order.
class Analysis {
 public:
  Analysis(const ir::Graph& graph, int symbol)
      : graph_(graph),
        symbol_(symbol),
        name_(graph.symbols[symbol]),
        symbol_size_(SymExpr::Of(ir::Dim::Symbol(symbol))),
        layouts_(graph.values.size()) {}

  absl::StatusOr<PaddedDims> Run() {
    PaddedDims result;
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
      const int value = graph_.inputs[i];
      ASSIGN_OR_RETURN(layouts_[value], InputLayout(static_cast<int>(i)));
      const std::vector<int> dims = CarrierDims(layouts_[value]);
      result.inputs.push_back(dims.empty() ? -1 : dims[0]);
    }
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const ir::Node& node = graph_.nodes[n];
      ASSIGN_OR_RETURN(std::vector<Layout> layouts, Infer(static_cast<int>(n)));
      if (layouts.size() != node.outputs.size()) {
        return absl::InternalError(absl::StrCat(Describe(n), ": ", layouts.size(), " layouts for ",
                                                node.outputs.size(), " results"));
      }
      for (size_t k = 0; k < layouts.size(); ++k) {
        RETURN_IF_ERROR(CheckResult(static_cast<int>(n), static_cast<int>(k), layouts[k]));
        layouts_[node.outputs[k]] = std::move(layouts[k]);
      }
    }
    for (size_t j = 0; j < graph_.outputs.size(); ++j) {
      ASSIGN_OR_RETURN(const int dim, OutputDim(static_cast<int>(j)));
      result.outputs.push_back(dim);
    }
    return result;
  }

 private:
  std::string Describe(int n) const {
    const ir::Node& node = graph_.nodes[n];
    return absl::StrCat("node ", n, " (", node.op, ", '", node.name, "')");
  }

  std::string Carries() const { return absl::StrCat("which carries symbol ", name_); }

  absl::Status Refuse(int n, const std::string& reason,
                      const std::string& consequence = "would change the result") const {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(n), ": ", reason, ": padding ", name_, " ", consequence));
  }

  std::string LayoutString(const Carrier& carrier) const {
    return absl::StrCat(ir::ToString(carrier.outer, graph_), " * ", name_, " * ",
                        ir::ToString(carrier.inner, graph_));
  }

  // A graph input holds the symbol outermost in each dim that names it.
  absl::StatusOr<Layout> InputLayout(int i) const {
    const ir::TensorType& type = graph_.values[graph_.inputs[i]];
    Layout layout(type.rank());
    for (int64_t d = 0; d < type.rank(); ++d) {
      if (Occurrences(type.sizes[d], symbol_) == 0) continue;
      const std::optional<SymExpr> inner =
          ir::DivideExactly(SymExpr::Of(type.sizes[d]), symbol_size_);
      if (!inner || Mentions(*inner, symbol_)) {
        return absl::InternalError(
            absl::StrCat("input ", i, " names symbol ", name_, " more than once in dim ", d));
      }
      layout[d] = Carrier{kOne, *inner};
    }
    const std::vector<int> dims = CarrierDims(layout);
    if (dims.size() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "input ", i, " ('", graph_.input_names[i], "') carries symbol ", name_, " in dims ",
          dims[0], " and ", dims[1], ": padding ", name_, " needs it in one dim"));
    }
    return layout;
  }

  absl::StatusOr<int> OutputDim(int j) const {
    const int value = graph_.outputs[j];
    const Layout& layout = layouts_[value];
    const std::vector<int> dims = CarrierDims(layout);
    if (dims.empty()) return -1;
    const int node = graph_.producer[value];
    const std::string where =
        absl::StrCat("output ", j, node >= 0 ? absl::StrCat(" (from ", Describe(node), ")") : "");
    if (dims.size() > 1) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": carries symbol ", name_, " in dims ", dims[0], " and ", dims[1],
                       ": a padded result could not be sliced back along one dim"));
    }
    const Carrier& carrier = *layout[dims[0]];
    if (carrier.outer != kOne) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": dim ", dims[0], " holds symbol ", name_, " as an inner factor (",
                       LayoutString(carrier), "): a padded result could not be sliced back"));
    }
    return dims[0];
  }

  // Every result dim that mentions the symbol has a layout that multiplies
  // out to its size, and no other dim has one.
  absl::Status CheckResult(int n, int k, const Layout& layout) const {
    const ir::TensorType& type = graph_.values[graph_.nodes[n].outputs[k]];
    if (static_cast<int64_t>(layout.size()) != type.rank()) {
      return absl::InternalError(absl::StrCat(Describe(n), ": a layout of rank ", layout.size(),
                                              " for result ", k, " of rank ", type.rank()));
    }
    for (int64_t d = 0; d < type.rank(); ++d) {
      const int occurrences = Occurrences(type.sizes[d], symbol_);
      if (occurrences > 1) {
        return Refuse(n, absl::StrCat("result ", k, "'s dim ", d, " (",
                                      ir::ToString(SymExpr::Of(type.sizes[d]), graph_),
                                      ") holds symbol ", name_, " more than once"));
      }
      const bool matches =
          occurrences == 0
              ? !layout[d].has_value()
              : layout[d].has_value() && layout[d]->outer * symbol_size_ * layout[d]->inner ==
                                             SymExpr::Of(type.sizes[d]);
      if (!matches) {
        return absl::InternalError(absl::StrCat(Describe(n), ": lost track of symbol ", name_,
                                                " in result ", k, "'s dim ", d));
      }
    }
    return absl::OkStatus();
  }

  const Layout& InputOf(int n, int i) const { return layouts_[graph_.nodes[n].inputs[i]]; }
  int64_t ResultRank(int n, int k) const {
    return graph_.values[graph_.nodes[n].outputs[k]].rank();
  }

  // Whether node n reads or writes anything that depends on the symbol.
  bool Touches(int n) const {
    const ir::Node& node = graph_.nodes[n];
    for (int input : node.inputs) {
      if (!CarrierDims(layouts_[input]).empty()) return true;
    }
    for (int output : node.outputs) {
      if (Mentions(graph_.values[output], symbol_)) return true;
    }
    for (const auto& [name, value] : node.args) {
      if (Mentions(value, symbol_)) return true;
    }
    return false;
  }

  // The results' layouts of node n, or why padding is refused there.
  absl::StatusOr<std::vector<Layout>> Infer(int n) {
    const ir::Node& node = graph_.nodes[n];
    if (!Touches(n)) {
      std::vector<Layout> layouts;
      for (size_t k = 0; k < node.outputs.size(); ++k) layouts.emplace_back(ResultRank(n, k));
      return layouts;
    }
    // A symbolic argument is a shape only where it is a view's sizes;
    // anywhere else the result would read the symbol's value.
    const bool shape_args = IsReshape(node.op) || node.op == "aten.expand.default";
    for (const auto& [name, value] : node.args) {
      if (Mentions(value, symbol_) && !(shape_args && (name == "size" || name == "stride"))) {
        return Refuse(n, absl::StrCat("argument '", name, "' reads the value of symbol ", name_));
      }
    }
    const ops::OpDef* def = ops::OpTable::Get().Find(node.op);
    const std::string family = def != nullptr ? def->family : "";
    const std::string& op = node.op;
    auto one = [](absl::StatusOr<Layout> layout) -> absl::StatusOr<std::vector<Layout>> {
      if (!layout.ok()) return layout.status();
      return std::vector<Layout>{*std::move(layout)};
    };

    // The op table's "pointwise" family computes each element from the same
    // element of its broadcast operands (ops/op_table.h).
    if (family == "pointwise" || IsElementwiseCopy(op)) return one(AllInputs(n));
    if (op == "aten.tril.default" || op == "aten.triu.default") return one(TriangularPart(n));
    if (op == "aten.permute.default" || op == "aten.t.default" || op == "aten.transpose.int") {
      return one(Permute(n));
    }
    if (KeepsDimOrder(op)) return one(SameOrder(n));
    if (op == "aten.expand.default") return one(Expand(n));
    if (IsReshape(op)) return one(Reshape(n));
    if (op == "aten.slice.Tensor" || op == "aten.select.int" || op == "aten.split.Tensor" ||
        op == "aten.split_with_sizes.default" || op == "aten.unbind.int") {
      return Slice(n);
    }
    if (op == "aten.mm.default" || op == "aten.bmm.default") {
      return one(Matmul(n, InputOf(n, 0), InputOf(n, 1), op == "aten.bmm.default", 0));
    }
    if (op == "aten.addmm.default" || op == "aten.baddbmm.default") return one(Addmm(n));
    if (op == "aten.linear.default") return one(Linear(n));
    // The "reduction" family reduces over its `dim` argument (all dims
    // when absent or empty), as do mean, var and std.
    if (family == "reduction" || op == "aten.mean.dim" || op == "aten.mean.default" ||
        op == "aten.var.correction" || op == "aten.std.correction") {
      return one(Reduce(n));
    }
    if (op == "aten._softmax.default" || op == "aten._log_softmax.default" ||
        op == "aten._softmax_backward_data.default") {
      return one(Softmax(n));
    }
    if (op == "aten.native_layer_norm.default") return LayerNorm(n);
    if (op == "aten.cat.default") return one(Cat(n));
    if (op == "aten.stack.default") return one(Stack(n));

    // Not known to be safe (as_strided, layer_norm's backward, which sums
    // the weight's gradient over rows, any op added later): refused.
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::vector<int> dims = CarrierDims(InputOf(n, static_cast<int>(i)));
      if (!dims.empty()) {
        return Refuse(n,
                      absl::StrCat("not known to keep positions apart along dim ", dims[0],
                                   " of input ", i, ", ", Carries()),
                      "could change the result");
      }
    }
    return Refuse(
        n, absl::StrCat("not known to keep positions apart along the dims of symbol ", name_),
        "could change the result");
  }

  // Operands broadcast against each other (aligned at their last dims): a
  // result dim's layout is that of the operands carrying it, which must
  // agree, or else the same position would pair different elements once
  // padded. `operands` are (description, layout).
  absl::StatusOr<Layout> Broadcast(int n,
                                   const std::vector<std::pair<std::string, Layout>>& operands,
                                   int64_t rank) const {
    Layout result(rank);
    std::vector<std::string> from(rank);
    for (const auto& [what, layout] : operands) {
      const int64_t lead = rank - static_cast<int64_t>(layout.size());
      if (lead < 0) {
        return absl::InternalError(absl::StrCat(Describe(n), ": ", what, " has rank ",
                                                layout.size(), " above the result's ", rank));
      }
      for (size_t s = 0; s < layout.size(); ++s) {
        if (!layout[s]) continue;
        const int64_t d = lead + static_cast<int64_t>(s);
        const std::string here = absl::StrCat("dim ", s, " of ", what);
        if (!result[d] || result[d]->uniform) {
          result[d] = layout[s];
          from[d] = here;
        } else if (!layout[s]->uniform && !result[d]->SameLayout(*layout[s])) {
          return Refuse(n, absl::StrCat("pairs ", from[d], " (", LayoutString(*result[d]),
                                        ") with ", here, " (", LayoutString(*layout[s]),
                                        "), which hold symbol ", name_, " in different layouts"));
        } else {
          result[d]->uniform = result[d]->uniform && layout[s]->uniform;
        }
      }
    }
    return result;
  }

  absl::StatusOr<Layout> AllInputs(int n) const {
    std::vector<std::pair<std::string, Layout>> operands;
    for (size_t i = 0; i < graph_.nodes[n].inputs.size(); ++i) {
      operands.push_back({absl::StrCat("input ", i), InputOf(n, static_cast<int>(i))});
    }
    return Broadcast(n, operands, ResultRank(n, 0));
  }

  // tril/triu compare row and column indices: a real position keeps its
  // index under padding only where the symbol is the dim's outermost factor.
  absl::StatusOr<Layout> TriangularPart(int n) const {
    ASSIGN_OR_RETURN(Layout layout, AllInputs(n));
    for (size_t d = layout.size() >= 2 ? layout.size() - 2 : 0; d < layout.size(); ++d) {
      if (!layout[d]) continue;
      if (layout[d]->outer != kOne) {
        return Refuse(n, absl::StrCat("compares indices along dim ", d, ", ", Carries(),
                                      " as an inner factor (", LayoutString(*layout[d]), ")"));
      }
      layout[d]->uniform = false;  // the result depends on the index
    }
    return layout;
  }

  absl::StatusOr<Layout> Permute(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const Layout& source = InputOf(n, 0);
    const int64_t rank = static_cast<int64_t>(source.size());
    std::vector<int> perm(rank);
    for (int64_t d = 0; d < rank; ++d) perm[d] = static_cast<int>(d);
    if (node.op == "aten.permute.default") {
      const std::vector<int64_t> dims = ops::IntListArg(node, "dims");
      if (static_cast<int64_t>(dims.size()) != rank) {
        return absl::InternalError(absl::StrCat(Describe(n), ": a permutation of the wrong rank"));
      }
      for (int64_t d = 0; d < rank; ++d) {
        ASSIGN_OR_RETURN(perm[d], ops::WrapDim(dims[d], rank));
      }
    } else if (node.op == "aten.t.default") {
      if (rank == 2) std::swap(perm[0], perm[1]);
    } else if (rank > 0) {
      ASSIGN_OR_RETURN(const int dim0, ops::WrapDim(ops::IntArg(node, "dim0"), rank));
      ASSIGN_OR_RETURN(const int dim1, ops::WrapDim(ops::IntArg(node, "dim1"), rank));
      std::swap(perm[dim0], perm[dim1]);
    }
    Layout result;
    for (int d : perm) result.push_back(source[d]);
    return result;
  }

  // squeeze/unsqueeze/alias: only dims of size 1, which never carry the
  // symbol, come and go; the others keep their order.
  absl::StatusOr<Layout> SameOrder(int n) const {
    const Layout& source = InputOf(n, 0);
    const ir::TensorType& type = graph_.values[graph_.nodes[n].outputs[0]];
    std::vector<Carrier> carriers;
    for (const auto& carrier : source) {
      if (carrier) carriers.push_back(*carrier);
    }
    Layout result(type.rank());
    size_t next = 0;
    for (int64_t d = 0; d < type.rank(); ++d) {
      if (Occurrences(type.sizes[d], symbol_) == 0) continue;
      if (next == carriers.size()) break;  // CheckResult reports it
      result[d] = carriers[next++];
    }
    return result;
  }

  // expand: kept dims keep their layout; a dim broadcast to a size that
  // mentions the symbol holds the same values at every position.
  absl::StatusOr<Layout> Expand(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const ir::TensorType& source = graph_.values[node.inputs[0]];
    const ir::TensorType& type = graph_.values[node.outputs[0]];
    const int64_t lead = type.rank() - source.rank();
    Layout result(type.rank());
    for (int64_t d = 0; d < type.rank(); ++d) {
      const int64_t s = d - lead;
      if (s >= 0 && source.sizes[s] == type.sizes[d]) {
        result[d] = InputOf(n, 0)[s];
      } else if (Occurrences(type.sizes[d], symbol_) == 1) {
        const std::optional<SymExpr> inner =
            ir::DivideExactly(SymExpr::Of(type.sizes[d]), symbol_size_);
        if (inner) result[d] = Carrier{kOne, *inner, /*uniform=*/true};
      }
    }
    return result;
  }

  // A reshape reads the source's elements in order under new sizes. Where
  // the source dim j holds the symbol, the flat order has `above` elements'
  // worth of more significant positions and `below` of less significant
  // ones; a result dim k holds it as one factor when the result dims before
  // it multiply to a divisor of `above` (the rest, x, is k's outer factor)
  // and k's size over x * symbol times the dims after it is `below`. These
  // are identities of monomials, so they hold at every size of every
  // symbol: the padded and the real graph place each element alike.
  absl::StatusOr<Layout> Reshape(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const std::vector<SymExpr> in = Sizes(graph_.values[node.inputs[0]]);
    const std::vector<SymExpr> out = Sizes(graph_.values[node.outputs[0]]);
    const Layout& source = InputOf(n, 0);
    Layout result(out.size());
    for (size_t j = 0; j < in.size(); ++j) {
      if (!source[j]) continue;
      const SymExpr above = Product(in, 0, j) * source[j]->outer;
      const SymExpr below = source[j]->inner * Product(in, j + 1, in.size());
      std::optional<size_t> found;
      SymExpr prefix = kOne;
      for (size_t k = 0; k < out.size() && !found; ++k) {
        const std::optional<SymExpr> outer = ir::DivideExactly(above, prefix);
        if (!outer) break;  // no longer prefix divides it either
        const std::optional<SymExpr> inner = ir::DivideExactly(out[k], *outer * symbol_size_);
        if (inner && *inner * Product(out, k + 1, out.size()) == below) {
          if (result[k]) {
            return Refuse(
                n, absl::StrCat("merges two dims that carry symbol ", name_, " into dim ", k));
          }
          result[k] = Carrier{*outer, *inner};
          found = k;
        }
        prefix = prefix * out[k];
      }
      if (!found) {
        return Refuse(
            n, absl::StrCat("reshapes dim ", j, " (", LayoutString(*source[j]), "), ", Carries(),
                            ", so that ", name_, " is not one factor of a result dim"));
      }
    }
    return result;
  }

  // slice, select, split, unbind: fine along other dims.
  absl::StatusOr<std::vector<Layout>> Slice(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const Layout& source = InputOf(n, 0);
    ASSIGN_OR_RETURN(const int dim,
                     ops::WrapDim(ops::IntArg(node, "dim"), static_cast<int64_t>(source.size())));
    if (source[dim]) {
      const std::string verb = node.op == "aten.slice.Tensor" ? "slices"
                               : node.op == "aten.select.int" ? "selects"
                               : node.op == "aten.unbind.int" ? "unbinds"
                                                              : "splits";
      return Refuse(n, absl::StrCat(verb, " along dim ", dim, ", ", Carries()));
    }
    Layout layout = source;
    if (node.op == "aten.select.int" || node.op == "aten.unbind.int") {
      layout.erase(layout.begin() + dim);
    }
    return std::vector<Layout>(node.outputs.size(), layout);
  }

  // mm / bmm: M, N and the batch keep their layouts; K is summed over.
  // `first` is the position of the left operand among the node's inputs.
  absl::StatusOr<Layout> Matmul(int n, const Layout& a, const Layout& b, bool batched,
                                int first) const {
    const int batch = batched ? 1 : 0;
    if (a.size() != static_cast<size_t>(2 + batch) || b.size() != static_cast<size_t>(2 + batch)) {
      return absl::InternalError(absl::StrCat(Describe(n), ": GEMM operands of the wrong rank"));
    }
    if (a[1 + batch]) {
      return Refuse(
          n, absl::StrCat("contracts over dim ", 1 + batch, " of input ", first, ", ", Carries()));
    }
    if (b[batch]) {
      return Refuse(
          n, absl::StrCat("contracts over dim ", batch, " of input ", first + 1, ", ", Carries()));
    }
    Layout result;
    if (batched) {
      ASSIGN_OR_RETURN(const Layout batches,
                       Broadcast(n,
                                 {{absl::StrCat("input ", first), Layout{a[0]}},
                                  {absl::StrCat("input ", first + 1), Layout{b[0]}}},
                                 1));
      result.push_back(batches[0]);
    }
    result.push_back(a[batch]);
    result.push_back(b[1 + batch]);
    return result;
  }

  // addmm(bias, a, b) = bias + a @ b, baddbmm likewise batched.
  absl::StatusOr<Layout> Addmm(int n) const {
    const bool batched = graph_.nodes[n].op == "aten.baddbmm.default";
    ASSIGN_OR_RETURN(const Layout product,
                     Matmul(n, InputOf(n, 1), InputOf(n, 2), batched, /*first=*/1));
    return Broadcast(n, {{"input 0", InputOf(n, 0)}, {"the product", product}}, ResultRank(n, 0));
  }

  // linear(x, weight, bias?) = x @ weight.T + bias over x's last dim.
  absl::StatusOr<Layout> Linear(int n) const {
    const Layout& x = InputOf(n, 0);
    const Layout& weight = InputOf(n, 1);
    if (x.empty() || weight.size() != 2) {
      return absl::InternalError(absl::StrCat(Describe(n), ": linear operands of the wrong rank"));
    }
    if (x.back()) {
      return Refuse(n,
                    absl::StrCat("contracts over dim ", x.size() - 1, " of input 0, ", Carries()));
    }
    if (weight[1]) return Refuse(n, absl::StrCat("contracts over dim 1 of input 1, ", Carries()));
    Layout product(x.begin(), x.end() - 1);
    product.push_back(weight[0]);
    if (graph_.nodes[n].inputs.size() < 3) return product;
    return Broadcast(n, {{"input 2", InputOf(n, 2)}, {"the product", product}}, ResultRank(n, 0));
  }

  // Removes the reduced dims (or keeps them as size 1), refusing a reduction
  // over a dim that carries the symbol.
  absl::StatusOr<Layout> ReduceOver(int n, const Layout& source, const std::vector<bool>& reduced,
                                    bool keepdim, const std::string& verb) const {
    Layout result;
    for (size_t d = 0; d < source.size(); ++d) {
      if (!reduced[d]) {
        result.push_back(source[d]);
        continue;
      }
      if (source[d]) return Refuse(n, absl::StrCat(verb, " over dim ", d, ", ", Carries()));
      if (keepdim) result.push_back(std::nullopt);
    }
    return result;
  }

  absl::StatusOr<Layout> Reduce(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const Layout& source = InputOf(n, 0);
    const int64_t rank = static_cast<int64_t>(source.size());
    std::vector<bool> reduced(rank, false);
    const std::vector<int64_t> dims = ops::DimsArg(node);
    if (dims.empty()) std::fill(reduced.begin(), reduced.end(), true);
    for (int64_t dim : dims) {
      if (rank == 0) break;
      ASSIGN_OR_RETURN(const int d, ops::WrapDim(dim, rank));
      reduced[d] = true;
    }
    return ReduceOver(n, source, reduced, ops::BoolArg(node, "keepdim"), "reduces");
  }

  // softmax / log_softmax / softmax backward: a sum over `dim` per row.
  absl::StatusOr<Layout> Softmax(int n) const {
    ASSIGN_OR_RETURN(const Layout layout, AllInputs(n));
    const int64_t rank = static_cast<int64_t>(layout.size());
    std::vector<bool> reduced(rank, false);
    if (rank > 0) {
      ASSIGN_OR_RETURN(const int dim, ops::WrapDim(ops::IntArg(graph_.nodes[n], "dim"), rank));
      reduced[dim] = true;
    }
    RETURN_IF_ERROR(ReduceOver(n, layout, reduced, /*keepdim=*/true, "reduces").status());
    return layout;
  }

  // native_layer_norm(x, weight?, bias?) -> (out, mean, rstd): statistics
  // over the last len(normalized_shape) dims, kept as size 1.
  absl::StatusOr<std::vector<Layout>> LayerNorm(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const Layout& x = InputOf(n, 0);
    const int64_t rank = static_cast<int64_t>(x.size());
    const int64_t normalized =
        static_cast<int64_t>(ops::IntListArg(node, "normalized_shape").size());
    std::vector<bool> reduced(rank, false);
    for (int64_t d = std::max<int64_t>(0, rank - normalized); d < rank; ++d) reduced[d] = true;
    ASSIGN_OR_RETURN(const Layout statistics,
                     ReduceOver(n, x, reduced, /*keepdim=*/true, "normalizes"));
    std::vector<Layout> result = {x};
    while (result.size() < node.outputs.size()) result.push_back(statistics);
    return result;
  }

  absl::StatusOr<Layout> Cat(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const int64_t rank = ResultRank(n, 0);
    ASSIGN_OR_RETURN(const int dim, ops::WrapDim(ops::IntArg(node, "dim"), rank));
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Layout& part = InputOf(n, static_cast<int>(i));
      if (static_cast<int64_t>(part.size()) == rank && part[dim]) {
        return Refuse(n, absl::StrCat("concatenates along dim ", dim, ", ", Carries()));
      }
    }
    return AllInputs(n);
  }

  absl::StatusOr<Layout> Stack(int n) const {
    const ir::Node& node = graph_.nodes[n];
    const int64_t rank = ResultRank(n, 0);
    ASSIGN_OR_RETURN(const int dim, ops::WrapDim(ops::IntArg(node, "dim"), rank));
    std::vector<std::pair<std::string, Layout>> parts;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      parts.push_back({absl::StrCat("input ", i), InputOf(n, static_cast<int>(i))});
    }
    ASSIGN_OR_RETURN(Layout layout, Broadcast(n, parts, rank - 1));
    layout.insert(layout.begin() + dim, std::nullopt);
    return layout;
  }

  const ir::Graph& graph_;
  const int symbol_;
  const std::string name_;
  const SymExpr symbol_size_;
  std::vector<Layout> layouts_;  // by value index
};

}  // namespace

absl::StatusOr<PaddedDims> PaddableDims(const ir::Graph& graph, int symbol) {
  if (symbol < 0 || symbol >= static_cast<int>(graph.symbols.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "symbol ", symbol, " is out of range: the graph has ", graph.symbols.size(), " symbols"));
  }
  return Analysis(graph, symbol).Run();
}

}  // namespace kiln
