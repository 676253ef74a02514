#include "cache/key.h"

#include <google/protobuf/util/json_util.h>

#include <functional>
#include <set>

#include "abi/target.h"
#include "absl/strings/str_join.h"
#include "cache/request_key.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
#include "common/files.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln::v1::Graph ReadExample(const std::string& name) {
  kiln::v1::Graph graph;
  auto json = ReadFile("examples/" + name + ".json");
  EXPECT_TRUE(json.ok());
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &graph).ok());
  return graph;
}

kiln::v1::Toolchain TestToolchain() {
  kiln::v1::Toolchain toolchain;
  toolchain.set_compiler_version("clang 19");
  toolchain.add_flags("-O3");
  toolchain.set_target_triple("x86_64-pc-linux-gnu");
  toolchain.set_cpu("znver4");
  toolchain.set_cpu_feature_list("+avx512f");
  toolchain.add_build_ids("clang=abc");
  return toolchain;
}

CodegenInputs InputsFor(const kiln::v1::Graph& graph) {
  auto prepared = PrepareGraph(graph);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  CodegenInputs inputs;
  inputs.graph = *prepared;
  inputs.guards = ExactGuards(inputs.graph);
  inputs.toolchain_digest = ToolchainDigest(TestToolchain());
  return inputs;
}

std::string KeyOf(const kiln::v1::Graph& graph) { return ComputeCacheKey(InputsFor(graph)).key; }

TEST(CacheKeyTest, EveryInputChangesTheKey) {
  const CodegenInputs base = InputsFor(ReadExample("f"));
  const std::string base_key = ComputeCacheKey(base).key;
  const std::vector<std::pair<std::string, std::function<void(CodegenInputs&)>>> changes = {
      {"graph op", [](CodegenInputs& in) { in.graph.nodes[3].op = "aten.sub.Tensor"; }},
      {"graph arg", [](CodegenInputs& in) { in.graph.nodes[2].args["other"] = 2.0; }},
      {"graph input dtype",
       [](CodegenInputs& in) { in.graph.values[0].dtype = ir::DType::kFloat64; }},
      {"graph outputs", [](CodegenInputs& in) { in.graph.outputs.push_back(2); }},
      {"guards", [](CodegenInputs& in) { in.guards.mutable_inputs(0)->set_requires_grad(true); }},
      {"guard relation",
       [](CodegenInputs& in) { in.guards.add_relations()->mutable_range()->set_symbol("s0"); }},
      {"salt", [](CodegenInputs& in) { in.options.set_salt("x"); }},
      {"toolchain", [](CodegenInputs& in) { in.toolchain_digest = std::string(64, '0'); }},
      {"target x86-64-v3",
       [](CodegenInputs& in) { in.options.set_target(kiln::v1::TARGET_X86_64_V3); }},
      {"target x86-64-v4",
       [](CodegenInputs& in) { in.options.set_target(kiln::v1::TARGET_X86_64_V4); }},
  };
  for (const auto& [what, change] : changes) {
    CodegenInputs changed = base;
    change(changed);
    EXPECT_NE(ComputeCacheKey(changed).key, base_key) << what << " did not change the key";
  }
  EXPECT_EQ(ComputeCacheKey(base).key, base_key);
}

TEST(CacheKeyTest, EveryToolchainFieldChangesItsDigest) {
  const std::string base = ToolchainDigest(TestToolchain());
  const std::vector<std::pair<std::string, std::function<void(kiln::v1::Toolchain&)>>> changes = {
      {"compiler", [](kiln::v1::Toolchain& t) { t.set_compiler_version("clang 20"); }},
      {"build id", [](kiln::v1::Toolchain& t) { t.set_build_ids(0, "clang=abd"); }},
      {"flags", [](kiln::v1::Toolchain& t) { t.add_flags("-ffast-math"); }},
      {"flag order",
       [](kiln::v1::Toolchain& t) {
         t.add_flags("-fPIC");
         t.mutable_flags()->SwapElements(0, 1);
       }},
      {"triple", [](kiln::v1::Toolchain& t) { t.set_target_triple("aarch64"); }},
      {"cpu", [](kiln::v1::Toolchain& t) { t.set_cpu("skylake-avx512"); }},
      {"cpu features",
       [](kiln::v1::Toolchain& t) { t.set_cpu_feature_list("+amx-tile,+avx512f"); }},
      // Lengths prefix every string: bytes moved between fields differ.
      {"bytes moved between fields",
       [](kiln::v1::Toolchain& t) {
         t.set_compiler_version("clang 19-O3");
         t.set_flags(0, "");
       }},
  };
  std::set<std::string> digests = {base};
  for (const auto& [what, change] : changes) {
    kiln::v1::Toolchain changed = TestToolchain();
    change(changed);
    EXPECT_TRUE(digests.insert(ToolchainDigest(changed)).second)
        << what << " did not change the digest";
  }
  EXPECT_EQ(ToolchainDigest(TestToolchain()), base);
}

TEST(CacheKeyTest, EachTargetHasItsOwnKeyAndNativeKeysAreThoseBeforeTargets) {
  CodegenInputs inputs = InputsFor(ReadExample("f"));
  const CacheKey unset = ComputeCacheKey(inputs);
  // Options as encoded before targets existed: the empty salt's length
  // prefix alone. Native entries stored then are still found.
  EXPECT_EQ(unset.components.options(), Sha256Hex(std::string(8, '\0')));
  inputs.options.set_target(kiln::v1::TARGET_NATIVE);
  EXPECT_EQ(ComputeCacheKey(inputs).key, unset.key) << "an unset target is native";
  inputs.options.set_target(kiln::v1::TARGET_X86_64_V3);
  const std::string v3 = ComputeCacheKey(inputs).key;
  inputs.options.set_target(kiln::v1::TARGET_X86_64_V4);
  const std::string v4 = ComputeCacheKey(inputs).key;
  EXPECT_NE(v3, unset.key);
  EXPECT_NE(v4, unset.key);
  EXPECT_NE(v3, v4);
}

// A portable target's fingerprint names the level, not the host's CPU
// (DetectToolchain; compile_test checks that against clang): hosts whose
// native fingerprints differ agree on the portable key.
TEST(CacheKeyTest, PortableKeysDoNotDependOnTheHostsCpu) {
  kiln::v1::Toolchain zen_toolchain = TestToolchain();
  zen_toolchain.set_cpu("znver5");
  kiln::v1::Toolchain xeon_toolchain = zen_toolchain;
  xeon_toolchain.set_cpu("sapphirerapids");
  xeon_toolchain.set_cpu_feature_list("+amx-tile,+avx512f");
  CodegenInputs zen = InputsFor(ReadExample("f"));
  zen.toolchain_digest = ToolchainDigest(zen_toolchain);
  CodegenInputs xeon = zen;
  xeon.toolchain_digest = ToolchainDigest(xeon_toolchain);
  EXPECT_NE(ComputeCacheKey(zen).key, ComputeCacheKey(xeon).key) << "native keys are per CPU";
  for (kiln::v1::Toolchain* host : {&zen_toolchain, &xeon_toolchain}) {
    host->set_cpu("x86-64-v3");
    host->clear_cpu_feature_list();
  }
  zen.options.set_target(kiln::v1::TARGET_X86_64_V3);
  zen.toolchain_digest = ToolchainDigest(zen_toolchain);
  xeon.options.set_target(kiln::v1::TARGET_X86_64_V3);
  xeon.toolchain_digest = ToolchainDigest(xeon_toolchain);
  EXPECT_EQ(ComputeCacheKey(zen).key, ComputeCacheKey(xeon).key);
}

// Entries written by earlier builds hold CPU features and graph parts as one
// string each: they read the same, and the toolchain digest (part of every
// key) is the one those builds computed, so their entries still hit.
TEST(CacheKeyTest, EarlierEncodingsOfFeaturesAndGraphPartsReadTheSame) {
  kiln::v1::Toolchain joined = TestToolchain();
  joined.set_cpu_feature_list("+avx2,+avx512f,-xop");
  kiln::v1::Toolchain listed = joined;
  listed.clear_cpu_feature_list();
  for (const char* feature : {"+avx2", "+avx512f", "-xop"}) listed.add_cpu_features(feature);
  const std::vector<absl::string_view> features = {"+avx2", "+avx512f", "-xop"};
  EXPECT_EQ(CpuFeatures(joined), features);
  EXPECT_EQ(CpuFeatures(listed), features);
  EXPECT_EQ(ToolchainDigest(joined),
            "944450b79855d9dbd50e2ace1296d600719d9cf64d258b0e31bcd5c159dedcab");
  EXPECT_EQ(ToolchainDigest(listed), ToolchainDigest(joined));
  EXPECT_TRUE(CpuFeatures(kiln::v1::Toolchain()).empty());

  const CacheKey key = ComputeCacheKey(InputsFor(ReadExample("f")));
  const std::vector<absl::string_view> parts = GraphParts(key.components);
  ASSERT_EQ(parts.size(), 1 + InputsFor(ReadExample("f")).graph.nodes.size());
  EXPECT_EQ(key.components.graph_part_digests(), absl::StrJoin(parts, ""));
  kiln::v1::KeyComponents earlier = key.components;
  earlier.clear_graph_part_digests();
  for (absl::string_view part : parts) {
    EXPECT_EQ(part.size(), 16u);
    earlier.add_graph_parts(std::string(part));
  }
  EXPECT_EQ(GraphParts(earlier), parts);
}

TEST(CacheKeyTest, NamesIdsAndIndependentNodeOrderDoNotChangeTheKey) {
  const kiln::v1::Graph f = ReadExample("keep_product");
  kiln::v1::Graph renamed = f;
  renamed.set_name("other");
  renamed.mutable_inputs(0)->set_name("y");
  for (auto& node : *renamed.mutable_nodes()) node.set_name("n_" + node.name());
  EXPECT_EQ(KeyOf(renamed), KeyOf(f));

  // Renumber every value id.
  kiln::v1::Graph renumbered = f;
  auto shift = [](int64_t id) { return id * 10 + 7; };
  renumbered.mutable_inputs(0)->set_value(shift(0));
  for (auto& node : *renumbered.mutable_nodes()) {
    for (auto& input : *node.mutable_inputs()) input = shift(input);
    for (auto& output : *node.mutable_outputs()) output = shift(output);
  }
  for (auto& output : *renumbered.mutable_outputs()) output = shift(output);
  EXPECT_EQ(KeyOf(renumbered), KeyOf(f));
}

TEST(CacheKeyTest, ReorderingIndependentNodesKeepsTheKey) {
  // Two independent branches, a = x + 1 and b = x * 2, returned as (a, b).
  auto graph = [](bool swapped) {
    kiln::v1::Graph g;
    auto* input = g.add_inputs();
    input->set_value(0);
    input->mutable_type()->set_dtype(kiln::v1::FLOAT32);
    input->mutable_type()->add_sizes()->set_constant(8);
    auto add_node = [&](const std::string& op, int64_t out) {
      auto* node = g.add_nodes();
      node->set_op(op);
      node->add_inputs(0);
      auto* arg = node->add_args();
      arg->set_name("other");
      arg->set_float_value(op == "aten.add.Tensor" ? 1.0 : 2.0);
      node->add_outputs(out);
      *node->add_output_types() = input->type();
    };
    if (swapped) {
      add_node("aten.mul.Tensor", 2);
      add_node("aten.add.Tensor", 1);
    } else {
      add_node("aten.add.Tensor", 1);
      add_node("aten.mul.Tensor", 2);
    }
    g.add_outputs(1);
    g.add_outputs(2);
    return g;
  };
  EXPECT_EQ(KeyOf(graph(true)), KeyOf(graph(false)));
}

TEST(CacheKeyTest, DefaultsStatedOrOmittedGiveOneKeyAndScalarTypesDiffer) {
  kiln::v1::Graph omitted = ReadExample("f");
  kiln::v1::Graph stated = omitted;
  auto* alpha = stated.mutable_nodes(2)->add_args();
  alpha->set_name("alpha");
  alpha->set_int_value(1);
  EXPECT_EQ(KeyOf(stated), KeyOf(omitted));

  kiln::v1::Graph int_scalar = omitted;
  int_scalar.mutable_nodes(2)->mutable_args(0)->set_int_value(1);  // add(t, 1), not add(t, 1.0)
  EXPECT_NE(KeyOf(int_scalar), KeyOf(omitted));
}

// f's output 0 has input 0's type: output 0 may be input 0's new value.
TEST(CacheKeyTest, AGraphThatDiffersOnlyInAliasingHasAnotherKeyAndRequestDigest) {
  kiln::v1::Graph graph = ReadExample("f");
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  const ToolchainDigests toolchains = {{kiln::v1::TARGET_NATIVE, std::string(64, '1')}};
  const absl::StatusOr<std::string> digest = RequestDigest(request, RequestSaltsFor(toolchains));
  ASSERT_TRUE(digest.ok()) << digest.status();
  const std::string key = KeyOf(graph);

  kiln::v1::OutputAlias* alias = graph.add_output_aliases();
  alias->set_output(0);
  alias->set_input(0);
  *request.mutable_graph() = graph;
  const absl::StatusOr<std::string> aliased_digest =
      RequestDigest(request, RequestSaltsFor(toolchains));
  ASSERT_TRUE(aliased_digest.ok()) << aliased_digest.status();
  EXPECT_NE(KeyOf(graph), key);
  EXPECT_NE(*aliased_digest, *digest);
  EXPECT_EQ(InputsFor(graph).graph.output_aliases, (std::vector<std::pair<int, int>>{{0, 0}}));
}

TEST(CacheKeyTest, DeadNodesDoNotChangeTheKey) {
  kiln::v1::Graph graph = ReadExample("f");
  const std::string key = KeyOf(graph);
  auto* dead = graph.add_nodes();
  *dead = graph.nodes(3);
  dead->set_name("unused");
  dead->set_outputs(0, 99);
  EXPECT_EQ(KeyOf(graph), key);
}

}  // namespace
}  // namespace kiln
