// kiln prune --stale: remove entries that can never hit on this host.
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/human_units.h"

ABSL_FLAG(bool, stale, false,
          "Remove entries built by another toolchain, codegen version or CPU (required: the one "
          "kind of pruning there is, named so that it is never a surprise).");

namespace kiln {
namespace {

absl::Status Prune(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln prune --stale"));
  if (!absl::GetFlag(FLAGS_stale)) {
    return absl::InvalidArgumentError("say what to prune: kiln prune --stale");
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::PruneResponse response,
                   client->Prune(absl::GetFlag(FLAGS_dry_run)));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const char* verb = absl::GetFlag(FLAGS_dry_run) ? "would prune" : "pruned";
  int64_t bytes = 0;
  for (const kiln::v1::PruneResponse::Pruned& entry : response.pruned()) {
    std::cout << verb << " " << ShortKey(entry.key()) << "  " << HumanBytes(entry.object_bytes())
              << "  " << entry.reason() << "\n";
    bytes += entry.object_bytes();
  }
  std::cout << verb << " " << response.pruned_size() << " stale entries (" << HumanBytes(bytes)
            << ")\n";
  return absl::OkStatus();
}

}  // namespace

const Command kPruneCommand = {
    "prune",
    "--stale",
    "remove entries built by another toolchain, codegen version or CPU (they can never hit)",
    {{"stale"}, {"dry_run"}, {"json"}, kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln prune --stale --dry_run",
    Prune};

}  // namespace kiln
