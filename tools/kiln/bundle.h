// `kiln export` and `kiln import`: a warmed cache as one checksummed file
// (cache/bundle.h), to bake into a container image (docs/OPERATIONS.md
// "Bundles"). kilnd reads and writes the file (it owns the store); this
// side turns keys, graph files and warmup plans into the request.
#ifndef KILN_TOOLS_KILN_BUNDLE_H_
#define KILN_TOOLS_KILN_BUNDLE_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/client.h"
#include "proto/service.pb.h"

namespace kiln {

struct ExportOptions {
  std::string output;  // the bundle to write; required
  // The arguments are graph files, keyed with `compile_options` as
  // `kiln compile` would key them; otherwise they are keys or key prefixes.
  bool graphs = false;
  kiln::v1::CompileOptions compile_options;
  // A warmup plan (client/warmup_plan.h) whose every bucket is exported.
  std::string plan;
};

// Exports what `arguments` and `options.plan` name, or the whole cache when
// they name nothing, printing a summary to `out`. Errors as kilnd's (a graph
// or bucket not stored is NotFound naming it), or InvalidArgument for a
// missing --output.
absl::Status RunExport(const std::vector<std::string>& arguments, const ExportOptions& options,
                       Client& client, std::ostream& out);

// Imports the bundle at `path` (all entries or none), printing what was
// stored to `out`; with `force`, entries built for another toolchain too,
// each named with the reason.
absl::Status RunImport(const std::string& path, bool force, Client& client, std::ostream& out);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_BUNDLE_H_
