// Test helpers for the pipeline and its passes: graphs from JSON or
// examples/, each stage's text, and the IR before a given pass.
#ifndef KILN_CODEGEN_PIPELINE_TESTING_H_
#define KILN_CODEGEN_PIPELINE_TESTING_H_

#include <string>

#include "codegen/ir.h"
#include "codegen/pipeline.h"
#include "proto/graph.pb.h"

namespace kiln {

// A graph from its protobuf JSON.
kiln::v1::Graph ParseGraph(const std::string& json);

// examples/<name>.json (the test needs //examples as data).
kiln::v1::Graph ReadExample(const std::string& name);

// The text of stage `name` of `code` (GenerateCode with keep_stages), or "".
std::string Stage(const GeneratedCode& code, const std::string& name);

// PrepareGraph then GenerateCode, keeping the stages; a failure fails the test.
GeneratedCode Generate(const kiln::v1::Graph& graph);

// PrepareGraph (import, verify, canonicalize) of `json`; a failure fails the test.
ir::Graph Prepare(const std::string& json);

}  // namespace kiln

#endif  // KILN_CODEGEN_PIPELINE_TESTING_H_
