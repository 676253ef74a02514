#include "client/warmup_suggest.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// Each symbol of the graph's inputs, mapped to the smallest symbol the
// graph's equalities join it to (itself when there is none).
std::map<std::string, std::string> Representatives(const kiln::v1::Graph& graph) {
  std::map<std::string, std::string> representative;
  for (const kiln::v1::Input& input : graph.inputs()) {
    for (const kiln::v1::Dim& dim : input.type().sizes()) {
      if (dim.kind_case() == kiln::v1::Dim::kSymbol) representative[dim.symbol()] = dim.symbol();
    }
  }
  // Representatives only decrease, so this stops, with both sides of every
  // equality holding the smallest name of their group.
  for (bool changed = true; changed;) {
    changed = false;
    for (const kiln::v1::SymbolRelation& relation : graph.relations()) {
      if (!relation.has_equal()) continue;
      const auto lhs = representative.find(relation.equal().lhs());
      const auto rhs = representative.find(relation.equal().rhs());
      if (lhs == representative.end() || rhs == representative.end()) continue;
      if (lhs->second == rhs->second) continue;
      lhs->second = rhs->second = std::min(lhs->second, rhs->second);
      changed = true;
    }
  }
  return representative;
}

// The graph's input dims, flattened in input order as a histogram row is,
// and for each symbolic one the column (sorted symbol) it gives a value to.
struct RowLayout {
  std::vector<const kiln::v1::Dim*> dims;
  std::vector<int> columns;  // -1 for a constant dim
  std::vector<std::string> symbols;
};

RowLayout LayoutOf(const kiln::v1::Graph& graph) {
  RowLayout layout;
  const std::map<std::string, std::string> representative = Representatives(graph);
  std::map<std::string, int> column;
  for (const auto& [symbol, chosen] : representative) {
    if (symbol == chosen) {
      column[symbol] = layout.symbols.size();
      layout.symbols.push_back(symbol);
    }
  }
  for (const kiln::v1::Input& input : graph.inputs()) {
    for (const kiln::v1::Dim& dim : input.type().sizes()) {
      layout.dims.push_back(&dim);
      layout.columns.push_back(dim.kind_case() == kiln::v1::Dim::kSymbol
                                   ? column.at(representative.at(dim.symbol()))
                                   : -1);
    }
  }
  return layout;
}

// The symbols' values (by column) at a row's sizes; nullopt when the sizes
// do not fit the graph.
std::optional<std::vector<int64_t>> SymbolValuesOf(const RowLayout& layout,
                                                   const kiln::v1::TrafficHistogram::Row& row) {
  if (row.sizes_size() != static_cast<int>(layout.dims.size())) return std::nullopt;
  std::vector<int64_t> values(layout.symbols.size(), 0);  // 0: not seen yet
  for (int i = 0; i < row.sizes_size(); ++i) {
    const int64_t size = row.sizes(i);
    if (layout.columns[i] < 0) {
      if (size != layout.dims[i]->constant()) return std::nullopt;
      continue;
    }
    const int64_t multiplier = std::max<int64_t>(layout.dims[i]->multiplier(), 1);
    if (size < multiplier || size % multiplier != 0) return std::nullopt;
    int64_t& value = values[layout.columns[i]];
    if (value != 0 && value != size / multiplier) return std::nullopt;
    value = size / multiplier;
  }
  return values;
}

// The symbols' values (by column) of some calls, and whether the chosen
// sizes hold them yet.
struct Tuple {
  std::vector<int64_t> values;
  int64_t calls = 0;
  bool covered = false;
};

// Whether `sizes`, grown by `extra` values when given, hold `values`.
bool Holds(const std::vector<std::set<int64_t>>& sizes, const std::vector<int64_t>& values,
           const std::vector<int64_t>* extra) {
  for (size_t i = 0; i < values.size(); ++i) {
    if ((extra == nullptr || values[i] != (*extra)[i]) && sizes[i].count(values[i]) == 0) {
      return false;
    }
  }
  return true;
}

// One greedy step: the size sets grown to hold tuples[tuple].
struct Step {
  size_t tuple = 0;
  int64_t added_buckets = 0;
  int64_t gained_calls = 0;
};

// Whether `a` is a better step than `b` when `missing` calls are still
// needed; on a tie the earlier step (the smaller tuple) stays.
bool Better(const Step& a, const Step& b, int64_t missing) {
  const bool a_finishes = a.gained_calls >= missing, b_finishes = b.gained_calls >= missing;
  if (a_finishes != b_finishes) return a_finishes;
  if (a_finishes) {
    if (a.added_buckets != b.added_buckets) return a.added_buckets < b.added_buckets;
    return a.gained_calls > b.gained_calls;
  }
  const double a_rate = static_cast<double>(a.gained_calls) / a.added_buckets;
  const double b_rate = static_cast<double>(b.gained_calls) / b.added_buckets;
  if (a_rate != b_rate) return a_rate > b_rate;
  return a.added_buckets < b.added_buckets;
}

}  // namespace

absl::StatusOr<WarmupSuggestion> SuggestWarmupPlan(const kiln::v1::Graph& graph,
                                                   const kiln::v1::TrafficHistogram& traffic,
                                                   double share, int max_buckets) {
  const RowLayout layout = LayoutOf(graph);
  if (layout.symbols.empty()) {
    return absl::InvalidArgumentError(
        "the graph's inputs have no symbolic dims: trace it with a dynamic dim");
  }
  if (!(share > 0 && share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("share ", share, " is outside (0, 1]"));
  }
  if (max_buckets < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_buckets ", max_buckets, " is below 1"));
  }

  if (traffic.other_calls() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the traffic histogram has ", traffic.other_calls(), " other calls"));
  }
  WarmupSuggestion suggestion;
  suggestion.total_calls = traffic.other_calls();
  std::map<std::vector<int64_t>, int64_t> calls_at;  // sorted: ties go to smaller sizes
  for (int i = 0; i < traffic.rows_size(); ++i) {
    const kiln::v1::TrafficHistogram::Row& row = traffic.rows(i);
    if (row.calls() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("traffic row ", i, " has ", row.calls(), " calls"));
    }
    suggestion.total_calls += row.calls();
    const std::optional<std::vector<int64_t>> values = SymbolValuesOf(layout, row);
    if (!values) {
      suggestion.unmatched_calls += row.calls();
    } else if (row.calls() > 0) {
      calls_at[*values] += row.calls();
    }
  }
  if (suggestion.total_calls <= 0) {
    return absl::InvalidArgumentError("the traffic histogram has no calls");
  }
  if (calls_at.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "none of the traffic histogram's ", suggestion.total_calls,
        " calls fit the graph's inputs (", suggestion.unmatched_calls, " at other ranks or sizes, ",
        traffic.other_calls(), " past the histogram's rows)"));
  }

  // The calls to cover; the small margin keeps share * total from rounding
  // up past a whole number of calls (0.3 * 10 is 3.0000000000000004).
  const int64_t needed =
      static_cast<int64_t>(std::ceil(share * suggestion.total_calls * (1 - 1e-12)));
  std::vector<Tuple> tuples;
  for (const auto& [values, calls] : calls_at) tuples.push_back({values, calls});
  std::vector<std::set<int64_t>> sizes(layout.symbols.size());
  while (suggestion.covered_calls < needed) {
    std::optional<Step> best;
    for (size_t t = 0; t < tuples.size(); ++t) {
      if (tuples[t].covered) continue;
      const std::vector<int64_t>& grown = tuples[t].values;
      int64_t buckets = 1;
      for (size_t i = 0; i < grown.size() && buckets <= max_buckets; ++i) {
        buckets *= static_cast<int64_t>(sizes[i].size() + (sizes[i].count(grown[i]) ? 0 : 1));
      }
      if (buckets > max_buckets) continue;
      Step step{t, buckets - suggestion.buckets, 0};
      for (const Tuple& other : tuples) {
        if (!other.covered && Holds(sizes, other.values, &grown)) step.gained_calls += other.calls;
      }
      if (!best || Better(step, *best, needed - suggestion.covered_calls)) best = step;
    }
    if (!best) break;  // every step left needs more than max_buckets
    for (size_t i = 0; i < sizes.size(); ++i) sizes[i].insert(tuples[best->tuple].values[i]);
    for (Tuple& other : tuples) other.covered = Holds(sizes, other.values, nullptr);
    suggestion.buckets += best->added_buckets;
    suggestion.covered_calls += best->gained_calls;
  }

  suggestion.entry.set_serve(kiln::v1::WarmupGraph::SERVE_STATIC);
  for (size_t i = 0; i < layout.symbols.size(); ++i) {
    kiln::v1::SymbolSizes* symbol = suggestion.entry.add_symbols();
    symbol->set_symbol(layout.symbols[i]);
    for (int64_t size : sizes[i]) symbol->add_sizes(size);
  }
  return suggestion;
}

}  // namespace kiln
