#include "daemon/miss_explainer.h"

#include <algorithm>
#include <tuple>

#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

std::string DimText(const kiln::v1::Dim& dim) {
  if (!dim.has_symbol()) return absl::StrCat(dim.constant());
  std::string text = dim.symbol();
  for (const std::string& symbol : dim.times()) absl::StrAppend(&text, "*", symbol);
  if (dim.multiplier() > 1) text = absl::StrCat(dim.multiplier(), "*", text);
  return text;
}

std::string DimsText(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& dims) {
  return absl::StrCat(
      "[",
      absl::StrJoin(dims, ", ",
                    [](std::string* out, const kiln::v1::Dim& dim) { out->append(DimText(dim)); }),
      "]");
}

// The first difference between two inputs' guards, or "".
std::string GuardDifference(int input, const kiln::v1::InputGuard& here,
                            const kiln::v1::InputGuard& stored) {
  const std::string name = absl::StrCat("guard: input ", input);
  if (here.dtype() != stored.dtype()) {
    return absl::StrCat(name, " dtype ", kiln::v1::DType_Name(here.dtype()), " here, ",
                        kiln::v1::DType_Name(stored.dtype()), " stored");
  }
  if (here.sizes_size() != stored.sizes_size()) {
    return absl::StrCat(name, " rank ", here.sizes_size(), " here, ", stored.sizes_size(),
                        " stored");
  }
  for (int d = 0; d < here.sizes_size(); ++d) {
    if (DimText(here.sizes(d)) != DimText(stored.sizes(d))) {
      return absl::StrCat(name, " dim ", d, " size ", DimText(here.sizes(d)), " here, ",
                          DimText(stored.sizes(d)), " stored");
    }
  }
  if (DimsText(here.strides()) != DimsText(stored.strides())) {
    return absl::StrCat(name, " strides ", DimsText(here.strides()), " here, ",
                        DimsText(stored.strides()), " stored");
  }
  if (here.requires_grad() != stored.requires_grad()) {
    return absl::StrCat(name, " requires_grad differs");
  }
  return "";
}

}  // namespace

KeyedRequestSummary SummarizeRequest(const CodegenInputs& inputs, const CacheKey& key,
                                     const kiln::v1::Toolchain& toolchain, absl::Time when) {
  KeyedRequestSummary summary;
  summary.when = when;
  summary.key = key.key;
  summary.graph_name = inputs.graph.name;
  summary.components = key.components;
  summary.guards = inputs.guards;
  for (size_t n = 0; n < inputs.graph.nodes.size(); ++n) {
    const ir::Node& node = inputs.graph.nodes[n];
    summary.node_labels.push_back(absl::StrCat(n, " '", node.name, "' (", node.op, ")"));
  }
  summary.target = inputs.options.target();
  summary.toolchain = toolchain;
  return summary;
}

std::vector<std::string> KeyDifferences(const KeyedRequestSummary& request,
                                        const kiln::v1::ArtifactMetadata& stored) {
  std::vector<std::string> differences;
  const kiln::v1::KeyComponents& here = request.components;
  const kiln::v1::KeyComponents& there = stored.key_components();
  if (here.graph() != there.graph()) {
    const std::vector<absl::string_view> a = GraphParts(here);
    const std::vector<absl::string_view> b = GraphParts(there);
    std::string where = "the graph differs (the stored entry records no parts)";
    if (!b.empty()) {
      if (!a.empty() && a[0] != b[0]) {
        where = "its inputs' dtypes or sizes differ";
      } else {
        size_t node = 1;
        while (node < a.size() && node < b.size() && a[node] == b[node]) ++node;
        if (node < a.size() && node < b.size()) {
          where = absl::StrCat("node ", request.node_labels[node - 1], " differs");
        } else {
          where = absl::StrCat(a.size() - 1, " nodes here, ", b.size() - 1,
                               " stored (the same up to there)");
        }
      }
    }
    differences.push_back(absl::StrCat("graph: ", where));
  }
  if (here.guards() != there.guards()) {
    const kiln::v1::Guards& a = request.guards;
    const kiln::v1::Guards& b = stored.guards();
    std::string line;
    for (int i = 0; line.empty() && i < std::min(a.inputs_size(), b.inputs_size()); ++i) {
      line = GuardDifference(i, a.inputs(i), b.inputs(i));
    }
    if (line.empty() && a.inputs_size() != b.inputs_size()) {
      line = absl::StrCat("guard: ", a.inputs_size(), " inputs here, ", b.inputs_size(), " stored");
    }
    differences.push_back(line.empty() ? "guard: the relations between symbols differ" : line);
  }
  if (here.options() != there.options()) {
    differences.push_back(request.target != stored.target()
                              ? absl::StrCat("options: target ",
                                             kiln::v1::Target_Name(request.target), " here, ",
                                             kiln::v1::Target_Name(stored.target()), " stored")
                              : "options: the salt differs");
  }
  if (here.toolchain() != there.toolchain()) {
    const kiln::v1::Toolchain& a = request.toolchain;
    const kiln::v1::Toolchain& b = stored.toolchain();
    std::string line = "toolchain: ";
    if (a.compiler_version() != b.compiler_version()) {
      absl::StrAppend(&line, "compiler '", a.compiler_version(), "' here, '", b.compiler_version(),
                      "' stored");
    } else if (a.cpu() != b.cpu() || CpuFeatures(a) != CpuFeatures(b)) {
      absl::StrAppend(&line, "target CPU ", a.cpu(), " here, ", b.cpu(), " stored");
    } else {
      absl::StrAppend(&line, "the compiler's build or flags differ");
    }
    differences.push_back(line);
  }
  if (here.codegen_version() != there.codegen_version()) {
    differences.push_back("codegen version: this kilnd's code generator is another version");
  }
  if (here.format_version() != there.format_version()) {
    differences.push_back("key format: another version");
  }
  return differences;
}

kiln::v1::WhyResponse::Request Explain(const KeyedRequestSummary& request,
                                       const std::vector<kiln::v1::ArtifactMetadata>& entries,
                                       int limit) {
  kiln::v1::WhyResponse::Request explained;
  explained.set_unix_ms(absl::ToUnixMillis(request.when));
  explained.set_key(request.key);
  explained.set_graph_name(request.graph_name);
  struct Candidate {
    const kiln::v1::ArtifactMetadata* entry;
    std::vector<std::string> differences;
  };
  std::vector<Candidate> candidates;
  for (const kiln::v1::ArtifactMetadata& entry : entries) {
    if (entry.key() == request.key) {
      explained.set_stored(true);
      continue;
    }
    candidates.push_back({&entry, KeyDifferences(request, entry)});
  }
  auto rank = [&](const Candidate& c) {
    return std::make_tuple(c.differences.size(), c.entry->graph_name() != request.graph_name,
                           -c.entry->created_unix_ms());
  };
  std::sort(candidates.begin(), candidates.end(),
            [&](const Candidate& a, const Candidate& b) { return rank(a) < rank(b); });
  for (int i = 0; i < std::min<int>(limit, candidates.size()); ++i) {
    kiln::v1::WhyResponse::Nearest* nearest = explained.add_nearest();
    nearest->set_key(candidates[i].entry->key());
    nearest->set_graph_name(candidates[i].entry->graph_name());
    for (const std::string& line : candidates[i].differences) nearest->add_differences(line);
  }
  return explained;
}

}  // namespace kiln
