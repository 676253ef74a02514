// Client's administration calls: one RPC each.
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<kiln::v1::StatsResponse> Client::Stats() {
  return Rpc<kiln::v1::StatsResponse>("Stats", kiln::v1::StatsRequest());
}

absl::StatusOr<kiln::v1::ListResponse> Client::List() {
  kiln::v1::ListResponse all;
  kiln::v1::ListRequest request;
  do {
    kiln::v1::ListResponse page;
    RETURN_IF_ERROR(ListPage(request, page));
    all.mutable_entries()->MergeFrom(page.entries());
    all.mutable_uses()->MergeFrom(page.uses());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return all;
}

absl::Status Client::ListPage(const kiln::v1::ListRequest& request, kiln::v1::ListResponse& page) {
  return RpcInto("List", request, page);
}

absl::StatusOr<int64_t> Client::Stop() {
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::StopResponse>("Stop", kiln::v1::StopRequest())));
  return response.pid();
}

absl::StatusOr<kiln::v1::ArtifactMetadata> Client::Show(const std::string& key) {
  kiln::v1::ShowRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::ShowResponse>("Show", request)));
  return response.artifact();
}

absl::StatusOr<std::string> Client::Evict(const std::string& key) {
  kiln::v1::EvictRequest request;
  request.set_key(key);
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::EvictResponse>("Evict", request)));
  return response.key();
}

absl::StatusOr<kiln::v1::GcResponse> Client::Gc(const kiln::v1::GcRequest& request) {
  return Rpc<kiln::v1::GcResponse>("Gc", request);
}

absl::StatusOr<std::vector<std::string>> Client::Pin(const kiln::v1::PinRequest& request) {
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::PinResponse>("Pin", request)));
  return std::vector<std::string>(response.keys().begin(), response.keys().end());
}

absl::StatusOr<kiln::v1::ExportResponse> Client::Export(const kiln::v1::ExportRequest& request) {
  return Rpc<kiln::v1::ExportResponse>("Export", request);
}

absl::StatusOr<kiln::v1::ImportResponse> Client::Import(const kiln::v1::ImportRequest& request) {
  return Rpc<kiln::v1::ImportResponse>("Import", request);
}

absl::StatusOr<kiln::v1::VerifyResponse> Client::Verify(bool repair) {
  kiln::v1::VerifyRequest request;
  request.set_repair(repair);
  return Rpc<kiln::v1::VerifyResponse>("Verify", request);
}

absl::StatusOr<kiln::v1::PruneResponse> Client::Prune(bool dry_run) {
  kiln::v1::PruneRequest request;
  request.set_dry_run(dry_run);
  return Rpc<kiln::v1::PruneResponse>("Prune", request);
}

absl::StatusOr<kiln::v1::WhyResponse> Client::Why(const kiln::v1::WhyRequest& request) {
  return Rpc<kiln::v1::WhyResponse>("Why", request);
}

absl::StatusOr<kiln::v1::PaddingResponse> Client::ProvePadding(
    const kiln::v1::PaddingRequest& request) {
  return Rpc<kiln::v1::PaddingResponse>("ProvePadding", request);
}

absl::StatusOr<kiln::v1::TrafficHistogram> Client::Traffic(const std::string& graph_digest) {
  kiln::v1::GetTrafficRequest request;
  request.set_graph_digest(graph_digest);
  ASSIGN_OR_RETURN(auto response, (Rpc<kiln::v1::GetTrafficResponse>("GetTraffic", request)));
  return response.histogram();
}
}  // namespace kiln
