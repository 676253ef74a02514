// Everything that can change generated code or the artifact built from it,
// in one value. The pipeline reads nothing else, and the cache key
// (cache/key.h) hashes this value whole, so nothing that changes the code
// can stay out of the key.
#ifndef KILN_CODEGEN_CODEGEN_INPUTS_H_
#define KILN_CODEGEN_CODEGEN_INPUTS_H_

#include "codegen/ir.h"
#include "proto/artifact.pb.h"
#include "proto/guards.pb.h"
#include "proto/service.pb.h"

namespace kiln {

struct CodegenInputs {
  ir::Graph graph;          // canonical (PrepareGraph)
  kiln::v1::Guards guards;  // canonical (ResolveGuards)
  kiln::v1::CompileOptions options;
  kiln::v1::Toolchain toolchain;  // the compiler that will build it
};

}  // namespace kiln

#endif  // KILN_CODEGEN_CODEGEN_INPUTS_H_
