// Which symbols of a warmup plan entry a call may pad to a larger static
// bucket (docs/WARMUP.md), proved by kilnd for its clients
// (ProvePadding, proto/service.proto): the graph is prepared and each
// symbol the entry marks paddable goes through codegen/symbol_independence.h.
#ifndef KILN_DAEMON_PADDING_PROOF_H_
#define KILN_DAEMON_PADDING_PROOF_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/service.pb.h"

namespace kiln {

// The dims carrying each symbol `request.entry` marks paddable, in the
// entry's order. InvalidArgument when the graph has more than
// `max_graph_nodes` nodes (kilnd's budget, as for a compile), the entry is
// not served static, or a symbol names no dim of the graph's inputs;
// FailedPrecondition naming the node when the graph mixes positions along
// a symbol, or the input that holds it with another factor; the graph's
// own errors as PrepareGraph gives them.
absl::StatusOr<kiln::v1::PaddingResponse> ProvePadding(const kiln::v1::PaddingRequest& request,
                                                       int64_t max_graph_nodes);

}  // namespace kiln

#endif  // KILN_DAEMON_PADDING_PROOF_H_
