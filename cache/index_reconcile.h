// Brings the local index (local_index.h) back in step with the store, for
// kilnd to run at start before it serves anything: the store may have lost
// entries the index still names (WAL replay stopped at damage, a damaged
// database moved aside), and clients must never load an artifact the store
// no longer vouches for.
#ifndef KILN_CACHE_INDEX_RECONCILE_H_
#define KILN_CACHE_INDEX_RECONCILE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "cache/local_index.h"
#include "cache/store.h"

namespace kiln {

struct ReconcileResult {
  int64_t checked = 0;        // index files read
  int64_t lost = 0;           // removed: the store has no such entry, or another blob for it
  int64_t damaged = 0;        // removed: the record could not be trusted
  int64_t stale_aliases = 0;  // removed: request aliases of keys not indexed, or untrusted
};

// Removes every index file whose record fails its checks or whose entry the
// store lacks (or holds with another digest), then every request alias
// whose key is no longer indexed; logs what it removed. Errors
// when the store cannot answer or a file cannot be removed — the caller
// must then not serve that index (kilnd removes the whole index directory).
absl::StatusOr<ReconcileResult> ReconcileLocalIndex(ArtifactStore& store, const LocalIndex& index);

}  // namespace kiln

#endif  // KILN_CACHE_INDEX_RECONCILE_H_
