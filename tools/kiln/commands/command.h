// A `kiln` subcommand: its name, help and flags, and the function that runs
// it. Each subcommand is one file in this directory; tools/kiln/main.cc
// dispatches to them and accepts only the flags a subcommand lists.
#ifndef KILN_TOOLS_KILN_COMMANDS_COMMAND_H_
#define KILN_TOOLS_KILN_COMMANDS_COMMAND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client.h"
#include "proto/artifact.pb.h"
#include "tools/kiln/json.h"  // IWYU pragma: export

// Flags more than one command takes (command.cc); a command that reads one
// lists it in its Command::flags.
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, salt);
ABSL_DECLARE_FLAG(bool, dry_run);
ABSL_DECLARE_FLAG(std::string, graph);
ABSL_DECLARE_FLAG(std::string, inputs);

namespace kiln {

using Args = std::vector<std::string>;

// A flag a command takes: its absl flag name and, where the flag's own help
// is written for several commands, what it means to this one.
struct FlagUse {
  const char* name;
  const char* help = nullptr;
};

struct Command {
  const char* name;
  const char* arguments;  // "GRAPH.json", or "" for none
  const char* summary;
  std::vector<FlagUse> flags;  // the only flags it accepts; `kiln NAME --help` lists them
  const char* example;
  absl::Status (*run)(const Args& args);
};

// The flags of every command that talks to kilnd (command.cc).
inline constexpr FlagUse kSocketFlag = {"socket"};
inline constexpr FlagUse kCacheDirFlag = {"cache_dir"};
inline constexpr FlagUse kStartFlag = {"start"};

// InvalidArgument "usage: USAGE" unless there are `count` arguments.
absl::Status NeedArgs(const Args& args, size_t count, const char* usage);

// Connects to kilnd as --socket, --cache_dir and --start say. `lazy`: opens
// without connecting, so that a hit in the local index needs no daemon.
absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(bool lazy = false);

// --socket only, never starting kilnd (status, stop).
ClientOptions DaemonOptionsFromFlags();

// --salt and --target.
absl::StatusOr<kiln::v1::CompileOptions> CompileOptionsFromFlags();

// The first 16 hex digits of a cache key.
std::string ShortKey(const std::string& key);

// The commands, one per file here.
extern const Command kCompileCommand;
extern const Command kEvictCommand;
extern const Command kExplainCommand;
extern const Command kExportCommand;
extern const Command kGcCommand;
extern const Command kImportCommand;
extern const Command kListCommand;
extern const Command kOpsCommand;
extern const Command kPinCommand;
extern const Command kPruneCommand;
extern const Command kRunCommand;
extern const Command kShowCommand;
extern const Command kStatsCommand;
extern const Command kStatusCommand;
extern const Command kStopCommand;
extern const Command kUnpinCommand;
extern const Command kVerifyCommand;
extern const Command kWarmupCommand;
extern const Command kWhyCommand;

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_COMMANDS_COMMAND_H_
