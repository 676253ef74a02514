#include "tests/fuzz/fuzz_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cache/key.h"
#include "codegen/guards.h"
#include "codegen/pipeline.h"

namespace kiln::fuzz {

void CheckCode(const absl::Status& status, absl::Span<const absl::StatusCode> allowed,
               const char* what) {
  if (status.ok()) return;
  for (absl::StatusCode code : allowed) {
    if (status.code() == code) return;
  }
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s returned %s\n", what, status.ToString().c_str());
  std::abort();
}

void Check(bool condition, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what.c_str());
  std::abort();
}

void CompileLikeKilnd(const kiln::v1::CompileRequest& request) {
  const absl::StatusCode kUserErrors[] = {absl::StatusCode::kInvalidArgument,
                                          absl::StatusCode::kUnimplemented};
  // As daemon/artifact_cache.cc Compile, up to the store lookup.
  absl::StatusOr<ir::Graph> graph = PrepareGraph(request.graph());
  CheckCode(graph.status(), kUserErrors, "PrepareGraph");
  if (!graph.ok()) return;
  absl::StatusOr<kiln::v1::Guards> guards = ResolveGuards(*graph, request.guards());
  CheckCode(guards.status(), kUserErrors, "ResolveGuards");
  if (!guards.ok()) return;
  CodegenInputs inputs;
  inputs.graph = *std::move(graph);
  inputs.guards = *std::move(guards);
  inputs.options = request.options();
  const CacheKey key = ComputeCacheKey(inputs);
  Check(key.key.size() == 64, "cache key is not 64 hex digits: " + key.key);
  // As ArtifactCache::Build on a miss (the compile itself is not fuzzed).
  absl::StatusOr<GeneratedCode> code = GenerateCode(inputs);
  CheckCode(code.status(), kUserErrors, "GenerateCode of a verified graph");
}

std::string ByteReader::Bytes(size_t length) {
  length = std::min(length, remaining());
  std::string bytes(reinterpret_cast<const char*>(data_ + position_), length);
  position_ += length;
  return bytes;
}

}  // namespace kiln::fuzz
