// A warmup plan entry suggested from observed traffic (`kiln warmup
// --suggest`): the static buckets that cover a share of a graph's calls.
//
// Each histogram row is mapped to one value per symbol through the graph's
// inputs; symbols the graph states equal are one symbol, listed under the
// smallest name (Specialize fixes the others). The entry is grown greedily:
// each step extends the symbols' size sets just enough to hold one more
// observed size tuple, choosing the step that reaches the share with the
// fewest added buckets if one does, else the one with the most newly covered
// calls per added bucket (the cross product grows), ties to smaller sizes.
// One symbol thus gets its most frequent sizes, and traffic concentrated on
// a few tuples gets the smallest cross product that holds them.
#ifndef KILN_CLIENT_WARMUP_SUGGEST_H_
#define KILN_CLIENT_WARMUP_SUGGEST_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

struct WarmupSuggestion {
  // Symbols with explicit size lists (sorted), serve SERVE_STATIC; `graph`
  // is left empty for the caller.
  kiln::v1::WarmupGraph entry;
  int64_t total_calls = 0;      // every call in the histogram, other_calls included
  int64_t covered_calls = 0;    // calls whose sizes are a bucket of `entry`
  int buckets = 0;              // size of the cross product
  int64_t unmatched_calls = 0;  // calls in rows whose sizes do not fit the graph
};

// The plan entry for `graph` whose buckets cover at least `share` of
// `traffic`'s calls with at most `max_buckets` buckets, or the best it finds
// within max_buckets when the share is out of reach (the caller says so, from
// covered_calls / total_calls). A row does not fit the graph when its rank
// differs from the inputs', a constant dim differs, a symbolic dim is below
// its multiplier or not a multiple of it, or one symbol gets two values.
// InvalidArgument: a graph with no symbolic input dims, share outside (0, 1],
// max_buckets < 1, negative calls (a row's or other_calls), a histogram with no calls, or
// one none of whose calls fit the graph.
absl::StatusOr<WarmupSuggestion> SuggestWarmupPlan(const kiln::v1::Graph& graph,
                                                   const kiln::v1::TrafficHistogram& traffic,
                                                   double share, int max_buckets);

}  // namespace kiln

#endif  // KILN_CLIENT_WARMUP_SUGGEST_H_
