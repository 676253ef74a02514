#include "codegen/pipeline_testing.h"

#include <google/protobuf/util/json_util.h>

#include "codegen/prepare.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace kiln {

kiln::v1::Graph ParseGraph(const std::string& json) {
  kiln::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &graph).ok()) << json;
  return graph;
}

kiln::v1::Graph ReadExample(const std::string& name) {
  auto json = ReadFile("examples/" + name + ".json");
  EXPECT_TRUE(json.ok()) << json.status();
  return ParseGraph(json.ok() ? *json : "");
}

std::string Stage(const GeneratedCode& code, const std::string& name) {
  for (const auto& [stage, text] : code.stages) {
    if (stage == name) return text;
  }
  return "";
}

GeneratedCode Generate(const kiln::v1::Graph& graph) {
  auto prepared = PrepareGraph(graph);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  CodegenInputs inputs;
  inputs.graph = *prepared;
  auto code = GenerateCode(inputs, /*keep_stages=*/true);
  EXPECT_TRUE(code.ok()) << code.status();
  return *code;
}

ir::Graph Prepare(const std::string& json) {
  absl::StatusOr<ir::Graph> prepared = PrepareGraph(ParseGraph(json));
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  return prepared.ok() ? *prepared : ir::Graph();
}

}  // namespace kiln
