// The analysis behind PaddableDims (codegen/symbol_independence.h), shared
// by its files: symbol_independence.cc walks the graph and dispatches each
// node by op; symbol_independence_views.cc handles ops that move or select
// elements (broadcasts, permutes, reshapes, slices, cat); and
// symbol_independence_reductions.cc ops that sum over a dim (GEMMs,
// reductions, softmax, layer_norm). Internal to those files.
#ifndef KILN_CODEGEN_SYMBOL_INDEPENDENCE_ANALYSIS_H_
#define KILN_CODEGEN_SYMBOL_INDEPENDENCE_ANALYSIS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/ir.h"
#include "codegen/symbol_independence.h"

namespace kiln::symbol_independence {

using ir::SymExpr;

inline const SymExpr kOne = SymExpr::Constant(1);

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

// How many times `dim`'s size names `symbol`.
int Occurrences(const ir::Dim& dim, int symbol);

// The analysis: every value's layout, node by node in topological order.
class Analysis {
 public:
  Analysis(const ir::Graph& graph, int symbol)
      : graph_(graph),
        symbol_(symbol),
        name_(graph.symbols[symbol]),
        symbol_size_(SymExpr::Of(ir::Dim::Symbol(symbol))),
        layouts_(graph.values.size()) {}

  absl::StatusOr<PaddedDims> Run();

 private:
  // "node 17 (aten._softmax.default, '_softmax')".
  std::string Describe(int n) const;
  std::string Carries() const { return absl::StrCat("which carries symbol ", name_); }
  // FailedPrecondition: node n's `reason`, and what padding would do.
  absl::Status Refuse(int n, const std::string& reason,
                      const std::string& consequence = "would change the result") const;
  // "outer * symbol * inner".
  std::string LayoutString(const Carrier& carrier) const;

  absl::StatusOr<Layout> InputLayout(int i) const;
  absl::StatusOr<int> OutputDim(int j) const;
  absl::Status CheckResult(int n, int k, const Layout& layout) const;

  const Layout& InputOf(int n, int i) const { return layouts_[graph_.nodes[n].inputs[i]]; }
  int64_t ResultRank(int n, int k) const {
    return graph_.values[graph_.nodes[n].outputs[k]].rank();
  }

  bool Touches(int n) const;
  absl::StatusOr<std::vector<Layout>> Infer(int n);

  // Ops that move or select elements (symbol_independence_views.cc).
  absl::StatusOr<Layout> Broadcast(int n,
                                   const std::vector<std::pair<std::string, Layout>>& operands,
                                   int64_t rank) const;
  absl::StatusOr<Layout> AllInputs(int n) const;
  absl::StatusOr<Layout> TriangularPart(int n) const;
  absl::StatusOr<Layout> Permute(int n) const;
  absl::StatusOr<Layout> SameOrder(int n) const;
  absl::StatusOr<Layout> Expand(int n) const;
  absl::StatusOr<Layout> Reshape(int n) const;
  absl::StatusOr<std::vector<Layout>> Slice(int n) const;
  absl::StatusOr<Layout> Cat(int n) const;
  absl::StatusOr<Layout> Stack(int n) const;

  // Ops that sum over a dim (symbol_independence_reductions.cc).
  absl::StatusOr<Layout> Matmul(int n, const Layout& a, const Layout& b, bool batched,
                                int first) const;
  absl::StatusOr<Layout> Addmm(int n) const;
  absl::StatusOr<Layout> Linear(int n) const;
  absl::StatusOr<Layout> ReduceOver(int n, const Layout& source, const std::vector<bool>& reduced,
                                    bool keepdim, const std::string& verb) const;
  absl::StatusOr<Layout> Reduce(int n) const;
  absl::StatusOr<Layout> Softmax(int n) const;
  absl::StatusOr<std::vector<Layout>> LayerNorm(int n) const;

  const ir::Graph& graph_;
  const int symbol_;
  const std::string name_;
  const SymExpr symbol_size_;
  std::vector<Layout> layouts_;  // by value index
};

}  // namespace kiln::symbol_independence

#endif  // KILN_CODEGEN_SYMBOL_INDEPENDENCE_ANALYSIS_H_
