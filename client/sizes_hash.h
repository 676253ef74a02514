// Where a CompiledGraph files its static entries: FNV-1a over each input's
// rank and sizes, computed without allocating (as Run must not allocate).
#ifndef KILN_CLIENT_SIZES_HASH_H_
#define KILN_CLIENT_SIZES_HASH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "client/tensor.h"
#include "proto/artifact.pb.h"

namespace kiln {

class SizesHash {
 public:
  void Add(int64_t value) { hash_ = (hash_ ^ static_cast<uint64_t>(value)) * 1099511628211ull; }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

// The hash of a call's inputs.
inline uint64_t HashOfSizes(absl::Span<const TensorView> inputs) {
  SizesHash hash;
  for (const TensorView& input : inputs) {
    hash.Add(input.rank());
    for (int64_t size : input.sizes) hash.Add(size);
  }
  return hash.value();
}

// The same for per-input size lists (a padded call's).
inline uint64_t HashOfSizes(const std::vector<std::vector<int64_t>>& inputs) {
  SizesHash hash;
  for (const std::vector<int64_t>& sizes : inputs) {
    hash.Add(static_cast<int64_t>(sizes.size()));
    for (int64_t size : sizes) hash.Add(size);
  }
  return hash.value();
}

// The same for a static artifact's inputs.
inline uint64_t HashOfSizes(const kiln::v1::Signature& signature) {
  SizesHash hash;
  for (const kiln::v1::TensorType& input : signature.inputs()) {
    hash.Add(input.sizes_size());
    for (const kiln::v1::Dim& dim : input.sizes()) hash.Add(dim.constant());
  }
  return hash.value();
}

}  // namespace kiln

#endif  // KILN_CLIENT_SIZES_HASH_H_
