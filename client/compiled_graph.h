// kiln::CompiledGraph: a graph that compiles itself on first use and then
// runs in-process. Run calls the kernel of the entry whose guards
// (client/guard_table.h) the inputs pass: no RPC, and no allocation when
// the outputs are preallocated. The parts, by job: the entry table
// (compiled_graph_entries.cc), specializations for inputs no entry takes
// (compiled_graph_specialize.cc), warmup and padding onto warmed buckets
// (compiled_graph_warmup.cc, docs/WARMUP.md), the background thread and
// idle closing (compiled_graph_background.cc).
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

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/bucket_padding.h"
#include "client/client.h"
#include "client/fork_aware.h"
#include "client/guard_table.h"
#include "client/loader.h"
#include "client/runtime/runtime.h"
#include "client/specialization.h"
#include "client/tensor.h"
#include "client/traffic.h"
#include "proto/graph.pb.h"
#include "proto/warmup.pb.h"

namespace kiln {

// Whether a Run error is a guard miss: inputs the compiled guards refuse
// (the message names the input and the dim) and no specialization serves.
inline constexpr char kGuardMissPayload[] = "kiln.dev/guard-miss";
bool IsGuardMiss(const absl::Status& status);

class CompiledGraph final : private ForkAware {
 public:
  CompiledGraph(Client* client, kiln::v1::Graph graph, kiln::v1::CompileOptions options = {},
                Runtime* runtime = &Runtime::Default());
  // Waits for a background compile in progress.
  ~CompiledGraph();

  struct PrepareResult {
    bool already_open = false;  // an earlier Prepare or Run did the work
    bool cache_hit = false;     // no compile was needed
    bool local = false;         // found in the local index: no round trip
    double fetch_ms = 0;        // the Compile RPC
    double open_ms = 0;         // digest check + dlopen
    bool opened = false;        // a new entry (not one another thread opened meanwhile)
  };
  // Fetches (compiling on a miss) and opens the artifact now rather than on
  // the first Run: warm-up before traffic arrives.
  absl::StatusOr<PrepareResult> Prepare();

  struct WarmupResult {
    int buckets = 0;  // buckets run
    int runs = 0;     // runs of them (a bucket runs until its choices are made)
    int entries = 0;  // artifacts opened for them
    int local = 0;    // of those, found in the local index (no round trip)
    std::vector<std::string> padded_symbols;  // paddable symbols the graph allows
  };
  // Makes every bucket of `buckets` (a warmup plan entry for this graph,
  // client/warmup_plan.h; its `graph` and `target` are not read: this
  // graph and its options apply) ready before traffic: fetches and opens
  // each bucket's artifact (compiling misses through kilnd) and runs it on
  // zero inputs of the bucket's sizes on the calling thread, so that the
  // first real call on this thread does no RPC, no dlopen and no first
  // touch of its scratch: once, or, when it has GEMMs or convolutions with
  // several ways to time (client/runtime/fastest_of.h), until a run finds
  // every way chosen (a bounded number of runs), so that traffic meets no
  // trial. Warmed entries do not count against the
  // specialization limit. Errors name the bucket. A symbol marked
  // paddable (static buckets only) lets later calls between its sizes run
  // the next larger bucket, padded; FailedPrecondition (before anything is
  // opened) naming the node when the graph mixes positions along it.
  // `progress`, if given, is called on the calling thread after each
  // compile's buckets have run: (done, total, the compile's name).
  using WarmupProgress = std::function<void(int done, int total, const std::string& name)>;
  absl::StatusOr<WarmupResult> Warmup(const kiln::v1::WarmupGraph& buckets,
                                      const WarmupProgress& progress = nullptr);
  // Every entry of `plan` (graph files read relative to `plan_dir`) whose
  // graph file holds this graph (GraphDigest); NotFound when none does.
  absl::StatusOr<WarmupResult> Warmup(const kiln::v1::WarmupPlan& plan, const std::string& plan_dir,
                                      const WarmupProgress& progress = nullptr);

  // An output the artifact's signature pairs with input i
  // (Signature.output_aliases, docs/ARCHITECTURE.md "Outputs that are
  // inputs") is written in input i itself: nothing is allocated, copied or
  // checked for it, and outputs[k] below is neither checked nor written
  // (an input copied into the artifact's layout is copied back). A graph
  // with output aliases is never padded to a bucket.
  //
  // Runs with outputs allocated here; an aliased output's Tensor is empty.
  absl::StatusOr<std::vector<Tensor>> Run(absl::Span<const TensorView> inputs);
  // Runs with outputs from `allocate`: given output k's dtype and sizes, it
  // returns contiguous memory for them (a torch.empty, say) that stays
  // valid until Run returns, or an error Run returns. It is not called for
  // an aliased output.
  using OutputAllocator = absl::FunctionRef<absl::StatusOr<TensorView>(
      int k, DType dtype, absl::Span<const int64_t> sizes)>;
  absl::Status Run(absl::Span<const TensorView> inputs, OutputAllocator allocate);
  // Runs into caller-allocated outputs. FailedPrecondition when an input
  // does not match the compiled guards (naming the input and the dim),
  // InvalidArgument for a bad output buffer.
  absl::Status Run(absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  // The kernel entry point and the arguments Run would pass it, for
  // measuring Run's own overhead (dispatch) against a direct call. Valid
  // until a CloseIdle.
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

  // Specializations: a symbolic graph run at size 0 or 1 gets a static
  // specialization of its own (as in PyTorch, symbolic dims are >= 2).
  // Inputs of sizes no entry covers get a new one: the graph re-typed for
  // them with the changed dims made symbolic (one artifact for every later
  // size), or, if that cannot be lowered, one changed dim symbolic at a
  // time and the rest exact, or else the exact sizes. Inputs whose strides
  // no entry takes get an entry laid out as they are, once per stride
  // pattern (or see set_stride_miss). Policy: client/specialization.h.
  using Size = GuardTable::Size;
  static constexpr int kMaxSymbols = GuardTable::kMaxSymbols;
  // The most entries this graph holds besides warmed buckets: its own and
  // the specializations Run makes (kDefaultSpecializationLimit unless set);
  // beyond it, FailedPrecondition naming the dim. Part of no key.
  void set_specialization_limit(size_t limit);
  using Symbols = GuardTable::Symbols;

  // What a call does whose inputs an entry takes but for their strides (a
  // transposed, sliced or expanded view where the trace had another
  // layout). Part of no key.
  enum class StrideMiss {
    // Compile (or fetch) an entry laid out as the inputs are: one per
    // stride pattern, later calls with those strides hit it. Counts
    // against the specialization limit. The default.
    kSpecialize,
    // Copy those inputs into the layout of an open entry whose guards they
    // pass but for strides (the traced layout, for the graph as given) and
    // run it: no compile. Only into layouts where no two elements share
    // memory; inputs that no entry takes even so (new sizes, a traced
    // expanded input) are specialized as with kSpecialize.
    kCopyToTracedLayout,
  };
  void set_stride_miss(StrideMiss policy);

  // Sizes the graph as given does not take (CheckGraphTakesSizes: another
  // constant size, a symbol outside the graph's relations) are refused,
  // FailedPrecondition naming the input and dim or the relation, instead of
  // compiling a specialization for them: a torch.export program is valid
  // only within its Dims' ranges. A symbol at 0 or 1 that the relations
  // allow still gets its static specialization, and inputs laid out
  // otherwise at sizes it takes are served as set_stride_miss says. Off by
  // default. Part of no key.
  void set_given_sizes_only(bool on);

  // Sizes that a symbolic entry serves but no static one get their exact
  // specialization compiled in the background (at warmup priority, within
  // the specialization limit); the symbolic entry serves them meanwhile.
  // Off by default.
  void set_background_specialization(bool on);
  // Closes entries no call has used for `idle` (checked every `idle`, so
  // within twice that) on a background thread; zero (the default) never.
  void set_close_after(absl::Duration idle);
  // Closes the entries no call used since the previous CloseIdle (or
  // their load), and has every thread trim its scratch on its next call to
  // what that call needs. Returns how many were closed. A later call
  // opens an entry again (a static one by the graph it was opened from).
  int CloseIdle();
  // Entries open now.
  int open_entries() const;

 private:
  struct Entry {
    Entry(std::shared_ptr<const ArtifactObject> artifact, GuardTable guards)
        : artifact(std::move(artifact)), guards(std::move(guards)) {}

    std::shared_ptr<const ArtifactObject> artifact;
    GuardTable guards;
    // What it was opened from when not the CompiledGraph's own graph as
    // given: static entries are fetched from it again after CloseIdle.
    std::shared_ptr<const SpecializedGraph> source;
    // Symbolic entries: the symbol value up to which every tensor is within
    // the limits (ArtifactMetadata.safe_symbol_value); calls above it are
    // checked in full against the metadata's run_time_sizes.
    int64_t safe_symbol_value = 0;
    // Static entries: the hash of their input sizes.
    uint64_t sizes_hash = 0;
    bool warmed = false;  // opened by Warmup: not counted against the limit
    // Calls that found this entry and have not returned: a closed entry
    // is freed only at zero.
    mutable std::atomic<int> in_flight{0};
    // Set by each call, cleared by each CloseIdle.
    mutable std::atomic<bool> used{true};
  };

  // An entry a call is running: it stays open while this lives.
  class EntryUse {
   public:
    EntryUse(const Entry* entry, bool copy_inputs) : entry_(entry), copy_inputs_(copy_inputs) {}
    EntryUse(EntryUse&& other)
        : entry_(std::exchange(other.entry_, nullptr)), copy_inputs_(other.copy_inputs_) {}
    EntryUse& operator=(EntryUse&&) = delete;
    ~EntryUse() {
      if (entry_ != nullptr) entry_->in_flight.fetch_sub(1, std::memory_order_release);
    }
    const Entry& operator*() const { return *entry_; }
    const Entry* operator->() const { return entry_; }
    // The inputs pass but for strides: the call copies them into the
    // entry's layouts (StrideMiss::kCopyToTracedLayout).
    bool copy_inputs() const { return copy_inputs_; }

   private:
    const Entry* entry_;
    bool copy_inputs_;
  };
  // Marks `entry` used and in flight (under mutex_, so that CloseIdle sees it).
  static EntryUse Use(const Entry* entry, bool copy_inputs = false);
  // An open entry whose guards `inputs` pass; else, copying to traced
  // layouts, one they pass but for strides, into layouts a copy can fill.
  std::optional<EntryUse> FindOpen(absl::Span<const TensorView> inputs, Symbols& symbols) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  // Inputs as a call passes them to the kernel: each input, or its copy in
  // the entry's layout.
  struct CopiedInputs {
    std::vector<Tensor> copies;
    std::vector<TensorView> views;
  };
  static absl::StatusOr<CopiedInputs> CopyIntoLayouts(const Entry& entry, const Symbols& symbols,
                                                      absl::Span<const TensorView> inputs);

  struct FetchOptions {
    bool warmed = false;
    kiln::v1::CompileRequest::Priority priority = kiln::v1::CompileRequest::PRIORITY_INTERACTIVE;
    // A respecialization's input layouts: kilnd re-types `graph` for them.
    const InputLayouts* layouts = nullptr;
  };
  // Fetches and opens the artifact of `graph` (this graph, or a
  // specialization of it) into a new entry.
  absl::StatusOr<PrepareResult> Fetch(const kiln::v1::Graph& graph, FetchOptions options);
  // The entry whose guards `inputs` pass, binding its symbols, loading or
  // specializing one when none does; then the sizes the symbols give are
  // checked against the artifact's run-time sizes (abi/run_time_sizes.h).
  absl::StatusOr<EntryUse> FindEntry(absl::Span<const TensorView> inputs, uint64_t sizes_hash,
                                     Symbols& symbols);
  absl::StatusOr<EntryUse> FindGuardedEntry(absl::Span<const TensorView> inputs,
                                            uint64_t sizes_hash, Symbols& symbols);
  // Entries that count against the specialization limit (all but warmed).
  size_t SpecializationCount() const ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  // Fetches an entry for `inputs`' sizes from step 2's plan for them
  // (client/specialization.h PlanSpecializations).
  absl::Status Respecialize(const absl::StatusOr<Respecialization>& planned,
                            absl::Span<const TensorView> inputs);
  // Queues the exact specialization of `inputs`' sizes for the background
  // thread, once per sizes and within the limit.
  void SpecializeInBackground(absl::Span<const TensorView> inputs, uint64_t sizes_hash);
  absl::Status SpecializeExactly(const std::vector<std::vector<int64_t>>& sizes);
  void StartBackgroundThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(background_mutex_);
  // fork(): see client/fork_aware.h.
  void BeforeFork() override;
  void AfterForkInParent() override;
  void AfterForkInChild() override;
  void BackgroundLoop();
  // The padded call for `inputs` when a paddable symbol lies between
  // buckets and the padded sizes have a static entry; nullopt otherwise.
  std::optional<PaddedShape> PaddedShapeFor(absl::Span<const TensorView> inputs,
                                            uint64_t sizes_hash);
  absl::Status RunPadded(absl::Span<const TensorView> inputs, const PaddedShape& shape,
                         OutputAllocator allocate);
  // Run, counting the call as traffic or not (Warmup's own calls).
  absl::Status RunAllocating(absl::Span<const TensorView> inputs, OutputAllocator allocate,
                             bool record);
  absl::StatusOr<std::vector<Tensor>> RunIntoTensors(absl::Span<const TensorView> inputs,
                                                     bool record);
  absl::Status CheckOutputs(const Entry& entry, const Symbols& symbols,
                            absl::Span<const TensorView> inputs,
                            absl::Span<const TensorView> outputs) const;
  // Runs `use`'s artifact, first copying the inputs into its layouts when
  // the use says so.
  absl::Status Invoke(const EntryUse& use, const Symbols& symbols,
                      absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);
  absl::Status Call(const Entry& entry, const Symbols& symbols, absl::Span<const TensorView> inputs,
                    absl::Span<const TensorView> outputs);

  Client* const client_;
  const kiln::v1::Graph graph_;
  const kiln::v1::CompileOptions options_;
  Runtime* const runtime_;
  TrafficRecorder traffic_{&graph_};

  mutable absl::Mutex mutex_;
  // Static entries first: an input whose sizes a static bucket has runs
  // that bucket's artifact rather than a symbolic one that also fits.
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mutex_);
  // Every static entry, by a hash of its input sizes: found in one lookup
  // however many buckets are opened.
  absl::flat_hash_map<uint64_t, std::vector<const Entry*>> static_by_sizes_ ABSL_GUARDED_BY(mutex_);
  size_t specialization_limit_ ABSL_GUARDED_BY(mutex_) = kDefaultSpecializationLimit;
  // The entry of the graph as given (Prepare): its guards explain a miss.
  const Entry* given_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // Input sizes for which no specialization could be made.
  absl::flat_hash_set<std::string> unfixable_ ABSL_GUARDED_BY(mutex_);
  // Static entries CloseIdle removed, by sizes hash: the graph to load
  // again and whether it was warmed.
  absl::flat_hash_map<uint64_t, std::pair<std::shared_ptr<const SpecializedGraph>, bool>> closed_
      ABSL_GUARDED_BY(mutex_);
  // Closed entries a call may still run.
  std::vector<std::unique_ptr<Entry>> retired_ ABSL_GUARDED_BY(mutex_);
  std::vector<PaddableSymbol> paddable_ ABSL_GUARDED_BY(mutex_);
  std::atomic<bool> has_paddable_{false};  // !paddable_.empty(), read without the lock
  bool background_specialization_ ABSL_GUARDED_BY(mutex_) = false;
  StrideMiss stride_miss_ ABSL_GUARDED_BY(mutex_) = StrideMiss::kSpecialize;
  bool given_sizes_only_ ABSL_GUARDED_BY(mutex_) = false;
  // Sizes (by hash) already queued for a background specialization.
  absl::flat_hash_set<uint64_t> background_tried_ ABSL_GUARDED_BY(mutex_);

  absl::Mutex background_mutex_ ABSL_ACQUIRED_AFTER(mutex_);
  std::deque<std::vector<std::vector<int64_t>>> background_queue_
      ABSL_GUARDED_BY(background_mutex_);
  absl::Duration close_after_ ABSL_GUARDED_BY(background_mutex_) = absl::ZeroDuration();
  bool stopping_ ABSL_GUARDED_BY(background_mutex_) = false;
  std::thread background_ ABSL_GUARDED_BY(background_mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_COMPILED_GRAPH_H_
