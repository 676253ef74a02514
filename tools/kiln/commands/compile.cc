// kiln compile GRAPH.json: compile (or fetch from the cache) and print the
// key and timings.
#include <iostream>

#include "abi/target.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/kiln/commands/command.h"

namespace kiln {
namespace {

absl::Status Compile(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln compile GRAPH.json"));
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(args[0]));
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, CompileOptionsFromFlags());
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_options() = options;
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(auto response, client->Compile(request));
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  const auto& timings = response.artifact().timings();
  std::cout << (response.cache_hit() ? "hit " : "compiled ") << response.artifact().key() << "\n"
            << "  object   " << response.object_path() << " (" << response.artifact().object_bytes()
            << " bytes)\n"
            << "  target   " << TargetName(response.artifact().target()) << " ("
            << response.artifact().toolchain().cpu() << ")\n"
            << absl::StrFormat("  request  %.2f ms", ms);
  if (!response.cache_hit()) {
    std::cout << absl::StrFormat(" (codegen %.2f ms, compile %.2f ms with the %s compiler)",
                                 timings.codegen_ms(), timings.compile_ms(),
                                 response.artifact().compiler());
  }
  std::cout << "\n";
  return absl::OkStatus();
}

}  // namespace

const Command kCompileCommand = {
    "compile",
    "GRAPH.json",
    "compile (or fetch from the cache); print the key and timings",
    {{"json"}, {"salt"}, {"target"}, kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln compile examples/f.json --target=x86-64-v3",
    Compile};

}  // namespace kiln
