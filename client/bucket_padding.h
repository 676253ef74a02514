// Padding a call up to a warmed bucket (docs/WARMUP.md): for symbols a plan
// marks paddable, a call whose size lies between buckets runs the next
// larger bucket's static artifact on zero-padded copies of its inputs, and
// its outputs are the leading part of the bucket's. Correct only where
// positions along the symbol's dims never mix — kilnd proves that from the
// graph and finds the dims (ProvePadding, daemon/padding_proof.h); this
// file does the arithmetic and the copies. Inputs must be contiguous.
#ifndef KILN_CLIENT_BUCKET_PADDING_H_
#define KILN_CLIENT_BUCKET_PADDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/service.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

struct PaddableSymbol {
  std::string name;
  // Per graph input and output, the dim carrying the symbol (its size is
  // the symbol, or the symbol times inner factors), or -1.
  std::vector<int> input_dims;
  std::vector<int> output_dims;
  std::vector<int64_t> buckets;  // the warmed sizes, ascending
};

// The symbols of `proof` (kilnd's answer to ProvePadding for a warmup
// plan entry), with their bucket sizes from `entry`. InvalidArgument
// naming the symbol when `entry` does not list one or its sizes do not
// expand (client/warmup_plan.h ExpandSizes).
absl::StatusOr<std::vector<PaddableSymbol>> PaddableSymbols(const kiln::v1::PaddingResponse& proof,
                                                            const kiln::v1::WarmupGraph& entry);

struct PaddedShape {
  // Per input, the bucket's sizes.
  std::vector<std::vector<int64_t>> input_sizes;
  // Per padded symbol (as in the span given): the call's value and the
  // bucket's (equal when that symbol needs no padding).
  std::vector<int64_t> values;
  std::vector<int64_t> bucket_values;
  // Per padded symbol, its output dims (PaddableSymbol::output_dims).
  std::vector<std::vector<int>> output_dims;
  size_t num_outputs = 0;  // the bucket's (filled in by the caller)
};

// Whether `view` is laid out row-major without gaps (size-1 dims aside).
bool IsContiguous(const TensorView& view);

// The shape `inputs` pad up to, or nullopt when padding does not apply: no
// symbol needs it, a value is past the largest bucket, inputs disagree on a
// symbol's value, or an input is not contiguous.
std::optional<PaddedShape> PadShape(absl::Span<const PaddableSymbol> symbols,
                                    absl::Span<const TensorView> inputs);

// The sizes of output `k` for the call, given its sizes in the bucket: each
// dim carrying a padded symbol shrinks by the call's value over the
// bucket's.
std::vector<int64_t> UnpaddedOutputSizes(const PaddedShape& shape, int k,
                                         std::vector<int64_t> bucket_sizes);

// Copies the leading region that both contiguous tensors share (per dim the
// smaller size) from `from` to `to`; the rest of `to` is left as it is.
void CopyLeadingRegion(const TensorView& from, const TensorView& to);

}  // namespace kiln

#endif  // KILN_CLIENT_BUCKET_PADDING_H_
