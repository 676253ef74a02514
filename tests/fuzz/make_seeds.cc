// Writes the seed corpora of tests/fuzz from graph files (examples/*.json
// and the traced workloads), plus a few hand-made cases:
//
//   bazel build //tests/workloads:traced //tests/workloads:traced_dynamic
//   graphs=$(ls $PWD/bazel-bin/tests/workloads/{,dynamic/}*.json | grep -v ref)
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus $PWD/examples/*.json $graphs
//
// Seeds are named seed-<graph>[-<variant>]; libFuzzer's own findings kept
// as regressions are named regression-<what>.
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
#include "common/files.h"
#include "common/sha256.h"
#include "proto/graph_file.h"
#include "proto/service.pb.h"

namespace kiln {
namespace {

// "<parent directory>-<file name without extension>": the examples and the
// traced workloads share names.
std::string SeedName(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t parent =
      slash == 0 || slash == std::string::npos ? 0 : path.rfind('/', slash - 1) + 1;
  std::string name = path.substr(parent);
  name = name.substr(0, name.rfind('.'));
  name[name.find('/')] = '-';
  return name;
}

void Put(const std::string& dir, const std::string& name, const std::string& bytes) {
  const absl::Status status = WriteFileAtomically(absl::StrCat(dir, "/", name), bytes, 0644);
  if (!status.ok()) {
    std::cerr << status << "\n";
    std::exit(1);
  }
}

std::string Record(const std::string& version, const std::string& payload) {
  return absl::StrCat("kiln-index ", version, " ", payload.size(), " ",
                      Sha256Hex(absl::StrCat(version, " ", payload)), "\n", payload);
}

std::string LengthPrefixed(const std::string& bytes) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bytes.size() >> (8 * i)) & 0xff));
  return out + bytes;
}

void Seeds(const std::string& out, const std::string& path) {
  const std::string name = "seed-" + SeedName(path);
  auto json = ReadFile(path);
  auto graph = ReadGraphFile(path);
  if (!json.ok() || !graph.ok()) {
    std::cerr << path << ": " << (json.ok() ? graph.status() : json.status()) << "\n";
    std::exit(1);
  }
  Put(out + "/graph_json", name + ".json", *json);

  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  Put(out + "/compile_request", name, request.SerializeAsString());
  auto prepared = PrepareGraph(*graph);
  kiln::v1::Guards guards;
  if (prepared.ok()) guards = ExactGuards(*prepared);
  *request.mutable_guards() = guards;
  request.mutable_options()->set_salt("seed");
  Put(out + "/compile_request", name + "-guards", request.SerializeAsString());

  // Sizes scripts (tests/fuzz/guards.cc): every dim as declared; every dim
  // 12; every dim 1; the first dim a huge int64.
  int dims = 0;
  for (const auto& input : graph->inputs()) dims += input.type().sizes_size();
  const std::string message = LengthPrefixed(request.SerializeAsString());
  Put(out + "/guards", name, message + std::string(dims, '\0'));
  Put(out + "/guards", name + "-12", message + std::string(dims, static_cast<char>(1 | (12 << 2))));
  Put(out + "/guards", name + "-1", message + std::string(dims, static_cast<char>(1 | (1 << 2))));
  Put(out + "/guards", name + "-huge",
      message + "\x02" + std::string(7, '\xff') + "\x3f" + std::string(dims, '\0'));

  // A stored entry of this graph, as kilnd writes it.
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(std::string(64, 'a'));
  metadata.set_digest(Sha256Hex(name));
  metadata.set_abi_version(1);
  for (const auto& input : graph->inputs())
    *metadata.mutable_signature()->add_inputs() = input.type();
  *metadata.mutable_guards() = guards;
  metadata.set_graph_name(graph->name());
  metadata.set_compiler("worker");
  metadata.set_object_bytes(16384);
  Put(out + "/store_entry", name, metadata.SerializeAsString());
  // Local index: the payload wrapped by the target (mode 3), and the whole
  // record as kilnd writes it (mode 0).
  Put(out + "/local_index", name + "-wrapped", "\x03" + metadata.SerializeAsString());
  Put(out + "/local_index", name + "-record",
      std::string(1, '\0') + Record("1", metadata.SerializeAsString()));
}

void HandMade(const std::string& out) {
  Put(out + "/graph_json", "hand-empty.json", "{}");
  Put(out + "/graph_json", "hand-bad-op.json",
      R"({"inputs":[{"name":"x","type":{"dtype":"FLOAT32","sizes":[{"constant":"4"}]}}],)"
      R"("nodes":[{"id":1,"op":"aten.add.Tensor","inputs":["0","0"]}],"outputs":["1"]})");
  Put(out + "/graph_json", "hand-deep.json", std::string(5000, '[') + std::string(5000, ']'));
  Put(out + "/graph_json", "hand-deep-object.json", [] {
    std::string s;
    for (int i = 0; i < 2000; ++i) s += R"({"a":)";
    return s + "1" + std::string(2000, '}');
  }());
  Put(out + "/compile_request", "hand-empty", "");
  Put(out + "/local_index", "hand-empty", std::string(1, '\0'));
  Put(out + "/local_index", "hand-header-only",
      std::string(1, '\0') + "kiln-index 1 0 " + std::string(64, '0') + "\n");
  Put(out + "/local_index", "hand-huge-length",
      std::string(1, '\0') + "kiln-index 1 99999999999999999999999 x\n");
  Put(
      out + "/local_index", "hand-other-key", "\x03" + [] {
        kiln::v1::ArtifactMetadata other;
        other.set_key(std::string(64, 'b'));
        return other.SerializeAsString();
      }());
  Put(out + "/local_index", "hand-version-2",
      "\x01"
      "payload");
  Put(out + "/store_entry", "hand-empty", "");
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: make_seeds OUT_DIR GRAPH.json...\n";
    return 1;
  }
  const std::string out = argv[1];
  for (const char* target :
       {"graph_json", "compile_request", "guards", "local_index", "store_entry"}) {
    if (!kiln::MakeDirectories(absl::StrCat(out, "/", target), 0755).ok()) return 1;
  }
  for (int i = 2; i < argc; ++i) kiln::Seeds(out, argv[i]);
  kiln::HandMade(out);
  return 0;
}
