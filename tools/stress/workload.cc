#include "tools/stress/workload.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/compiled_graph.h"
#include "client/tensor.h"
#include "codegen/prepare.h"
#include "proto/graph_file.h"
#include "tools/reference/reference.h"
#include "tools/reference/tensor_data.h"

namespace kiln::stress {
namespace {

kiln::v1::TensorType Float32(const std::vector<int64_t>& sizes) {
  kiln::v1::TensorType type;
  type.set_dtype(kiln::v1::FLOAT32);
  for (int64_t size : sizes) type.add_sizes()->set_constant(size);
  return type;
}

// Appends `op` over `inputs` with one [sizes] float32 result; returns its id.
int64_t AddNode(kiln::v1::Graph& graph, int64_t& next_id, const std::string& op,
                const std::vector<int64_t>& inputs, const std::vector<int64_t>& sizes,
                const std::optional<double>& other = std::nullopt) {
  auto* node = graph.add_nodes();
  node->set_op(op);
  node->set_name(absl::StrCat("n", graph.nodes_size()));
  for (int64_t input : inputs) node->add_inputs(input);
  if (other.has_value()) {
    auto* argument = node->add_args();
    argument->set_name("other");
    argument->set_float_value(*other);
  }
  node->add_outputs(next_id);
  *node->add_output_types() = Float32(sizes);
  return next_id++;
}

bool ReferenceKnows(const kiln::v1::Graph& graph) {
  static const std::set<std::string> kOps = {
      "aten.add.Tensor",   "aten.sub.Tensor", "aten.mul.Tensor",
      "aten.div.Tensor",   "aten.mm.default", "aten.permute.default",
      "aten.relu.default", "aten.t.default",  "aten.transpose.int"};
  for (const auto& input : graph.inputs()) {
    for (const auto& dim : input.type().sizes()) {
      if (dim.has_symbol()) return false;
    }
  }
  for (const auto& node : graph.nodes()) {
    if (kOps.count(node.op()) == 0) return false;
  }
  return true;
}

// The reference's outputs for `workload` on the inputs drawn from `seed`,
// computed once per process: the naive evaluator is slow, and the campaigns
// run the same graphs on the same inputs over and over.
absl::StatusOr<std::vector<RefTensor>> Expected(const Workload& workload, uint32_t seed,
                                                const std::vector<RefTensor>& inputs) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* known = new absl::flat_hash_map<std::string, std::vector<RefTensor>>();
  const std::string memo_key = absl::StrCat(seed, ":", workload.Request().SerializeAsString());
  {
    absl::MutexLock lock(&mutex);
    if (auto it = known->find(memo_key); it != known->end()) return it->second;
  }
  auto prepared = PrepareGraph(workload.graph);
  if (!prepared.ok()) return prepared.status();
  auto expected = EvaluateReference(*prepared, inputs);
  if (!expected.ok()) return expected.status();
  absl::MutexLock lock(&mutex);
  known->emplace(memo_key, *expected);
  return expected;
}

}  // namespace

kiln::v1::CompileRequest Workload::Request() const {
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_options() = options;
  return request;
}

absl::StatusOr<std::vector<Workload>> ExampleWorkloads(const std::string& examples_dir) {
  std::vector<std::string> files;
  DIR* listing = opendir(examples_dir.c_str());
  if (listing == nullptr) {
    return absl::NotFoundError(absl::StrCat("no directory ", examples_dir));
  }
  while (const dirent* file = readdir(listing)) {
    if (absl::EndsWith(file->d_name, ".json")) files.push_back(file->d_name);
  }
  closedir(listing);
  std::sort(files.begin(), files.end());
  std::vector<Workload> workloads;
  for (const std::string& file : files) {
    auto graph = ReadGraphFile(examples_dir + "/" + file);
    if (!graph.ok()) return graph.status();
    if (!ReferenceKnows(*graph)) continue;
    workloads.push_back({file.substr(0, file.size() - 5), *std::move(graph), {}});
  }
  if (workloads.empty())
    return absl::NotFoundError(absl::StrCat("no usable graph in ", examples_dir));
  return workloads;
}

Workload PointwiseWorkload(std::mt19937& random, const std::string& salt) {
  const int64_t rows = std::uniform_int_distribution<int64_t>(1, 64)(random);
  const int64_t columns = std::uniform_int_distribution<int64_t>(1, 300)(random);
  const int depth = std::uniform_int_distribution<int>(1, 12)(random);
  const std::vector<int64_t> sizes = {rows, columns};
  Workload workload;
  workload.name = absl::StrCat("pointwise-", rows, "x", columns, "-d", depth);
  workload.options.set_salt(salt);
  kiln::v1::Graph& graph = workload.graph;
  graph.set_name(workload.name);
  auto* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  *input->mutable_type() = Float32(sizes);
  int64_t next_id = 1, last = 0;
  std::uniform_real_distribution<double> scalar(0.5, 2.0);
  for (int i = 0; i < depth; ++i) {
    switch (std::uniform_int_distribution<int>(0, 6)(random)) {
      case 0:
        last = AddNode(graph, next_id, "aten.add.Tensor", {last}, sizes, scalar(random));
        break;
      case 1:
        last = AddNode(graph, next_id, "aten.sub.Tensor", {last}, sizes, scalar(random));
        break;
      case 2:
        last = AddNode(graph, next_id, "aten.mul.Tensor", {last}, sizes, scalar(random));
        break;
      case 3:
        last = AddNode(graph, next_id, "aten.div.Tensor", {last}, sizes, scalar(random));
        break;
      case 4:
        last = AddNode(graph, next_id, "aten.relu.default", {last}, sizes);
        break;
      case 5:
        last = AddNode(graph, next_id, "aten.add.Tensor", {last, 0}, sizes);
        break;
      default:
        last = AddNode(graph, next_id, "aten.mul.Tensor", {last, 0}, sizes);
        break;
    }
  }
  graph.add_outputs(last);
  return workload;
}

Workload LinearWorkload(std::mt19937& random, const std::string& salt) {
  std::uniform_int_distribution<int64_t> size(1, 96);
  const int64_t rows = size(random), inner = size(random), columns = size(random);
  Workload workload;
  workload.name = absl::StrCat("linear-", rows, "x", inner, "x", columns);
  workload.options.set_salt(salt);
  kiln::v1::Graph& graph = workload.graph;
  graph.set_name(workload.name);
  auto* x = graph.add_inputs();
  x->set_value(0);
  x->set_name("x");
  *x->mutable_type() = Float32({rows, inner});
  auto* w = graph.add_inputs();
  w->set_value(1);
  w->set_name("w");
  *w->mutable_type() = Float32({inner, columns});
  int64_t next_id = 2;
  const int64_t product = AddNode(graph, next_id, "aten.mm.default", {0, 1}, {rows, columns});
  const int64_t shifted = AddNode(graph, next_id, "aten.add.Tensor", {product}, {rows, columns},
                                  std::uniform_real_distribution<double>(-1, 1)(random));
  graph.add_outputs(AddNode(graph, next_id, "aten.relu.default", {shifted}, {rows, columns}));
  return workload;
}

Workload GeneratedWorkload(std::mt19937& random, const std::string& salt) {
  if (std::uniform_int_distribution<int>(0, 3)(random) == 0) return LinearWorkload(random, salt);
  return PointwiseWorkload(random, salt);
}

RunResult RunAndCheck(Client* client, const Workload& workload, uint32_t seed) {
  RunResult result;
  std::mt19937 random(seed);
  std::normal_distribution<double> normal;
  std::vector<Tensor> inputs;
  std::vector<TensorView> views;
  std::vector<RefTensor> reference_inputs;
  for (const auto& input : workload.graph.inputs()) {
    std::vector<int64_t> sizes;
    for (const auto& dim : input.type().sizes()) sizes.push_back(dim.constant());
    Tensor tensor(input.type().dtype(), sizes);
    RefTensor reference{sizes, {}};
    for (int64_t i = 0; i < tensor.NumElements(); ++i) {
      const float value = static_cast<float>(normal(random));
      tensor.data<float>()[i] = value;
      reference.values.push_back(value);
    }
    inputs.push_back(std::move(tensor));
    reference_inputs.push_back(std::move(reference));
  }
  for (const Tensor& input : inputs) views.push_back(input.view());

  CompiledGraph compiled(client, workload.graph, workload.options);
  auto prepared = compiled.Prepare();
  if (!prepared.ok()) {
    result.error = prepared.status();
    return result;
  }
  result.cache_hit = prepared->cache_hit;
  auto outputs = compiled.Run(views);
  if (!outputs.ok()) {
    result.error = outputs.status();
    return result;
  }
  if (auto artifact = compiled.artifact(); artifact.ok()) result.key = artifact->key();
  auto expected = Expected(workload, seed, reference_inputs);
  if (!expected.ok()) {
    result.error = expected.status();
    return result;
  }
  if (expected->size() != outputs->size()) {
    result.verdict = Verdict::kWrong;
    result.detail = absl::StrCat(outputs->size(), " outputs, the reference has ", expected->size());
    return result;
  }
  for (size_t k = 0; k < outputs->size(); ++k) {
    const Tensor& output = (*outputs)[k];
    if (output.sizes() != (*expected)[k].sizes) {
      result.verdict = Verdict::kWrong;
      result.detail = absl::StrCat("output ", k, " has another shape than the reference's");
      return result;
    }
    for (int64_t i = 0; i < output.NumElements(); ++i) {
      const double got = ElementAsDouble(output, i), want = (*expected)[k].values[i];
      const bool same = (std::isnan(got) && std::isnan(want)) || got == want;
      if (!same && !(std::abs(got - want) <= 1e-4 + 1e-4 * std::abs(want))) {
        result.verdict = Verdict::kWrong;
        result.detail = absl::StrFormat("%s output %d element %d is %.9g, the reference says %.9g",
                                        workload.name, k, i, got, want);
        return result;
      }
    }
  }
  result.verdict = Verdict::kCorrect;
  return result;
}

StoreAudit AuditStore(Client* client, const std::vector<Workload>& workloads, uint32_t seed) {
  StoreAudit audit;
  auto listed = client->List();
  if (!listed.ok()) {
    ++audit.corrupt;
    audit.problems.push_back(absl::StrCat("List: ", listed.status().ToString()));
    return audit;
  }
  absl::flat_hash_set<std::string> unexplained;
  for (const auto& entry : listed->entries()) unexplained.insert(entry.key());
  audit.listed = listed->entries_size();
  absl::flat_hash_set<std::string> seen;
  for (const Workload& workload : workloads) {
    const kiln::v1::CompileRequest request = workload.Request();
    auto found = client->Lookup(request);
    if (!found.ok()) {
      if (found.status().code() == absl::StatusCode::kNotFound) continue;
      ++audit.corrupt;
      audit.problems.push_back(
          absl::StrCat(workload.name, ": Lookup: ", found.status().ToString()));
      continue;
    }
    if (!seen.insert(found->artifact().key()).second) continue;  // an equal graph, checked
    unexplained.erase(found->artifact().key());
    auto loaded = client->OpenArtifact(*found, Client::Source::kDaemon);
    if (!loaded.ok()) {
      ++audit.corrupt;
      audit.problems.push_back(absl::StrCat(workload.name, " (", found->artifact().key(),
                                            "): load: ", loaded.status().ToString()));
      continue;
    }
    const RunResult run = RunAndCheck(client, workload, seed);
    if (run.verdict == Verdict::kWrong) {
      ++audit.wrong;
      audit.problems.push_back(absl::StrCat("WRONG ", run.detail));
    } else if (run.verdict == Verdict::kError) {
      ++audit.corrupt;
      audit.problems.push_back(absl::StrCat(workload.name, ": run: ", run.error.ToString()));
    } else if (run.key != found->artifact().key()) {
      ++audit.corrupt;
      audit.problems.push_back(absl::StrCat(workload.name, ": ran ", run.key, ", the store has ",
                                            found->artifact().key()));
    } else {
      ++audit.verified;
    }
  }
  for (const std::string& key : unexplained) {
    ++audit.corrupt;
    audit.problems.push_back(absl::StrCat("listed entry ", key, " belongs to no workload"));
  }
  if (auto stats = client->Stats(); stats.ok()) {
    audit.corrupt_blobs = stats->corrupt_blobs();
    audit.corrupt_entries = stats->corrupt_entries();
    audit.unreadable_ranges = stats->unreadable_ranges();
  }
  return audit;
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace kiln::stress
