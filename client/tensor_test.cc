#include "client/tensor.h"

#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/sanitizers.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

TEST(TensorTest, ShapesPastMemoryAreErrorsNotCrashes) {
  auto overflow = Tensor::Empty(kiln::v1::FLOAT32, {int64_t{1} << 62, 8});
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(overflow.status().message(),
            "a tensor of sizes [4611686018427387904, 8] holds more than 2^63 bytes");
  auto huge = Tensor::Empty(kiln::v1::FLOAT32, {int64_t{1} << 40, int64_t{1} << 20});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().message(),
            "cannot allocate 4611686018427387904 bytes for a tensor of sizes [1099511627776, "
            "1048576]");
  EXPECT_EQ(Tensor::Empty(kiln::v1::FLOAT32, {3, -1}).status().message(),
            "a tensor of sizes [3, -1] has a negative size");
}

TEST(TensorTest, BuffersAre64ByteAligned) {
  for (int64_t n : {0, 1, 3, 17, 1000, 1 << 20}) {
    Tensor tensor = *Tensor::Empty(kiln::v1::FLOAT32, {n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.data<float>()) % 64, 0u) << n;
  }
}

// A transposed, a sliced and an expanded layout of one [3, 4] tensor: each
// reaches its own elements, and copies in and back keep every value.
TEST(TensorTest, StridedTensorsHoldWhatTheirLayoutReaches) {
  Tensor values(kiln::v1::FLOAT64, {3, 4});
  for (int64_t i = 0; i < 12; ++i) values.data<double>()[i] = i;
  struct Layout {
    std::vector<int64_t> strides;
    int64_t storage_elements;
    bool distinct;
  };
  for (const Layout& layout : std::vector<Layout>{
           {{1, 3}, 12, true}, {{10, 1}, 24, true}, {{0, 1}, 4, false}, {{4, 1}, 12, true}}) {
    absl::StatusOr<Tensor> strided =
        Tensor::EmptyStrided(kiln::v1::FLOAT64, {3, 4}, layout.strides);
    ASSERT_TRUE(strided.ok()) << strided.status();
    EXPECT_EQ(strided->StorageBytes(), layout.storage_elements * 8);
    EXPECT_EQ(strided->strides(), layout.strides);
    EXPECT_EQ(HasDistinctElements({3, 4}, layout.strides), layout.distinct);
    CopyElements(values.view(), strided->view());
    Tensor back(kiln::v1::FLOAT64, {3, 4});
    CopyElements(strided->view(), back.view());
    for (int64_t i = 0; i < 12; ++i) {
      // An expanded dim keeps its last row: all rows share one.
      const double want = layout.distinct ? i : 8 + i % 4;
      EXPECT_EQ(back.data<double>()[i], want) << i;
    }
  }
  // Element (1, 2) of the transposed layout is at 1 + 2 * 3.
  Tensor transposed = *Tensor::EmptyStrided(kiln::v1::FLOAT32, {3, 4}, {1, 3});
  Tensor source(kiln::v1::FLOAT32, {3, 4});
  source.data<float>()[6] = 7;  // (1, 2)
  CopyElements(source.view(), transposed.view());
  EXPECT_EQ(transposed.data<float>()[7], 7);
  EXPECT_TRUE(HasDistinctElements({3, 1, 4}, {1, 0, 3})) << "a size-1 dim's stride is moot";
  EXPECT_FALSE(HasDistinctElements({3, 4}, {3, 2})) << "interleaved";
  EXPECT_EQ(Tensor::EmptyStrided(kiln::v1::FLOAT32, {3, 4}, {1}).status().message(),
            "a tensor of sizes [3, 4] and strides [1]: one stride per dim");
  EXPECT_EQ(Tensor::EmptyStrided(kiln::v1::FLOAT32, {3, 4}, {-1, 1}).status().message(),
            "a tensor of sizes [3, 4] and strides [-1, 1] has a negative size or stride");
  EXPECT_EQ(Tensor::EmptyStrided(kiln::v1::FLOAT32, {3, 0}, {1, 3})->StorageBytes(), 0);
}

// What Run(inputs) does per call: an output (4 MiB, and 16 MiB as the
// kernels bench's tail), written from an input that stays, then freed. The
// first 16 MiB block is mapped; once freed, glibc's thresholds rise to its
// size and later blocks come from the heap, where the freed one is reused
// (16 MiB at the top stays under the trim threshold, twice the block).
TEST(TensorTest, ALoopOfLargeOutputsReusesMemory) {
  if (kSanitized) GTEST_SKIP() << "measures glibc's malloc, which ASan and TSan replace";
  for (const int64_t floats : {int64_t{1} << 20, int64_t{1} << 22}) {
    Tensor input(kiln::v1::FLOAT32, {floats});
    auto one_call = [&] {
      Tensor output = *Tensor::Empty(kiln::v1::FLOAT32, {floats});
      memcpy(output.data<float>(), input.data<float>(), floats * sizeof(float));
    };
    // Between calls the worker allocates something small that stays (here
    // a buffer, as printf's first call makes): the freed output is no
    // longer at the top of the heap.
    std::vector<std::unique_ptr<char[]>> kept;
    for (int i = 0; i < 3; ++i) {
      one_call();
      kept.emplace_back(new char[1024]);
    }
    const long before = MinorFaults();
    for (int i = 0; i < 20; ++i) {
      one_call();
      kept.emplace_back(new char[1024]);
    }
    // A fresh block faults in one page per 4 KiB (1,024 or 4,096); reusing
    // the freed one, none (with aligned_alloc, 4 MiB: 1,025 over these 20
    // calls).
    EXPECT_LT(MinorFaults() - before, 256) << floats * 4 << " bytes";
  }
}

}  // namespace
}  // namespace kiln
