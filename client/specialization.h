// The respecialization policy of CompiledGraph: which graph to compile when
// the inputs pass no loaded entry's guards.
//
//   1. A symbolic graph run with a symbol at 0 or 1 (symbolic dims are >= 2,
//      as in PyTorch): the graph with those symbols made constant
//      (SmallSizeSpecialization, proto/specialize.h Specialize).
//   2. Otherwise, within the specialization limit
//      (CheckSpecializationLimit), the graph re-typed for the new sizes
//      (PlanRespecialization's candidates, best first, each the graph and
//      its inputs' new layouts: kilnd re-types it, CompileRequest.input_layouts):
//        a. every changed dim symbolic — one symbol per (old size, new size)
//           pair, so inputs that agreed still agree and a square input grown
//           in one dim keeps its dims apart — one artifact for every later
//           size;
//        b. when (a) cannot be lowered and it made more than one symbol,
//           one new symbol at a time with the other changed dims exact;
//        c. the exact sizes.
//      A dim becomes symbolic only when both its old and new size are >= 2.
//      Each candidate lays its inputs out as the call's are (StridesAsSeen):
//      an input that passes its declared strides keeps them, a contiguous
//      one is contiguous, and a transposed, sliced or expanded (stride 0)
//      one declares its strides, so a stride miss compiles for the strides
//      it saw, once. A symbolic graph called with other strides at sizes it
//      takes gets candidate (a) too: its symbols, the new strides.
//
// Pure functions of the graph and the inputs' sizes and strides: no
// daemon, no state.
// The caller compiles, loads and remembers sizes no candidate served.
// CompiledGraph runs them when no loaded entry's guards pass;
// RequestsForSizes runs the whole policy on sizes alone, for
// `kiln why GRAPH.json --inputs SIZES`.
#ifndef KILN_CLIENT_SPECIALIZATION_H_
#define KILN_CLIENT_SPECIALIZATION_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/graph.pb.h"
#include "proto/service.pb.h"
#include "proto/specialize.h"

namespace kiln {

// The most entries a CompiledGraph holds besides warmed buckets, by default
// (torch.compile's cache size limit is 8 too).
inline constexpr size_t kDefaultSpecializationLimit = 8;

// Per input, its sizes and strides: what kilnd re-types a graph for.
using InputLayouts = std::vector<kiln::v1::InputLayout>;

// A graph to compile for a specialization, and, when its inputs need other
// types than it declares, their layouts (kilnd re-types it for them).
struct SpecializedGraph {
  kiln::v1::Graph graph;
  InputLayouts layouts;  // none: the graph as it is
};

// Step 1: `graph` with every symbol that `inputs` give a value below 2 made
// that constant, its inputs laid out as `inputs` are; nullopt when no
// symbol is below 2.
std::optional<SpecializedGraph> SmallSizeSpecialization(const kiln::v1::Graph& graph,
                                                        absl::Span<const TensorView> inputs);

// OK while `entries` is below `limit`; otherwise `miss` (why the inputs fit
// no entry, naming the input and the dim) with the limit and what to do
// about it, as FailedPrecondition.
absl::Status CheckSpecializationLimit(size_t entries, size_t limit, const absl::Status& miss);

struct Respecialization {
  // The inputs' exact sizes as text ("64,128,;4,;"), with the strides of
  // those that are not contiguous ("5,3,@1,5,;"): the key under which a
  // caller remembers inputs that no candidate served.
  std::string sizes_key;
  // Step 2's candidates, best first, each the graph's input layouts; the
  // last is always the exact sizes.
  std::vector<InputLayouts> candidates;
};

// The strides a graph input of `sizes` (the candidate's dims: constants or
// symbols, one per dim of `view`) declares to take `view` as laid out:
// none when `view` is contiguous; else, walking its dims from the smallest
// stride, each stride that is the product of the dims inside it (a
// transpose, the rows of a slice) as that product of `sizes` (so [1, S]
// for a transposed [S, 5] input), any other (a slice's row step, the 0 of
// an expanded dim) as the constant. A dim of size 1, whose stride the
// guards never check, takes the stride a contiguous layout would give it
// next to the dim inside: calls that differ only there declare the same.
std::vector<kiln::v1::Dim> StridesAsSeen(const std::vector<kiln::v1::Dim>& sizes,
                                         const TensorView& view);

// Step 2 for `inputs`. InvalidArgument when their number differs from the
// graph's; FailedPrecondition when an input's rank or dtype differs (no
// specialization helps).
absl::StatusOr<Respecialization> PlanRespecialization(const kiln::v1::Graph& graph,
                                                      absl::Span<const TensorView> inputs);

// Step 1, else step 2, for `inputs`.
struct Specializations {
  // Step 1's graph; when set, the one candidate (no limit applies).
  std::optional<SpecializedGraph> small_size;
  // Step 2 when small_size is not set: PlanRespecialization's answer.
  absl::StatusOr<Respecialization> respecialization = absl::UnknownError("step 1 applies");
};
Specializations PlanSpecializations(const kiln::v1::Graph& graph,
                                    absl::Span<const TensorView> inputs);

// Whether `inputs` pass the guards of the input types of `graph` laid out
// as `layouts` (none: as it declares) — dtypes, sizes, strides; relations
// aside — or with `copyable`, would pass after copies into those layouts
// (GuardTable::CheckCopyable): a candidate that fails would compile an
// artifact the call cannot run. True when that cannot be told (more
// symbols than a GuardTable holds).
bool InputTypesTake(const kiln::v1::Graph& graph, const InputLayouts& layouts,
                    absl::Span<const TensorView> inputs, bool copyable = false);

// Whether `graph` as given takes inputs of `sizes` (its declared dtypes):
// every constant dim equal, every symbol bound to one value by all the dims
// naming it (proto/specialize.h SymbolValues: size / multiplier), at least
// `smallest_symbol` (2: what a CompiledGraph's entry for the graph checks;
// 0: the sizes step 1's static specializations take too), and within the
// graph's relations. FailedPrecondition naming the input and dim, or the
// relation; InvalidArgument for a wrong number of inputs or dims.
absl::Status CheckGraphTakesSizes(const kiln::v1::Graph& graph,
                                  const std::vector<std::vector<int64_t>>& sizes,
                                  int64_t smallest_symbol = 2);

// A graph the client would request for some input sizes, and why it is
// that one ("the graph as given", "changed dims symbolic (d64_32)", ...).
struct SizedRequest {
  SpecializedGraph request;
  std::string description;
};

// The graphs a CompiledGraph of `graph`, holding no other entry, requests
// for inputs of `sizes` (contiguous, the declared dtypes), in the order it
// tries them, taking the first that compiles: the graph itself when it
// takes them (CheckGraphTakesSizes); else step 1's graph; else step 2's
// candidates (kilnd refuses those it cannot re-type). InvalidArgument naming the input for a
// wrong number of inputs or dims, or a negative size; FailedPrecondition
// when no specialization can take them.
absl::StatusOr<std::vector<SizedRequest>> RequestsForSizes(
    const kiln::v1::Graph& graph, const std::vector<std::vector<int64_t>>& sizes);

// Input sizes for `graph` written as `kiln why --inputs` takes them: per
// input its dims joined by 'x', inputs separated by commas ("8x64,64x32";
// an empty item for a 0-d input), or symbol sizes ("B=8,S=16", expanded
// by client/warmup_plan.h BucketInputSizes: an unlisted symbol takes its
// least value). InvalidArgument naming the item that does not parse, a
// symbol the graph's inputs do not have, or a wrong number of inputs.
absl::StatusOr<std::vector<std::vector<int64_t>>> ParseInputSizes(const kiln::v1::Graph& graph,
                                                                  absl::string_view text);

// "8x64,64x32": sizes as ParseInputSizes reads them.
std::string InputSizesString(const std::vector<std::vector<int64_t>>& sizes);

}  // namespace kiln

#endif  // KILN_CLIENT_SPECIALIZATION_H_
