// The fastest of a few ways to do the same work, per shape, found by
// timing each on a process's first calls of the shape: for choices whose
// winner depends on the CPU and its libraries (which OpenBLAS kernels,
// OpenBLAS or oneDNN, which of oneDNN's implementations), where no rule
// holds on every machine.
//
// A shape's first call warms caches and buffers and is not timed; then the
// calls take the ways in turn (0, 1, ..., 0, 1, ...) so that each meets the
// machine's state of the moment as often as the others, until each has
// kTrials timed calls; the way with the fastest single call is kept for
// the rest of the process. Thread-safe.
//
// Warmup (client/compiled_graph.h) runs a bucket until its run makes no
// call of a shape still being timed (CallsBeforeAChoice), so that the
// trials happen before traffic, not on it.
#ifndef KILN_CLIENT_RUNTIME_FASTEST_OF_H_
#define KILN_CLIENT_RUNTIME_FASTEST_OF_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

// Calls this thread was handed by any FastestOf while their shape's way was
// not yet chosen (its untimed first call and its trials). Every chooser is
// asked on the thread that calls the GEMM or convolution, before any work
// goes to the pool, so a run of work on this thread that leaves the count
// unchanged met only shapes already decided, whatever other threads do.
inline int64_t& CallsBeforeAChoice() {
  static thread_local int64_t calls = 0;
  return calls;
}

template <typename Shape>
class FastestOf {
 public:
  // The most ways a shape can have.
  static constexpr int kMaxWays = 4;
  // Timed calls of each way before a shape's choice is made.
  static constexpr int kTrials = 4;

  struct Choice {
    int way;     // in [0, ways)
    bool timed;  // the caller times this call and Records it
  };

  // `ways` (1 to kMaxWays) is the same on every call for one shape.
  Choice Choose(const Shape& shape, int ways) {
    if (ways <= 1) return {0, false};
    absl::MutexLock lock(&mutex_);
    Trials& trials = trials_[shape];
    if (trials.decided) return {trials.way, false};
    ++CallsBeforeAChoice();
    const int call = trials.started++;
    if (call == 0) return {0, false};
    return {(call - 1) % ways, true};
  }

  // Calls run(way) for the way Choose picks, timing the call for Record
  // when it is a trial.
  void Run(const Shape& shape, int ways, absl::FunctionRef<void(int way)> run) {
    const Choice choice = Choose(shape, ways);
    if (!choice.timed) {
      run(choice.way);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    run(choice.way);
    Record(shape, choice.way, ways,
           std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start)
               .count());
  }

  // A timed call's time, in ns.
  void Record(const Shape& shape, int way, int ways, int64_t ns) {
    absl::MutexLock lock(&mutex_);
    Trials& trials = trials_[shape];
    if (trials.decided) return;
    trials.best_ns[way] = trials.recorded[way] == 0 ? ns : std::min(trials.best_ns[way], ns);
    ++trials.recorded[way];
    if (std::all_of(trials.recorded, trials.recorded + ways,
                    [](int recorded) { return recorded >= kTrials; })) {
      trials.decided = true;
      trials.way = static_cast<int>(std::min_element(trials.best_ns, trials.best_ns + ways) -
                                    trials.best_ns);
    }
  }

 private:
  struct Trials {
    int started = 0;  // calls handed out
    int recorded[kMaxWays] = {};
    int64_t best_ns[kMaxWays] = {};
    bool decided = false;
    int way = 0;
  };

  absl::Mutex mutex_;
  absl::flat_hash_map<Shape, Trials> trials_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_FASTEST_OF_H_
