// oneDNN in a process: loaded by a product's first trial, not its first
// call; and, since oneDNN fixes a primitive's OpenMP thread count when it
// makes it, primitives made and run at one OpenMP thread whatever the
// process's count, so a convolution never starts an OpenMP team next to
// the pool. A binary of its own, its tests in this order: each needs a
// process in which no earlier oneDNN call loaded it or grew its threads.
#include <dirent.h>
#include <dlfcn.h>

#include <vector>

#include "client/runtime/convolution.h"
#include "client/runtime/fastest_of.h"
#include "client/runtime/runtime.h"
#include "client/runtime/thread_pool.h"
#include "gtest/gtest.h"

// oneDNN's per-thread state it never frees: see convolution_test.cc.
extern "C" const char* __lsan_default_suppressions() { return "leak:libdnnl.so\n"; }

namespace kiln {
namespace {

int ThreadsOfThisProcess() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(tasks)) count += entry->d_name[0] != '.';
  closedir(tasks);
  return count;
}

// A stride-1 convolution of batch 1, `channels` to `channels`, `kernel`
// wide and padded to keep `size` x `size`, on contiguous tensors.
kiln_conv SquareConvolution(long long channels, long long size, long long kernel) {
  kiln_conv c = {};
  c.spatial = 2;
  c.batch = c.groups = 1;
  c.in_channels = c.out_channels = channels;
  for (int d = 0; d < 2; ++d) {
    c.in_size[d] = c.out_size[d] = size;
    c.kernel[d] = kernel;
    c.stride[d] = c.dilation[d] = 1;
    c.padding[d] = kernel / 2;
  }
  const long long src[4] = {channels * size * size, size * size, size, 1};
  const long long weights[4] = {channels * kernel * kernel, kernel * kernel, kernel, 1};
  for (int d = 0; d < 4; ++d) {
    c.src_strides[d] = c.dst_strides[d] = src[d];
    c.weight_strides[d] = weights[d];
  }
  return c;
}

bool DnnlOpened() { return dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

TEST(DnnlThreadsTest, AProductsFirstCallLeavesOneDnnUnloadedAndItsFirstTrialLoadsIt) {
  ASSERT_FALSE(DnnlOpened());
  Runtime runtime(1, GemmLibraries::kFastest);
  // 64 x 256 x 1024, B row-major: OpenBLAS untimed, then a trial of each.
  constexpr int m = 64, n = 256, k = 1024;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  auto multiply = [&] {
    runtime.table()->gemm_f32(runtime.table()->context, m, n, k, 1.0f, a.data(), k, 1, b.data(), n,
                              1, 0.0f, c.data(), n);
  };
  multiply();
  EXPECT_FALSE(DnnlOpened()) << "a process's first result waited for oneDNN";
  multiply();
  multiply();
  EXPECT_TRUE(DnnlOpened());
  EXPECT_EQ(c[n + 1], k * 0.5f * 0.25f);
}

TEST(DnnlThreadsTest, AConvolutionStartsNoOpenMpTeamWhateverTheProcessCount) {
  ThreadPool pool(1);
  // A first convolution loads oneDNN and its OpenMP runtime.
  const kiln_conv tiny = SquareConvolution(1, 4, 1);
  std::vector<float> tiny_src(16, 1.0f), tiny_dst(16);
  const float weight = 2.0f;
  ASSERT_EQ(ConvolveF32(pool, tiny, tiny_src.data(), &weight, nullptr, tiny_dst.data()), 0);
  void* openmp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(openmp, nullptr);
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(openmp, "omp_set_num_threads"));
  auto max_threads = reinterpret_cast<int (*)()>(dlsym(openmp, "omp_get_max_threads"));
  ASSERT_NE(set_threads, nullptr);
  ASSERT_NE(max_threads, nullptr);
  set_threads(4);  // as a process whose OpenMP count is the machine's
  const int before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  // 64 to 64 channels, 3x3 over 28x28: work oneDNN's kernels split
  // across as many OpenMP threads as their primitive was made for. Every
  // call of the shape's trials of both implementations, and after.
  const kiln_conv conv = SquareConvolution(64, 28, 3);
  std::vector<float> src(64 * 28 * 28, 0.5f), weights(64 * 64 * 9, 0.25f), dst(64 * 28 * 28);
  for (int call = 0; call < 2 + 2 * FastestOf<int>::kTrials; ++call) {
    ASSERT_EQ(ConvolveF32(pool, conv, src.data(), weights.data(), nullptr, dst.data()), 0);
  }
  EXPECT_EQ(dst[28 + 1], 64 * 9 * 0.5f * 0.25f) << "row 1, column 1 of channel 0";
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  EXPECT_EQ(max_threads(), 4) << "the thread's own count is restored";
}

}  // namespace
}  // namespace kiln
