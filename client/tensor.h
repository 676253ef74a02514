// Tensors as the client sees them.
//
// TensorView does not own anything: data, sizes and strides belong to the
// caller and must outlive the call they are passed to. Tensor owns a
// 64-byte-aligned buffer and its shape; outputs that Run allocates are
// Tensors. No alignment is assumed of caller memory.
#ifndef KILN_CLIENT_TENSOR_H_
#define KILN_CLIENT_TENSOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/graph.pb.h"

namespace kiln {

using DType = kiln::v1::DType;

int64_t ElementSize(DType dtype);

struct TensorView {
  void* data = nullptr;
  DType dtype = kiln::v1::FLOAT32;
  absl::Span<const int64_t> sizes;
  absl::Span<const int64_t> strides;  // in elements, one per size

  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  // The byte range [first, last) the view can touch.
  std::pair<const char*, const char*> ByteRange() const;
};

class Tensor {
 public:
  Tensor() = default;
  // A contiguous, zero-filled tensor of a size the program chose (tests,
  // tools); aborts when the memory cannot be had. For sizes from outside,
  // use Empty.
  Tensor(DType dtype, std::vector<int64_t> sizes);
  // A contiguous tensor whose contents are undefined (torch.empty): for
  // outputs a kernel overwrites, without the cost of zeroing them.
  // InvalidArgument for a negative size or a byte count past int64;
  // ResourceExhausted when the allocation fails.
  static absl::StatusOr<Tensor> Empty(DType dtype, std::vector<int64_t> sizes);

  TensorView view() const;
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(buffer_.get());
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  // Both fit in int64: Empty refuses shapes whose byte count does not.
  int64_t NumElements() const;
  int64_t NumBytes() const { return NumElements() * ElementSize(dtype_); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  DType dtype_ = kiln::v1::FLOAT32;
  std::vector<int64_t> sizes_, strides_;
  std::unique_ptr<void, Free> buffer_;
};

std::vector<int64_t> ContiguousStrides(absl::Span<const int64_t> sizes);

// The bytes a contiguous tensor of `sizes` takes. InvalidArgument for a
// negative size or a count that overflows int64.
absl::StatusOr<int64_t> ContiguousBytes(DType dtype, absl::Span<const int64_t> sizes);

}  // namespace kiln

#endif  // KILN_CLIENT_TENSOR_H_
