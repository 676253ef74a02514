// The respecialization policy of CompiledGraph: which graph to compile when
// the inputs pass no loaded entry's guards.
//
//   1. A symbolic graph run with a symbol at 0 or 1 (symbolic dims are >= 2,
//      as in PyTorch): the graph with those symbols made constant
//      (SmallSizeSpecialization, codegen/retype.h Specialize).
//   2. Otherwise, within the specialization limit
//      (CheckSpecializationLimit), the graph re-typed for the new sizes (PlanRespecialization, then
//      codegen/retype.h Retype on each candidate, best first):
//        a. every changed dim symbolic — one symbol per (old size, new size)
//           pair, so inputs that agreed still agree and a square input grown
//           in one dim keeps its dims apart — one artifact for every later
//           size;
//        b. when (a) cannot be lowered and it made more than one symbol,
//           one new symbol at a time with the other changed dims exact;
//        c. the exact sizes.
//      A dim becomes symbolic only when both its old and new size are >= 2.
//
// Pure functions of the graph and the input sizes: no daemon, no state.
// The caller compiles, loads and remembers sizes no candidate served.
#ifndef KILN_CLIENT_SPECIALIZATION_H_
#define KILN_CLIENT_SPECIALIZATION_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/graph.pb.h"

namespace kiln {

// The most entries a CompiledGraph holds besides warmed buckets, by default
// (torch.compile's cache size limit is 8 too).
inline constexpr size_t kDefaultSpecializationLimit = 8;

// Step 1: `graph` with every symbol that `inputs` give a value below 2 made
// that constant; nullopt when no symbol is below 2.
std::optional<kiln::v1::Graph> SmallSizeSpecialization(const kiln::v1::Graph& graph,
                                                       absl::Span<const TensorView> inputs);

// OK while `entries` is below `limit`; otherwise `miss` (why the inputs fit
// no entry, naming the input and the dim) with the limit and what to do
// about it, as FailedPrecondition.
absl::Status CheckSpecializationLimit(size_t entries, size_t limit, const absl::Status& miss);

// Per input, its dims: the sizes Retype takes.
using InputDims = std::vector<std::vector<kiln::v1::Dim>>;

struct Respecialization {
  // The inputs' exact sizes as text ("64,128,;4,;"): the key under which a
  // caller remembers sizes that no candidate served.
  std::string sizes_key;
  // Step 2's candidates, best first; the last is always the exact sizes.
  std::vector<InputDims> candidates;
};

// Step 2 for `inputs`. InvalidArgument when their number differs from the
// graph's; FailedPrecondition when an input's rank or dtype differs (no
// specialization helps).
absl::StatusOr<Respecialization> PlanRespecialization(const kiln::v1::Graph& graph,
                                                      absl::Span<const TensorView> inputs);

}  // namespace kiln

#endif  // KILN_CLIENT_SPECIALIZATION_H_
