#include "codegen/compile/worker_compiler.h"

#include <dirent.h>
#include <dlfcn.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/compile/fallback_compiler.h"
#include "codegen/compile/subprocess_compiler.h"
#include "common/files.h"
#include "gtest/gtest.h"

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
  auto object = compiler.Compile(AnswerSource(42));
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
  ASSERT_TRUE(compiler.WarmUp().ok());
  EXPECT_EQ(started->workers_started(), 1);
  auto object = compiler.Compile(AnswerSource(5));
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->compiler, "worker");
  EXPECT_EQ(started->workers_started(), 1);
}

TEST_F(WorkerCompilerTest, ProducesTheSameBytesAsTheClangSubprocess) {
  WorkerCompiler worker(Options());
  SubprocessCompiler subprocess(dir_ + "/subprocess", absl::Seconds(60));
  auto from_worker = worker.Compile(AnswerSource(7));
  auto from_subprocess = subprocess.Compile(AnswerSource(7));
  ASSERT_TRUE(from_worker.ok()) << from_worker.status();
  ASSERT_TRUE(from_subprocess.ok()) << from_subprocess.status();
  EXPECT_TRUE(from_worker->shared_object == from_subprocess->shared_object)
      << "worker and clang++ disagree: check CodegenFlags() and the link arguments in "
         "worker/in_process_compiler.cc against `clang++ -###`";
}

TEST_F(WorkerCompilerTest, InvalidSourceIsAnInternalErrorWithDiagnostics) {
  WorkerCompiler compiler(Options());
  auto object = compiler.Compile("this is not C++;");
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(object.status().message().find("kernel.cc:1:1: error:"), std::string::npos)
      << object.status();
  // A failed compile leaves the worker usable.
  ASSERT_TRUE(compiler.Compile(AnswerSource(1)).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

TEST_F(WorkerCompilerTest, CrashIsInternalAndTheNextCompileGetsAFreshWorker) {
  {
    WorkerCompiler compiler(Options());
    auto crashed = compiler.CompileWithFault(AnswerSource(1), WorkerCompiler::Fault::kCrash);
    EXPECT_EQ(crashed.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(crashed.status().message().find("compile worker crashed (signal 11)"),
              std::string::npos)
        << crashed.status();
    auto object = compiler.Compile(AnswerSource(2));
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_EQ(LoadAndCallAnswer(*object, "after_crash"), 2);
    EXPECT_EQ(compiler.workers_started(), 2);
    EXPECT_EQ(WorkerDirectories().size(), 1u) << "the crashed worker's directory is removed";
  }
  EXPECT_TRUE(WorkerDirectories().empty());
}

TEST_F(WorkerCompilerTest, HangIsDeadlineExceededAndTheNextCompileGetsAFreshWorker) {
  WorkerCompilerOptions options = Options();
  options.timeout = absl::Seconds(2);
  WorkerCompiler compiler(options);
  auto hung = compiler.CompileWithFault(AnswerSource(1), WorkerCompiler::Fault::kHang);
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(hung.status().message().find("did not finish within 2s"), std::string::npos)
      << hung.status();
  auto object = compiler.Compile(AnswerSource(3));
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(LoadAndCallAnswer(*object, "after_hang"), 3);
  EXPECT_EQ(compiler.workers_started(), 2);
}

TEST_F(WorkerCompilerTest, FaultInjectionIsRefusedUnlessEnabled) {
  WorkerCompilerOptions options = Options();
  options.allow_fault_injection = false;
  WorkerCompiler compiler(options);
  auto refused = compiler.CompileWithFault(AnswerSource(1), WorkerCompiler::Fault::kCrash);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(refused.status().message().find("--allow_fault_injection"), std::string::npos)
      << refused.status();
  ASSERT_TRUE(compiler.Compile(AnswerSource(1)).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

TEST_F(WorkerCompilerTest, FourConcurrentCompilesShareTwoWorkers) {
  WorkerCompiler compiler(Options(/*jobs=*/2));
  std::vector<absl::StatusOr<CompiledObject>> results(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = compiler.Compile(AnswerSource(100 + i)); });
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
  std::thread([&] { ASSERT_TRUE(compiler.Compile(AnswerSource(1)).ok()); }).join();
  absl::SleepFor(absl::Milliseconds(200));  // time for a death signal to land
  ASSERT_TRUE(compiler.Compile(AnswerSource(2)).ok());
  EXPECT_EQ(compiler.workers_started(), 1);
}

TEST_F(WorkerCompilerTest, MissingWorkerBinaryIsUnavailable) {
  WorkerCompilerOptions options = Options();
  options.worker_path = dir_ + "/no-such-worker";
  WorkerCompiler compiler(options);
  auto object = compiler.Compile(AnswerSource(1));
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
