// kiln verify: check every entry, blob, object file and index record against
// its digest, and optionally repair.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(bool, repair, false,
          "Rewrite damaged object files and index records from the store, evict entries whose "
          "blob is damaged, remove orphan object files.");

namespace kiln {
namespace {

absl::Status Verify(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln verify"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::VerifyResponse report,
                   client->Verify(absl::GetFlag(FLAGS_repair)));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(report) << "\n";
  } else {
    for (const std::string& problem : report.problems()) std::cout << "bad " << problem << "\n";
    std::cout << absl::StrFormat(
        "checked %d entries: %d bad entries, %d bad blobs, %d bad object files, %d bad index "
        "records; %d unindexed, %d orphan object files; %d repaired\n",
        report.entries(), report.bad_entries(), report.bad_blobs(), report.bad_objects(),
        report.bad_index(), report.unindexed(), report.orphan_objects(), report.repaired());
  }
  const int64_t bad =
      report.bad_entries() + report.bad_blobs() + report.bad_objects() + report.bad_index();
  if (bad > 0) {
    return absl::DataLossError(absl::StrCat(bad, " damaged ", bad == 1 ? "item" : "items",
                                            absl::GetFlag(FLAGS_repair)
                                                ? " (repaired as listed)"
                                                : "; `kiln verify --repair` repairs them"));
  }
  return absl::OkStatus();
}

}  // namespace

const Command kVerifyCommand = {
    "verify",
    "",
    "check every entry, blob, object file and index record against its digest; exit 1 when "
    "anything is damaged",
    {{"repair"}, {"json"}, kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln verify --repair",
    Verify};

}  // namespace kiln
