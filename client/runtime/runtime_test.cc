#include "client/runtime/runtime.h"

#include <cblas.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "client/fork_aware.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Naive reference: C = A.B with arbitrary strides.
std::vector<float> Reference(int m, int n, int k, const float* a, int a_row, int a_col,
                             const float* b, int b_row, int b_col) {
  std::vector<float> c(m * n, 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += double(a[i * a_row + p * a_col]) * b[p * b_row + j * b_col];
      c[i * n + j] = static_cast<float>(sum);
    }
  return c;
}

class GemmTest : public ::testing::TestWithParam<int> {};

// A [m, k] and B [k, n] of small integers, with room for every layout of
// Layouts.
std::pair<std::vector<float>, std::vector<float>> Operands(int m, int n, int k) {
  std::vector<float> a(m * k * 2), b(k * n * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 13) - 6;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 11) - 5;
  return {std::move(a), std::move(b)};
}

struct Layout {
  int a_row, a_col, b_row, b_col;
};

// Row-major, transposed, and strided (packed by the runtime) operands.
std::vector<Layout> Layouts(int m, int n, int k) {
  return {{k, 1, n, 1}, {1, m, 1, k}, {2 * k, 2, 2 * n, 2}};
}

TEST_P(GemmTest, AnyStridesMatchTheReference) {
  // Big enough to split across threads: by rows (m >= n), then by columns
  // (the last with B deep enough that each chunk packs a transposed B
  // row-major); and small enough that a transposed B is packed whole. On
  // OpenBLAS, and on oneDNN where it takes the product (the first three
  // shapes, row-major or transposed operands), each into a C whose rows
  // are padded, the padding left alone.
  for (const GemmLibraries libraries : {GemmLibraries::kOpenBlas, GemmLibraries::kOneDnn}) {
    Runtime runtime(GetParam(), libraries);
    for (const auto& [m, n, k] :
         {std::tuple<int, int, int>{70, 50, 600}, {20, 300, 600}, {40, 100, 600}, {12, 40, 30}}) {
      const auto [a, b] = Operands(m, n, k);
      for (const Layout& l : Layouts(m, n, k)) {
        const int c_row = n + 3;
        std::vector<float> c(m * c_row, -1);
        runtime.table()->gemm_f32(runtime.table()->context, m, n, k, 1.0f, a.data(), l.a_row,
                                  l.a_col, b.data(), l.b_row, l.b_col, 0.0f, c.data(), c_row);
        const std::vector<float> expected =
            Reference(m, n, k, a.data(), l.a_row, l.a_col, b.data(), l.b_row, l.b_col);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < c_row; ++j) {
            ASSERT_NEAR(c[i * c_row + j], j < n ? expected[i * n + j] : -1.0f, 1e-3)
                << m << "x" << n << "x" << k << " element " << i << ", " << j;
          }
        }
      }
    }
  }
}

// 64 x 256 x 1024 with B stored transposed: a shape whose first calls
// take OpenBLAS on B as stored, OpenBLAS on B copied row-major and (unless
// pinned to OpenBLAS) oneDNN in turn (GemmWays).
struct TransposedBProduct {
  static constexpr int m = 64, n = 256, k = 1024;
  std::vector<float> a = std::vector<float>(m * k), b = std::vector<float>(k * n);
  std::vector<float> expected;
  TransposedBProduct() {
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 13) / 7 - 0.8f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 11) / 5 - 1.1f;
    expected = Reference(m, n, k, a.data(), k, 1, b.data(), 1, k);
  }
  std::vector<float> Run(Runtime& runtime) const {
    std::vector<float> c(m * n, -1);
    runtime.table()->gemm_f32(runtime.table()->context, m, n, k, 1.0f, a.data(), k, 1, b.data(), 1,
                              k, 0.0f, c.data(), n);
    return c;
  }
};

TEST_P(GemmTest, OpenBlasGivesTheSameBitsWithATransposedBCopiedOrNot) {
  Runtime runtime(GetParam(), GemmLibraries::kOpenBlas);
  const TransposedBProduct product;
  std::vector<float> first;
  for (int call = 0; call < 2 * GemmWays::kTrials + 3; ++call) {
    const std::vector<float> c = product.Run(runtime);
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], product.expected[i], 2e-3) << "call " << call;
    }
    if (call == 0) first = c;
    EXPECT_EQ(c, first) << "call " << call;
  }
}

TEST_P(GemmTest, EveryWayMatchesTheReferenceThroughTheTrialsAndAfter) {
  // The runtime's own choice (OpenBLAS either way, or oneDNN), and oneDNN
  // pinned; each element sums 1024 products of terms below 2 in size.
  for (const GemmLibraries libraries : {GemmLibraries::kFastest, GemmLibraries::kOneDnn}) {
    Runtime runtime(GetParam(), libraries);
    const TransposedBProduct product;
    for (int call = 0; call < 3 * GemmWays::kTrials + 3; ++call) {
      const std::vector<float> c = product.Run(runtime);
      for (size_t i = 0; i < c.size(); ++i) {
        ASSERT_NEAR(c[i], product.expected[i], 2e-3) << "call " << call << ", element " << i;
      }
    }
  }
}

GemmWays::Shape Float32(int64_t m, int64_t k, int64_t n, bool b_transposed, int threads = 1) {
  return {1, m, k, n, 4, threads, b_transposed, /*onednn_layout=*/true};
}

std::vector<GemmWay> Ways(const GemmWays& ways, const GemmWays::Shape& shape) {
  const GemmWays::Candidates candidates = ways.WaysFor(shape);
  return std::vector<GemmWay>(candidates.way, candidates.way + candidates.count);
}

TEST(GemmWaysTest, EachShapeIsOfferedTheWaysThatCanWinForIt) {
  using W = GemmWay;
  const GemmWays fastest(GemmLibraries::kFastest);
  // A small transposed B is always copied; a large one, or one against a
  // short A, used as stored; in between both are tried.
  EXPECT_EQ(Ways(fastest, Float32(64, 128, 128, true)), (std::vector{W::kOpenBlasCopiedB}));
  EXPECT_EQ(Ways(fastest, Float32(31, 1024, 256, true)), (std::vector{W::kOpenBlas, W::kOneDnn}));
  EXPECT_EQ(Ways(fastest, Float32(197, 3072, 768, true)), (std::vector{W::kOpenBlas, W::kOneDnn}));
  EXPECT_EQ(Ways(fastest, Float32(64, 1024, 512, true)),
            (std::vector{W::kOpenBlas, W::kOpenBlasCopiedB, W::kOneDnn}));
  EXPECT_EQ(Ways(fastest, Float32(64, 1024, 512, false)), (std::vector{W::kOpenBlas, W::kOneDnn}));
  // oneDNN only for products of 2^21 multiply-adds or more, in a layout it
  // takes, unless ruled out.
  EXPECT_EQ(Ways(fastest, Float32(128, 128, 128, false)), (std::vector{W::kOpenBlas, W::kOneDnn}));
  EXPECT_EQ(Ways(fastest, Float32(128, 127, 128, false)), (std::vector{W::kOpenBlas}));
  GemmWays::Shape strided = Float32(64, 1024, 512, false);
  strided.onednn_layout = false;
  EXPECT_EQ(Ways(fastest, strided), (std::vector{W::kOpenBlas}));
  GemmWays::Shape doubles = Float32(64, 1024, 512, true);
  doubles.element_bytes = 8;
  doubles.onednn_layout = false;
  EXPECT_EQ(Ways(fastest, doubles), (std::vector{W::kOpenBlas}));  // 4 MiB: as stored
  EXPECT_EQ(Ways(GemmWays(GemmLibraries::kOpenBlas), Float32(64, 1024, 512, true)),
            (std::vector{W::kOpenBlas, W::kOpenBlasCopiedB}));
  const GemmWays onednn(GemmLibraries::kOneDnn);
  EXPECT_EQ(Ways(onednn, Float32(64, 1024, 512, true)), (std::vector{W::kOneDnn}));
  EXPECT_EQ(Ways(onednn, Float32(16, 64, 64, true)), (std::vector{W::kOpenBlasCopiedB}));
}

TEST(GemmWaysTest, AProductOfOneRowOrOneColumnIsOpenBlasOnTheOperandsAsStored) {
  // A matrix-vector product (OpenBLAS's GEMV) has nothing to choose: no
  // copy of a small transposed B, no oneDNN, whichever libraries are asked.
  using W = GemmWay;
  for (const GemmLibraries libraries :
       {GemmLibraries::kFastest, GemmLibraries::kOpenBlas, GemmLibraries::kOneDnn}) {
    const GemmWays ways(libraries);
    EXPECT_EQ(Ways(ways, Float32(1, 64, 128, true)), (std::vector{W::kOpenBlas}));
    EXPECT_EQ(Ways(ways, Float32(1, 2048, 1024, false)), (std::vector{W::kOpenBlas}));
    EXPECT_EQ(Ways(ways, Float32(1, 2048, 1024, true)), (std::vector{W::kOpenBlas}));
    EXPECT_EQ(Ways(ways, Float32(2048, 1024, 1, false)), (std::vector{W::kOpenBlas}));
  }
}

TEST(GemmWaysTest, EachWayIsTimedInTurnThenTheFastestKept) {
  using W = GemmWay;
  GemmWays ways(GemmLibraries::kFastest);
  // A different winner per shape; the same shape over two threads is a
  // shape of its own.
  for (const auto& [n, threads, winner] : {std::tuple<int, int, W>{256, 1, W::kOpenBlasCopiedB},
                                           {512, 1, W::kOneDnn},
                                           {256, 2, W::kOpenBlas}}) {
    const GemmWays::Shape shape = Float32(64, 1024, n, true, threads);
    std::vector<GemmWay> taken;
    for (int call = 0; call < 1 + 3 * GemmWays::kTrials + 3; ++call) {
      ways.Run(shape, [&](GemmWay way) {
        taken.push_back(way);
        // The winner's calls take 1 ms, the others' 3 ms.
        std::this_thread::sleep_for(std::chrono::milliseconds(way == winner ? 1 : 3));
      });
    }
    std::vector<GemmWay> expected = {W::kOpenBlas};  // the untimed first call
    for (int trial = 0; trial < GemmWays::kTrials; ++trial) {
      expected.insert(expected.end(), {W::kOpenBlas, W::kOpenBlasCopiedB, W::kOneDnn});
    }
    expected.insert(expected.end(), {winner, winner, winner});
    EXPECT_EQ(taken, expected) << n << " " << threads;
  }
}

TEST(GemmWaysTest, OnlyTheFirstShapesAreOfferedOneDnn) {
  GemmWays ways(GemmLibraries::kFastest);
  // Three calls of a shape with two ways: untimed OpenBLAS, then a trial
  // of each.
  auto offered = [&](int64_t m) {
    bool onednn = false;
    for (int call = 0; call < 3; ++call) {
      ways.Run(Float32(m, 1024, 512, false),
               [&](GemmWay way) { onednn |= way == GemmWay::kOneDnn; });
    }
    return onednn;
  };
  for (int shape = 0; shape < GemmWays::kMaxOneDnnShapes; ++shape) {
    ASSERT_TRUE(offered(64 + shape)) << shape;
  }
  EXPECT_FALSE(offered(64 + GemmWays::kMaxOneDnnShapes));
  EXPECT_TRUE(offered(64)) << "a shape offered oneDNN keeps it";
}

TEST(GemmWaysTest, KilnGemmPinsALibrary) {
  const char* saved = getenv("KILN_GEMM");
  for (const auto& [value, libraries] :
       {std::pair<const char*, GemmLibraries>{"openblas", GemmLibraries::kOpenBlas},
        {"onednn", GemmLibraries::kOneDnn},
        {"fastest", GemmLibraries::kFastest},
        {"", GemmLibraries::kFastest},
        {"mkl", GemmLibraries::kFastest}}) {
    setenv("KILN_GEMM", value, 1);
    EXPECT_EQ(GemmLibrariesFromEnvironment(), libraries) << value;
  }
  if (saved != nullptr) {
    setenv("KILN_GEMM", saved, 1);
  } else {
    unsetenv("KILN_GEMM");
  }
}

TEST_P(GemmTest, ABetaOfZeroIgnoresWhatCHeldAndLeavesItsRowPaddingAlone) {
  // The runtime clears C itself for beta = 0 (then has OpenBLAS add): a C
  // full of NaN gives the product; the padding between C's rows keeps its
  // values; beta = 1 adds to what C held. Split by rows and by columns.
  Runtime runtime(GetParam());
  for (const auto& [m, n, k] : {std::tuple<int, int, int>{70, 50, 600}, {20, 300, 600}}) {
    std::vector<float> a(m * k), b(k * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 13) - 6;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 11) - 5;
    const std::vector<float> expected = Reference(m, n, k, a.data(), k, 1, b.data(), n, 1);
    const int c_row = n + 3;
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> c(m * c_row, 7.0f);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) c[i * c_row + j] = beta == 0.0f ? NAN : 2.0f;
      }
      runtime.table()->gemm_f32(runtime.table()->context, m, n, k, 1.0f, a.data(), k, 1, b.data(),
                                n, 1, beta, c.data(), c_row);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < c_row; ++j) {
          const float want = j >= n ? 7.0f : expected[i * n + j] + (beta == 0.0f ? 0.0f : 2.0f);
          ASSERT_NEAR(c[i * c_row + j], want, 1e-3)
              << m << "x" << n << " beta " << beta << " (" << i << ", " << j << ")";
        }
      }
    }
    std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
    std::vector<double> c64(m * c_row, 7.0);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) c64[i * c_row + j] = NAN;
    }
    runtime.table()->gemm_f64(runtime.table()->context, m, n, k, 1.0, a64.data(), k, 1, b64.data(),
                              n, 1, 0.0, c64.data(), c_row);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < c_row; ++j) {
        ASSERT_EQ(c64[i * c_row + j], j >= n ? 7.0 : expected[i * n + j]) << i << ", " << j;
      }
    }
  }
}

TEST_P(GemmTest, AProductOfOneRowOrOneColumnIsAMatrixVectorProduct) {
  // One row of A (a decode step's activations against a weight), one
  // column of B, and both; B (or A) row-major, transposed and strided;
  // small, and large enough to split across threads. C starts as NaN (beta
  // 0) or 2 (beta 1); the gaps between its elements keep their 7s.
  Runtime runtime(GetParam());
  for (const auto& [m, n, k] : {std::tuple<int, int, int>{1, 300, 600},
                                {1, 2048, 1100},
                                {2048, 1, 1100},
                                {300, 1, 600},
                                {1, 1, 700}}) {
    const auto [a, b] = Operands(m, n, k);
    for (const Layout& l : Layouts(m, n, k)) {
      const std::vector<float> expected =
          Reference(m, n, k, a.data(), l.a_row, l.a_col, b.data(), l.b_row, l.b_col);
      const int c_row = n + 3;  // n = 1: a column whose elements are 4 apart
      for (float beta : {0.0f, 1.0f}) {
        std::vector<float> c(m * c_row, 7.0f);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) c[i * c_row + j] = beta == 0.0f ? NAN : 2.0f;
        }
        runtime.table()->gemm_f32(runtime.table()->context, m, n, k, 1.0f, a.data(), l.a_row,
                                  l.a_col, b.data(), l.b_row, l.b_col, beta, c.data(), c_row);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < c_row; ++j) {
            const float want = j >= n ? 7.0f : expected[i * n + j] + (beta == 0.0f ? 0.0f : 2.0f);
            ASSERT_NEAR(c[i * c_row + j], want, 1e-3)
                << m << "x" << n << "x" << k << " beta " << beta << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
  // float64, one column of a transposed A.
  const int m = 40, k = 30;
  std::vector<double> a(m * k), b(k), c(m, NAN);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>((i * 7919) % 13) - 6;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>((i * 104729) % 11) - 5;
  runtime.table()->gemm_f64(runtime.table()->context, m, 1, k, 1.0, a.data(), 1, m, b.data(), 1, 1,
                            0.0, c.data(), 1);
  for (int i = 0; i < m; ++i) {
    double want = 0;
    for (int p = 0; p < k; ++p) want += a[p * m + i] * b[p];
    ASSERT_EQ(c[i], want) << i;
  }
}

TEST_P(GemmTest, SyrkIsASymmetricProduct) {
  Runtime runtime(GetParam());
  for (int n : {5, 70, 300}) {
    const int k = 90;
    std::vector<float> a(n * k);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 13) - 6;
    // Row-major, and transposed storage (a column-major view).
    for (bool transposed : {false, true}) {
      const int row = transposed ? 1 : k, col = transposed ? n : 1;
      std::vector<float> c(n * n, NAN);  // ignored: a syrk has beta = 0
      runtime.table()->syrk_f32(runtime.table()->context, n, k, a.data(), row, col, c.data(), n);
      const std::vector<float> expected =
          Reference(n, n, k, a.data(), row, col, a.data(), col, row);
      for (int i = 0; i < n * n; ++i) ASSERT_NEAR(c[i], expected[i], 1e-2) << n << " " << i;
    }
  }
}

TEST_P(GemmTest, BatchedGemmMatchesTheReference) {
  Runtime runtime(GetParam());
  // Small per element, large in all: spread by batch elements across the
  // pool; B row-major and transposed (packed).
  const int batch = 8, m = 64, n = 48, k = 72;
  std::vector<float> a(batch * m * k), b(batch * k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 13) - 6;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 11) - 5;
  for (bool transposed : {false, true}) {
    const int b_row = transposed ? 1 : n, b_col = transposed ? k : 1;
    std::vector<float> c(batch * m * n, -1);
    runtime.table()->bmm_f32(runtime.table()->context, batch, m, n, k, a.data(), m * k, k, 1,
                             b.data(), k * n, b_row, b_col, c.data(), m * n, n);
    for (int e = 0; e < batch; ++e) {
      const std::vector<float> expected =
          Reference(m, n, k, a.data() + e * m * k, k, 1, b.data() + e * k * n, b_row, b_col);
      for (int i = 0; i < m * n; ++i) {
        ASSERT_NEAR(c[e * m * n + i], expected[i], 1e-3) << transposed << " " << e << " " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, GemmTest, ::testing::Values(1, 2, 3));

// Eager PyTorch shares OpenBLAS's process-wide thread count: Kiln's GEMMs
// hold it at one while they run and leave it as they found it.
TEST(GemmThreadsTest, OpenBlasRunsOneThreadDuringKilnGemmsOnlyAndIsRestored) {
  openblas_set_num_threads(3);
  Runtime runtime(1);
  const kiln_runtime* table = runtime.table();
  const int n = 1200;
  std::vector<float> a(n * n, 1.0f), b(n * n, 1.0f), c(n * n);
  std::atomic<bool> done{false};
  std::thread gemm([&] {
    for (int i = 0; i < 3; ++i) {
      table->gemm_f32(table->context, n, n, n, 1.0f, a.data(), n, 1, b.data(), n, 1, 0.0f, c.data(),
                      n);
    }
    done = true;
  });
  bool saw_one = false;
  while (!done) saw_one |= openblas_get_num_threads() == 1;
  gemm.join();
  EXPECT_TRUE(saw_one);
  EXPECT_EQ(c[n * n - 1], static_cast<float>(n));
  EXPECT_EQ(openblas_get_num_threads(), 3);

  table->syrk_f32(table->context, 64, 32, a.data(), 32, 1, c.data(), 64);
  table->bmm_f32(table->context, 4, 16, 16, 16, a.data(), 256, 16, 1, b.data(), 256, 16, 1,
                 c.data(), 256, 16);
  EXPECT_EQ(openblas_get_num_threads(), 3);
  openblas_set_num_threads(1);
}

TEST(ThreadPoolTest, CoversTheRangeOnceAndNestsInline) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(1000, 10, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++hits[i];
    pool.ParallelFor(4, 1, [](int64_t, int64_t) {});  // nested: inline, no deadlock
  });
  for (const auto& hit : hits) ASSERT_EQ(hit.load(), 1);
  // More threads than a short range needs: no empty or inverted chunk.
  ThreadPool wide(4);
  std::atomic<int> covered{0};
  wide.ParallelFor(5, 1, [&](int64_t begin, int64_t end) {
    EXPECT_LT(begin, end);
    covered += static_cast<int>(end - begin);
  });
  EXPECT_EQ(covered, 5);
  int calls = 0;
  pool.ParallelFor(5, 100, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 5);
  });
  EXPECT_EQ(calls, 1);
}

// Threads of this process whose name (/proc's comm) is `name`.
int CountThreadsNamed(const std::string& name) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

// Another pool's loops (torch's, in the Python extension): every loop and
// the thread count are theirs, and this pool starts no thread of its own.
TEST(ThreadPoolTest, RunsOnAnotherPoolsLoopsAndStartsNoThread) {
  static std::atomic<int> delegated{0};
  static constexpr ThreadPool::Loops kInline = {
      [] { return 5; },
      [](int64_t n, int64_t grain, ThreadPool::Body body) {
        ++delegated;
        EXPECT_EQ(grain, 10);
        body(0, n);
      }};
  const int named_before = CountThreadsNamed("kiln-pool");
  ThreadPool pool(3);
  pool.RunOn(&kInline);
  EXPECT_EQ(pool.threads(), 5);
  int64_t covered = 0;
  pool.ParallelFor(1000, 10, [&](int64_t begin, int64_t end) { covered += end - begin; });
  EXPECT_EQ(covered, 1000);
  EXPECT_EQ(delegated, 1);
  EXPECT_EQ(CountThreadsNamed("kiln-pool"), named_before);
  pool.RunOn(nullptr);
  EXPECT_EQ(pool.threads(), 3);
  std::atomic<int64_t> again{0};
  pool.ParallelFor(1000, 10, [&](int64_t begin, int64_t end) { again += end - begin; });
  EXPECT_EQ(again, 1000);
  EXPECT_EQ(delegated, 1);
  EXPECT_EQ(CountThreadsNamed("kiln-pool"), named_before + 2) << "its own workers, named";
}

// Pre-fork servers: a pool whose workers ran in the parent runs loops in
// the child, with workers of its own (the parent's did not survive).
TEST(ThreadPoolTest, AForkedChildRunsParallelLoops) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  auto add = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  };
  pool.ParallelFor(1000, 10, add);
  ASSERT_EQ(sum, 499500);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hung loop dies of SIGALRM rather than hanging the test
    sum = 0;
    pool.ParallelFor(1000, 10, add);
    pool.ParallelFor(1000, 10, add);
    _exit(sum == 2 * 499500 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  sum = 0;
  pool.ParallelFor(1000, 10, add);
  EXPECT_EQ(sum, 499500) << "the parent's pool still works";
}

// Pre-fork servers fork while other threads run compiled calls: each
// call holds a ForkGuard (as CompiledGraph::Run does), so a child never
// starts with a lock or a count that a parent thread held mid-GEMM
// (OpenBLAS's thread count is held at one while a GEMM runs, and restored
// by the last one out).
TEST(ForkTest, ChildrenForkedWhileEightThreadsRunGemmsRunThemToo) {
  openblas_set_num_threads(2);  // so that every GEMM changes it, under a lock
  Runtime runtime(2);
  const kiln_runtime* table = runtime.table();
  const int n = 160;  // 4 M multiply-adds: split across the pool
  const std::vector<float> a(n * n, 1.0f), b(n * n, 2.0f);
  auto gemm = [&](std::vector<float>& c) {
    const ForkGuard call;
    table->gemm_f32(table->context, n, n, n, 1.0f, a.data(), n, 1, b.data(), n, 1, 0.0f, c.data(),
                    n);
    return c[0] == 2.0f * n && c[n * n - 1] == 2.0f * n;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::vector<float> c(n * n);
      while (!stop) wrong += gemm(c) ? 0 : 1;
    });
  }
  int hung = 0, failed = 0;
  for (int fork_index = 0; fork_index < 24; ++fork_index) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(10);  // a hung child dies of SIGALRM rather than hanging the test
      std::vector<float> c(n * n);
      const bool right = gemm(c) && gemm(c);
      _exit(right && openblas_get_num_threads() == 2 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    hung += WIFSIGNALED(status) ? 1 : 0;
    failed += WIFEXITED(status) && WEXITSTATUS(status) != 0 ? 1 : 0;
  }
  stop = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(hung, 0) << "children that hung (killed by SIGALRM) of 24";
  EXPECT_EQ(failed, 0) << "children whose GEMM or OpenBLAS thread count was wrong";
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(openblas_get_num_threads(), 2);
  openblas_set_num_threads(1);
}

}  // namespace
}  // namespace kiln
