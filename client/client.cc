#include "client/client.h"

#include <algorithm>

#include "abi/kiln_abi.h"
#include "cache/local_index.h"
#include "cache/object_dir.h"
#include "cache/request_digest.h"
#include "common/paths.h"
#include "common/status_macros.h"
#include "common/trust.h"
#include "common/version.h"

namespace kiln {
namespace {

thread_local InterruptScope* interrupt_scope = nullptr;

}  // namespace

InterruptScope::InterruptScope(std::function<bool()> interrupted)
    : interrupted_(std::move(interrupted)), outer_(interrupt_scope) {
  check_ = [this] {
    if (!fired_ && interrupted_()) fired_ = true;
    return fired_;
  };
  interrupt_scope = this;
}

InterruptScope::~InterruptScope() { interrupt_scope = outer_; }

const std::function<bool()>& InterruptScope::Check() {
  static const std::function<bool()> none;
  return interrupt_scope != nullptr ? interrupt_scope->check_ : none;
}

bool InterruptScope::Interrupted() { return interrupt_scope != nullptr && interrupt_scope->fired_; }

Client::Client(ClientOptions options) : options_(std::move(options)), trusted_(TrustedUids()) {
  if (options_.socket_path.empty()) options_.socket_path = DefaultSocketPath();
  if (options_.cache_dir.empty()) options_.cache_dir = DefaultCacheDir();
  RegisterForFork();
}

Client::~Client() {
  UnregisterForFork();
  {
    absl::MutexLock lock(&traffic_mutex_);
    stopping_ = true;
  }
  if (traffic_reporter_.joinable()) traffic_reporter_.join();
  ReportLocalIndexHitsAtExit();
}

absl::Status Client::CheckCacheDirectory(const std::string& dir) {
  RETURN_IF_ERROR(trusted_.status());
  absl::MutexLock lock(&descriptor_mutex_);
  if (std::find(trusted_dirs_.begin(), trusted_dirs_.end(), dir) != trusted_dirs_.end()) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckTrustedPath(dir, "cache directory", *trusted_));
  trusted_dirs_.push_back(dir);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ArtifactObject>> Client::OpenArtifact(
    const kiln::v1::CompileResponse& response, Source source) {
  std::string cache_dir = options_.cache_dir;
  if (source == Source::kDaemon) {
    absl::MutexLock lock(&mutex_);
    cache_dir = hello_.cache_dir();
  }
  if (cache_dir.empty()) {
    return absl::FailedPreconditionError("kilnd reported no cache directory to open objects from");
  }
  RETURN_IF_ERROR(CheckCacheDirectory(cache_dir));
  absl::StatusOr<std::shared_ptr<const ArtifactObject>> opened =
      OpenObject(cache_dir, response.artifact(), *trusted_);
  // A hit kilnd never saw is a use all the same: eviction reads this mark
  // (once per open, not per call; a shared daemon's file may not be ours).
  if (opened.ok() && source == Source::kLocalIndex) {
    LocalIndex(cache_dir).Touch(response.artifact().key()).IgnoreError();
    local_index_hits_.fetch_add(1, std::memory_order_relaxed);  // reported with traffic
  }
  return opened;
}

std::optional<kiln::v1::CompileResponse> Client::FindLocal(
    const kiln::v1::CompileRequest& request) {
  // Nothing is read from a directory someone else could have written.
  if (!CheckCacheDirectory(options_.cache_dir).ok()) return std::nullopt;
  const LocalIndex index(options_.cache_dir);
  std::shared_ptr<const RequestSalts> salts;
  {
    // Read until found (a daemon may start after this process), then kept.
    absl::MutexLock lock(&descriptor_mutex_);
    if (request_salts_ == nullptr) {
      auto descriptor = index.ReadDescriptor();
      if (descriptor.ok() && descriptor->has_value() &&
          (*descriptor)->protocol_version() == kProtocolVersion &&
          (*descriptor)->abi_version() == KILN_ABI_VERSION &&
          (*descriptor)->machine_id() == MachineId()) {
        request_salts_ = std::make_shared<const RequestSalts>(DescriptorRequestSalts(**descriptor));
      }
    }
    if (request_salts_ == nullptr) return std::nullopt;
    salts = request_salts_;
  }
  // A request kilnd has answered before names its key (an alias). The key
  // is kilnd's alone: a request no process here has sent yet is a miss,
  // one RPC, and kilnd keys it.
  const absl::StatusOr<std::string> digest = RequestDigest(request, *salts);
  if (!digest.ok()) return std::nullopt;
  absl::StatusOr<std::optional<std::string>> key = index.FindAlias(*digest);
  if (!key.ok() || !key->has_value()) return std::nullopt;
  auto entry = index.Find(**key);
  if (!entry.ok() || !entry->has_value()) return std::nullopt;
  kiln::v1::CompileResponse response;
  response.set_object_path(
      ObjectDirectory(options_.cache_dir + "/objects").PathFor((*entry)->digest()));
  *response.mutable_artifact() = **std::move(entry);
  response.set_cache_hit(true);
  return response;
}

absl::StatusOr<kiln::v1::CompileResponse> Client::Compile(const kiln::v1::CompileRequest& request) {
  return Rpc<kiln::v1::CompileResponse>("Compile", request);
}

absl::StatusOr<kiln::v1::CompileResponse> Client::Lookup(const kiln::v1::CompileRequest& request) {
  return Rpc<kiln::v1::CompileResponse>("Lookup", request);
}

}  // namespace kiln
