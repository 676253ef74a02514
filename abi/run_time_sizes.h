// A call's symbol values against an artifact's RunTimeSizes
// (ArtifactMetadata.run_time_sizes, proto/artifact.proto): the one check
// that every tensor of a symbolic artifact stays within the limits
// (codegen/limits.h) at the sizes a call binds. kilnd computes the
// artifact's safe symbol value with it; a client runs it before kiln_run,
// on metadata alone.
#ifndef KILN_ABI_RUN_TIME_SIZES_H_
#define KILN_ABI_RUN_TIME_SIZES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/artifact.pb.h"

namespace kiln {

// OK when every tensor of `sizes`, at `symbol_values` (one per
// sizes.symbols), has each dim and, from each dim on, its element count
// within max_tensor_elements and its bytes within max_tensor_bytes,
// computed without overflow. InvalidArgument naming the tensor, the dim,
// the symbols' values and the limit otherwise, or for a wrong number of
// values or a negative one.
absl::Status CheckSymbolValues(const kiln::v1::RunTimeSizes& sizes,
                               absl::Span<const int64_t> symbol_values);

}  // namespace kiln

#endif  // KILN_ABI_RUN_TIME_SIZES_H_
