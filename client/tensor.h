// Tensors as the client sees them.
//
// TensorView does not own anything: data, sizes and strides belong to the
// caller and must outlive the call they are passed to. Tensor owns a
// 64-byte-aligned buffer and its shape; outputs that Run allocates are
// Tensors, contiguous; inputs copied into a layout an artifact declares
// (a transposed one, say) are strided Tensors. No alignment is assumed of
// caller memory.
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
  // A tensor of `sizes` laid out with `strides` (in elements, none
  // negative), contents undefined. Its buffer holds what the layout reaches
  // (StorageBytes): dims of stride 0 share memory, a sliced layout leaves
  // gaps. InvalidArgument for a stride count that is not the rank, a
  // negative size or stride, or a byte count past int64; ResourceExhausted
  // when the allocation fails.
  static absl::StatusOr<Tensor> EmptyStrided(DType dtype, std::vector<int64_t> sizes,
                                             std::vector<int64_t> strides);

  TensorView view() const;
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(buffer_.get());
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  // Both fit in int64: Empty refuses shapes whose byte count does not.
  // NumBytes counts the elements, which is the buffer of a contiguous
  // tensor; a strided one's data<T>()[i] is not element i.
  int64_t NumElements() const;
  int64_t NumBytes() const { return NumElements() * ElementSize(dtype_); }
  // The bytes of the buffer (NumBytes for a tensor Empty made).
  int64_t StorageBytes() const { return storage_bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  DType dtype_ = kiln::v1::FLOAT32;
  std::vector<int64_t> sizes_, strides_;
  int64_t storage_bytes_ = 0;
  std::unique_ptr<void, Free> buffer_;
};

std::vector<int64_t> ContiguousStrides(absl::Span<const int64_t> sizes);

// The bytes a contiguous tensor of `sizes` takes. InvalidArgument for a
// negative size or a count that overflows int64.
absl::StatusOr<int64_t> ContiguousBytes(DType dtype, absl::Span<const int64_t> sizes);

// Whether every element of a view of `sizes` and `strides` has memory of its
// own (no stride negative, none 0 on a dim longer than 1, no two dims
// interleaved): a layout a copy can fill without losing values.
bool HasDistinctElements(absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides);

// Copies each element of `from` to the same index of `to`: equal dtypes and
// sizes, any strides, no overlap between the two.
void CopyElements(const TensorView& from, const TensorView& to);

}  // namespace kiln

#endif  // KILN_CLIENT_TENSOR_H_
