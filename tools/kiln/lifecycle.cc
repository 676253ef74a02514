#include "tools/kiln/lifecycle.h"

#include <fcntl.h>
#include <google/protobuf/struct.pb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "tools/kiln/human_units.h"
#include "tools/kiln/json.h"

namespace kiln {
namespace {

constexpr char kExitCodePayload[] = "type.kiln.dev/kiln.cli.ExitCode";

ClientOptions NeverStart(ClientOptions options) {
  options.auto_start = false;
  return options;
}

absl::Status NotRunning(const std::string& socket_path, const absl::Status& why) {
  // A draining kilnd answers no more calls: as good as gone.
  const bool draining = absl::StrContains(why.message(), "shutting down");
  return WithExitCode(
      absl::UnavailableError(absl::StrCat(
          "no kilnd on ", socket_path, draining ? " (one is draining and exiting)" : "",
          "; any compile starts one, or start it with `kilnd --socket=", socket_path,
          "` or as a service (docs/OPERATIONS.md)")),
      kExitNotRunning);
}

void Set(google::protobuf::Struct& fields, const std::string& name, const std::string& value) {
  (*fields.mutable_fields())[name].set_string_value(value);
}
void Set(google::protobuf::Struct& fields, const std::string& name, double value) {
  (*fields.mutable_fields())[name].set_number_value(value);
}
void SetBool(google::protobuf::Struct& fields, const std::string& name, bool value) {
  (*fields.mutable_fields())[name].set_bool_value(value);
}

// Whether `pid` has exited (a zombie has: its parent has yet to reap it).
bool Exited(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
}

}  // namespace

absl::Status WithExitCode(absl::Status status, int exit_code) {
  // From a string_view: Cord's rvalue-string constructor is a template
  // whose symbol clang (the sanitizer builds) and gcc (Debian's Abseil)
  // name differently.
  const std::string code = absl::StrCat(exit_code);
  status.SetPayload(kExitCodePayload, absl::Cord(absl::string_view(code)));
  return status;
}

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return 0;
  int code = 1;
  if (auto payload = status.GetPayload(kExitCodePayload); payload.has_value()) {
    if (!absl::SimpleAtoi(std::string(*payload), &code)) code = 1;
  }
  return code;
}

absl::Status PrintDaemonStatus(ClientOptions options, bool json, std::ostream& out) {
  std::unique_ptr<Client> client = Client::Open(NeverStart(std::move(options)));
  absl::StatusOr<kiln::v1::HelloResponse> daemon = client->daemon();
  if (absl::IsUnavailable(daemon.status())) {
    if (json) {
      google::protobuf::Struct fields;
      SetBool(fields, "running", false);
      Set(fields, "socket", client->socket_path());
      out << ToJson(fields) << "\n";
    }
    return NotRunning(client->socket_path(), daemon.status());
  }
  RETURN_IF_ERROR(daemon.status());
  ASSIGN_OR_RETURN(const kiln::v1::StatsResponse stats, client->Stats());
  if (json) {
    google::protobuf::Struct fields;
    SetBool(fields, "running", true);
    Set(fields, "version", daemon->daemon_version());
    Set(fields, "pid", static_cast<double>(daemon->pid()));
    Set(fields, "socket", client->socket_path());
    Set(fields, "cache_dir", daemon->cache_dir());
    Set(fields, "uptime_ms", static_cast<double>(stats.uptime_ms()));
    Set(fields, "entries", static_cast<double>(stats.entries()));
    Set(fields, "bytes_stored", static_cast<double>(stats.bytes_stored()));
    SetBool(fields, "auto_started", daemon->auto_started());
    out << ToJson(fields) << "\n";
    return absl::OkStatus();
  }
  out << absl::StrFormat(
      "kilnd %s running (pid %d)\n"
      "  socket   %s\n"
      "  cache    %s\n"
      "  uptime   %s\n"
      "  store    %d entries, %s\n"
      "  started  %s\n",
      daemon->daemon_version(), daemon->pid(), client->socket_path(), daemon->cache_dir(),
      HumanDuration(absl::Milliseconds(stats.uptime_ms())), stats.entries(),
      HumanBytes(stats.bytes_stored()),
      daemon->auto_started() ? "on demand by a client (exits when idle)"
                             : "by hand or by a service manager");
  return absl::OkStatus();
}

absl::Status StopDaemon(ClientOptions options, absl::Duration wait, std::ostream& out) {
  std::unique_ptr<Client> client = Client::Open(NeverStart(std::move(options)));
  const std::string socket_path = client->socket_path();
  absl::StatusOr<kiln::v1::HelloResponse> daemon = client->daemon();
  if (absl::IsUnavailable(daemon.status())) return NotRunning(socket_path, daemon.status());
  RETURN_IF_ERROR(daemon.status());
  const pid_t pid = static_cast<pid_t>(daemon->pid());
  // kilnd creates its socket, so the socket's owner is the daemon's uid.
  struct stat socket_status;
  if (stat(socket_path.c_str(), &socket_status) == 0 && socket_status.st_uid != geteuid() &&
      geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("kilnd on ", socket_path, " (pid ", pid, ") runs as uid ",
                     socket_status.st_uid, ", not as you (uid ", geteuid(),
                     "): it is shared, not yours to stop; ask its owner "
                     "or root to stop it"));
  }
  // A kilnd that goes away under the call (Unavailable, Cancelled) was
  // stopping anyway: wait for it all the same.
  const absl::StatusOr<int64_t> stopping = client->Stop();
  if (!stopping.ok() && !absl::IsUnavailable(stopping.status()) &&
      !absl::IsCancelled(stopping.status())) {
    return stopping.status();
  }
  client.reset();  // our own connection must not count as a call to drain
  const absl::Time deadline = absl::Now() + wait;
  while (!Exited(pid) && DaemonLockHeld(socket_path)) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("kilnd (pid ", pid, ") on ", socket_path, " is still draining after ",
                       absl::FormatDuration(wait),
                       " (running compiles finish first; kilnd's --drain_timeout "
                       "bounds the calls); wait longer with --wait=2m, or end it with kill -KILL ",
                       pid));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  out << "stopped kilnd (pid " << pid << ")\n";
  return absl::OkStatus();
}

}  // namespace kiln
