#include "tools/kiln/bundle.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/warmup_plan.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

// kilnd runs in another directory: it gets absolute paths.
absl::StatusOr<std::string> Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) {
    return absl::InternalError("cannot find the current directory");
  }
  return absl::StrCat(cwd, "/", path);
}

}  // namespace

absl::Status RunExport(const std::vector<std::string>& arguments, const ExportOptions& options,
                       Client& client, std::ostream& out) {
  if (options.output.empty()) {
    return absl::InvalidArgumentError("give the bundle to write with -o FILE");
  }
  kiln::v1::ExportRequest request;
  ASSIGN_OR_RETURN(*request.mutable_path(), Absolute(options.output));
  for (const std::string& argument : arguments) {
    if (!options.graphs) {
      request.add_keys(argument);
      continue;
    }
    kiln::v1::ExportRequest::NamedRequest* named = request.add_requests();
    named->set_name(argument);
    ASSIGN_OR_RETURN(*named->mutable_request()->mutable_graph(), ReadGraphFile(argument));
    *named->mutable_request()->mutable_options() = options.compile_options;
  }
  if (!options.plan.empty()) {
    ASSIGN_OR_RETURN(const kiln::v1::WarmupPlan plan, ReadWarmupPlan(options.plan));
    ASSIGN_OR_RETURN(std::vector<WarmupCompile> compiles,
                     ExpandWarmupPlan(plan, Dirname(options.plan)));
    for (WarmupCompile& compile : compiles) {
      kiln::v1::ExportRequest::NamedRequest* named = request.add_requests();
      named->set_name(absl::StrCat(options.plan, ": ", compile.name));
      *named->mutable_request() = std::move(compile.request);
    }
  }
  ASSIGN_OR_RETURN(const kiln::v1::ExportResponse response, client.Export(request));
  int64_t object_bytes = 0;
  for (const kiln::v1::BundledEntry& entry : response.entries()) {
    object_bytes += entry.object_bytes();
  }
  out << absl::StrFormat("exported %d entries (%d object bytes) to %s, %d bytes\n",
                         response.entries_size(), object_bytes, options.output,
                         response.bundle_bytes());
  return absl::OkStatus();
}

absl::Status RunImport(const std::string& path, bool force, Client& client, std::ostream& out) {
  kiln::v1::ImportRequest request;
  ASSIGN_OR_RETURN(*request.mutable_path(), Absolute(path));
  request.set_force(force);
  ASSIGN_OR_RETURN(const kiln::v1::ImportResponse response, client.Import(request));
  int64_t object_bytes = 0;
  for (const kiln::v1::BundledEntry& entry : response.entries()) {
    object_bytes += entry.object_bytes();
    if (!entry.stale_reason().empty()) {
      out << "forced " << entry.key().substr(0, 16) << " ("
          << (entry.graph_name().empty() ? "-" : entry.graph_name())
          << "): " << entry.stale_reason() << "; it cannot be a hit here\n";
    }
  }
  out << absl::StrFormat("imported %d entries (%d object bytes) from %s\n", response.entries_size(),
                         object_bytes, path);
  return absl::OkStatus();
}

}  // namespace kiln
