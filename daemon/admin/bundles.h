// kiln export / import: entries with their blobs in a bundle file
// (cache/bundle.h), so that a machine can be warmed from another's cache.
// kilnd opens bundles as its user: paths must be absolute.
#ifndef KILN_DAEMON_ADMIN_BUNDLES_H_
#define KILN_DAEMON_ADMIN_BUNDLES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/local_tier.h"
#include "cache/request_key.h"
#include "proto/service.pb.h"

namespace kiln::admin {

// Writes the entries the request names (every entry when it names none)
// with their blobs to request.path. Keys may be unique prefixes of at least
// 6 hex digits; requests are keyed as a compile keys them, and one that is
// not stored is NotFound naming it. Reads one blob at a time.
absl::StatusOr<kiln::v1::ExportResponse> Export(LocalTier& tier, const ToolchainDigests& toolchains,
                                                const kiln::v1::ExportRequest& request);

struct ImportOptions {
  // The largest blob, and the most metadata of all entries, a bundle may
  // hold (ResourceExhausted past them: kilnd --max_artifact_bytes,
  // --max_bundle_metadata_bytes).
  int64_t max_blob_bytes = 0;
  int64_t max_metadata_bytes = 0;
  absl::Time now;  // recorded as the entries' last use
  // Tests only: the import takes at least this long before its entries are
  // stored.
  absl::Duration testonly_delay = absl::ZeroDuration();
};

// Stores every entry of the bundle at request.path in one write, after
// checking the whole file: DataLoss or InvalidArgument naming the file and
// entry, ResourceExhausted for a length past the limits, and
// FailedPrecondition listing the entries that can never hit here
// (StaleReason) unless request.force — and then no entry is stored. Reads
// the file twice (checks, then blobs one at a time), holding one blob and
// every entry's metadata.
absl::StatusOr<kiln::v1::ImportResponse> Import(LocalTier& tier, const ToolchainDigests& toolchains,
                                                const ImportOptions& options,
                                                const kiln::v1::ImportRequest& request);

}  // namespace kiln::admin

#endif  // KILN_DAEMON_ADMIN_BUNDLES_H_
