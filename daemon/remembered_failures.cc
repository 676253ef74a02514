#include "daemon/remembered_failures.h"

#include "absl/strings/match.h"
#include "common/logging.h"

namespace kiln {
namespace {

// An Internal error that reports the compiler process dying rather than the
// compiler rejecting the source (compiler.h gives both the same code).
bool IsCompilerCrash(const absl::Status& status) {
  const absl::string_view message = status.message();
  return absl::StartsWith(message, "compile worker crashed") ||
         absl::StartsWith(message, "compile worker exited") ||
         absl::StartsWith(message, "clang++ crashed");
}

}  // namespace

bool IsDeterministicFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return true;
    case absl::StatusCode::kInternal:
      return !IsCompilerCrash(status);
    default:
      return false;
  }
}

std::optional<absl::Status> RememberedFailures::Find(const std::string& key) {
  absl::MutexLock lock(&mutex_);
  auto it = failures_.find(key);
  if (it == failures_.end()) return std::nullopt;
  if (it->second.expiry <= options_.now()) {
    failures_.erase(it);
    return std::nullopt;
  }
  return it->second.status;
}

void RememberedFailures::RememberIfDeterministic(const std::string& key,
                                                 const absl::Status& failure) {
  if (!IsDeterministicFailure(failure) || options_.remember_for <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mutex_);
  const absl::Time now = options_.now();
  if (failures_.size() >= options_.max_remembered) {
    for (auto it = failures_.begin(); it != failures_.end();) {
      it = it->second.expiry <= now ? failures_.erase(it) : std::next(it);
    }
  }
  if (failures_.size() >= options_.max_remembered && !failures_.empty()) {
    auto soonest = failures_.begin();
    for (auto it = failures_.begin(); it != failures_.end(); ++it) {
      if (it->second.expiry < soonest->second.expiry) soonest = it;
    }
    failures_.erase(soonest);
  }
  failures_[key] = Failure{failure, now + options_.remember_for};
  KILN_LOG(INFO) << "remembering the failure of " << key.substr(0, 12) << " for "
                 << absl::FormatDuration(options_.remember_for) << " (`kiln evict "
                 << key.substr(0, 12) << "` forgets it)";
}

void RememberedFailures::Forget(const std::string& key) {
  absl::MutexLock lock(&mutex_);
  failures_.erase(key);
}

std::vector<std::string> RememberedFailures::KeysWithPrefix(const std::string& prefix) {
  absl::MutexLock lock(&mutex_);
  std::vector<std::string> keys;
  for (auto it = failures_.lower_bound(prefix);
       it != failures_.end() && absl::StartsWith(it->first, prefix); ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

int64_t RememberedFailures::Count() {
  absl::MutexLock lock(&mutex_);
  const absl::Time now = options_.now();
  int64_t count = 0;
  for (const auto& [key, failure] : failures_) count += failure.expiry > now ? 1 : 0;
  return count;
}

}  // namespace kiln
