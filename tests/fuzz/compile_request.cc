// Fuzz target: a Compile request as kilnd receives it (binary
// kiln.v1.CompileRequest: graph, requested guards, options) through
// PrepareGraph, ResolveGuards, the cache key and GenerateCode. Never a
// crash; refusals are InvalidArgument or Unimplemented.
#include <cstdint>

#include "tests/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::v1::CompileRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::fuzz::CompileLikeKilnd(request);
  return 0;
}
