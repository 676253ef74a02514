// What a fuzz target asserts beyond "no crash": a broken property aborts,
// which libFuzzer (and the replay tests) report like any crash.
#ifndef KILN_TESTS_FUZZ_FUZZ_CHECKS_H_
#define KILN_TESTS_FUZZ_FUZZ_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/service.pb.h"

namespace kiln::fuzz {

// Aborts, printing `what` and `status`, unless `status` is OK or has one
// of `allowed` codes.
void CheckCode(const absl::Status& status, absl::Span<const absl::StatusCode> allowed,
               const char* what);

// Aborts with `what` unless `condition`.
void Check(bool condition, const std::string& what);

// What kilnd does with a Compile request before the store and the compiler:
// PrepareGraph, ResolveGuards, ComputeCacheKey, GenerateCode. Refusals must
// be InvalidArgument or Unimplemented (a user's graph is wrong or not
// supported); anything else, and an Internal error of GenerateCode for a
// graph that verified, is a Kiln bug and aborts.
void CompileLikeKilnd(const kiln::v1::CompileRequest& request);

// A little-endian reader over fuzz input that yields zeros past the end.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return position_ < size_ ? data_[position_++] : 0; }
  uint64_t Uint64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t{Byte()} << (8 * i);
    return value;
  }
  // The next `length` bytes (fewer at the end).
  std::string Bytes(size_t length);
  size_t remaining() const { return size_ - position_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace kiln::fuzz

#endif  // KILN_TESTS_FUZZ_FUZZ_CHECKS_H_
