// Malformed requests (campaigns.h).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <set>

#include "abi/kiln_abi.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/version.h"
#include "tools/stress/campaigns.h"
#include "tools/stress/workload.h"

namespace kiln::stress {
namespace {

using Graph = kiln::v1::Graph;
using Random = std::mt19937;

int Pick(Random& random, int n) { return std::uniform_int_distribution<int>(0, n - 1)(random); }

// A graph with at least one node, each mutation below breaks one rule of
// proto/graph.proto or codegen/limits.h. `may_stay_valid` marks the few
// that can leave a graph Kiln accepts (it then compiles, and that is fine).
struct Mutation {
  const char* name;
  bool may_stay_valid;
  void (*apply)(Graph& graph, Random& random);
};

kiln::v1::Node& AnyNode(Graph& graph, Random& random) {
  return *graph.mutable_nodes(Pick(random, graph.nodes_size()));
}

const Mutation kMutations[] = {
    {"dangling_input", false,
     [](Graph& g, Random& r) { AnyNode(g, r).set_inputs(0, 1000000 + Pick(r, 1000)); }},
    {"dangling_output", false, [](Graph& g, Random& r) { g.set_outputs(0, -7 - Pick(r, 100)); }},
    {"duplicate_id", false,
     [](Graph& g, Random& r) { AnyNode(g, r).set_outputs(0, g.inputs(0).value()); }},
    {"cycle", false,
     [](Graph& g, Random&) {
       // The first node reads the last node's result: used before defined.
       g.mutable_nodes(0)->set_inputs(0, g.nodes(g.nodes_size() - 1).outputs(0));
     }},
    {"self_loop", false,
     [](Graph& g, Random& r) {
       kiln::v1::Node& node = AnyNode(g, r);
       node.set_inputs(0, node.outputs(0));
     }},
    {"huge_size", false,
     [](Graph& g, Random& r) {
       g.mutable_inputs(0)->mutable_type()->mutable_sizes(0)->set_constant((int64_t{1} << 41) +
                                                                           Pick(r, 1000));
     }},
    {"huge_product", false,
     [](Graph& g, Random&) {
       auto* type = g.mutable_inputs(0)->mutable_type();
       for (int i = 0; i < 4; ++i) type->add_sizes()->set_constant(int64_t{1} << 20);
     }},
    {"negative_size", false,
     [](Graph& g, Random& r) {
       g.mutable_inputs(0)->mutable_type()->mutable_sizes(0)->set_constant(-1 - Pick(r, 1 << 20));
     }},
    {"min_int_size", false,
     [](Graph& g, Random&) {
       g.mutable_inputs(0)->mutable_type()->mutable_sizes(0)->set_constant(INT64_MIN);
     }},
    {"unknown_aten_op", false,
     [](Graph& g, Random& r) { AnyNode(g, r).set_op("aten.frobnicate.default"); }},
    {"not_an_op", false, [](Graph& g, Random& r) { AnyNode(g, r).set_op("frobnicate"); }},
    {"empty_op", false, [](Graph& g, Random& r) { AnyNode(g, r).clear_op(); }},
    {"extra_operand", false,
     [](Graph& g, Random& r) { AnyNode(g, r).add_inputs(g.inputs(0).value()); }},
    {"missing_operand", false, [](Graph& g, Random& r) { AnyNode(g, r).clear_inputs(); }},
    {"missing_result", false, [](Graph& g, Random& r) { AnyNode(g, r).clear_outputs(); }},
    {"missing_result_type", false, [](Graph& g, Random& r) { AnyNode(g, r).clear_output_types(); }},
    {"wrong_result_type", false,
     [](Graph& g, Random& r) {
       AnyNode(g, r).mutable_output_types(0)->mutable_sizes(0)->set_constant(12345);
     }},
    {"missing_dtype", false,
     [](Graph& g, Random&) { g.mutable_inputs(0)->mutable_type()->clear_dtype(); }},
    {"unknown_dtype", false,
     [](Graph& g, Random& r) {
       g.mutable_inputs(0)->mutable_type()->set_dtype(
           static_cast<kiln::v1::DType>(50 + Pick(r, 50)));
     }},
    {"no_inputs_type", false, [](Graph& g, Random&) { g.mutable_inputs(0)->clear_type(); }},
    {"no_outputs", false, [](Graph& g, Random&) { g.clear_outputs(); }},
    {"absurd_rank", false,
     [](Graph& g, Random& r) {
       auto* type = g.mutable_inputs(0)->mutable_type();
       const int extra = 40 + Pick(r, 2000);
       for (int i = 0; i < extra; ++i) type->add_sizes()->set_constant(1);
     }},
    {"strides_mismatch", false,
     [](Graph& g, Random&) {
       g.mutable_inputs(0)->mutable_type()->add_strides()->set_constant(-5);
     }},
    {"long_op_name", false,
     [](Graph& g, Random& r) {
       AnyNode(g, r).set_op("aten." + std::string(2000 + Pick(r, 100000), 'x') + ".default");
     }},
    {"long_graph_name", false,
     [](Graph& g, Random& r) { g.set_name(std::string(1025 + Pick(r, 1 << 20), 'n')); }},
    {"long_node_name", false,
     [](Graph& g, Random& r) { AnyNode(g, r).set_name(std::string(1025 + Pick(r, 100000), 'n')); }},
    {"control_character_name", true,
     [](Graph& g, Random& r) {
       // Control characters: valid UTF-8 (proto3 strings must be), no text.
       std::string name(1 + Pick(r, 64), '\0');
       for (char& c : name) c = static_cast<char>(1 + Pick(r, 31));
       AnyNode(g, r).set_name(name);
     }},
    {"wrong_argument_type", false,
     [](Graph& g, Random& r) {
       for (auto& node : *g.mutable_nodes()) {
         for (auto& argument : *node.mutable_args()) argument.set_string_value("not a number");
       }
       // A graph without arguments gets one that no op has.
       auto* argument = AnyNode(g, r).add_args();
       argument->set_name("frobnication");
       argument->set_int_value(3);
     }},
    {"unknown_symbol_multiplier", false,
     [](Graph& g, Random& r) {
       auto* dim = g.mutable_inputs(0)->mutable_type()->mutable_sizes(0);
       dim->set_symbol("s0");
       dim->set_multiplier(-1 - Pick(r, 10));
     }},
    {"bad_relation", false,
     [](Graph& g, Random& r) {
       auto* relation = g.add_relations()->mutable_divisible();
       relation->set_symbol("nope");
       relation->set_divisor(-Pick(r, 3));
     }},
    {"too_many_outputs", false,
     [](Graph& g, Random&) {
       for (int i = 0; i < (1 << 14) + 1; ++i) g.add_outputs(g.inputs(0).value());
     }},
    {"deep_chain_dangling", false,
     [](Graph& g, Random& r) {
       // 5,000 valid nodes, then one that reads nothing defined.
       int64_t last = g.outputs(0);
       const kiln::v1::TensorType type = g.nodes(g.nodes_size() - 1).output_types(0);
       int64_t next = 1 << 20;
       for (int i = 0; i < 5000; ++i) {
         auto* node = g.add_nodes();
         node->set_op("aten.relu.default");
         node->add_inputs(last);
         node->add_outputs(next);
         *node->add_output_types() = type;
         last = next++;
       }
       g.mutable_nodes(g.nodes_size() - 1 - Pick(r, 5000))->set_inputs(0, -99);
       g.set_outputs(0, last);
     }},
    {"too_many_nodes", false,
     [](Graph& g, Random&) {
       int64_t last = g.outputs(0);
       const kiln::v1::TensorType type = g.nodes(g.nodes_size() - 1).output_types(0);
       int64_t next = 1 << 20;
       for (int i = 0; i < (1 << 17) + 1; ++i) {
         auto* node = g.add_nodes();
         node->set_op("aten.relu.default");
         node->add_inputs(last);
         node->add_outputs(next);
         *node->add_output_types() = type;
         last = next++;
       }
       g.set_outputs(0, last);
     }},
};

// Whether every mutation above can apply to `graph` (the first one may have
// removed what a second one indexes).
bool Mutable(const Graph& graph) {
  if (graph.inputs_size() == 0 || graph.inputs(0).type().sizes_size() == 0 ||
      graph.outputs_size() == 0 || graph.nodes_size() == 0) {
    return false;
  }
  for (const auto& node : graph.nodes()) {
    if (node.inputs_size() == 0 || node.outputs_size() == 0 || node.output_types_size() == 0 ||
        node.output_types(0).sizes_size() == 0) {
      return false;
    }
  }
  return true;
}

bool Expected(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented ||
         code == absl::StatusCode::kFailedPrecondition;
}

}  // namespace

std::string MalformedReport::Json() const {
  auto map_json = [](const std::map<std::string, int64_t>& map) {
    std::vector<std::string> parts;
    for (const auto& [name, count] : map)
      parts.push_back(absl::StrCat(JsonString(name), ": ", count));
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  };
  std::vector<std::string> quoted;
  for (const std::string& violation : violations) quoted.push_back(JsonString(violation));
  return absl::StrFormat(
      "{\"campaign\": \"malformed_requests\", \"requests\": %d, \"raw_calls\": %d, "
      "\"by_code\": %s, \"by_mutation\": %s, \"accepted_valid\": %d, \"rss_start_kib\": %d, "
      "\"rss_max_kib\": %d, \"rss_peak_kib\": %d, \"rss_end_kib\": %d, \"seconds\": %.1f, "
      "\"violations\": [%s]}",
      requests, raw_calls, map_json(by_code), map_json(by_mutation), accepted_valid, rss_start_kib,
      rss_max_kib, rss_peak_kib, rss_end_kib, seconds, absl::StrJoin(quoted, ", "));
}

std::string MalformedReport::Text() const {
  std::string text = absl::StrFormat(
      "malformed_requests: %d generated requests, %d raw gRPC calls in %.1f s\n"
      "  kilnd RSS %d KiB after warm-up, max %d KiB settled (growth %d KiB; %d KiB at a busy "
      "moment), at the end %d KiB\n"
      "  accepted (mutation left a valid graph): %d\n  answers:",
      requests, raw_calls, seconds, rss_start_kib, rss_max_kib, rss_max_kib - rss_start_kib,
      rss_peak_kib, rss_end_kib, accepted_valid);
  for (const auto& [code, count] : by_code) absl::StrAppend(&text, " ", code, " ", count);
  absl::StrAppend(&text, "\n  mutations:");
  for (const auto& [name, count] : by_mutation) absl::StrAppend(&text, " ", name, " ", count);
  absl::StrAppend(&text, "\n");
  for (const std::string& violation : violations)
    absl::StrAppend(&text, "  VIOLATION ", violation, "\n");
  return text;
}

absl::StatusOr<MalformedReport> RunMalformedRequests(const MalformedOptions& options) {
  const absl::Time start = absl::Now();
  MalformedReport report;
  Random random(options.common.seed);
  auto examples = ExampleWorkloads(options.common.examples_dir);
  if (!examples.ok()) return examples.status();
  std::vector<Workload> bases = *examples;
  for (int i = 0; i < 4; ++i) bases.push_back(GeneratedWorkload(random, "malformed-base"));

  auto daemon = DaemonProcess::Create(CampaignDaemon(options.common));
  if (!daemon.ok()) return daemon.status();
  DaemonProcess& kilnd = **daemon;
  if (absl::Status started = kilnd.Start(); !started.ok()) return started;
  auto client = kilnd.Connect();
  if (!client.ok()) return client.status();
  // Warm-up: the valid bases compiled once, so that RSS growth measures
  // what the refusals cost, not the first compiles.
  for (const Workload& base : bases) {
    if (auto compiled = (*client)->Compile(base.Request()); !compiled.ok()) {
      return absl::InternalError(
          absl::StrCat("cannot compile ", base.name, ": ", compiled.status().ToString()));
    }
  }
  report.rss_start_kib = report.rss_max_kib = report.rss_peak_kib = kilnd.RssKib();

  auto after_batch = [&](int64_t done) -> bool {
    if (!kilnd.Alive()) {
      report.violations.push_back(absl::StrCat("kilnd died (status ", kilnd.exit_status(),
                                               ") within the batch ending at call ", done));
      return false;
    }
    // Right after a large request kilnd may still be freeing it: the
    // sample that counts is taken once that settled.
    const int64_t sampled = kilnd.RssKib();
    absl::SleepFor(absl::Milliseconds(100));
    const int64_t settled = kilnd.RssKib();
    report.rss_peak_kib = std::max({report.rss_peak_kib, sampled, settled});
    report.rss_max_kib = std::max(report.rss_max_kib, settled);
    if (options.common.verbose) {
      std::cerr << absl::StrFormat("%d calls: kilnd RSS %d KiB, %d KiB settled\n", done, sampled,
                                   settled);
    }
    return true;
  };

  constexpr int kMutationCount = sizeof(kMutations) / sizeof(kMutations[0]);
  bool alive = true;
  for (int i = 0; i < options.requests && alive; ++i) {
    const Workload& base = bases[Pick(random, bases.size())];
    // Mostly one rule broken; sometimes two at once.
    kiln::v1::CompileRequest request = base.Request();
    const Mutation& mutation = kMutations[Pick(random, kMutationCount)];
    mutation.apply(*request.mutable_graph(), random);
    std::string name = mutation.name;
    bool may_stay_valid = mutation.may_stay_valid;
    const Mutation& second = kMutations[Pick(random, kMutationCount)];
    // A second rule broken, never one that can repair the first (a valid
    // name written over a too-long one).
    if (Pick(random, 8) == 0 && !second.may_stay_valid && Mutable(request.graph())) {
      second.apply(*request.mutable_graph(), random);
      name = absl::StrCat(name, "+", second.name);
      may_stay_valid &= second.may_stay_valid;
    }
    ++report.by_mutation[mutation.name];
    const auto answer = (*client)->Compile(request);
    ++report.requests;
    const absl::StatusCode code = answer.status().code();
    ++report.by_code[absl::StatusCodeToString(code)];
    if (answer.ok() && may_stay_valid) {
      ++report.accepted_valid;
    } else if (!Expected(code)) {
      report.violations.push_back(absl::StrCat(
          "request ", i, " (", name, " of ", base.name,
          "): ", answer.ok() ? "accepted" : answer.status().ToString().substr(0, 300)));
    }
    if ((i + 1) % options.batch == 0) alive = after_batch(i + 1);
  }
  if (alive) alive = after_batch(report.requests);

  // Raw gRPC: bytes that are a damaged request or no message at all, on
  // Compile and Lookup, with and without the version metadata.
  auto channel =
      grpc::CreateChannel("unix:" + kilnd.socket_path(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  for (int i = 0; i < options.raw_calls && alive; ++i) {
    std::string bytes;
    const int shape = Pick(random, 4);
    if (shape == 0) {
      bytes.resize(Pick(random, 4096));
      for (char& c : bytes) c = static_cast<char>(Pick(random, 256));
    } else {
      bytes = bases[Pick(random, bases.size())].Request().SerializeAsString();
      if (shape == 1) {
        bytes.resize(Pick(random, bytes.size()));  // truncated
      } else if (shape == 2) {
        for (int k = 0; k < 1 + Pick(random, 8); ++k)
          bytes[Pick(random, bytes.size())] ^= 1 + Pick(random, 255);
      } else {
        bytes.insert(Pick(random, bytes.size()), std::string(1 + Pick(random, 64), '\xff'));
      }
    }
    const bool with_versions = Pick(random, 2) == 0;
    const std::string method =
        Pick(random, 4) == 0 ? "/kiln.v1.Kiln/Lookup" : "/kiln.v1.Kiln/Compile";
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    if (with_versions) {
      context.AddMetadata(kProtocolMetadataKey, absl::StrCat(kProtocolVersion));
      context.AddMetadata(kAbiMetadataKey, absl::StrCat(KILN_ABI_VERSION));
    }
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    ++report.raw_calls;
    const std::string code = absl::StrCat(
        "raw ", absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())));
    ++report.by_code[code];
    // gRPC's own answer to bytes that do not parse: its callback server
    // fails the call with UNIMPLEMENTED and no message before any handler
    // runs (grpcpp server_callback_handlers.h). Anything that parses must
    // be refused by kilnd. A damaged request may still be a valid one (a
    // flipped salt byte): then it compiles, which is fine.
    const grpc::StatusCode c = status.error_code();
    const bool parse_failure =
        c == grpc::StatusCode::UNIMPLEMENTED && status.error_message().empty();
    const bool refused = c == grpc::StatusCode::INVALID_ARGUMENT ||
                         c == grpc::StatusCode::UNIMPLEMENTED ||
                         c == grpc::StatusCode::FAILED_PRECONDITION ||
                         (c == grpc::StatusCode::NOT_FOUND && method == "/kiln.v1.Kiln/Lookup");
    if (status.ok() && shape != 0 && with_versions) {
      ++report.accepted_valid;
    } else if (!parse_failure && !refused) {
      report.violations.push_back(
          absl::StrCat("raw call ", i, " (", bytes.size(), " bytes, shape ", shape,
                       with_versions ? ", versions" : ", no versions", ") on ", method, ": ", c,
                       " ", status.error_message().substr(0, 200)));
    }
    if (!with_versions && c != grpc::StatusCode::FAILED_PRECONDITION && !parse_failure) {
      report.violations.push_back(absl::StrCat("raw call ", i,
                                               " without versions was not refused: ", c, " ",
                                               status.error_message().substr(0, 200)));
    }
    if ((i + 1) % options.batch == 0) alive = after_batch(report.requests + i + 1);
  }
  if (alive) after_batch(report.requests + report.raw_calls);
  // Still serving: a valid request after all that.
  if (alive) {
    const RunResult run = RunAndCheck(client->get(), bases[0], 7);
    if (run.verdict != Verdict::kCorrect) {
      report.violations.push_back(
          absl::StrCat("a valid request afterwards: ", run.error.ToString(), run.detail));
    }
  }
  report.rss_end_kib = kilnd.RssKib();
  if (report.rss_max_kib - report.rss_start_kib > options.max_rss_growth_kib) {
    report.violations.push_back(absl::StrCat("kilnd's RSS grew by ",
                                             report.rss_max_kib - report.rss_start_kib,
                                             " KiB (limit ", options.max_rss_growth_kib, ")"));
  }
  report.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return report;
}

}  // namespace kiln::stress
