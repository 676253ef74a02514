#include "client/tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kiln {

int64_t ElementSize(DType dtype) {
  switch (dtype) {
    case kiln::v1::COMPLEX128:
      return 16;
    case kiln::v1::FLOAT64:
    case kiln::v1::INT64:
    case kiln::v1::COMPLEX64:
      return 8;
    case kiln::v1::FLOAT32:
    case kiln::v1::INT32:
      return 4;
    case kiln::v1::FLOAT16:
    case kiln::v1::BFLOAT16:
    case kiln::v1::INT16:
      return 2;
    case kiln::v1::BOOL:
    case kiln::v1::INT8:
    case kiln::v1::UINT8:
      return 1;
    default:
      return 0;
  }
}

std::pair<const char*, const char*> TensorView::ByteRange() const {
  const char* base = static_cast<const char*>(data);
  int64_t low = 0, high = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return {base, base};
    const int64_t extent = (sizes[d] - 1) * strides[d];
    (extent < 0 ? low : high) += extent;
  }
  const int64_t element = ElementSize(dtype);
  return {base + low * element, base + (high + 1) * element};
}

std::vector<int64_t> ContiguousStrides(absl::Span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);  // as torch: [3, 0, 4] -> [4, 4, 1]
  }
  return strides;
}

namespace {

// 64-byte-aligned memory from plain malloc, the block's own address kept
// just below the aligned one. Not aligned_alloc: glibc carves each large
// aligned block out of fresh heap (a freed block lacks the alignment slack
// the next request asks for), so Run(inputs) in a loop would page-fault
// every output anew, the faults costing many times the writes; malloc
// hands the freed block back. (Blocks above glibc's
// adaptive mmap threshold, at most 32 MiB, are mapped afresh either way.)
void* AllocateAligned(size_t bytes) {
  char* block = static_cast<char*>(malloc(bytes + 64));
  if (block == nullptr) return nullptr;
  char* aligned = block + 64 - reinterpret_cast<uintptr_t>(block) % 64;
  reinterpret_cast<char**>(aligned)[-1] = block;
  return aligned;
}

}  // namespace

void Tensor::Free::operator()(void* p) const {
  if (p != nullptr) free(static_cast<char**>(p)[-1]);
}

absl::StatusOr<int64_t> ContiguousBytes(DType dtype, absl::Span<const int64_t> sizes) {
  int64_t bytes = ElementSize(dtype);
  for (int64_t size : sizes) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tensor of sizes [", absl::StrJoin(sizes, ", "), "] has a negative size"));
    }
    if (__builtin_mul_overflow(bytes, size, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a tensor of sizes [", absl::StrJoin(sizes, ", "), "] holds more than 2^63 bytes"));
    }
  }
  return bytes;
}

absl::StatusOr<Tensor> Tensor::Empty(DType dtype, std::vector<int64_t> sizes) {
  ASSIGN_OR_RETURN(const int64_t bytes, ContiguousBytes(dtype, sizes));
  Tensor tensor;
  tensor.dtype_ = dtype;
  tensor.buffer_.reset(AllocateAligned(static_cast<size_t>(bytes)));
  if (tensor.buffer_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes,
                                                     " bytes for a tensor of sizes [",
                                                     absl::StrJoin(sizes, ", "), "]"));
  }
  tensor.sizes_ = std::move(sizes);
  tensor.strides_ = ContiguousStrides(tensor.sizes_);
  tensor.storage_bytes_ = bytes;
  return tensor;
}

absl::StatusOr<Tensor> Tensor::EmptyStrided(DType dtype, std::vector<int64_t> sizes,
                                            std::vector<int64_t> strides) {
  const auto shape = [&] {
    return absl::StrCat("sizes [", absl::StrJoin(sizes, ", "), "] and strides [",
                        absl::StrJoin(strides, ", "), "]");
  };
  if (strides.size() != sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor of ", shape(), ": one stride per dim"));
  }
  // The last element's offset, plus one; nothing when a size is 0.
  int64_t elements = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tensor of ", shape(), " has a negative size or stride"));
    }
    if (sizes[d] == 0) elements = 0;
  }
  for (size_t d = 0; d < sizes.size() && elements > 0; ++d) {
    int64_t reach;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(elements, reach, &elements)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tensor of ", shape(), " spans more than 2^63 elements"));
    }
  }
  ASSIGN_OR_RETURN(Tensor tensor, Empty(dtype, {elements}));
  tensor.sizes_ = std::move(sizes);
  tensor.strides_ = std::move(strides);
  return tensor;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> sizes) {
  absl::StatusOr<Tensor> tensor = Empty(dtype, std::move(sizes));
  if (!tensor.ok()) {
    fprintf(stderr, "kiln::Tensor: %s\n", std::string(tensor.status().message()).c_str());
    abort();
  }
  *this = *std::move(tensor);
  memset(buffer_.get(), 0, static_cast<size_t>(NumBytes()));
}

TensorView Tensor::view() const { return TensorView{buffer_.get(), dtype_, sizes_, strides_}; }

bool HasDistinctElements(absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims longer than 1
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  // Each dim must step over the whole extent of the dims inside it.
  int64_t extent = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < extent) return false;
    if (__builtin_mul_overflow(stride, size, &extent)) return true;  // nothing lies outside
  }
  return true;
}

namespace {

// One row of CopyElements: `length` elements of `Bytes` bytes each, a
// constant size so the copy is one move.
template <int64_t Bytes>
void CopyRow(const char* in, char* out, int64_t length, int64_t in_step, int64_t out_step) {
  for (int64_t i = 0; i < length; ++i, in += in_step, out += out_step) std::memcpy(out, in, Bytes);
}

}  // namespace

void CopyElements(const TensorView& from, const TensorView& to) {
  const int rank = static_cast<int>(from.rank());
  for (int64_t size : from.sizes) {
    if (size == 0) return;
  }
  const int64_t element = ElementSize(from.dtype);
  const char* source = static_cast<const char*>(from.data);
  char* target = static_cast<char*>(to.data);
  if (rank == 0) {
    std::memcpy(target, source, element);
    return;
  }
  // An odometer over the outer dims; the innermost one element by element.
  const int inner = rank - 1;
  const int64_t length = from.sizes[inner];
  const int64_t from_step = from.strides[inner] * element, to_step = to.strides[inner] * element;
  std::vector<int64_t> index(inner, 0);
  while (true) {
    int64_t from_offset = 0, to_offset = 0;
    for (int d = 0; d < inner; ++d) {
      from_offset += index[d] * from.strides[d];
      to_offset += index[d] * to.strides[d];
    }
    const char* in = source + from_offset * element;
    char* out = target + to_offset * element;
    switch (element) {
      case 8:
        CopyRow<8>(in, out, length, from_step, to_step);
        break;
      case 4:
        CopyRow<4>(in, out, length, from_step, to_step);
        break;
      case 2:
        CopyRow<2>(in, out, length, from_step, to_step);
        break;
      default:
        CopyRow<1>(in, out, length, from_step, to_step);
        break;
    }
    int d = inner - 1;
    while (d >= 0 && ++index[d] == from.sizes[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

int64_t Tensor::NumElements() const {
  int64_t count = 1;
  for (int64_t size : sizes_) count *= size;
  return count;
}

}  // namespace kiln
