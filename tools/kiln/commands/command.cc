#include "tools/kiln/commands/command.h"

#include "abi/target.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

ABSL_FLAG(bool, json, false, "Print machine-readable JSON (field names in snake_case).");
ABSL_FLAG(std::string, target, "native",
          "The CPUs to compile for: native (this host's, 512-bit vectors where it has AVX-512), "
          "x86-64-v3 (AVX2) or x86-64-v4 (AVX-512); a portable level's artifacts serve every "
          "host with the same compiler. It enters the cache key.");
ABSL_FLAG(std::string, salt, "", "A salt that enters the cache key (forces a compile).");
ABSL_FLAG(bool, dry_run, false, "List what would be removed; remove nothing.");
ABSL_FLAG(std::string, graph, "", "A graph: see the command's help.");
ABSL_FLAG(std::string, inputs, "", "The graph's inputs: see the command's help.");
ABSL_FLAG(std::string, socket, "",
          "kilnd's socket (default: $KILN_SOCKET or the per-user default).");
ABSL_FLAG(std::string, cache_dir, "", "Cache directory for an auto-started kilnd.");
ABSL_FLAG(bool, start, true, "Start kilnd when none is running.");

namespace kiln {

absl::Status NeedArgs(const Args& args, size_t count, const char* usage) {
  if (args.size() != count) return absl::InvalidArgumentError(absl::StrCat("usage: ", usage));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(bool lazy) {
  ClientOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  options.auto_start = absl::GetFlag(FLAGS_start);
  options.client_name = "kiln-cli";
  if (lazy) return Client::Open(options);
  return Client::Connect(options);
}

ClientOptions DaemonOptionsFromFlags() {
  ClientOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.auto_start = false;
  options.client_name = "kiln-cli";
  return options;
}

absl::StatusOr<kiln::v1::CompileOptions> CompileOptionsFromFlags() {
  kiln::v1::CompileOptions options;
  options.set_salt(absl::GetFlag(FLAGS_salt));
  ASSIGN_OR_RETURN(const kiln::v1::Target target, ParseTarget(absl::GetFlag(FLAGS_target)));
  options.set_target(target);
  return options;
}

std::string ShortKey(const std::string& key) { return key.substr(0, 16); }

}  // namespace kiln
