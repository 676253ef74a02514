// kiln::CompiledGraph: a graph that compiles itself on first use and then
// runs in-process.
//
// It holds a table of (guards -> kernel) entries. Run() finds the entry
// whose guards (client/guard_table.h) the inputs satisfy — dtypes,
// strides, constant sizes, and symbolic sizes bound consistently, each
// symbol >= 2 and within the graph's relations (ranges, divisibility) — and
// calls its kernel directly: no RPC, no allocation when the outputs are
// preallocated.
// The first Run (or Prepare) fetches the artifact (a same-host hit needs no
// round trip) and loads it. A symbolic graph run at size 0 or 1 gets a
// static specialization of its own, compiled on first use (as in PyTorch,
// symbolic dims are >= 2). Inputs of sizes no entry covers get a new one:
// the graph is re-typed for them (codegen/retype.h) with the changed dims
// made symbolic — one artifact for every later size — or, if that cannot
// be lowered, one changed dim symbolic at a time and the rest exact, or
// else the exact sizes; at most
// the specialization limit (8 by default, set_specialization_limit; warmed
// buckets do not count), then FailedPrecondition naming the dim. That
// policy is client/specialization.h; this class fetches, loads and invokes.
//
// Ownership: inputs and preallocated outputs belong to the caller; outputs
// must be contiguous, have the signature's dtype and sizes, and must not
// overlap an input or each other (artifacts assume no aliasing). Outputs
// that Run allocates are returned as Tensors.
//
// Thread-safe: Run may be called from several threads at once (each thread
// has its own scratch arena). The Client and Runtime must outlive it.
#ifndef KILN_CLIENT_COMPILED_GRAPH_H_
#define KILN_CLIENT_COMPILED_GRAPH_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/client.h"
#include "client/guard_table.h"
#include "client/loader.h"
#include "client/runtime/runtime.h"
#include "client/specialization.h"
#include "client/tensor.h"
#include "codegen/ir.h"
#include "proto/graph.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

class CompiledGraph {
 public:
  CompiledGraph(Client* client, kiln::v1::Graph graph, kiln::v1::CompileOptions options = {},
                Runtime* runtime = &Runtime::Default());

  struct PrepareResult {
    bool already_loaded = false;  // an earlier Prepare or Run did the work
    bool cache_hit = false;       // no compile was needed
    bool local = false;           // found in the local index: no round trip
    double fetch_ms = 0;          // the Compile RPC
    double load_ms = 0;           // digest check + dlopen
    bool loaded = false;          // a new entry (not one another thread loaded meanwhile)
  };
  // Fetches (compiling on a miss) and loads the artifact now rather than on
  // the first Run: warm-up before traffic arrives.
  absl::StatusOr<PrepareResult> Prepare();

  struct WarmupResult {
    int buckets = 0;  // buckets run once
    int entries = 0;  // artifacts loaded for them
    int local = 0;    // of those, found in the local index (no round trip)
  };
  // Makes every bucket of `buckets` (a warmup plan entry for this graph,
  // client/warmup_plan.h; its `graph` and `target` are not read: this
  // graph and its options apply) ready before traffic: fetches and loads
  // each bucket's artifact (compiling misses through kilnd) and runs it
  // once on zero inputs of the bucket's sizes on the calling thread, so
  // that the first real call on this thread does no RPC, no dlopen and no
  // first touch of its scratch. Warmed entries do not count against the
  // specialization limit. Errors name the bucket.
  absl::StatusOr<WarmupResult> Warmup(const kiln::v1::WarmupGraph& buckets);

  // Runs with outputs allocated here.
  absl::StatusOr<std::vector<Tensor>> Run(absl::Span<const TensorView> inputs);
  // Runs into caller-allocated outputs. FailedPrecondition when an input
  // does not match the compiled guards (naming the input and the dim),
  // InvalidArgument for a bad output buffer.
  absl::Status Run(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  // The kernel entry point and the arguments Run would pass it, for
  // measuring Run's own overhead (dispatch) against a direct call.
  struct DirectCall {
    kiln_run_fn run;
    const kiln_runtime* runtime;
    void* scratch;
  };
  absl::StatusOr<DirectCall> DirectCallForBenchmark(absl::Span<const TensorView> inputs);

  // The metadata of the artifact Run would call for `inputs` (loading or
  // specializing one as Run would).
  absl::StatusOr<kiln::v1::ArtifactMetadata> ArtifactFor(absl::Span<const TensorView> inputs);
  // The metadata of the graph's own artifact (after Prepare or a Run).
  absl::StatusOr<kiln::v1::ArtifactMetadata> artifact() const;
  const kiln::v1::Graph& graph() const { return graph_; }

  // See client/guard_table.h and client/specialization.h.
  using Size = GuardTable::Size;
  static constexpr int kMaxSymbols = GuardTable::kMaxSymbols;
  // The most entries this graph holds besides warmed buckets: its own and
  // the specializations Run makes (kDefaultSpecializationLimit unless set).
  // Part of no key.
  void set_specialization_limit(size_t limit);
  using Symbols = GuardTable::Symbols;

 private:
  struct Entry {
    std::shared_ptr<const LoadedArtifact> artifact;
    GuardTable guards;
    // Symbolic entries: the canonical graph, and the symbol value up to
    // which its every tensor is within codegen/limits.h (checked in full
    // only above it, on the calls that need it).
    std::shared_ptr<const ir::Graph> canonical;
    int64_t safe_symbol_value = 0;
  };

  // Fetches and loads the artifact of `graph` (this graph, or a
  // specialization of it) into a new entry.
  absl::StatusOr<PrepareResult> Load(const kiln::v1::Graph& graph);
  // The entry whose guards `inputs` pass, binding its symbols, loading or
  // specializing one when none does; then the sizes the symbols give are
  // checked against codegen/limits.h.
  absl::StatusOr<const Entry*> FindEntry(absl::Span<const TensorView> inputs, Symbols& symbols);
  absl::StatusOr<const Entry*> FindGuardedEntry(absl::Span<const TensorView> inputs,
                                                Symbols& symbols);
  // Loads an entry for `inputs`' sizes (client/specialization.h).
  absl::Status Respecialize(absl::Span<const TensorView> inputs);
  absl::Status CheckOutputs(const Entry& entry, const Symbols& symbols,
                            absl::Span<const TensorView> inputs,
                            absl::Span<const TensorView> outputs) const;
  absl::Status Invoke(const Entry& entry, const Symbols& symbols,
                      absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  Client* const client_;
  const kiln::v1::Graph graph_;
  const kiln::v1::CompileOptions options_;
  Runtime* const runtime_;

  mutable absl::Mutex mutex_;
  // Static entries first: an input whose sizes a static bucket has runs
  // that bucket's artifact rather than a symbolic one that also fits.
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mutex_);
  // Every static entry, by a hash of its input sizes: found in one lookup
  // however many buckets are loaded.
  absl::flat_hash_map<uint64_t, std::vector<const Entry*>> static_by_sizes_ ABSL_GUARDED_BY(mutex_);
  int warmed_entries_ ABSL_GUARDED_BY(mutex_) = 0;  // loaded by Warmup
  size_t specialization_limit_ ABSL_GUARDED_BY(mutex_) = kDefaultSpecializationLimit;
  // The entry of the graph as given (Prepare): its guards explain a miss.
  const Entry* given_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // Input sizes for which no specialization could be made.
  absl::flat_hash_set<std::string> unfixable_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_COMPILED_GRAPH_H_
