#include "codegen/symbol_independence.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"
#include "codegen/symbol_independence_analysis.h"
#include "common/status_macros.h"

namespace kiln {
namespace symbol_independence {
namespace {

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

}  // namespace

int Occurrences(const ir::Dim& dim, int symbol) {
  if (!dim.is_symbolic()) return 0;
  return (dim.symbol == symbol) +
         static_cast<int>(std::count(dim.times.begin(), dim.times.end(), symbol));
}

absl::StatusOr<PaddedDims> Analysis::Run() {
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

std::string Analysis::Describe(int n) const {
  const ir::Node& node = graph_.nodes[n];
  return absl::StrCat("node ", n, " (", node.op, ", '", node.name, "')");
}

absl::Status Analysis::Refuse(int n, const std::string& reason,
                              const std::string& consequence) const {
  return absl::FailedPreconditionError(
      absl::StrCat(Describe(n), ": ", reason, ": padding ", name_, " ", consequence));
}

std::string Analysis::LayoutString(const Carrier& carrier) const {
  return absl::StrCat(ir::ToString(carrier.outer, graph_), " * ", name_, " * ",
                      ir::ToString(carrier.inner, graph_));
}

// A graph input holds the symbol outermost in each dim that names it.
absl::StatusOr<Layout> Analysis::InputLayout(int i) const {
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

absl::StatusOr<int> Analysis::OutputDim(int j) const {
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
absl::Status Analysis::CheckResult(int n, int k, const Layout& layout) const {
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
            : layout[d].has_value() &&
                  layout[d]->outer * symbol_size_ * layout[d]->inner == SymExpr::Of(type.sizes[d]);
    if (!matches) {
      return absl::InternalError(absl::StrCat(Describe(n), ": lost track of symbol ", name_,
                                              " in result ", k, "'s dim ", d));
    }
  }
  return absl::OkStatus();
}

// Whether node n reads or writes anything that depends on the symbol.
bool Analysis::Touches(int n) const {
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
absl::StatusOr<std::vector<Layout>> Analysis::Infer(int n) {
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
  return Refuse(n,
                absl::StrCat("not known to keep positions apart along the dims of symbol ", name_),
                "could change the result");
}

}  // namespace symbol_independence

absl::StatusOr<PaddedDims> PaddableDims(const ir::Graph& graph, int symbol) {
  if (symbol < 0 || symbol >= static_cast<int>(graph.symbols.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "symbol ", symbol, " is out of range: the graph has ", graph.symbols.size(), " symbols"));
  }
  return symbol_independence::Analysis(graph, symbol).Run();
}

}  // namespace kiln
