// PaddableDims for ops that move or select elements: broadcasting operands,
// tril/triu, permutes, squeeze/unsqueeze, expand, reshapes, slices, cat and
// stack.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/symbol_independence_analysis.h"
#include "common/status_macros.h"

namespace kiln::symbol_independence {
namespace {

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

}  // namespace

// Operands broadcast against each other (aligned at their last dims): a
// result dim's layout is that of the operands carrying it, which must
// agree, or else the same position would pair different elements once
// padded. `operands` are (description, layout).
absl::StatusOr<Layout> Analysis::Broadcast(
    int n, const std::vector<std::pair<std::string, Layout>>& operands, int64_t rank) const {
  Layout result(rank);
  std::vector<std::string> from(rank);
  for (const auto& [what, layout] : operands) {
    const int64_t lead = rank - static_cast<int64_t>(layout.size());
    if (lead < 0) {
      return absl::InternalError(absl::StrCat(Describe(n), ": ", what, " has rank ", layout.size(),
                                              " above the result's ", rank));
    }
    for (size_t s = 0; s < layout.size(); ++s) {
      if (!layout[s]) continue;
      const int64_t d = lead + static_cast<int64_t>(s);
      const std::string here = absl::StrCat("dim ", s, " of ", what);
      if (!result[d] || result[d]->uniform) {
        result[d] = layout[s];
        from[d] = here;
      } else if (!layout[s]->uniform && !result[d]->SameLayout(*layout[s])) {
        return Refuse(n, absl::StrCat("pairs ", from[d], " (", LayoutString(*result[d]), ") with ",
                                      here, " (", LayoutString(*layout[s]), "), which hold symbol ",
                                      name_, " in different layouts"));
      } else {
        result[d]->uniform = result[d]->uniform && layout[s]->uniform;
      }
    }
  }
  return result;
}

absl::StatusOr<Layout> Analysis::AllInputs(int n) const {
  std::vector<std::pair<std::string, Layout>> operands;
  for (size_t i = 0; i < graph_.nodes[n].inputs.size(); ++i) {
    operands.push_back({absl::StrCat("input ", i), InputOf(n, static_cast<int>(i))});
  }
  return Broadcast(n, operands, ResultRank(n, 0));
}

// tril/triu compare row and column indices: a real position keeps its
// index under padding only where the symbol is the dim's outermost factor.
absl::StatusOr<Layout> Analysis::TriangularPart(int n) const {
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

absl::StatusOr<Layout> Analysis::Permute(int n) const {
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
absl::StatusOr<Layout> Analysis::SameOrder(int n) const {
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
absl::StatusOr<Layout> Analysis::Expand(int n) const {
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
absl::StatusOr<Layout> Analysis::Reshape(int n) const {
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
          return Refuse(n,
                        absl::StrCat("merges two dims that carry symbol ", name_, " into dim ", k));
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
absl::StatusOr<std::vector<Layout>> Analysis::Slice(int n) const {
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

absl::StatusOr<Layout> Analysis::Cat(int n) const {
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

absl::StatusOr<Layout> Analysis::Stack(int n) const {
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

}  // namespace kiln::symbol_independence
