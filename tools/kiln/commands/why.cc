// kiln why: why a request missed, or would miss, and what differs from the
// nearest stored entries.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/specialization.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "tools/kiln/commands/command.h"
#include "tools/kiln/human_units.h"

ABSL_FLAG(int, last, 0, "Explain the last N misses kilnd remembers (it keeps 64).");

namespace kiln {
namespace {

// One request of a WhyResponse: its key, whether it is stored, and the
// nearest stored entries with what differs.
void PrintWhy(const kiln::v1::WhyResponse::Request& asked, bool past_miss) {
  std::cout << (past_miss ? "miss " : "request ") << ShortKey(asked.key()) << " ("
            << asked.graph_name() << ")";
  if (past_miss) std::cout << " at " << HumanTime(absl::FromUnixMillis(asked.unix_ms()));
  std::cout << "\n";
  if (asked.stored()) {
    std::cout << (past_miss ? "  stored since (that miss compiled it); before it:\n"
                            : "  stored: a request for it hits\n");
    if (!past_miss) return;
  }
  if (asked.nearest().empty()) std::cout << "  nothing else is stored to compare with\n";
  for (const kiln::v1::WhyResponse::Nearest& nearest : asked.nearest()) {
    std::cout << "  nearest " << ShortKey(nearest.key()) << " (" << nearest.graph_name() << "):\n";
    for (const std::string& line : nearest.differences()) std::cout << "    " << line << "\n";
  }
}

// `kiln why GRAPH.json --inputs SIZES`: the requests a CompiledGraph of the
// graph makes for inputs of these sizes (client/specialization.h
// RequestsForSizes), each explained; the client takes the first that
// compiles, so the first decides whether the call hit.
absl::Status WhyForSizes(const kiln::v1::Graph& graph, const kiln::v1::CompileOptions& options,
                         Client& client) {
  ASSIGN_OR_RETURN(const std::vector<std::vector<int64_t>> sizes,
                   ParseInputSizes(graph, absl::GetFlag(FLAGS_inputs)));
  ASSIGN_OR_RETURN(const std::vector<SizedRequest> planned, RequestsForSizes(graph, sizes));
  kiln::v1::WhyResponse all;
  std::vector<SizedRequest> requests;
  absl::Status first_refusal;
  for (const SizedRequest& sized : planned) {
    kiln::v1::WhyRequest request;
    *request.mutable_request()->mutable_graph() = sized.request.graph;
    request.mutable_request()->mutable_input_layouts()->Add(sized.request.layouts.begin(),
                                                            sized.request.layouts.end());
    *request.mutable_request()->mutable_options() = options;
    absl::StatusOr<kiln::v1::WhyResponse> response = client.Why(request);
    // A candidate kilnd cannot re-type is one the client never compiles.
    const absl::StatusCode code = response.status().code();
    if (!sized.request.layouts.empty() &&
        (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented)) {
      if (first_refusal.ok()) first_refusal = response.status();
      continue;
    }
    RETURN_IF_ERROR(response.status());
    if (response->requests_size() != 1) {
      return absl::InternalError("kilnd did not answer for the one request asked");
    }
    *all.add_requests() = response->requests(0);
    requests.push_back(sized);
  }
  if (requests.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no specialization of the graph takes these sizes: ", first_refusal.message()));
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(all) << "\n";
    return absl::OkStatus();
  }
  const std::string shown = InputSizesString(sizes);
  if (const absl::Status taken = CheckGraphTakesSizes(graph, sizes); taken.ok()) {
    std::cout << "inputs " << shown << ": the graph as given takes them\n";
  } else {
    std::cout << "inputs " << shown << ": the graph as given does not take them ("
              << taken.message() << "); the client requests, in order, taking the first that "
              << "compiles:\n";
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests.size() > 1 || requests[i].description != "the graph as given") {
      std::cout << i + 1 << ". " << requests[i].description << "\n";
    }
    PrintWhy(all.requests(i), /*past_miss=*/false);
  }
  std::cout << (all.requests(0).stored()
                    ? "a call at these sizes hits: the first request is stored\n"
                    : "a call at these sizes compiles: the first request is not stored\n");
  return absl::OkStatus();
}

absl::Status Why(const Args& args) {
  kiln::v1::WhyRequest request;
  const bool sized = !absl::GetFlag(FLAGS_inputs).empty();
  if (absl::GetFlag(FLAGS_last) > 0) {
    RETURN_IF_ERROR(NeedArgs(args, 0, "kiln why --last=N"));
    if (sized) return absl::InvalidArgumentError("--inputs is for a graph file, not --last");
    request.set_last(absl::GetFlag(FLAGS_last));
  } else {
    RETURN_IF_ERROR(NeedArgs(args, 1, "kiln why GRAPH.json [--inputs=SIZES] | kiln why --last=N"));
    ASSIGN_OR_RETURN(*request.mutable_request()->mutable_graph(), ReadGraphFile(args[0]));
    ASSIGN_OR_RETURN(*request.mutable_request()->mutable_options(), CompileOptionsFromFlags());
  }
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  if (sized) return WhyForSizes(request.request().graph(), request.request().options(), *client);
  ASSIGN_OR_RETURN(const kiln::v1::WhyResponse response, client->Why(request));
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(response) << "\n";
    return absl::OkStatus();
  }
  if (response.requests().empty()) std::cout << "no misses since kilnd started\n";
  for (const kiln::v1::WhyResponse::Request& asked : response.requests()) {
    PrintWhy(asked, /*past_miss=*/request.has_last());
  }
  return absl::OkStatus();
}

}  // namespace

const Command kWhyCommand = {
    "why",
    "GRAPH.json [--inputs=SIZES] | --last=N",
    "why a request missed: the nearest stored entries and which part of the key differs (graph "
    "node, guard, options, toolchain, codegen version); with --inputs, for the request a process "
    "calling GRAPH.json at those sizes makes",
    {{"last"},
     {"inputs",
      "the input sizes a process called GRAPH.json with: each input's dims joined by x, inputs "
      "separated by commas (8x64,64x32; an empty item for a 0-d input), or symbol sizes "
      "(B=8,S=16); explains the request the client makes for them"},
     {"target"},
     {"salt"},
     {"json"},
     kSocketFlag,
     kCacheDirFlag,
     kStartFlag},
    "kiln why model.json --inputs=8x64,64x32",
    Why};

}  // namespace kiln
