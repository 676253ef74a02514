// Fuzz target: a graph file (protobuf JSON, as examples/ and kiln_trace.py
// write them) through everything kilnd does before compiling: parse,
// PrepareGraph (import -> verify -> canonicalize), exact guards, the cache
// key, GenerateCode (decompose ... emit). Never a crash; refusals are
// InvalidArgument or Unimplemented (tests/fuzz/fuzz_checks.h).
#include <cstdint>
#include <string>

#include "proto/graph_file.h"
#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<kiln::v1::Graph> graph =
      kiln::ParseGraphJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
  if (!graph.ok()) return 0;
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *std::move(graph);
  kiln::fuzz::CompileLikeKilnd(request);
  return 0;
}
