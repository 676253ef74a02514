// kiln: the Kiln command-line tool. Each subcommand is a file under
// tools/kiln/commands/ with its own flags and help; this file dispatches to
// it and accepts only the flags it lists.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/lifecycle.h"

namespace kiln {
namespace {

constexpr int kExitUsage = 2;

// A to Z, as `kiln --help` lists them.
const std::vector<const Command*>& Commands() {
  static const auto* const commands = new std::vector<const Command*>{
      &kCompileCommand, &kEvictCommand,  &kExplainCommand, &kExportCommand, &kGcCommand,
      &kImportCommand,  &kListCommand,   &kOpsCommand,     &kPinCommand,    &kPruneCommand,
      &kRunCommand,     &kShowCommand,   &kStatsCommand,   &kStatusCommand, &kStopCommand,
      &kUnpinCommand,   &kVerifyCommand, &kWarmupCommand,  &kWhyCommand};
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command* command : Commands()) {
    if (command->name == name) return command;
  }
  return nullptr;
}

const FlagUse* FindFlagUse(const Command& command, absl::string_view flag) {
  for (const FlagUse& use : command.flags) {
    if (use.name == flag) return &use;
  }
  return nullptr;
}

constexpr char kEnvironment[] =
    "Environment:\n"
    "  KILN_SOCKET      kilnd's socket (default $XDG_RUNTIME_DIR/kiln/kilnd.sock, else\n"
    "                   /tmp/kiln-$UID/kilnd.sock)\n"
    "  KILN_CACHE_DIR   the cache directory (default $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n"
    "  KILN_DAEMON      the kilnd binary to start on demand (default: next to kiln, else PATH)\n"
    "  KILN_DAEMON_UID  a uid whose daemon and files are trusted besides yours and root's\n"
    "                   (a kilnd shared on purpose; see docs/SECURITY.md)\n"
    "  KILN_NUM_THREADS threads that run kernels (default: one per core)\n";

std::string Usage() {
  std::string usage =
      "kiln: compile tensor graphs through the Kiln cache, and manage the cache.\n\n"
      "Usage: kiln COMMAND [ARGS] [FLAGS]   (kiln COMMAND --help: its flags and an example)\n\n"
      "Commands:\n";
  // Name and arguments in a column of 20; longer ones get the summary on
  // a line of its own.
  constexpr int kColumn = 20;
  for (const Command* command : Commands()) {
    const std::string head = absl::StrFormat("%-8s%s", command->name, command->arguments);
    if (head.size() < kColumn) {
      absl::StrAppend(&usage, "  ", absl::StrFormat("%-*s", kColumn, head), command->summary, "\n");
    } else {
      absl::StrAppend(&usage, "  ", head, "\n", std::string(2 + kColumn, ' '), command->summary,
                      "\n");
    }
  }
  absl::StrAppend(&usage,
                  "\nGraph files are the protobuf JSON of kiln.v1.Graph (see examples/).\n"
                  "kilnd is started on demand.\n\n",
                  kEnvironment);
  return usage;
}

std::string CommandUsage(const Command& command) {
  std::string usage = absl::StrCat("kiln ", command.name, ": ", command.summary, "\n\nUsage: kiln ",
                                   command.name, *command.arguments ? " " : "", command.arguments,
                                   command.flags.empty() ? "" : " [FLAGS]", "\n");
  if (!command.flags.empty()) absl::StrAppend(&usage, "\nFlags:\n");
  for (const FlagUse& use : command.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(use.name);
    const std::string help = use.help != nullptr ? use.help : flag->Help();
    absl::StrAppend(&usage, "  --", use.name,
                    " (default: ", flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue(),
                    ")\n      ", help, "\n");
  }
  absl::StrAppend(&usage, "\nExample:\n  ", command.example, "\n\n", kEnvironment);
  return usage;
}

// InvalidArgument unless every flag in `argv` (after the command name) is
// one `command` lists: a flag of another command names that command.
absl::Status CheckFlags(const Command& command, const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::string_view name = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    const bool has_value = absl::StrContains(name, '=');
    name = name.substr(0, name.find('='));
    if (const FlagUse* use = FindFlagUse(command, name); use != nullptr) {
      // `--flag value`: the value is the next argument.
      if (!has_value && !absl::FindCommandLineFlag(use->name)->IsOfType<bool>()) ++i;
      continue;
    }
    // --noFLAG sets a bool FLAG to false.
    const absl::string_view negated = absl::StripPrefix(name, "no");
    const absl::CommandLineFlag* bool_flag = absl::FindCommandLineFlag(negated);
    if (negated != name && absl::FindCommandLineFlag(name) == nullptr && bool_flag != nullptr &&
        bool_flag->IsOfType<bool>()) {
      name = negated;
      if (FindFlagUse(command, name) != nullptr) continue;
    }
    std::vector<std::string> owners;
    for (const Command* other : Commands()) {
      if (FindFlagUse(*other, name) != nullptr)
        owners.push_back(absl::StrCat("kiln ", other->name));
    }
    const std::string help = absl::StrCat("; `kiln ", command.name, " --help` lists its flags");
    if (owners.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, help));
    }
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is a flag of ",
                                                   absl::StrJoin(owners, ", "), ", not of kiln ",
                                                   command.name, help));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  const bool help = std::any_of(arguments.begin(), arguments.end(), [](const std::string& arg) {
    return arg == "--help" || arg == "-h";
  });
  if (arguments.empty() || arguments[0] == "help" || arguments[0][0] == '-') {
    const bool asked = !arguments.empty() && (help || arguments[0] == "help");
    (asked ? std::cout : std::cerr) << Usage();
    return asked ? 0 : kExitUsage;
  }
  const Command* command = FindCommand(arguments[0]);
  if (command == nullptr) {
    std::cerr << "kiln: unknown command '" << arguments[0] << "'; run `kiln --help` for the list\n";
    return kExitUsage;
  }
  if (help) {
    std::cout << CommandUsage(*command);
    return 0;
  }
  if (const absl::Status flags = CheckFlags(*command, {arguments.begin() + 1, arguments.end()});
      !flags.ok()) {
    std::cerr << "kiln " << command->name << ": " << flags.message() << "\n";
    return kExitUsage;
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const absl::Status status = command->run(Args(positional.begin() + 2, positional.end()));
  if (!status.ok()) {
    std::cerr << "kiln " << command->name << ": " << status.message() << "\n";
    return ExitCodeOf(status);  // 1, or what the command chose (status: 3)
  }
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
