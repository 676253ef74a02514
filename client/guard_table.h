// kiln::GuardTable: the guards of one artifact, flattened for the check
// CompiledGraph::Run makes on every call.
//
// Built once per loaded artifact from its signature (input and output types,
// the kernel's size symbols in argument order) and its canonical guards'
// relations (a range and a divisor per symbol). Check() then binds each
// symbol from the input sizes — consistent across inputs, divisible by its
// multiplier, >= 2 as in PyTorch — checks constant sizes and dtypes, then
// strides (which may name symbols) against the bound values, then each
// symbol's bounds: integer compares over flat vectors, no allocation, no
// virtual call. Only when a caller asks why a check failed is the error
// built, naming the input and the dim.
//
// Immutable after Create; Check may be called from any number of threads.
#ifndef KILN_CLIENT_GUARD_TABLE_H_
#define KILN_CLIENT_GUARD_TABLE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/artifact.pb.h"
#include "proto/graph.pb.h"
#include "proto/guards.pb.h"

namespace kiln {

class GuardTable {
 public:
  static constexpr int kMaxSymbols = 8;
  // The kernel's symbol values, in signature order (kiln_int64, as kiln_run
  // takes them); -1 for a symbol not bound yet.
  using Symbols = std::array<long long, kMaxSymbols>;

  // A size in a signature: constant, or multiplier * symbols[symbol] *
  // symbols[times[0]] * ... (only results are products of symbols).
  struct Size {
    int64_t constant = 0;
    int symbol = -1;
    int64_t multiplier = 1;
    std::vector<int> times;

    // The size at these symbol values; -1 when the product overflows int64
    // (sizes from huge symbols).
    int64_t Evaluate(const Symbols& symbols) const {
      if (symbol < 0) return constant;
      int64_t value;
      if (__builtin_mul_overflow(multiplier, symbols[symbol], &value)) return -1;
      for (int other : times) {
        if (other < 0 || __builtin_mul_overflow(value, symbols[other], &value)) return -1;
      }
      return value;
    }
  };

  // What a symbol's value must satisfy: min <= value <= max (0: no upper
  // bound), value % divisor == 0.
  struct Bounds {
    int64_t min = 2;
    int64_t max = 0;
    int64_t divisor = 1;
  };

  // The table of an artifact with `signature` and `guards`; `graph` names
  // the inputs in errors (a specialization's artifact keeps the names of
  // the graph it was made from). Unimplemented for more than kMaxSymbols
  // symbols; Internal for a relation that is not a range or divisor of a
  // signature symbol, or states an empty range or a non-positive divisor
  // (canonical guards never do).
  static absl::StatusOr<GuardTable> Create(const kiln::v1::Signature& signature,
                                           const kiln::v1::Guards& guards,
                                           const kiln::v1::Graph& graph);

  // Whether `inputs` pass these guards, binding `symbols` (all of them are
  // overwritten). When not, and `why` is given, *why is the first failed
  // guard: FailedPrecondition naming the input and the dim, or
  // InvalidArgument for the wrong number of inputs. The message is built
  // only then: Run tries each entry in turn on every call.
  bool Check(absl::Span<const TensorView> inputs, Symbols& symbols,
             absl::Status* why = nullptr) const;
  // Check but for the strides: whether `inputs`, copied into this table's
  // layouts (InputStrides), would pass. Only into layouts a copy can fill:
  // false when an input that does not already pass its strides would be
  // copied into one where elements share memory (a stride 0, an expanded
  // input traced as such).
  bool CheckCopyable(absl::Span<const TensorView> inputs, Symbols& symbols) const;
  // Whether input i's strides pass, once `symbols` are bound (by Check or
  // CheckCopyable).
  bool StridesPass(size_t i, const TensorView& input, const Symbols& symbols) const;
  // Input i's strides at these symbol values: those the artifact declares,
  // else contiguous ones.
  std::vector<int64_t> InputStrides(size_t i, const TensorView& input,
                                    const Symbols& symbols) const;

  int num_symbols() const { return static_cast<int>(symbol_names_.size()); }
  size_t num_inputs() const { return dtypes_.size(); }
  size_t num_outputs() const { return output_sizes_.size(); }
  const std::vector<Size>& output_sizes(size_t k) const { return output_sizes_[k]; }
  // "input 0 'x'" (or "input 0" when it has no name), for errors.
  const std::string& input_name(size_t i) const { return input_names_[i]; }

  // One line per input, output and symbol bound, for tests:
  //   input 0 'x': FLOAT32 [s0, 64] strides [64, 1]   (or "contiguous")
  //   output 0: [s0, 2*s0*t]
  //   s0: 2 <= s0 <= 512, s0 % 8 == 0
  std::string DebugString() const;

 private:
  GuardTable() = default;

  // The first dim (from the innermost) whose stride input i fails, and the
  // stride it should have.
  struct StrideMiss {
    size_t dim;
    int64_t expected;
  };
  std::optional<StrideMiss> FirstStrideMiss(size_t i, const TensorView& input,
                                            const Symbols& symbols) const;
  // Check, with or without the strides.
  bool CheckImpl(absl::Span<const TensorView> inputs, Symbols& symbols, absl::Status* why,
                 bool strides) const;

  // The error of a symbol out of its bounds, naming the first dim that
  // binds it.
  std::string BoundsError(int symbol, absl::Span<const TensorView> inputs, int64_t value) const;

  std::vector<std::string> input_names_;
  std::vector<std::string> symbol_names_;
  // Per input: dtype, sizes, strides (none: contiguous).
  std::vector<DType> dtypes_;
  std::vector<std::vector<Size>> sizes_;
  std::vector<std::vector<Size>> strides_;
  std::vector<std::vector<Size>> output_sizes_;
  std::vector<Bounds> bounds_;  // per symbol, from the guards' relations
};

}  // namespace kiln

#endif  // KILN_CLIENT_GUARD_TABLE_H_
