// The codegen pipeline: one linear list of passes, graph in, C++ out.
//
//   import -> verify -> canonicalize        (PrepareGraph: before keying)
//   decompose -> transpose linear pairs -> lower -> schedule -> plan buffers
//     -> check plan -> emit                 (GenerateCode)
//
// PrepareGraph (codegen/prepare.h, its own target: clients link it) runs
// before the cache key is computed (the key hashes the canonical graph);
// GenerateCode runs only on a miss, in kilnd. Both are pure functions of
// their inputs: same inputs, byte-identical source. The codegen version is
// in codegen/version.h.
#ifndef KILN_CODEGEN_PIPELINE_H_
#define KILN_CODEGEN_PIPELINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/codegen_inputs.h"
#include "codegen/ir.h"
#include "codegen/prepare.h"
#include "proto/artifact.pb.h"

namespace kiln {

struct GeneratedCode {
  std::string source;
  kiln::v1::Signature signature;
  // Each stage printed, in pipeline order, when asked for ("kiln explain").
  std::vector<std::pair<std::string, std::string>> stages;
};

absl::StatusOr<GeneratedCode> GenerateCode(const CodegenInputs& inputs, bool keep_stages = false);

}  // namespace kiln

#endif  // KILN_CODEGEN_PIPELINE_H_
