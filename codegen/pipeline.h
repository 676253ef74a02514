// The codegen pipeline: one linear list of passes, graph in, C++ out.
//
//   import -> verify -> canonicalize        (PrepareGraph: before keying)
//   decompose -> transpose linear pairs -> lower -> schedule -> plan buffers
//     -> check plan -> emit                 (GenerateCode)
//
// PrepareGraph runs before the cache key is computed (the key hashes the
// canonical graph); GenerateCode runs only on a miss. Both are pure
// functions of their inputs: same inputs, byte-identical source.
#ifndef KILN_CODEGEN_PIPELINE_H_
#define KILN_CODEGEN_PIPELINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/codegen_inputs.h"
#include "codegen/ir.h"
#include "proto/artifact.pb.h"
#include "proto/graph.pb.h"

namespace kiln {

// Incremented whenever generated code changes for the same inputs. Part of
// every cache key.
inline constexpr int kCodegenVersion = 20;

// Wire graph -> verified, canonical IR. InvalidArgument / Unimplemented name
// the offending node.
absl::StatusOr<ir::Graph> PrepareGraph(const kiln::v1::Graph& graph);

struct GeneratedCode {
  std::string source;
  kiln::v1::Signature signature;
  // Each stage printed, in pipeline order, when asked for ("kiln explain").
  std::vector<std::pair<std::string, std::string>> stages;
};

absl::StatusOr<GeneratedCode> GenerateCode(const CodegenInputs& inputs, bool keep_stages = false);

}  // namespace kiln

#endif  // KILN_CODEGEN_PIPELINE_H_
