#include "codegen/compile/worker_compiler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "codegen/compile/fallback_compiler.h"
#include "codegen/compile/subprocess_compiler.h"
#include "common/files.h"
#include "common/sanitizers.h"
#include "common/testing/tiny_filesystem.h"
#include "gtest/gtest.h"

// Under ASan or TSan the worker skips RLIMIT_AS and their runtimes catch
// SIGBUS (common/sanitizers.h): the tests of those two behaviours run in the
// default build only.
constexpr char kSanitizedReason[] =
    "a sanitizer's runtime handles SIGBUS and address-space limits itself; the default build "
    "runs this test";

namespace kiln {
namespace {

// Relative to the test's working directory, the runfiles root.
constexpr char kWorkerPath[] = "codegen/compile/worker/kiln-compile-worker";

std::string AnswerSource(int answer) {
  return absl::StrCat(
      "extern \"C\" __attribute__((visibility(\"default\"))) int kiln_answer() { return ", answer,
      "; }\n"
      "int hidden_helper() { return 1; }\n");
}

class WorkerCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kilnXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override { RemoveRecursively(dir_).IgnoreError(); }

  WorkerCompilerOptions Options(int jobs = 1) const {
    WorkerCompilerOptions options;
    options.worker_path = kWorkerPath;
    options.jobs = jobs;
    options.timeout = absl::Seconds(60);
    options.temp_root = dir_;
    options.allow_fault_injection = true;
    return options;
  }

  // dlopens the .so and returns kiln_answer(), or -1 with a test failure.
  int LoadAndCallAnswer(const CompiledObject& object, const std::string& name) {
    const std::string path = absl::StrCat(dir_, "/", name, ".so");
    EXPECT_TRUE(WriteFileAtomically(path, object.shared_object, 0500).ok());
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (handle == nullptr) return -1;
    auto answer = reinterpret_cast<int (*)()>(dlsym(handle, "kiln_answer"));
    EXPECT_NE(answer, nullptr);
    EXPECT_EQ(dlsym(handle, "_Z13hidden_helperv"), nullptr) << "-fvisibility=hidden";
    const int result = answer != nullptr ? answer() : -1;
    dlclose(handle);
    return result;
  }

  // Names in dir_ other than the .so files the test wrote.
  std::vector<std::string> WorkerDirectories() const {
    std::vector<std::string> names;
    DIR* dir = opendir(dir_.c_str());
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind("kiln-worker", 0) == 0) names.push_back(name);
    }
    closedir(dir);
    return names;
  }

  std::string dir_;
};

TEST_F(WorkerCompilerTest, CompilesALoadableFreestandingObject) {
  WorkerCompiler compiler(Options());
  EXPECT_STREQ(compiler.name(), "worker");
  auto object = compiler.Compile(AnswerSource(42), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_GT(object->compile_ms, 0);
  EXPECT_EQ(LoadAndCallAnswer(*object, "a"), 42);
}

TEST_F(WorkerCompilerTest, WarmUpStartsTheWorkerTheFirstCompileUses) {
  auto worker = std::make_unique<WorkerCompiler>(Options());
  WorkerCompiler* const started = worker.get();
  // Through the fallback, as kilnd holds it: it warms its primary.
  FallbackCompiler compiler(std::move(worker),
                            std::make_unique<SubprocessCompiler>(dir_, absl::Seconds(60)));
  EXPECT_EQ(started->workers_started(), 0);
  ASSERT_TRUE(compiler.Warmup().ok());
  EXPECT_EQ(started->workers_started(), 1);
  auto object = compiler.Compile(AnswerSource(5), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->compiler, "worker");
  EXPECT_EQ(started->workers_started(), 1);
}

TEST_F(WorkerCompilerTest, ProducesTheSameBytesAsTheClangSubprocess) {
  WorkerCompiler worker(Options());
  SubprocessCompiler subprocess(dir_ + "/subprocess", absl::Seconds(60));
  auto from_worker = worker.Compile(AnswerSource(7), kiln::v1::TARGET_NATIVE);
  auto from_subprocess = subprocess.Compile(AnswerSource(7), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(from_worker.ok()) << from_worker.status();
  ASSERT_TRUE(from_subprocess.ok()) << from_subprocess.status();
  EXPECT_TRUE(from_worker->shared_object == from_subprocess->shared_object)
      << "worker and clang++ disagree: check CodegenFlags() and the link arguments in "
         "worker/in_process_compiler.cc against `clang++ -###`";
}

// One worker keeps an invocation per target: each target's bytes are
// clang++'s for that target, and the targets' vector code differs.
TEST_F(WorkerCompilerTest, EachTargetProducesTheClangSubprocesssBytesForIt) {
  constexpr char kLoop[] =
      "extern \"C\" __attribute__((visibility(\"default\"))) void kiln_scale(\n"
      "    float* __restrict__ x, int n) { for (int i = 0; i < n; ++i) x[i] = x[i] * 2.0f + 1.0f; "
      "}\n";
  WorkerCompiler worker(Options());
  SubprocessCompiler subprocess(dir_ + "/subprocess", absl::Seconds(60));
  std::map<kiln::v1::Target, std::string> objects;
  for (kiln::v1::Target target : AllTargets()) {
    auto from_worker = worker.Compile(kLoop, target);
    auto from_subprocess = subprocess.Compile(kLoop, target);
    ASSERT_TRUE(from_worker.ok()) << from_worker.status();
    ASSERT_TRUE(from_subprocess.ok()) << from_subprocess.status();
    EXPECT_TRUE(from_worker->shared_object == from_subprocess->shared_object) << TargetName(target);
    objects[target] = from_worker->shared_object;
  }
  EXPECT_NE(objects[kiln::v1::TARGET_X86_64_V3], objects[kiln::v1::TARGET_X86_64_V4]);
  EXPECT_EQ(worker.workers_started(), 1);
  auto unknown = worker.Compile(kLoop, static_cast<kiln::v1::Target>(9));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "cannot compile for unknown target 9");
}

TEST_F(WorkerCompilerTest, InvalidSourceIsAnInternalErrorWithDiagnostics) {
  WorkerCompiler compiler(Options());
  auto object = compiler.Compile("this is not C++;", kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(object.status().message().find("kernel.cc:1:1: error:"), std::string::npos)
      << object.status();
  // A failed compile leaves the worker usable.
  ASSERT_TRUE(compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

// A crash is taken to be transient: the compile is retried on a fresh
// worker and succeeds.
TEST_F(WorkerCompilerTest, CrashIsRetriedOnAFreshWorker) {
  {
    WorkerCompilerOptions options = Options();
    options.injected_fault = WorkerFault::kCrash;
    options.injected_fault_count = 1;
    WorkerCompiler compiler(options);
    auto object = compiler.Compile(AnswerSource(2), kiln::v1::TARGET_NATIVE);
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_EQ(LoadAndCallAnswer(*object, "after_crash"), 2);
    EXPECT_EQ(compiler.workers_started(), 2);
    EXPECT_EQ(WorkerDirectories().size(), 1u) << "the crashed worker's directory is removed";
  }
  EXPECT_TRUE(WorkerDirectories().empty());
}

// The case: kilnd's worker SIGKILLed while it holds a request.
TEST_F(WorkerCompilerTest, WorkerKilledMidCompileIsRetriedOnAFreshWorker) {
  WorkerCompilerOptions options = Options();
  options.injected_fault = WorkerFault::kHang;  // so that the kill finds it mid-compile
  options.injected_fault_count = 1;
  std::vector<pid_t> killed;
  options.after_send = [&killed](pid_t pid) {
    if (!killed.empty()) return;
    killed.push_back(pid);
    kill(pid, SIGKILL);
  };
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(4), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->compiler, "worker");
  EXPECT_EQ(LoadAndCallAnswer(*object, "after_kill"), 4);
  EXPECT_EQ(killed.size(), 1u);
  EXPECT_EQ(compiler.workers_started(), 2);
}

TEST_F(WorkerCompilerTest, CrashOnTheRetryTooIsUnavailable) {
  WorkerCompilerOptions options = Options();
  options.injected_fault = WorkerFault::kCrash;
  options.injected_fault_count = 2;
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(object.status().message().find(
                "compile worker crashed (signal 11); its stderr is in the daemon's log; the "
                "compile was retried once on a fresh worker"),
            std::string::npos)
      << object.status();
  EXPECT_EQ(compiler.workers_started(), 2);
  ASSERT_TRUE(compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE).ok())
      << "the next compile gets a fresh worker";
}

// As kilnd holds its compilers: workers that crash twice leave the compile
// to clang++.
TEST_F(WorkerCompilerTest, WorkersThatKeepCrashingFallBackToTheSubprocess) {
  WorkerCompilerOptions options = Options();
  options.injected_fault = WorkerFault::kCrash;
  options.injected_fault_count = 2;
  auto worker = std::make_unique<WorkerCompiler>(options);
  WorkerCompiler* const workers = worker.get();
  FallbackCompiler compiler(std::move(worker),
                            std::make_unique<SubprocessCompiler>(dir_, absl::Seconds(60)));
  auto object = compiler.Compile(AnswerSource(6), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->compiler, "subprocess");
  EXPECT_EQ(LoadAndCallAnswer(*object, "from_subprocess"), 6);
  EXPECT_EQ(workers->workers_started(), 2);
}

TEST_F(WorkerCompilerTest, HangIsDeadlineExceededAndTheNextCompileGetsAFreshWorker) {
  WorkerCompilerOptions options = Options();
  options.timeout = absl::Seconds(2);
  options.injected_fault = WorkerFault::kHang;
  options.injected_fault_count = 1;
  WorkerCompiler compiler(options);
  auto hung = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(hung.status().message().find("did not finish within 2s"), std::string::npos)
      << hung.status();
  EXPECT_EQ(compiler.workers_started(), 1) << "a compile that timed out is not retried";
  auto object = compiler.Compile(AnswerSource(3), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(LoadAndCallAnswer(*object, "after_hang"), 3);
  EXPECT_EQ(compiler.workers_started(), 2);
}

TEST_F(WorkerCompilerTest, FaultInjectionIsRefusedUnlessEnabled) {
  WorkerCompilerOptions options = Options();
  options.allow_fault_injection = false;
  options.injected_fault = WorkerFault::kCrash;
  options.injected_fault_count = 1;
  WorkerCompiler compiler(options);
  auto refused = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.status().message().find("--allow_fault_injection"), std::string::npos)
      << refused.status();
  ASSERT_TRUE(compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

// A source that makes clang allocate without bound meets the worker's
// RLIMIT_AS: a clear error naming the limit, no retry, no crash loop.
TEST_F(WorkerCompilerTest, ExceedingTheMemoryLimitIsResourceExhaustedNamingIt) {
  if (kSanitized) GTEST_SKIP() << kSanitizedReason;
  WorkerCompilerOptions options = Options();
  options.memory_limit_bytes = uint64_t{3} << 30;
  options.injected_fault = WorkerFault::kExceedMemory;
  options.injected_fault_count = 1;
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(object.status().message(),
            "compile exceeded the compiler's memory limit of 3 GiB (RLIMIT_AS)");
  EXPECT_EQ(compiler.workers_started(), 1) << "not retried";
  auto next = compiler.Compile(AnswerSource(8), kiln::v1::TARGET_NATIVE);
  ASSERT_TRUE(next.ok()) << "a normal compile fits the limit: " << next.status();
  EXPECT_EQ(LoadAndCallAnswer(*next, "under_limit"), 8);
}

TEST_F(WorkerCompilerTest, RemovesDirectoriesOfDeadWorkersAtStart) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/kiln-workerAbC123/nested", 0700).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/kiln-workerAbC123/kernel.o", "x", 0600).ok());
  ASSERT_TRUE(MakeDirectories(dir_ + "/kiln-worker9zZ9zZ", 0700).ok());
  ASSERT_TRUE(MakeDirectories(dir_ + "/not-a-worker", 0700).ok());
  ASSERT_EQ(WorkerDirectories().size(), 2u);
  WorkerCompiler compiler(Options());
  EXPECT_TRUE(WorkerDirectories().empty());
  EXPECT_EQ(access((dir_ + "/not-a-worker").c_str(), F_OK), 0)
      << "only kiln-worker* entries are the compiler's";
}

// Disk full, on a real full file system: the worker's own write of the
// object fails with ENOSPC, and it says so in its answer.
TEST_F(WorkerCompilerTest, FullDiskIsResourceExhaustedNamingTheDirectory) {
  const std::string tiny = dir_ + "/tiny";
  ASSERT_TRUE(MakeDirectories(tiny, 0700).ok());
  auto filesystem = TinyFilesystem::Mount(tiny, 64 << 10);
  if (!filesystem.ok()) GTEST_SKIP() << "needs root to mount a tmpfs: " << filesystem.status();
  ASSERT_TRUE((*filesystem)->FillLeaving(0).ok());
  WorkerCompilerOptions options = Options();
  options.temp_root = tiny;
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted) << object.status();
  EXPECT_EQ(object.status().message(), "no space left on device in " + tiny);
  EXPECT_EQ(compiler.workers_started(), 1) << "not a crash: not retried";

  ASSERT_TRUE((*filesystem)->Empty().ok());
  EXPECT_TRUE(compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE).ok())
      << "space freed, compiles work again";
}

// With room for the object but not the .so, lld (writing through a shared
// mapping) dies of SIGBUS: still a full disk, not a crash to retry.
TEST_F(WorkerCompilerTest, LinkerBusErrorOnAFullDiskIsResourceExhausted) {
  if (kSanitized) GTEST_SKIP() << kSanitizedReason;
  const std::string tiny = dir_ + "/tiny";
  ASSERT_TRUE(MakeDirectories(tiny, 0700).ok());
  auto filesystem = TinyFilesystem::Mount(tiny, 64 << 10);
  if (!filesystem.ok()) GTEST_SKIP() << "needs root to mount a tmpfs: " << filesystem.status();
  ASSERT_TRUE((*filesystem)->FillLeaving(4096).ok());
  WorkerCompilerOptions options = Options();
  options.temp_root = tiny;
  auto worker = std::make_unique<WorkerCompiler>(options);
  WorkerCompiler* const workers = worker.get();
  FallbackCompiler compiler(std::move(worker),
                            std::make_unique<SubprocessCompiler>(tiny, absl::Seconds(60)));
  auto object = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kResourceExhausted) << object.status();
  EXPECT_EQ(object.status().message(), "no space left on device in " + tiny);
  EXPECT_EQ(workers->workers_started(), 1) << "not a crash: not retried";
}

TEST_F(WorkerCompilerTest, FourConcurrentCompilesShareTwoWorkers) {
  WorkerCompiler compiler(Options(/*jobs=*/2));
  std::vector<absl::StatusOr<CompiledObject>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = compiler.Compile(AnswerSource(100 + i), kiln::v1::TARGET_NATIVE); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(LoadAndCallAnswer(*results[i], absl::StrCat("concurrent", i)), 100 + i);
  }
  EXPECT_LE(compiler.workers_started(), 2);
}

// PR_SET_PDEATHSIG fires when the spawning *thread* exits; workers are
// spawned from a thread owned by the compiler, so they outlive callers.
TEST_F(WorkerCompilerTest, WorkersOutliveTheThreadThatStartedThem) {
  WorkerCompiler compiler(Options());
  std::thread([&] {
    ASSERT_TRUE(compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE).ok());
  }).join();
  absl::SleepFor(absl::Milliseconds(200));  // time for a death signal to land
  ASSERT_TRUE(compiler.Compile(AnswerSource(2), kiln::v1::TARGET_NATIVE).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

TEST_F(WorkerCompilerTest, MissingWorkerBinaryIsUnavailable) {
  WorkerCompilerOptions options = Options();
  options.worker_path = dir_ + "/no-such-worker";
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(1), kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(object.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(object.status().message().find("no-such-worker"), std::string::npos) << object.status();
  EXPECT_TRUE(WorkerDirectories().empty());
}

TEST(FindCompileWorkerTest, FindsTheWorkerInRunfiles) {
  auto path = FindCompileWorker();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_NE(path->find(kWorkerPath), std::string::npos) << *path;
}

// The point of the worker: this process never maps LLVM.
TEST(WorkerCompilerLinkTest, ThisProcessDoesNotLoadLlvm) {
  auto maps = ReadFile("/proc/self/maps");
  ASSERT_TRUE(maps.ok());
  EXPECT_EQ(maps->find("libLLVM"), std::string::npos);
  EXPECT_EQ(maps->find("libclang-cpp"), std::string::npos);
}

}  // namespace
}  // namespace kiln
