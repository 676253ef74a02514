// The faster of two ways to do the same work, per shape, found by timing
// both on a process's first calls of the shape: for choices whose winner
// depends on the CPU and its libraries (which OpenBLAS kernels, which of
// oneDNN's implementations), where no rule holds on every machine.
//
// A shape's first call warms caches and buffers and is not timed; then the
// calls alternate between the ways (0, 1, 0, ...) so that each meets the
// machine's state of the moment as often as the other, until each has
// kTrials timed calls; the way with the fastest single call is kept for
// the rest of the process. Thread-safe.
#ifndef KILN_CLIENT_RUNTIME_FASTER_OF_TWO_H_
#define KILN_CLIENT_RUNTIME_FASTER_OF_TWO_H_

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

template <typename Shape>
class FasterOfTwo {
 public:
  struct Choice {
    int way;     // 0 or 1
    bool timed;  // the caller times this call and Records it
  };

  // Timed calls of each way before a shape's choice is made.
  static constexpr int kTrials = 4;

  Choice Choose(const Shape& shape) {
    absl::MutexLock lock(&mutex_);
    Trials& trials = trials_[shape];
    if (trials.decided) return {trials.way, false};
    const int call = trials.started++;
    if (call == 0) return {0, false};
    return {call % 2 == 0 ? 1 : 0, true};
  }

  // A timed call's time, in ns.
  void Record(const Shape& shape, int way, int64_t ns) {
    absl::MutexLock lock(&mutex_);
    Trials& trials = trials_[shape];
    if (trials.decided) return;
    trials.best_ns[way] = trials.recorded[way] == 0 ? ns : std::min(trials.best_ns[way], ns);
    ++trials.recorded[way];
    if (trials.recorded[0] >= kTrials && trials.recorded[1] >= kTrials) {
      trials.decided = true;
      trials.way = trials.best_ns[1] < trials.best_ns[0] ? 1 : 0;
    }
  }

 private:
  struct Trials {
    int started = 0;  // calls handed out
    int recorded[2] = {0, 0};
    int64_t best_ns[2] = {0, 0};
    bool decided = false;
    int way = 0;
  };

  absl::Mutex mutex_;
  absl::flat_hash_map<Shape, Trials> trials_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_FASTER_OF_TWO_H_
