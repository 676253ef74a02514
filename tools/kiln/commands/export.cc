// kiln export: write entries and their objects to one checksummed bundle
// (tools/kiln/bundle.h).
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/bundle.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(std::string, output, "", "The bundle file to write (also -o FILE).");
ABSL_FLAG(std::string, o, "", "As --output.");
ABSL_FLAG(std::string, plan, "", "A warmup plan (docs/WARMUP.md) whose every bucket to export.");

namespace kiln {
namespace {

absl::Status Export(const Args& args) {
  ExportOptions options;
  options.output = absl::GetFlag(FLAGS_output);
  if (options.output.empty()) options.output = absl::GetFlag(FLAGS_o);
  Args arguments = args;
  if (const std::string graph = absl::GetFlag(FLAGS_graph); !graph.empty()) {
    options.graphs = true;
    arguments.insert(arguments.begin(), graph);
  }
  ASSIGN_OR_RETURN(options.compile_options, CompileOptionsFromFlags());
  options.plan = absl::GetFlag(FLAGS_plan);
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  return RunExport(arguments, options, *client, std::cout);
}

}  // namespace

const Command kExportCommand = {
    "export",
    "[KEY...] -o FILE",
    "write entries (by key, --graph file or --plan bucket; all when none is named) and their "
    "objects to one checksummed bundle, to import elsewhere",
    {{"output"},
     {"o"},
     {"graph",
      "a graph file whose entry to export, keyed as `kiln compile` keys it (the arguments after "
      "it are graph files too)"},
     {"plan"},
     {"target"},
     kSocketFlag,
     kCacheDirFlag,
     kStartFlag},
    "kiln warmup plan.json && kiln export --plan plan.json -o warm.kb",
    Export};

}  // namespace kiln
