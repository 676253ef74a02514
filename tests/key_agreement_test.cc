// The client's local path finds the daemon's key for every request it
// answered, by the request's digest, and never keys a request itself.
//
// kilnd's ArtifactCache (in-process: in-memory store, a fake compiler after
// the real codegen) stores each graph and publishes it in the local index;
// a Client opened on the same cache directory, which never connects, must
// then find that very entry with FindLocal through the request's alias —
// for every public workload graph, its symbolic form and a respecialized
// form, each made by the client's own policy (client/specialization.h), as
// CompiledGraph would ask for them (a respecialization as the graph and its
// new input layouts: kilnd re-types it) — and find nothing once the alias
// goes.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "abi/kiln_abi.h"
#include "abi/target.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cache/local_index.h"
#include "cache/memory_store.h"
#include "cache/object_dir.h"
#include "cache/request_key.h"
#include "client/client.h"
#include "client/specialization.h"
#include "client/tensor.h"
#include "codegen/retype.h"
#include "common/files.h"
#include "common/version.h"
#include "daemon/artifact_cache.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"

namespace kiln {
namespace {

// Runs the real codegen's output nowhere: every compile "succeeds" with
// the source's own bytes (so distinct graphs get distinct objects).
class FakeCompiler : public Compiler {
 public:
  absl::StatusOr<CompiledObject> Compile(absl::string_view source, kiln::v1::Target) override {
    CompiledObject object;
    object.shared_object = std::string(source);
    object.compiler = "fake";
    return object;
  }
  const char* name() const override { return "fake"; }
};

// A toolchain with every field set: it enters the key on both sides.
kiln::v1::Toolchain TestToolchain(kiln::v1::Target target = kiln::v1::TARGET_NATIVE) {
  kiln::v1::Toolchain toolchain;
  toolchain.set_compiler_version("Debian clang version 19.1.7 (3)");
  toolchain.add_build_ids("0123456789abcdef");
  toolchain.add_flags("-O3");
  toolchain.add_flags("-ffp-contract=off");
  toolchain.set_target_triple("x86_64-pc-linux-gnu");
  if (target == kiln::v1::TARGET_NATIVE) {
    toolchain.set_cpu("skylake-avx512");
    toolchain.set_cpu_feature_list("+avx512f");
  } else {
    toolchain.set_cpu(TargetName(target));
  }
  return toolchain;
}

TargetToolchains TestToolchains() {
  TargetToolchains toolchains;
  for (kiln::v1::Target target : AllTargets()) toolchains[target] = TestToolchain(target);
  return toolchains;
}

// The graph files in `dir` (not the .ref.json references), sorted.
std::vector<std::string> GraphFiles(const std::string& dir) {
  std::vector<std::string> paths;
  DIR* stream = opendir(dir.c_str());
  if (stream == nullptr) return paths;
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    if (absl::EndsWith(name, ".json") && !absl::StrContains(name, ".ref")) {
      paths.push_back(absl::StrCat(dir, "/", name));
    }
  }
  closedir(stream);
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Input views of given sizes (contiguous; guards and the policy read no
// data).
class Inputs {
 public:
  Inputs(const kiln::v1::Graph& graph, std::vector<std::vector<int64_t>> sizes)
      : sizes_(std::move(sizes)) {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      strides_.push_back(ContiguousStrides(sizes_[i]));
      views_.push_back(TensorView{nullptr, graph.inputs(i).type().dtype(), sizes_[i], strides_[i]});
    }
  }
  Inputs(const Inputs&) = delete;  // the views point into this object
  absl::Span<const TensorView> views() const { return views_; }

 private:
  std::vector<std::vector<int64_t>> sizes_, strides_;
  std::vector<TensorView> views_;
};

// The input sizes of `graph` with each symbol at `symbol_size` and, for
// inputs of input 0's rank whose first dim is input 0's, that dim `grow`
// larger (a new batch size, or sequence length, shared where it was).
std::vector<std::vector<int64_t>> SizesOf(const kiln::v1::Graph& graph, int64_t symbol_size,
                                          int64_t grow) {
  std::vector<std::vector<int64_t>> sizes;
  const kiln::v1::TensorType& first = graph.inputs(0).type();
  for (const auto& input : graph.inputs()) {
    std::vector<int64_t> dims;
    for (const kiln::v1::Dim& dim : input.type().sizes()) {
      dims.push_back(dim.has_symbol() ? symbol_size * std::max<int64_t>(1, dim.multiplier())
                                      : dim.constant());
    }
    const bool batch = input.type().sizes_size() == first.sizes_size() && !dims.empty() &&
                       !first.sizes(0).has_symbol() && !input.type().sizes(0).has_symbol() &&
                       input.type().sizes(0).constant() == first.sizes(0).constant();
    if (batch) dims[0] += grow;
    sizes.push_back(std::move(dims));
  }
  return sizes;
}

class KeyAgreementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDirectory("/tmp/kiln-keysXXXXXX");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    // What kilnd writes at start: the toolchain a client keys with.
    kiln::v1::CacheDescriptor descriptor;
    descriptor.set_protocol_version(kProtocolVersion);
    descriptor.set_abi_version(KILN_ABI_VERSION);
    descriptor.set_kiln_version(kKilnVersion);
    SetDescriptorToolchainDigests(DigestToolchains(TestToolchains()), descriptor);
    descriptor.set_machine_id(MachineId());
    ASSERT_TRUE(LocalIndex(dir_).WriteDescriptor(descriptor).ok());
    ArtifactCache::Options options;
    options.compile_threads = 1;
    daemon_ = std::make_unique<ArtifactCache>(
        std::make_unique<MemoryStore>(), ObjectDirectory(dir_ + "/objects"), LocalIndex(dir_),
        std::make_unique<FakeCompiler>(), TestToolchains(), options);
    ClientOptions client_options;
    client_options.cache_dir = dir_;
    client_options.socket_path = dir_ + "/no-kilnd.sock";
    client_options.auto_start = false;
    client_ = Client::Open(client_options);
  }
  void TearDown() override {
    daemon_.reset();
    RemoveRecursively(dir_).IgnoreError();
  }

  // The daemon's answer to a Compile of `request`.
  absl::StatusOr<kiln::v1::CompileResponse> DaemonCompile(const kiln::v1::CompileRequest& request) {
    absl::Notification finished;
    absl::StatusOr<kiln::v1::CompileResponse> result = absl::UnknownError("not called");
    daemon_->Compile(request, /*allow_compile=*/true,
                     [&](absl::StatusOr<kiln::v1::CompileResponse> response) {
                       result = std::move(response);
                       finished.Notify();
                     });
    finished.WaitForNotification();
    return result;
  }

  // Stores `graph` through the daemon (with and without a salt, which
  // enters the key) and expects the client's local path to find each
  // entry. The daemon's key of the unsalted request; nullopt when the
  // daemon refuses the graph (a form that cannot be lowered: the client
  // would try its next candidate).
  std::optional<std::string> StoredAndFoundLocally(const kiln::v1::Graph& graph,
                                                   const std::string& form,
                                                   const InputLayouts& layouts = {}) {
    SCOPED_TRACE(form);
    std::optional<std::string> unsalted;
    for (const std::string salt : {"", "agreement"}) {
      kiln::v1::CompileRequest request;
      *request.mutable_graph() = graph;
      request.mutable_input_layouts()->Add(layouts.begin(), layouts.end());
      request.mutable_options()->set_salt(salt);
      const absl::StatusOr<kiln::v1::CompileResponse> stored = DaemonCompile(request);
      if (!stored.ok()) {
        if (!salt.empty()) ADD_FAILURE() << "refused only with a salt: " << stored.status();
        return std::nullopt;
      }
      const std::string& key = stored->artifact().key();
      if (salt.empty()) {
        unsalted = key;
      } else {
        EXPECT_NE(key, *unsalted) << "the salt is part of the key";
      }
      // The daemon's alias of this exact request names its key.
      const absl::StatusOr<std::string> digest =
          RequestDigest(request, RequestSaltsFor(DigestToolchains(TestToolchains())));
      if (!digest.ok()) {
        ADD_FAILURE() << digest.status();
        continue;
      }
      const LocalIndex index(dir_);
      EXPECT_EQ(*index.FindAlias(*digest), key);
      const std::optional<kiln::v1::CompileResponse> aliased = client_->FindLocal(request);
      if (!aliased.has_value()) {
        ADD_FAILURE() << "the client computes another request digest than the daemon's (salt '"
                      << salt << "')";
        continue;
      }
      EXPECT_EQ(aliased->artifact().key(), key);
      EXPECT_EQ(aliased->artifact().digest(), stored->artifact().digest());
      EXPECT_EQ(aliased->object_path(), stored->object_path());
      // Without the alias, the key is kilnd's to compute: a local miss,
      // even with the entry in the index.
      EXPECT_TRUE(index.RemoveAlias(*digest).ok());
      EXPECT_FALSE(client_->FindLocal(request).has_value())
          << "the client keyed the request in process";
      ++agreed_;
    }
    return unsalted;
  }

  // `graph` (already stored under `key`) at input sizes no entry covers
  // (symbols at `symbol_size`, the batch dim grown by `grow`), as the
  // client's policy asks for it: the graph with a candidate's input
  // layouts, which kilnd re-types — its first symbolic candidate that
  // lowers, and its exact one. Each form has a key of its own, the key of
  // the graph re-typed for those layouts. False when not even the exact
  // sizes re-type (an argument bakes in a traced size).
  bool RespecializedForms(const kiln::v1::Graph& graph, const std::string& name,
                          const std::string& key, int64_t symbol_size, int64_t grow) {
    const Inputs inputs(graph, SizesOf(graph, symbol_size, grow));
    auto plan = PlanRespecialization(graph, inputs.views());
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return false;
    if (!Retype(graph, ToRetypeLayouts(plan->candidates.back())).ok()) return false;
    std::set<std::string> keys = {key};
    for (size_t c = 0; c + 1 < plan->candidates.size(); ++c) {
      const std::optional<std::string> symbolic =
          StoredAndFoundLocally(graph, name + " made symbolic", plan->candidates[c]);
      if (!symbolic.has_value()) continue;
      EXPECT_EQ(symbolic, KeyOfRetyped(graph, plan->candidates[c]));
      EXPECT_TRUE(keys.insert(*symbolic).second) << name << ": symbolic form has the same key";
      ++symbolic_forms_;
      break;
    }
    const std::optional<std::string> respecialized =
        StoredAndFoundLocally(graph, name + " respecialized", plan->candidates.back());
    EXPECT_TRUE(respecialized.has_value());
    EXPECT_EQ(respecialized, KeyOfRetyped(graph, plan->candidates.back()));
    EXPECT_TRUE(keys.insert(respecialized.value_or(key)).second)
        << name << ": respecialized, same key";
    return true;
  }

  static std::vector<InputLayout> ToRetypeLayouts(const InputLayouts& layouts) {
    std::vector<InputLayout> converted;
    for (const kiln::v1::InputLayout& layout : layouts) {
      converted.push_back({{layout.sizes().begin(), layout.sizes().end()},
                           {layout.strides().begin(), layout.strides().end()}});
    }
    return converted;
  }

  // kilnd's key of `graph` re-typed here for `layouts`, sent as a plain
  // graph: the key a request with those layouts must have.
  std::optional<std::string> KeyOfRetyped(const kiln::v1::Graph& graph,
                                          const InputLayouts& layouts) {
    absl::StatusOr<kiln::v1::Graph> retyped = Retype(graph, ToRetypeLayouts(layouts));
    if (!retyped.ok()) return std::nullopt;
    kiln::v1::CompileRequest request;
    *request.mutable_graph() = *std::move(retyped);
    absl::StatusOr<KeyedRequest> keyed = KeyRequest(request, DigestToolchains(TestToolchains()));
    if (!keyed.ok()) return std::nullopt;
    return keyed->key.key;
  }

  std::string dir_;
  std::unique_ptr<ArtifactCache> daemon_;
  std::unique_ptr<Client> client_;
  int agreed_ = 0;          // requests both sides keyed alike
  int symbolic_forms_ = 0;  // graphs that lowered made symbolic
  int fixed_ = 0;           // static graphs whose arguments bake in their sizes
};

// Static public graphs: as traced, made symbolic for a new batch size, and
// respecialized to it exactly. A graph whose traced arguments bake in its
// sizes (an expand to [2, ...], a view to 2048 elements) has no other
// form; its dynamic trace stands in for it (the next test).
TEST_F(KeyAgreementTest, StaticWorkloadsTheirSymbolicAndRespecializedForms) {
  std::vector<std::string> paths = GraphFiles("tests/workloads");
  ASSERT_GE(paths.size(), 12u) << "the traced workloads are missing from the runfiles";
  for (const char* example :
       {"examples/f.json", "examples/keep_product.json", "examples/tail.json"}) {
    paths.push_back(example);
  }
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto graph = ReadGraphFile(path);
    ASSERT_TRUE(graph.ok()) << graph.status();
    const std::optional<std::string> key = StoredAndFoundLocally(*graph, path);
    ASSERT_TRUE(key.has_value());
    if (!RespecializedForms(*graph, path, *key, /*symbol_size=*/3, /*grow=*/5)) {
      const std::string dynamic =
          absl::StrCat("tests/workloads/dynamic/", path.substr(path.rfind('/') + 1));
      EXPECT_TRUE(ReadGraphFile(dynamic).ok())
          << path << " has no respecialized form and no dynamic trace " << dynamic;
      ++fixed_;
    }
  }
  EXPECT_LE(fixed_, 3) << "most graphs re-type for a new batch size";
  EXPECT_EQ(symbolic_forms_, static_cast<int>(paths.size()) - fixed_);
  EXPECT_EQ(agreed_, 2 * (static_cast<int>(paths.size()) + 2 * symbolic_forms_));
}

// Symbolic public graphs (traced with a dynamic batch or sequence dim): as
// traced, at size 1 (the client's static specialization), and at a size
// their own guards cover.
TEST_F(KeyAgreementTest, DynamicWorkloadsAndTheirSizeOneSpecializations) {
  std::vector<std::string> paths = GraphFiles("tests/workloads/dynamic");
  int respecialized = 0;
  ASSERT_GE(paths.size(), 14u) << "the dynamic workloads are missing from the runfiles";
  paths.push_back("examples/tail_dynamic.json");
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto graph = ReadGraphFile(path);
    ASSERT_TRUE(graph.ok()) << graph.status();
    const std::optional<std::string> key = StoredAndFoundLocally(*graph, path);
    ASSERT_TRUE(key.has_value());
    const Inputs at_one(*graph, SizesOf(*graph, 1, 0));
    const std::optional<SpecializedGraph> specialized =
        SmallSizeSpecialization(*graph, at_one.views());
    ASSERT_TRUE(specialized.has_value());
    const std::optional<std::string> at_one_key =
        StoredAndFoundLocally(specialized->graph, path + " at size 1", specialized->layouts);
    ASSERT_TRUE(at_one_key.has_value());
    EXPECT_NE(*at_one_key, *key);
    const Inputs at_three(*graph, SizesOf(*graph, 3, 0));
    EXPECT_FALSE(SmallSizeSpecialization(*graph, at_three.views()).has_value())
        << "size 3 is the symbolic artifact's";
    // Respecialized: re-typed for a new static size of the other dims
    // (the symbols kept), or, when those dims are baked in, at its
    // symbols' exact values.
    if (RespecializedForms(*graph, path, *key, /*symbol_size=*/5, /*grow=*/3)) {
      ++respecialized;
    } else {
      EXPECT_TRUE(RespecializedForms(*graph, path, *key, /*symbol_size=*/5, /*grow=*/0)) << path;
    }
  }
  EXPECT_GT(respecialized, 0);
  EXPECT_EQ(agreed_, 2 * (3 * static_cast<int>(paths.size()) + symbolic_forms_));
}

// Each target has its own key, and the client keys each as kilnd does
// (the descriptor carries every target's toolchain digest).
TEST_F(KeyAgreementTest, EveryTargetHasItsOwnKeyOnBothSides) {
  for (const char* path : {"examples/f.json", "tests/workloads/softmax.json"}) {
    SCOPED_TRACE(path);
    auto graph = ReadGraphFile(path);
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::set<std::string> keys;
    for (kiln::v1::Target target : AllTargets()) {
      kiln::v1::CompileRequest request;
      *request.mutable_graph() = *graph;
      request.mutable_options()->set_target(target);
      const absl::StatusOr<kiln::v1::CompileResponse> stored = DaemonCompile(request);
      ASSERT_TRUE(stored.ok()) << stored.status();
      EXPECT_EQ(stored->artifact().target(), target);
      EXPECT_EQ(stored->artifact().toolchain().cpu(), TestToolchain(target).cpu());
      EXPECT_TRUE(keys.insert(stored->artifact().key()).second) << TargetName(target);
      const std::optional<kiln::v1::CompileResponse> local = client_->FindLocal(request);
      ASSERT_TRUE(local.has_value()) << TargetName(target);
      EXPECT_EQ(local->artifact().key(), stored->artifact().key());
    }
  }
  kiln::v1::CompileRequest unknown;
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok());
  *unknown.mutable_graph() = *graph;
  unknown.mutable_options()->set_target(static_cast<kiln::v1::Target>(7));
  const absl::StatusOr<kiln::v1::CompileResponse> refused = DaemonCompile(unknown);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "options.target 7 is not a known target (0 native, 1 x86-64-v3, 2 x86-64-v4)");
  EXPECT_FALSE(client_->FindLocal(unknown).has_value());
}

}  // namespace
}  // namespace kiln
