// What //tools/bench:e2e and //tools/bench:kernels share: clocks and
// per-batch medians, processes started with posix_spawn (never fork: the
// benches run gRPC threads), a private kilnd, a helper process driven one
// line each way over a pipe (the eager PyTorch side), runfiles, machine
// facts, and the min/median/max + JSON summary. docs/BENCHMARKS.md says what
// the benches measure.
#ifndef KILN_TOOLS_BENCH_BENCH_UTIL_H_
#define KILN_TOOLS_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "common/subprocess.h"  // SpawnProcess, EnvChanges
#include "tools/daemon_process/daemon_process.h"

namespace kiln {
namespace bench {

// ------------------------------------------------------------------ clocks

int64_t NowNs();  // CLOCK_MONOTONIC
double MsSince(int64_t start_ns);
double Median(std::vector<double> values);

// Every measurement, by figure name, one value per round.
using Samples = std::map<std::string, std::vector<double>>;
// A `key=value key=value` line, as children and the Python side report.
using Fields = std::map<std::string, std::string>;

Fields ParseFields(absl::string_view line);
absl::StatusOr<double> NumberField(const Fields& fields, const std::string& key);

struct Batch {
  double median_ns;
  double minor_faults_per_call;
};

// Times `calls` calls of `fn` one by one: the median survives the
// interrupts and preemptions a shared 2-vCPU VM delivers, a mean does not.
// Minor page faults (getrusage ru_minflt) are counted over the whole batch.
template <typename Fn>
Batch TimeBatch(int calls, Fn&& fn) {
  std::vector<double> ns(calls);
  rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  for (int i = 0; i < calls; ++i) {
    const int64_t start = NowNs();
    fn();
    ns[i] = NowNs() - start;
  }
  getrusage(RUSAGE_SELF, &after);
  return {Median(std::move(ns)), double(after.ru_minflt - before.ru_minflt) / calls};
}

// --------------------------------------------------------------- processes

// Owns a file descriptor; closes it when it goes.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& other) {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~ScopedFd() { Close(); }
  void Close();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// {read end, write end}, both close-on-exec: a child gets only what Spawn
// hands it, so a held child sees EOF on stdin when the parent closes it.
absl::StatusOr<std::pair<ScopedFd, ScopedFd>> MakePipe();

// Waits for `pid`; Internal unless it exited with status 0.
absl::Status Reap(pid_t pid, absl::string_view what);

absl::StatusOr<std::string> ReadToEof(int fd);
absl::Status WriteAll(int fd, absl::string_view text);

// utime + stime of all of `pid`'s threads, in clock ticks (/proc/PID/stat).
absl::StatusOr<int64_t> CpuTicks(pid_t pid);

// A helper process driven one line each way over its stdin and stdout (the
// eager PyTorch side of the benches). Its first line is `ready key=value
// ...` (the facts) or `error MESSAGE` (Unavailable with MESSAGE: e.g. no
// torch). `name` appears in error messages.
class LineProcess {
 public:
  static absl::StatusOr<std::unique_ptr<LineProcess>> Start(const std::vector<std::string>& argv,
                                                            const std::string& name,
                                                            const EnvChanges& env = {});
  ~LineProcess();  // closes its stdin (it should exit on EOF) and reaps it

  // Sends one line, returns the answer line (trailing whitespace stripped).
  absl::StatusOr<std::string> Ask(absl::string_view line);
  const Fields& facts() const { return facts_; }
  pid_t pid() const { return pid_; }

 private:
  LineProcess() = default;
  absl::StatusOr<std::string> ReadLine();

  std::string name_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  Fields facts_;
};

// A private directory under /tmp (a short path: Unix socket paths must stay
// under 108 bytes), removed with everything in it when this goes. Declare
// it before the daemons that live in it, so they stop first.
class ScratchDirectory {
 public:
  static absl::StatusOr<ScratchDirectory> Make();
  ScratchDirectory(ScratchDirectory&& other) : path_(std::exchange(other.path_, "")) {}
  ScratchDirectory& operator=(ScratchDirectory&&) = delete;
  ~ScratchDirectory();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// kilnd in the bench's runfiles, and the runfiles tree it runs with. The
// bench's data brings kilnd and kiln-compile-worker; kilnd gets the tree as
// RUNFILES_DIR and finds its worker there (FindCompileWorker), so a fresh
// clone's `bazel run` needs no other build step (kilnd's own .runfiles
// tree exists only when kilnd itself is built as a top-level target).
struct KilndBinary {
  std::string path;
  std::string runfiles_dir;  // holds kiln/daemon/kilnd and kiln/codegen/compile/worker/...
};
// NotFound, naming the places looked at and `target`, when no tree has both.
absl::StatusOr<KilndBinary> FindKilnd(absl::string_view target);

// A private kilnd started by a bench (on the shared launcher,
// DaemonProcess): socket and cache under `directory` (removed when this
// goes), its output in directory/kilnd.log, RUNFILES_DIR set to kilnd's
// runfiles tree. A `cache_dir` given is used instead, and kept;
// `extra_flags` follow --compiler.
class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const KilndBinary& kilnd, const std::string& directory, const std::string& compiler,
      const std::string& cache_dir = "", const std::vector<std::string>& extra_flags = {});
  ~Daemon() { Stop().IgnoreError(); }

  // SIGTERM, as a user would stop it; Internal when kilnd does not exit
  // cleanly within 15 s (then it is killed).
  absl::Status Stop();

  Client& client() { return *client_; }
  pid_t pid() const { return process_->pid(); }
  const std::string& socket_path() const { return process_->socket_path(); }
  const std::string& cache_dir() const { return process_->cache_dir(); }
  const std::string& log_path() const { return process_->log_path(); }

 private:
  Daemon() = default;
  std::unique_ptr<DaemonProcess> process_;
  std::unique_ptr<Client> client_;
};

// The end of kilnd's log on one line, for an error message: the directory
// holding the log is removed when the bench exits.
std::string LogTail(const std::string& path);

// ------------------------------------------------------- files and machine

// A data dependency: relative to the working directory under `bazel run`
// (the runfiles root), else in this binary's runfiles tree. `target` names
// the bench in the error message.
absl::StatusOr<std::string> Runfile(const std::string& path, absl::string_view target);

// The checkout's .venv interpreter (torch 2.15) in the runfiles: the eager
// baselines' Python. The bench lists `@kiln_python//:python3` in its data.
absl::StatusOr<std::string> VenvPython(absl::string_view target);

// "VmRSS" and friends from /proc/PID/status, in KB.
absl::StatusOr<double> ProcStatusKb(pid_t pid, absl::string_view field);

// Children of `parent` whose comm is `comm` (truncated to 15 characters by
// the kernel, as /proc/PID/stat shows it).
std::vector<pid_t> ChildrenNamed(pid_t parent, absl::string_view comm);

// The shared objects mapped into this process whose path contains `fragment`.
std::string MappedLibraries(absl::string_view fragment);

// The 1-minute load average: other work on a 2-vCPU machine moves medians,
// so each run records what else was running.
std::string LoadAverage();
std::string CpuModel();

// The kernels OpenBLAS runs ("Haswell", "Cooperlake", ...): its own pick
// for the CPU, unless OPENBLAS_CORETYPE names them. Eager and Kiln load the
// same OpenBLAS in the same environment, so both run these.
std::string BlasCore();

// Sets each of `variables` to "1" and, if any was not set so already,
// executes this binary again (OpenBLAS reads OPENBLAS_NUM_THREADS when it is
// loaded, before main); children inherit them. `program` prefixes the
// warning printed when re-executing fails.
void PinThreadsOrReexecute(char** argv, const std::vector<const char*>& variables,
                           absl::string_view program);

// ----------------------------------------------------------------- summary

struct Summary {
  double min, median, max;
  size_t count;
};
std::optional<Summary> Summarize(const Samples& samples, const std::string& key);

std::string JsonString(absl::string_view text);
std::string JsonNumber(double value);  // null when not finite

// One JSON object: for each of `keys`, its median (null when never
// measured), plus KEY_min and KEY_max when it has several samples; then the
// facts, as numbers when they parse as one.
std::string JsonLine(const Samples& samples, const std::vector<std::string>& keys,
                     const Fields& facts);

// A table of `keys`' min / median / max (those measured), and with `json`
// then the JsonLine of `json_keys` (empty: `keys`) on the last line.
void PrintFigures(const Samples& samples, const std::vector<std::string>& keys, const Fields& facts,
                  bool json, const std::vector<std::string>& json_keys = {});

// A bench's exit status: 0, or 1 after printing "NAME: MESSAGE" to stderr.
int ExitStatus(absl::string_view name, const absl::Status& status);

}  // namespace bench
}  // namespace kiln

#endif  // KILN_TOOLS_BENCH_BENCH_UTIL_H_
