#include "daemon/padding_proof.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/prepare.h"
#include "codegen/symbol_independence.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<kiln::v1::PaddingResponse> ProvePadding(const kiln::v1::PaddingRequest& request,
                                                       int64_t max_graph_nodes) {
  const kiln::v1::Graph& graph = request.graph();
  const kiln::v1::WarmupGraph& entry = request.entry();
  if (graph.nodes_size() > max_graph_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", graph.nodes_size(),
                                                   " nodes, over the limit max_graph_nodes = ",
                                                   max_graph_nodes, " (kilnd --max_graph_nodes)"));
  }
  kiln::v1::PaddingResponse response;
  std::optional<ir::Graph> canonical;
  for (const kiln::v1::SymbolSizes& sizes : entry.symbols()) {
    if (!sizes.paddable()) continue;
    if (entry.serve() != kiln::v1::WarmupGraph::SERVE_STATIC) {
      return absl::InvalidArgumentError(absl::StrCat(
          "symbol ", sizes.symbol(), " is paddable, which needs static buckets (SERVE_STATIC)"));
    }
    if (!canonical.has_value()) {
      ASSIGN_OR_RETURN(canonical, PrepareGraph(graph));
    }
    // The canonical graph names symbols by first use: find this one's
    // index through the first input dim that names it.
    int index = -1;
    for (int i = 0; i < graph.inputs_size() && index < 0; ++i) {
      const auto& dims = graph.inputs(i).type().sizes();
      for (int d = 0; d < dims.size() && index < 0; ++d) {
        if (dims[d].symbol() == sizes.symbol()) {
          index = canonical->values[canonical->inputs[i]].sizes[d].symbol;
        }
      }
    }
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", sizes.symbol(), " names no dim of the graph's inputs"));
    }
    absl::StatusOr<PaddedDims> dims = PaddableDims(*canonical, index);
    if (!dims.ok()) {
      return absl::Status(
          dims.status().code(),
          absl::StrCat("symbol ", sizes.symbol(), " is not paddable: ", dims.status().message()));
    }
    // A call's inputs give the symbol's value only where a dim is the
    // symbol alone.
    for (int i = 0; i < graph.inputs_size(); ++i) {
      const int d = dims->inputs[i];
      if (d < 0) continue;
      const kiln::v1::Dim& dim = graph.inputs(i).type().sizes(d);
      if (dim.symbol() != sizes.symbol() || dim.multiplier() > 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("symbol ", sizes.symbol(), " is not paddable: input ", i, " '",
                         graph.inputs(i).name(), "' holds it in dim ", d,
                         " with another factor; padding needs the symbol alone in each input dim"));
      }
    }
    kiln::v1::PaddedSymbol& padded = *response.add_symbols();
    padded.set_symbol(sizes.symbol());
    padded.mutable_input_dims()->Add(dims->inputs.begin(), dims->inputs.end());
    padded.mutable_output_dims()->Add(dims->outputs.begin(), dims->outputs.end());
  }
  return response;
}

}  // namespace kiln
