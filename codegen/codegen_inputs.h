// Everything that can change generated code or the artifact built from it,
// in one value. The pipeline reads nothing else, and the cache key
// (cache/key.h) hashes this value whole, so nothing that changes the code
// can stay out of the key.
#ifndef KILN_CODEGEN_CODEGEN_INPUTS_H_
#define KILN_CODEGEN_CODEGEN_INPUTS_H_

#include <string>

#include "codegen/ir.h"
#include "proto/artifact.pb.h"
#include "proto/guards.pb.h"
#include "proto/service.pb.h"

namespace kiln {

struct CodegenInputs {
  ir::Graph graph;          // canonical (PrepareGraph)
  kiln::v1::Guards guards;  // canonical (ResolveGuards)
  kiln::v1::CompileOptions options;
  // The compiler that will build it: ToolchainDigest (cache/key.h) of its
  // fingerprint (codegen/compile/toolchain.h).
  std::string toolchain_digest;
};

}  // namespace kiln

#endif  // KILN_CODEGEN_CODEGEN_INPUTS_H_
