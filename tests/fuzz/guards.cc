// Fuzz target: what the client computes from a graph and the sizes of the
// inputs a caller passes, before any daemon is asked (client/compiled_graph.cc
// FindEntry / Respecialize), plus the daemon's guard resolution:
//
//   input := u32 length (little endian) | CompileRequest (binary, `length`
//            bytes) | sizes script
//
// The script gives each input dim a run-time size (an arbitrary int64:
// zero, negative, huge) and each symbol of the prepared graph a value.
// Then, as the client: SymbolValues and Specialize (a symbolic graph at
// size 0 or 1), Retype to the new sizes with the changed dims symbolic and
// exact; as the daemon: PrepareGraph and ResolveGuards of each result;
// and limits::CheckRunTimeSizes at the scripted symbol values.
//
// The guard table itself (CompiledGraph::CheckGuards) is private to a
// CompiledGraph loaded from a real artifact, so it is not reachable here;
// e2e_test covers it with a daemon.
#include "codegen/guards.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/limits.h"
#include "codegen/prepare.h"
#include "codegen/retype.h"
#include "tests/fuzz/fuzz_checks.h"

namespace kiln::fuzz {
namespace {

const absl::StatusCode kUserErrors[] = {absl::StatusCode::kInvalidArgument,
                                        absl::StatusCode::kUnimplemented};

// A run-time size: mostly small, sometimes any int64.
int64_t ScriptedSize(ByteReader& script, int64_t declared) {
  const uint8_t op = script.Byte();
  switch (op % 4) {
    case 0:
      return declared;
    case 1:
      return op >> 2;  // 0..63
    case 2:
      return static_cast<int64_t>(script.Uint64());
    default:
      return declared + (op >> 2) - 32;
  }
}

// PrepareGraph and ResolveGuards as the daemon would on `graph`.
void Prepare(const kiln::v1::Graph& graph, const char* what) {
  absl::StatusOr<ir::Graph> prepared = PrepareGraph(graph);
  CheckCode(prepared.status(), kUserErrors, what);
  if (!prepared.ok()) return;
  CheckCode(ResolveGuards(*prepared, {}).status(), {}, "ResolveGuards of exact guards");
}

void Run(const kiln::v1::CompileRequest& request, ByteReader& script) {
  const kiln::v1::Graph& graph = request.graph();
  absl::StatusOr<ir::Graph> prepared = PrepareGraph(graph);
  CheckCode(prepared.status(), kUserErrors, "PrepareGraph");
  if (prepared.ok()) {
    CheckCode(ResolveGuards(*prepared, request.guards()).status(), kUserErrors, "ResolveGuards");
    const kiln::v1::Guards exact = ExactGuards(*prepared);
    CheckCode(ResolveGuards(*prepared, exact).status(), {}, "ResolveGuards of ExactGuards");
    std::vector<int64_t> values;
    for (size_t s = 0; s < prepared->symbols.size(); ++s) {
      const uint8_t op = script.Byte();
      values.push_back(op % 2 ? op >> 1 : static_cast<int64_t>(script.Uint64()));
    }
    CheckCode(limits::CheckRunTimeSizes(*prepared, values), {absl::StatusCode::kInvalidArgument},
              "CheckRunTimeSizes");
  }
  // The client works on the graph as the user gave it, verified or not.
  std::vector<std::vector<int64_t>> sizes;
  std::vector<std::vector<kiln::v1::Dim>> symbolic, exact;
  for (const auto& input : graph.inputs()) {
    sizes.emplace_back();
    symbolic.emplace_back();
    exact.emplace_back();
    for (const kiln::v1::Dim& old : input.type().sizes()) {
      const int64_t size = ScriptedSize(script, old.has_symbol() ? 8 : old.constant());
      sizes.back().push_back(size);
      kiln::v1::Dim dim;
      dim.set_constant(size);
      exact.back().push_back(dim);
      if (!old.has_symbol() && old.constant() != size && size >= 2 && old.constant() >= 2) {
        dim.set_symbol(absl::StrCat("d", old.constant(), "_", size));
      } else if (old.has_symbol()) {
        dim = old;
      }
      symbolic.back().push_back(dim);
    }
  }
  std::map<std::string, int64_t> values = SymbolValues(graph, sizes);
  for (auto it = values.begin(); it != values.end();) {
    it = it->second < 2 ? std::next(it) : values.erase(it);
  }
  if (!values.empty()) Prepare(Specialize(graph, values), "PrepareGraph of a specialization");
  for (const auto* new_sizes : {&symbolic, &exact}) {
    absl::StatusOr<kiln::v1::Graph> retyped = Retype(graph, *new_sizes);
    CheckCode(retyped.status(), kUserErrors, "Retype");
    if (retyped.ok()) Prepare(*retyped, "PrepareGraph of a retyped graph");
  }
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::ByteReader reader(data, size);
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= uint32_t{reader.Byte()} << (8 * i);
  const std::string bytes = reader.Bytes(length);
  kiln::v1::CompileRequest request;
  if (!request.ParseFromString(bytes)) return 0;
  kiln::fuzz::Run(request, reader);
  return 0;
}
