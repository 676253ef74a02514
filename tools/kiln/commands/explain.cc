// kiln explain GRAPH.json: print each codegen stage (graph, loop IR, kernels,
// buffers, C++) and optionally the assembly clang makes of it.
#include <iostream>

#include "absl/flags/flag.h"
#include "codegen/compile/toolchain.h"
#include "codegen/pipeline.h"
#include "codegen/prepare.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "proto/graph_file.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(bool, asm, false, "Also print the assembly clang generates.");

namespace kiln {
namespace {

absl::Status Explain(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln explain GRAPH.json [--asm] [--target=...]"));
  ASSIGN_OR_RETURN(kiln::v1::Graph graph, ReadGraphFile(args[0]));
  ASSIGN_OR_RETURN(const kiln::v1::CompileOptions options, CompileOptionsFromFlags());
  ASSIGN_OR_RETURN(ir::Graph prepared, PrepareGraph(graph));
  CodegenInputs inputs;
  inputs.graph = std::move(prepared);
  inputs.options = options;
  ASSIGN_OR_RETURN(GeneratedCode code, GenerateCode(inputs, /*keep_stages=*/true));
  for (const auto& [stage, text] : code.stages) {
    std::cout << "== " << stage << " ==\n" << text << "\n";
  }
  if (absl::GetFlag(FLAGS_asm)) {
    ASSIGN_OR_RETURN(const std::string dir, MakeTempDirectory("/tmp/kiln-asmXXXXXX"));
    const std::string source = dir + "/kernel.cc";
    RETURN_IF_ERROR(WriteFileAtomically(source, code.source, 0600));
    std::vector<std::string> argv = {kDefaultClang};
    for (const std::string& flag : CodegenFlags(options.target())) {
      if (flag != "-shared" && flag != "-nostdlib" && flag != "-fuse-ld=lld") argv.push_back(flag);
    }
    for (const char* arg : {"-S", "-fno-verbose-asm", "-o", "-"}) argv.push_back(arg);
    argv.push_back(source);
    auto result = RunProcess(argv, absl::Minutes(1));
    RemoveRecursively(dir).IgnoreError();
    RETURN_IF_ERROR(result.status());
    std::cout << "== assembly ==\n" << result->output;
  }
  return absl::OkStatus();
}

}  // namespace

const Command kExplainCommand = {"explain",
                                 "GRAPH.json",
                                 "print each codegen stage: graph, loop IR, kernels, buffers, C++",
                                 {{"asm"}, {"target"}},
                                 "kiln explain examples/tail.json --asm --target=x86-64-v3",
                                 Explain};

}  // namespace kiln
