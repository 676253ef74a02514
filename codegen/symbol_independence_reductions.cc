// PaddableDims for ops that sum over a dim: GEMMs (mm, bmm, addmm,
// baddbmm, linear), reductions, softmax and layer_norm. Each refuses a sum
// over a dim that carries the symbol: padded positions would enter it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/symbol_independence_analysis.h"
#include "common/status_macros.h"

namespace kiln::symbol_independence {

// mm / bmm: M, N and the batch keep their layouts; K is summed over.
// `first` is the position of the left operand among the node's inputs.
absl::StatusOr<Layout> Analysis::Matmul(int n, const Layout& a, const Layout& b, bool batched,
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
absl::StatusOr<Layout> Analysis::Addmm(int n) const {
  const bool batched = graph_.nodes[n].op == "aten.baddbmm.default";
  ASSIGN_OR_RETURN(const Layout product,
                   Matmul(n, InputOf(n, 1), InputOf(n, 2), batched, /*first=*/1));
  return Broadcast(n, {{"input 0", InputOf(n, 0)}, {"the product", product}}, ResultRank(n, 0));
}

// linear(x, weight, bias?) = x @ weight.T + bias over x's last dim.
absl::StatusOr<Layout> Analysis::Linear(int n) const {
  const Layout& x = InputOf(n, 0);
  const Layout& weight = InputOf(n, 1);
  if (x.empty() || weight.size() != 2) {
    return absl::InternalError(absl::StrCat(Describe(n), ": linear operands of the wrong rank"));
  }
  if (x.back()) {
    return Refuse(n, absl::StrCat("contracts over dim ", x.size() - 1, " of input 0, ", Carries()));
  }
  if (weight[1]) return Refuse(n, absl::StrCat("contracts over dim 1 of input 1, ", Carries()));
  Layout product(x.begin(), x.end() - 1);
  product.push_back(weight[0]);
  if (graph_.nodes[n].inputs.size() < 3) return product;
  return Broadcast(n, {{"input 2", InputOf(n, 2)}, {"the product", product}}, ResultRank(n, 0));
}

// Removes the reduced dims (or keeps them as size 1), refusing a reduction
// over a dim that carries the symbol.
absl::StatusOr<Layout> Analysis::ReduceOver(int n, const Layout& source,
                                            const std::vector<bool>& reduced, bool keepdim,
                                            const std::string& verb) const {
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

absl::StatusOr<Layout> Analysis::Reduce(int n) const {
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
absl::StatusOr<Layout> Analysis::Softmax(int n) const {
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
absl::StatusOr<std::vector<Layout>> Analysis::LayerNorm(int n) const {
  const ir::Node& node = graph_.nodes[n];
  const Layout& x = InputOf(n, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t normalized = static_cast<int64_t>(ops::IntListArg(node, "normalized_shape").size());
  std::vector<bool> reduced(rank, false);
  for (int64_t d = std::max<int64_t>(0, rank - normalized); d < rank; ++d) reduced[d] = true;
  ASSIGN_OR_RETURN(const Layout statistics,
                   ReduceOver(n, x, reduced, /*keepdim=*/true, "normalizes"));
  std::vector<Layout> result = {x};
  while (result.size() < node.outputs.size()) result.push_back(statistics);
  return result;
}

}  // namespace kiln::symbol_independence
