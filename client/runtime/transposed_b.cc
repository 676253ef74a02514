#include "client/runtime/transposed_b.h"

#include <algorithm>

namespace kiln {

TransposedBChoices::Choice TransposedBChoices::Choose(int64_t m, int64_t k, int64_t n,
                                                      int element_bytes, int threads) {
  const int64_t elements = k * n;
  if (elements <= (int64_t{1} << 14)) return {true, false};
  if (m < 32 || elements * element_bytes > (int64_t{2} << 20)) return {false, false};
  absl::MutexLock lock(&mutex_);
  Trials& trials = trials_[Shape{m, k, n, element_bytes, threads}];
  if (trials.decided) return {trials.copy, false};
  // A first call warms caches and buffers, untimed; then as stored,
  // copied, as stored, ...: each way meets the machine's state of the
  // moment as often as the other, and each keeps its fastest.
  const int call = trials.started++;
  if (call == 0) return {false, false};
  return {call % 2 == 0, true};
}

void TransposedBChoices::Record(int64_t m, int64_t k, int64_t n, int element_bytes, int threads,
                                bool copy, int64_t ns) {
  absl::MutexLock lock(&mutex_);
  Trials& trials = trials_[Shape{m, k, n, element_bytes, threads}];
  if (trials.decided) return;
  const int way = copy ? 1 : 0;
  trials.best_ns[way] = trials.recorded[way] == 0 ? ns : std::min(trials.best_ns[way], ns);
  ++trials.recorded[way];
  if (trials.recorded[0] >= kTrials && trials.recorded[1] >= kTrials) {
    trials.decided = true;
    trials.copy = trials.best_ns[1] < trials.best_ns[0];
  }
}

TransposedBChoices& TransposedBChoices::Process() {
  static TransposedBChoices* const choices = new TransposedBChoices;
  return *choices;
}

}  // namespace kiln
