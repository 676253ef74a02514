#include "client/warmup_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "proto/specialize.h"

namespace kiln {
namespace {

// Far above any real bucket list; bounds a plan's rules.
constexpr int64_t kMaxSizesPerSymbol = 4096;

// The symbols the graph's input sizes name.
std::set<std::string> InputSymbols(const kiln::v1::Graph& graph) {
  std::set<std::string> symbols;
  for (const kiln::v1::Input& input : graph.inputs()) {
    for (const kiln::v1::Dim& dim : input.type().sizes()) {
      if (dim.kind_case() == kiln::v1::Dim::kSymbol) symbols.insert(dim.symbol());
    }
  }
  return symbols;
}

std::string BucketText(const std::map<std::string, int64_t>& values) {
  return absl::StrJoin(values, " ", absl::PairFormatter("="));
}

// Whether `values` break a relation of `graph`: equalities always (the
// sizes would contradict each other), ranges and divisibility when the
// symbolic artifact is to serve them. An empty string when they do not.
std::string BrokenRelation(const kiln::v1::Graph& graph,
                           const std::map<std::string, int64_t>& values, bool symbolic) {
  auto value = [&](const std::string& symbol) -> std::optional<int64_t> {
    const auto it = values.find(symbol);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
  for (const kiln::v1::SymbolRelation& relation : graph.relations()) {
    if (relation.has_equal()) {
      const auto lhs = value(relation.equal().lhs()), rhs = value(relation.equal().rhs());
      if (lhs && rhs && *lhs != *rhs) {
        return absl::StrCat(relation.equal().lhs(), " == ", relation.equal().rhs());
      }
    } else if (symbolic && relation.has_range()) {
      const auto& range = relation.range();
      const auto v = value(range.symbol());
      if (v && (*v < range.min() || (range.max() != 0 && *v > range.max()))) {
        return absl::StrCat(range.min(), " <= ", range.symbol(),
                            range.max() != 0 ? absl::StrCat(" <= ", range.max()) : "");
      }
    } else if (symbolic && relation.has_divisible()) {
      const auto& divisible = relation.divisible();
      const auto v = value(divisible.symbol());
      if (v && divisible.divisor() > 0 && *v % divisible.divisor() != 0) {
        return absl::StrCat(divisible.symbol(), " % ", divisible.divisor(), " == 0");
      }
    }
  }
  return "";
}

// Every combination of the symbols' sizes, in plan order.
std::vector<std::map<std::string, int64_t>> CrossProduct(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& sizes) {
  std::vector<std::map<std::string, int64_t>> buckets = {{}};
  for (const auto& [symbol, values] : sizes) {
    std::vector<std::map<std::string, int64_t>> grown;
    for (const auto& bucket : buckets) {
      for (int64_t value : values) {
        grown.push_back(bucket);
        grown.back()[symbol] = value;
      }
    }
    buckets = std::move(grown);
  }
  return buckets;
}

kiln::v1::CompileRequest WarmupRequest(kiln::v1::Graph graph, const kiln::v1::WarmupGraph& entry) {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = std::move(graph);
  request.mutable_options()->set_target(entry.target());
  request.set_priority(kiln::v1::CompileRequest::PRIORITY_WARMUP);
  return request;
}

absl::Status ExpandEntry(const kiln::v1::WarmupGraph& entry, const std::string& label,
                         const std::string& plan_dir, std::vector<WarmupCompile>& compiles) {
  if (entry.graph().empty()) return absl::InvalidArgumentError(label + ": names no graph file");
  absl::StatusOr<kiln::v1::Graph> graph = ReadGraphFile(WarmupGraphPath(entry, plan_dir));
  if (!graph.ok()) {
    return absl::Status(graph.status().code() == absl::StatusCode::kInvalidArgument
                            ? absl::StatusCode::kInvalidArgument
                            : absl::StatusCode::kNotFound,
                        absl::StrCat(label, ": ", graph.status().message()));
  }
  ASSIGN_OR_RETURN(std::vector<WarmupCompile> expanded, ExpandWarmupGraph(*graph, entry, label));
  for (WarmupCompile& compile : expanded) compiles.push_back(std::move(compile));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<WarmupCompile>> ExpandWarmupGraph(const kiln::v1::Graph& graph,
                                                             const kiln::v1::WarmupGraph& entry,
                                                             const std::string& label) {
  std::vector<WarmupCompile> compiles;
  const std::set<std::string> symbols = InputSymbols(graph);
  std::vector<std::pair<std::string, std::vector<int64_t>>> sizes;
  for (const kiln::v1::SymbolSizes& symbol : entry.symbols()) {
    const std::string where = absl::StrCat(label, " symbol '", symbol.symbol(), "'");
    if (symbols.count(symbol.symbol()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": not a symbolic dim of the graph's inputs (its symbols: ",
          symbols.empty() ? "none; trace it with a dynamic dim" : absl::StrJoin(symbols, ", "),
          ")"));
    }
    for (const auto& [seen, unused] : sizes) {
      if (seen == symbol.symbol()) return absl::InvalidArgumentError(where + ": listed twice");
    }
    absl::StatusOr<std::vector<int64_t>> values = ExpandSizes(symbol);
    if (!values.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", values.status().message()));
    sizes.emplace_back(symbol.symbol(), *std::move(values));
  }
  if (sizes.empty() && !symbols.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": lists no symbol sizes"));
  }
  if (symbols.empty()) {  // a static graph: one bucket, the graph itself
    compiles.push_back(WarmupCompile{label, {{}}, WarmupRequest(graph, entry)});
    return compiles;
  }

  const bool symbolic_serves = entry.serve() == kiln::v1::WarmupGraph::SERVE_SYMBOLIC;
  WarmupCompile symbolic{absl::StrCat(label, " symbolic"),
                         {},
                         WarmupRequest(graph, entry),
                         /*symbolic=*/true};
  for (const std::map<std::string, int64_t>& bucket : CrossProduct(sizes)) {
    // Symbols are >= 2: a size of 1 is its own specialization, made as a
    // serving process makes it (client/specialization.h, step 1).
    std::map<std::string, int64_t> small;
    for (const auto& [symbol, value] : bucket) {
      if (value < 2) small[symbol] = value;
    }
    const bool served_symbolically = symbolic_serves && small.empty();
    const std::string broken = BrokenRelation(graph, bucket, served_symbolically);
    if (!broken.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, " bucket ", BucketText(bucket), ": breaks the graph's relation ",
                       broken, served_symbolically ? "; make it a static bucket" : ""));
    }
    if (served_symbolically) {
      symbolic.buckets.push_back(bucket);
      continue;
    }
    const std::map<std::string, int64_t>& fixed = symbolic_serves ? small : bucket;
    compiles.push_back(WarmupCompile{absl::StrCat(label, " ", BucketText(bucket)),
                                     {bucket},
                                     WarmupRequest(Specialize(graph, fixed), entry)});
  }
  if (!symbolic.buckets.empty()) compiles.push_back(std::move(symbolic));
  return compiles;
}

std::vector<std::vector<int64_t>> BucketInputSizes(const kiln::v1::Graph& graph,
                                                   const std::map<std::string, int64_t>& bucket) {
  // A symbol the bucket does not list: the value of one stated equal to
  // it, else the smallest its relations allow.
  auto value_of = [&](const std::string& symbol) {
    if (const auto it = bucket.find(symbol); it != bucket.end()) return it->second;
    int64_t least = 2, divisor = 1;
    for (const kiln::v1::SymbolRelation& relation : graph.relations()) {
      if (relation.has_equal()) {
        const std::string& lhs = relation.equal().lhs();
        const std::string& rhs = relation.equal().rhs();
        const auto it = bucket.find(lhs == symbol ? rhs : rhs == symbol ? lhs : symbol);
        if (it != bucket.end()) return it->second;
      } else if (relation.has_range() && relation.range().symbol() == symbol) {
        least = std::max(least, relation.range().min());
      } else if (relation.has_divisible() && relation.divisible().symbol() == symbol) {
        divisor = std::lcm(divisor, std::max<int64_t>(relation.divisible().divisor(), 1));
      }
    }
    return (least + divisor - 1) / divisor * divisor;
  };
  std::vector<std::vector<int64_t>> sizes;
  for (const kiln::v1::Input& input : graph.inputs()) {
    std::vector<int64_t>& dims = sizes.emplace_back();
    for (const kiln::v1::Dim& dim : input.type().sizes()) {
      dims.push_back(dim.kind_case() == kiln::v1::Dim::kSymbol
                         ? value_of(dim.symbol()) * std::max<int64_t>(dim.multiplier(), 1)
                         : dim.constant());
    }
  }
  return sizes;
}

std::string WarmupGraphPath(const kiln::v1::WarmupGraph& entry, const std::string& plan_dir) {
  std::string path = !entry.graph().empty() && entry.graph()[0] == '/'
                         ? entry.graph()
                         : absl::StrCat(plan_dir, "/", entry.graph());
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) path += "/graph.json";
  return path;
}

absl::StatusOr<kiln::v1::WarmupPlan> ReadWarmupPlan(const std::string& path) {
  kiln::v1::WarmupPlan plan;
  RETURN_IF_ERROR(ReadJsonFile(path, "a Kiln warmup plan", plan));
  return plan;
}

absl::StatusOr<std::vector<int64_t>> ExpandSizes(const kiln::v1::SymbolSizes& sizes) {
  std::set<int64_t> values(sizes.sizes().begin(), sizes.sizes().end());
  if (sizes.has_powers_of_two()) {
    const auto& rule = sizes.powers_of_two();
    if (rule.from() < 1 || rule.to() < rule.from()) {
      return absl::InvalidArgumentError(absl::StrCat("powers_of_two from ", rule.from(), " to ",
                                                     rule.to(),
                                                     " is empty (needs 1 <= from <= to)"));
    }
    for (int64_t value = 1; value <= rule.to(); value *= 2) {
      if (value >= rule.from()) values.insert(value);
      if (value > rule.to() / 2) break;
    }
  }
  if (sizes.has_multiples()) {
    const auto& rule = sizes.multiples();
    if (rule.of() < 1 || rule.up_to() < rule.of()) {
      return absl::InvalidArgumentError(absl::StrCat("multiples of ", rule.of(), " up to ",
                                                     rule.up_to(),
                                                     " is empty (needs 1 <= of <= up_to)"));
    }
    if (rule.up_to() / rule.of() > kMaxSizesPerSymbol) {
      return absl::InvalidArgumentError(absl::StrCat("multiples of ", rule.of(), " up to ",
                                                     rule.up_to(), " is more than ",
                                                     kMaxSizesPerSymbol, " sizes"));
    }
    for (int64_t value = rule.of(); value <= rule.up_to(); value += rule.of()) values.insert(value);
  }
  if (values.empty()) {
    return absl::InvalidArgumentError("no sizes: give `sizes`, `powers_of_two` or `multiples`");
  }
  if (*values.begin() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("size ", *values.begin(), " is below 1"));
  }
  if (values.size() > kMaxSizesPerSymbol) {
    return absl::InvalidArgumentError(
        absl::StrCat(values.size(), " sizes; at most ", kMaxSizesPerSymbol));
  }
  return std::vector<int64_t>(values.begin(), values.end());
}

absl::StatusOr<std::vector<WarmupCompile>> ExpandWarmupPlan(const kiln::v1::WarmupPlan& plan,
                                                            const std::string& plan_dir) {
  if (plan.graphs().empty()) return absl::InvalidArgumentError("the plan lists no graphs");
  std::vector<WarmupCompile> compiles;
  for (int i = 0; i < plan.graphs_size(); ++i) {
    const kiln::v1::WarmupGraph& entry = plan.graphs(i);
    RETURN_IF_ERROR(
        ExpandEntry(entry, absl::StrCat("graphs[", i, "] ", entry.graph()), plan_dir, compiles));
  }
  return compiles;
}

}  // namespace kiln
