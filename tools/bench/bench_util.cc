#include "tools/bench/bench_util.h"

#include <cblas.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace kiln {
namespace bench {

// ------------------------------------------------------------------ clocks

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000000000LL + now.tv_nsec;
}

double MsSince(int64_t start_ns) { return (NowNs() - start_ns) / 1e6; }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Fields ParseFields(absl::string_view line) {
  Fields fields;
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> pair = absl::StrSplit(word, absl::MaxSplits('=', 1));
    fields[pair.first] = pair.second;
  }
  return fields;
}

absl::StatusOr<double> NumberField(const Fields& fields, const std::string& key) {
  double value;
  const auto it = fields.find(key);
  if (it == fields.end() || !absl::SimpleAtod(it->second, &value)) {
    return absl::InternalError(absl::StrCat("report lacks a number for ", key));
  }
  return value;
}

// --------------------------------------------------------------- processes

void ScopedFd::Close() {
  if (fd_ >= 0) close(std::exchange(fd_, -1));
}

absl::StatusOr<std::pair<ScopedFd, ScopedFd>> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  return std::make_pair(ScopedFd(fds[0]), ScopedFd(fds[1]));
}

absl::Status Reap(pid_t pid, absl::string_view what) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " (pid ", pid, ") failed: ",
                                          WIFEXITED(status)
                                              ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                              : absl::StrCat("signal ", WTERMSIG(status))));
}

absl::StatusOr<std::string> ReadToEof(int fd) {
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("read failed: ", strerror(errno)));
    if (n == 0) return text;
    text.append(buffer, n);
  }
}

absl::Status WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("write failed: ", strerror(errno)));
    text.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CpuTicks(pid_t pid) {
  ASSIGN_OR_RETURN(const std::string stat, ReadFile(absl::StrCat("/proc/", pid, "/stat")));
  // "PID (COMM) STATE PPID ...": utime and stime are fields 14 and 15, the
  // 12th and 13th after the closing parenthesis.
  const size_t comm_end = stat.rfind(')');
  const std::vector<std::string> rest = absl::StrSplit(
      stat.substr(comm_end == std::string::npos ? 0 : comm_end + 1), ' ', absl::SkipEmpty());
  int64_t utime, stime;
  if (rest.size() < 13 || !absl::SimpleAtoi(rest[11], &utime) ||
      !absl::SimpleAtoi(rest[12], &stime)) {
    return absl::InternalError(absl::StrCat("cannot parse /proc/", pid, "/stat"));
  }
  return utime + stime;
}

absl::StatusOr<std::unique_ptr<LineProcess>> LineProcess::Start(
    const std::vector<std::string>& argv, const std::string& name, const EnvChanges& env) {
  ASSIGN_OR_RETURN(auto to_child, MakePipe());
  ASSIGN_OR_RETURN(auto from_child, MakePipe());
  ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(argv,
                                                 {{to_child.first.get(), STDIN_FILENO},
                                                  {from_child.second.get(), STDOUT_FILENO}},
                                                 env));
  to_child.first.Close();  // else a dead child never reads as EOF
  from_child.second.Close();
  std::unique_ptr<LineProcess> process(new LineProcess);
  process->name_ = name;
  process->pid_ = pid;
  process->to_ = fdopen(to_child.second.release(), "w");
  process->from_ = fdopen(from_child.first.release(), "r");
  ASSIGN_OR_RETURN(const std::string ready, process->ReadLine());
  if (absl::StartsWith(ready, "error ")) return absl::UnavailableError(ready.substr(6));
  process->facts_ = ParseFields(ready);
  if (!absl::StartsWith(ready, "ready ")) {
    return absl::UnavailableError(absl::StrCat(name, " said: ", ready));
  }
  return process;
}

LineProcess::~LineProcess() {
  if (to_ != nullptr) fclose(to_);  // EOF: the child exits
  if (from_ != nullptr) fclose(from_);
  if (pid_ > 0) Reap(pid_, name_).IgnoreError();
}

absl::StatusOr<std::string> LineProcess::Ask(absl::string_view line) {
  if (fprintf(to_, "%.*s\n", static_cast<int>(line.size()), line.data()) < 0 || fflush(to_) != 0) {
    return absl::InternalError(absl::StrCat(name_, " is gone"));
  }
  return ReadLine();
}

absl::StatusOr<std::string> LineProcess::ReadLine() {
  char* line = nullptr;
  size_t capacity = 0;
  const ssize_t n = getline(&line, &capacity, from_);
  std::string text = n > 0 ? std::string(line, n) : "";
  free(line);
  if (n <= 0) return absl::UnavailableError(absl::StrCat(name_, " exited without answering"));
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

std::string LogTail(const std::string& path) {
  std::string log = ReadFile(path).value_or("");
  if (log.size() > 600) log = log.substr(log.size() - 600);
  std::replace(log.begin(), log.end(), '\n', ' ');
  return log.empty() ? "(kilnd logged nothing)" : absl::StrCat("kilnd's log: ", log);
}

absl::StatusOr<ScratchDirectory> ScratchDirectory::Make() {
  ASSIGN_OR_RETURN(std::string path, MakeTempDirectory("/tmp/kilnXXXXXX"));
  return ScratchDirectory(std::move(path));
}

ScratchDirectory::~ScratchDirectory() {
  if (!path_.empty()) RemoveRecursively(path_).IgnoreError();
}

absl::StatusOr<KilndBinary> FindKilnd(absl::string_view target) {
  constexpr char kKilnd[] = "kiln/daemon/kilnd";
  constexpr char kWorker[] = "kiln/codegen/compile/worker/kiln-compile-worker";
  std::vector<std::string> roots;
  if (const char* root = getenv("RUNFILES_DIR"); root != nullptr && *root != '\0') {
    roots.push_back(root);
  }
  roots.push_back(ExecutablePath() + ".runfiles");
  char cwd[4096];
  // Under `bazel run` the working directory is <runfiles>/kiln.
  if (getcwd(cwd, sizeof(cwd)) != nullptr) roots.push_back(Dirname(cwd));
  for (const std::string& root : roots) {
    const std::string kilnd = absl::StrCat(root, "/", kKilnd);
    const std::string worker = absl::StrCat(root, "/", kWorker);
    if (access(kilnd.c_str(), X_OK) == 0 && access(worker.c_str(), X_OK) == 0) {
      return KilndBinary{kilnd, root};
    }
  }
  return absl::NotFoundError(absl::StrCat("no runfiles tree with both ", kKilnd, " and ", kWorker,
                                          " (looked in ", absl::StrJoin(roots, ", "),
                                          "); run with `bazel run -c opt ", target, "`"));
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const KilndBinary& kilnd,
                                                      const std::string& directory,
                                                      const std::string& compiler,
                                                      const std::string& cache_dir,
                                                      const std::vector<std::string>& extra_flags) {
  DaemonProcess::Options options;
  options.kilnd = kilnd.path;
  options.root = directory;
  options.cache_dir = cache_dir;
  options.env = {{"RUNFILES_DIR", kilnd.runfiles_dir}};
  options.client.client_name = "bench";
  std::unique_ptr<Daemon> daemon(new Daemon);
  ASSIGN_OR_RETURN(daemon->process_, DaemonProcess::Create(std::move(options)));
  std::vector<std::string> flags = {"--compiler=" + compiler};
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  if (absl::Status started = daemon->process_->Start(flags); !started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("kilnd --compiler=", compiler, ": ", started.message()));
  }
  ASSIGN_OR_RETURN(daemon->client_, daemon->process_->Connect());
  return daemon;
}

absl::Status Daemon::Stop() {
  if (process_ == nullptr || process_->pid() <= 0) return absl::OkStatus();
  client_.reset();
  const int status = process_->Stop(absl::Seconds(15));
  if (status == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("kilnd exited with status ", status,
                                          " on SIGTERM (137: ignored it for 15 s); ",
                                          LogTail(log_path())));
}

// ------------------------------------------------------- files and machine

absl::StatusOr<std::string> Runfile(const std::string& path, absl::string_view target) {
  std::vector<std::string> candidates;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) candidates.push_back(absl::StrCat(cwd, "/", path));
  if (const char* root = getenv("RUNFILES_DIR"); root != nullptr && *root != '\0') {
    candidates.push_back(absl::StrCat(root, "/kiln/", path));
  }
  candidates.push_back(absl::StrCat(ExecutablePath(), ".runfiles/kiln/", path));
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(path, " not found (looked at ",
                                          absl::StrJoin(candidates, ", "),
                                          "); run with `bazel run -c opt ", target, "`"));
}

absl::StatusOr<std::string> VenvPython(absl::string_view target) {
  return Runfile("external/kiln_python/python3", target);
}

absl::StatusOr<double> ProcStatusKb(pid_t pid, absl::string_view field) {
  ASSIGN_OR_RETURN(const std::string status, ReadFile(absl::StrCat("/proc/", pid, "/status")));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, field) || !absl::ConsumePrefix(&line, ":")) continue;
    double kb;
    if (absl::SimpleAtod(absl::StripSuffix(absl::StripAsciiWhitespace(line), " kB"), &kb)) {
      return kb;
    }
  }
  return absl::NotFoundError(absl::StrCat("no ", field, " in /proc/", pid, "/status"));
}

std::vector<pid_t> ChildrenNamed(pid_t parent, absl::string_view comm) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    if (!stat.ok()) continue;  // it exited meanwhile
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
    const size_t comm_begin = stat->find('(') + 1, comm_end = stat->rfind(')');
    if (comm_begin == 0 || comm_end == std::string::npos || comm_end < comm_begin) continue;
    const std::vector<std::string> rest =
        absl::StrSplit(stat->substr(comm_end + 1), ' ', absl::SkipEmpty());
    int ppid;
    if (rest.size() > 1 && absl::SimpleAtoi(rest[1], &ppid) && ppid == parent &&
        stat->substr(comm_begin, comm_end - comm_begin) == comm) {
      children.push_back(pid);
    }
  }
  closedir(proc);
  return children;
}

std::string MappedLibraries(absl::string_view fragment) {
  std::vector<std::string> paths;
  const std::string maps = ReadFile("/proc/self/maps").value_or("");
  for (absl::string_view line : absl::StrSplit(maps, '\n')) {
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() >= 6 && absl::StrContains(words[5], fragment) &&
        std::find(paths.begin(), paths.end(), words[5]) == paths.end()) {
      paths.emplace_back(words[5]);
    }
  }
  return paths.empty() ? "none" : absl::StrJoin(paths, ",");
}

std::string LoadAverage() {
  const std::string loadavg = ReadFile("/proc/loadavg").value_or("?");
  return loadavg.substr(0, loadavg.find(' '));
}

std::string CpuModel() {
  const std::string cpuinfo = ReadFile("/proc/cpuinfo").value_or("");
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (absl::ConsumePrefix(&line, "model name")) {
      return std::string(
          absl::StripAsciiWhitespace(absl::StripPrefix(absl::StripAsciiWhitespace(line), ":")));
    }
  }
  return "unknown";
}

std::string BlasCore() { return openblas_get_corename(); }

void PinThreadsOrReexecute(char** argv, const std::vector<const char*>& variables,
                           absl::string_view program) {
  bool pinned = true;
  for (const char* variable : variables) {
    const char* value = getenv(variable);
    if (value == nullptr || strcmp(value, "1") != 0) {
      setenv(variable, "1", 1);
      pinned = false;
    }
  }
  if (!pinned) {
    execv("/proc/self/exe", argv);
    absl::FPrintF(stderr, "%s: cannot re-execute with one BLAS thread (%s); continuing\n", program,
                  strerror(errno));
  }
}

// ----------------------------------------------------------------- summary

std::optional<Summary> Summarize(const Samples& samples, const std::string& key) {
  const auto it = samples.find(key);
  if (it == samples.end() || it->second.empty()) return std::nullopt;
  const std::vector<double>& values = it->second;
  return Summary{*std::min_element(values.begin(), values.end()), Median(values),
                 *std::max_element(values.begin(), values.end()), values.size()};
}

std::string JsonString(absl::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) quoted += c;
  }
  return quoted + "\"";
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null";
}

std::string JsonLine(const Samples& samples, const std::vector<std::string>& keys,
                     const Fields& facts) {
  std::vector<std::string> members;
  for (const std::string& key : keys) {
    const std::optional<Summary> summary = Summarize(samples, key);
    if (!summary) {
      members.push_back(JsonString(key) + ": null");
      continue;
    }
    members.push_back(absl::StrCat(JsonString(key), ": ", JsonNumber(summary->median)));
    if (summary->count > 1) {
      members.push_back(absl::StrCat(JsonString(key + "_min"), ": ", JsonNumber(summary->min)));
      members.push_back(absl::StrCat(JsonString(key + "_max"), ": ", JsonNumber(summary->max)));
    }
  }
  for (const auto& [key, value] : facts) {
    double number;
    members.push_back(absl::StrCat(JsonString(key), ": ",
                                   absl::SimpleAtod(value, &number) ? value : JsonString(value)));
  }
  return absl::StrCat("{", absl::StrJoin(members, ", "), "}");
}

void PrintFigures(const Samples& samples, const std::vector<std::string>& keys, const Fields& facts,
                  bool json, const std::vector<std::string>& json_keys) {
  size_t width = 6;
  for (const std::string& key : keys) width = std::max(width, key.size());
  printf("%-*s %12s %12s %12s\n", static_cast<int>(width), "figure", "min", "median", "max");
  for (const std::string& key : keys) {
    if (const auto s = Summarize(samples, key)) {
      printf("%-*s %12.3f %12.3f %12.3f\n", static_cast<int>(width), key.c_str(), s->min, s->median,
             s->max);
    }
  }
  if (json) printf("%s\n", JsonLine(samples, json_keys.empty() ? keys : json_keys, facts).c_str());
}

int ExitStatus(absl::string_view name, const absl::Status& status) {
  if (status.ok()) return 0;
  fprintf(stderr, "%s: %s\n", std::string(name).c_str(), std::string(status.message()).c_str());
  return 1;
}

}  // namespace bench
}  // namespace kiln
