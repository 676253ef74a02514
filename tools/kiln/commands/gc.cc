// kiln gc: evict least recently used entries past a size, and entries
// unused for an age.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/human_units.h"

ABSL_FLAG(std::string, max_bytes, "",
          "Evict least recently used entries until the store holds at most this many bytes "
          "(e.g. 2G, 500M; default: kilnd's --max_cache_bytes).");
ABSL_FLAG(std::string, older_than, "",
          "Evict entries unused for longer than this (e.g. 30d, 12h; default: kilnd's "
          "--max_entry_age).");

namespace kiln {
namespace {

absl::Status Gc(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 0, "kiln gc"));
  kiln::v1::GcRequest request;
  if (const std::string bytes = absl::GetFlag(FLAGS_max_bytes); !bytes.empty()) {
    ASSIGN_OR_RETURN(const int64_t max_bytes, ParseBytes(bytes));
    request.set_max_bytes(max_bytes);
  }
  if (const std::string age = absl::GetFlag(FLAGS_older_than); !age.empty()) {
    ASSIGN_OR_RETURN(const absl::Duration older_than, ParseAge(age));
    request.set_older_than_ms(absl::ToInt64Milliseconds(older_than));
  }
  request.set_dry_run(absl::GetFlag(FLAGS_dry_run));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  ASSIGN_OR_RETURN(const kiln::v1::GcResponse response, client->Gc(request));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const char* verb = request.dry_run() ? "would evict" : "evicted";
  for (const kiln::v1::GcResponse::Evicted& entry : response.evicted()) {
    std::cout << absl::StrFormat("%s %s  %10s  last used %s\n", verb, ShortKey(entry.key()),
                                 HumanBytes(entry.object_bytes()),
                                 HumanTime(absl::FromUnixMillis(entry.last_use_unix_ms())));
  }
  std::cout << absl::StrFormat("%s %d entries: %s -> %s\n", verb, response.evicted_size(),
                               HumanBytes(response.bytes_before()),
                               HumanBytes(response.bytes_after()));
  return absl::OkStatus();
}

}  // namespace

const Command kGcCommand = {
    "gc",
    "",
    "evict least recently used entries past a size, and entries unused for an age (pinned ones "
    "never)",
    {{"max_bytes"}, {"older_than"}, {"dry_run"}, {"json"}, kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln gc --max_bytes=2G --older_than=30d --dry_run",
    Gc};

}  // namespace kiln
