#include "client/runtime/transposed_b.h"

namespace kiln {

TransposedBChoices::Choice TransposedBChoices::Choose(int64_t m, int64_t k, int64_t n,
                                                      int element_bytes, int threads) {
  const int64_t elements = k * n;
  if (elements <= (int64_t{1} << 14)) return {true, false};
  if (m < 32 || elements * element_bytes > (int64_t{2} << 20)) return {false, false};
  const auto choice = ways_.Choose(Shape{m, k, n, element_bytes, threads});
  return {choice.way == 1, choice.timed};
}

void TransposedBChoices::Record(int64_t m, int64_t k, int64_t n, int element_bytes, int threads,
                                bool copy, int64_t ns) {
  ways_.Record(Shape{m, k, n, element_bytes, threads}, copy ? 1 : 0, ns);
}

TransposedBChoices& TransposedBChoices::Process() {
  static TransposedBChoices* const choices = new TransposedBChoices;
  return *choices;
}

}  // namespace kiln
