// Bad graphs must come back as errors, never as crashes or broken plans:
// thousands of random mutations of the example graphs and of traced
// symbolic ones (some re-typed with symbolic dims first) through the whole
// codegen pipeline (a crash here would take kilnd down with it).
#include <iostream>
#include <random>

#include "codegen/compile/subprocess_compiler.h"
#include "codegen/pipeline.h"
#include "codegen/retype.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

constexpr const char* kOps[] = {
    "aten.add.Tensor",
    "aten.mul.Tensor",
    "aten.relu.default",
    "aten.mm.default",
    "aten.permute.default",
    "aten.sum.dim_IntList",
    "aten._softmax.default",
    "aten.view.default",
    "aten.expand.default",
    "aten.bmm.default",
    "aten.native_layer_norm.default",
    "aten.slice.Tensor",
    "aten.select.int",
    "aten.where.self",
    "aten.amax.default",
    "bogus",
};

void Mutate(kiln::v1::Graph& graph, std::mt19937& random) {
  auto pick = [&](int n) { return n <= 0 ? 0 : static_cast<int>(random() % n); };
  auto value = [&]() -> int64_t { return static_cast<int64_t>(random() % 9) - 2; };
  if (graph.nodes_size() == 0) return;
  kiln::v1::Node& node = *graph.mutable_nodes(pick(graph.nodes_size()));
  switch (pick(9)) {
    case 0:
      node.set_op(kOps[pick(sizeof(kOps) / sizeof(kOps[0]))]);
      break;
    case 1:
      if (node.inputs_size() > 0) node.set_inputs(pick(node.inputs_size()), value());
      break;
    case 2:
      node.add_inputs(pick(6));
      break;
    case 3: {
      auto* arg = node.add_args();
      const char* names[] = {"dim", "dims", "other", "size", "keepdim", "alpha", "start", "index"};
      arg->set_name(names[pick(8)]);
      if (random() % 2) {
        arg->set_int_value(value());
      } else {
        for (int i = pick(4); i > 0; --i) arg->mutable_int_list()->add_values(value() * 16);
      }
      break;
    }
    case 4:
      if (node.output_types_size() > 0 && node.output_types(0).sizes_size() > 0) {
        node.mutable_output_types(0)->mutable_sizes(0)->set_constant(value() * 32);
      }
      break;
    case 5:
      if (graph.inputs_size() > 0 && graph.inputs(0).type().sizes_size() > 0) {
        graph.mutable_inputs(0)
            ->mutable_type()
            ->mutable_sizes(pick(2) % graph.inputs(0).type().sizes_size())
            ->set_constant(value() + 1);
      }
      break;
    case 6:
      graph.add_outputs(pick(8));
      break;
    case 7:
      node.clear_args();
      break;
    case 8: {  // a size list naming a symbol
      auto* arg = node.add_args();
      arg->set_name(random() % 2 ? "size" : "stride");
      for (int i = 1 + pick(4); i > 0; --i) {
        auto* term = arg->mutable_sym_int_list()->add_values()->add_terms();
        term->set_coefficient(value() * 4);
        if (random() % 2) term->add_symbols(random() % 2 ? "S" : "T");
      }
      break;
    }
  }
}

// `graph` re-typed with some of its input dims made symbolic (one symbol
// per original size, as the client does), or unchanged when that does not
// type-check.
kiln::v1::Graph WithSymbolicDims(const kiln::v1::Graph& graph, std::mt19937& random) {
  std::vector<std::vector<kiln::v1::Dim>> sizes;
  for (const auto& input : graph.inputs()) {
    sizes.emplace_back();
    for (const auto& dim : input.type().sizes()) {
      kiln::v1::Dim changed = dim;
      if (!dim.has_symbol() && dim.constant() >= 2 && random() % 2) {
        changed.set_symbol("d" + std::to_string(dim.constant()));
      }
      sizes.back().push_back(changed);
    }
  }
  auto retyped = Retype(graph, sizes);
  return retyped.ok() ? *retyped : graph;
}

TEST(PipelineFuzzTest, MutatedGraphsGiveErrorsNotCrashes) {
  // Every 8th accepted symbolic graph also goes through clang: the emitted
  // C++ must compile (symbolic strides, offsets and slots are text).
  auto work = MakeTempDirectory("/tmp/kilnXXXXXX");
  ASSERT_TRUE(work.ok()) << work.status();
  SubprocessCompiler compiler(*work, absl::Seconds(120));
  int compiled = 0;
  std::mt19937 random(12345);
  int accepted = 0, refused = 0, symbolic = 0;
  for (const char* name :
       {"examples/f", "examples/keep_product", "examples/tail",
        "tests/workloads/dynamic/attention_seq", "tests/workloads/dynamic/transformer_layer"}) {
    auto base = ReadGraphFile(std::string(name) + ".json");
    ASSERT_TRUE(base.ok());
    for (int round = 0; round < 700; ++round) {
      kiln::v1::Graph graph = random() % 3 ? *base : WithSymbolicDims(*base, random);
      for (int m = 1 + random() % 3; m > 0; --m) Mutate(graph, random);
      auto prepared = PrepareGraph(graph);
      if (!prepared.ok()) {
        ++refused;
        const auto code = prepared.status().code();
        EXPECT_TRUE(code == absl::StatusCode::kInvalidArgument ||
                    code == absl::StatusCode::kUnimplemented)
            << prepared.status();
        continue;
      }
      symbolic += !prepared->symbols.empty();
      CodegenInputs inputs;
      inputs.graph = *std::move(prepared);
      auto code = GenerateCode(inputs);
      // A verified graph must generate code; an Internal error is a Kiln bug.
      EXPECT_NE(code.status().code(), absl::StatusCode::kInternal) << code.status();
      ++accepted;
      if (code.ok() && !inputs.graph.symbols.empty() && symbolic % 8 == 1) {
        auto object = compiler.Compile(code->source, kiln::v1::TARGET_NATIVE);
        EXPECT_TRUE(object.ok()) << object.status();
        ++compiled;
      }
    }
  }
  EXPECT_GT(refused, 500);
  EXPECT_GT(accepted, 100);
  EXPECT_GT(symbolic, 100) << "of " << accepted << " accepted";
  EXPECT_GT(compiled, 10);
  std::cout << accepted << " accepted (" << symbolic << " symbolic, " << compiled
            << " of those compiled), " << refused << " refused\n";
  RemoveRecursively(*work).IgnoreError();
}

}  // namespace
}  // namespace kiln
