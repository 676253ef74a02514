// Brings the local index (local_index.h) back in step with the store, for
// kilnd to run after a start: the store may have lost entries the index
// still names (WAL replay stopped at damage, a damaged database moved
// aside). kilnd serves meanwhile (ArtifactCache runs it in the background:
// at 100,000 entries it reads for seconds); a client that loads such an
// entry in that window still verifies the object's digest, and the entry's
// index file goes when its turn comes.
#ifndef KILN_CACHE_INDEX_RECONCILE_H_
#define KILN_CACHE_INDEX_RECONCILE_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/local_index.h"
#include "cache/store.h"

namespace kiln {

struct ReconcileResult {
  int64_t checked = 0;        // index files read
  int64_t lost = 0;           // removed: the store has no such entry, or another blob for it
  int64_t damaged = 0;        // removed: the record could not be trusted
  int64_t stale_aliases = 0;  // removed: request aliases of keys not indexed, or untrusted
};

struct ReconcileOptions {
  // Held exclusively around each record's check and removal, so that a
  // publish or an eviction running beside it never interleaves with one.
  absl::Mutex* per_record_lock = nullptr;
  // Asked between records; true stops the pass early (Cancelled).
  std::function<bool()> stop = [] { return false; };
};

// Removes every index file whose record fails its checks or whose entry the
// store lacks (or holds with another digest), then every request alias
// whose key is no longer indexed; logs what it removed. Errors
// when the store cannot answer or a file cannot be removed — the caller
// must then not serve that index (kilnd removes it: LocalIndex::RemoveAll).
absl::StatusOr<ReconcileResult> ReconcileLocalIndex(ArtifactStore& store, const LocalIndex& index,
                                                    const ReconcileOptions& options = {});

}  // namespace kiln

#endif  // KILN_CACHE_INDEX_RECONCILE_H_
