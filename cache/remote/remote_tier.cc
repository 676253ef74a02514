#include "cache/remote/remote_tier.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

constexpr char kSignedPrefix[] = "kiln-remote-entry-v1";

std::string SignedMessage(const std::string& metadata) {
  return absl::StrCat(absl::string_view(kSignedPrefix, sizeof(kSignedPrefix)), metadata);
}

// Compare-and-act on a lease, so a machine whose lease lapsed and was taken
// over never extends or deletes the new holder's.
constexpr char kRenewScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

std::string Millis(absl::Duration duration) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

std::string TokenPrefix(const void* tier) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, ":", getpid(), ":", absl::Hex(reinterpret_cast<uintptr_t>(tier)), ":",
                      absl::ToUnixNanos(absl::Now()), ":");
}

}  // namespace

RemoteTier::Lease::Lease(RemoteTier* tier, std::string redis_key, std::string token)
    : tier_(tier), redis_key_(std::move(redis_key)), token_(std::move(token)) {
  absl::MutexLock lock(&tier_->mutex_);
  tier_->live_leases_.emplace(redis_key_, token_);
}

RemoteTier::Lease::~Lease() {
  {
    absl::MutexLock lock(&tier_->mutex_);
    tier_->live_leases_.erase({redis_key_, token_});
  }
  tier_->Release(redis_key_, token_);
}

RemoteTier::RemoteTier(std::unique_ptr<RedisClient> redis, SigningKeys keys, Options options)
    : redis_(std::move(redis)),
      keys_(std::move(keys)),
      options_(std::move(options)),
      token_prefix_(TokenPrefix(this)) {
  writer_ = std::thread([this] { WriterLoop(); });
  renewer_ = std::thread([this] { RenewerLoop(); });
}

RemoteTier::~RemoteTier() {
  Flush();
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  writer_.join();
  renewer_.join();
}

std::string RemoteTier::EntryKey(const std::string& key) const {
  return absl::StrCat(options_.key_namespace, ":a:", key);
}
std::string RemoteTier::LeaseKey(const std::string& key) const {
  return absl::StrCat(options_.key_namespace, ":l:", key);
}

absl::StatusOr<RedisReply> RemoteTier::Run(std::initializer_list<std::string> args) {
  const std::vector<std::string> argv(args);
  // Every command here names its key first, but EVAL SCRIPT NUMKEYS KEY.
  absl::StatusOr<RedisReply> reply = redis_->Command(argv, argv[0] == "EVAL" ? 3 : 1);
  if (!reply.ok()) {
    ++errors_;
    if (available_.exchange(false)) {
      KILN_LOG(WARNING) << "the fleet tier is unavailable, compiling locally: " << reply.status();
    }
  } else if (!available_.exchange(true)) {
    KILN_LOG(INFO) << "the fleet tier is reachable again";
  }
  return reply;
}

absl::StatusOr<std::string> RemoteTier::EncodeEntry(const kiln::v1::ArtifactMetadata& metadata,
                                                    const std::string& object) const {
  kiln::v1::RemoteEntry entry;
  entry.set_metadata(metadata.SerializeAsString());
  ASSIGN_OR_RETURN(Signature signature, keys_.Sign(SignedMessage(entry.metadata())));
  entry.set_object(object);
  entry.set_key_id(std::move(signature.key_id));
  entry.set_signature(std::move(signature.bytes));
  return entry.SerializeAsString();
}

absl::StatusOr<RemoteTier::Fetched> RemoteTier::DecodeEntry(const std::string& key,
                                                            const std::string& value) const {
  kiln::v1::RemoteEntry entry;
  if (!entry.ParseFromString(value)) {
    return absl::DataLossError("the value is not a Kiln entry");
  }
  RETURN_IF_ERROR(
      keys_.Verify(SignedMessage(entry.metadata()), Signature{entry.key_id(), entry.signature()}));
  Fetched fetched;
  if (!fetched.metadata.ParseFromString(entry.metadata())) {
    return absl::DataLossError("its signed metadata does not parse");
  }
  if (fetched.metadata.key() != key) {
    return absl::DataLossError(
        absl::StrCat("it is signed as the entry of key ", fetched.metadata.key()));
  }
  if (Sha256Hex(entry.object()) != fetched.metadata.digest() ||
      static_cast<int64_t>(entry.object().size()) != fetched.metadata.object_bytes()) {
    return absl::DataLossError("its object does not match the digest it is signed with");
  }
  fetched.object = std::move(*entry.mutable_object());
  return fetched;
}

absl::StatusOr<bool> RemoteTier::TryLease(const std::string& lease_key, const std::string& token) {
  ASSIGN_OR_RETURN(RedisReply reply,
                   Run({"SET", lease_key, token, "NX", "PX", Millis(options_.lease_ttl)}));
  return reply.type == RedisReply::Type::kStatus;  // OK; nil when held
}

void RemoteTier::Release(const std::string& lease_key, const std::string& token) {
  // A lease we fail to release lapses after lease_ttl.
  (void)Run({"EVAL", kReleaseScript, "1", lease_key, token});
}

RemoteTier::Claim RemoteTier::FetchOrLease(const std::string& key) {
  const std::string entry_key = EntryKey(key);
  const std::string lease_key = LeaseKey(key);
  const absl::Time deadline = absl::Now() + options_.max_lease_wait;
  absl::Duration poll = absl::Milliseconds(5);
  bool waited = false;
  bool refused = false;  // the value there is bad: compile under the lease and overwrite it
  Claim claim;
  while (true) {
    absl::StatusOr<RedisReply> value = Run({"GET", entry_key});
    if (!value.ok()) break;
    if (value->type == RedisReply::Type::kString) {
      absl::StatusOr<Fetched> fetched = DecodeEntry(key, value->str);
      if (fetched.ok()) {
        ++hits_;
        bytes_read_ += static_cast<int64_t>(value->str.size());
        claim.entry = *std::move(fetched);
        return claim;
      }
      if (!refused) {
        ++refused_;
        KILN_LOG(WARNING) << "refused the fleet tier's entry for " << key << ": "
                          << fetched.status().message();
      }
      refused = true;
    }
    if (!keys_.can_sign()) {
      // A reader cannot publish, so it takes no lease; it still waits for
      // a machine that holds one.
      absl::StatusOr<RedisReply> held = Run({"EXISTS", lease_key});
      if (!held.ok() || held->integer == 0) break;
    } else {
      const std::string token = absl::StrCat(token_prefix_, next_token_++);
      absl::StatusOr<bool> leased = TryLease(lease_key, token);
      if (!leased.ok()) break;
      if (*leased) {
        auto lease = std::unique_ptr<Lease>(new Lease(this, lease_key, token));
        // A holder may have published and released between our GET and
        // our SET: look once more before compiling.
        if (!refused) {
          absl::StatusOr<RedisReply> again = Run({"EXISTS", entry_key});
          if (again.ok() && again->integer == 1) continue;  // `lease` is released
        }
        if (waited) ++lease_takeovers_;
        claim.lease = std::move(lease);
        break;
      }
    }
    if (!waited) ++lease_waits_;
    waited = true;
    if (stop_waiting_) break;
    if (absl::Now() + poll > deadline) {
      KILN_LOG(WARNING) << "waited " << options_.max_lease_wait
                        << " for another machine to compile " << key << "; compiling here";
      break;
    }
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Milliseconds(100));
  }
  ++misses_;
  return claim;
}

void RemoteTier::PublishBehind(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                               std::unique_ptr<Lease> lease) {
  if (!keys_.can_sign()) return;  // `lease` is released here
  {
    absl::MutexLock lock(&mutex_);
    if (pending_.size() < options_.max_pending_writes) {
      pending_.push_back(PendingWrite{metadata, std::move(object), std::move(lease)});
      return;
    }
  }
  ++publishes_dropped_;
  lease.reset();  // outside the lock: a release is a Redis command
}

void RemoteTier::Flush() {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(
      +[](RemoteTier* tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tier->mutex_) {
        return tier->pending_.empty() && tier->writing_ == 0;
      },
      this));
}

void RemoteTier::WriterLoop() {
  while (true) {
    PendingWrite write;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](RemoteTier* tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tier->mutex_) {
            return tier->stopping_ || !tier->pending_.empty();
          },
          this));
      if (pending_.empty()) return;  // stopping, and nothing left
      write = std::move(pending_.front());
      pending_.pop_front();
      ++writing_;
    }
    absl::StatusOr<std::string> value = EncodeEntry(write.metadata, write.object);
    if (!value.ok()) {
      KILN_LOG(ERROR) << "cannot sign " << write.metadata.key() << ": " << value.status();
      ++publishes_dropped_;
    } else if (Run({"SET", EntryKey(write.metadata.key()), *value, "PX",
                    Millis(options_.entry_ttl)})
                   .ok()) {
      ++publishes_;
      bytes_written_ += static_cast<int64_t>(value->size());
    } else {
      ++publishes_dropped_;
    }
    write.lease.reset();  // after the entry is there: waiters find it
    absl::MutexLock lock(&mutex_);
    --writing_;
  }
}

void RemoteTier::RenewerLoop() {
  const absl::Duration period = options_.lease_ttl / 3;
  while (true) {
    std::vector<std::pair<std::string, std::string>> leases;
    {
      absl::MutexLock lock(&mutex_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; };
      mutex_.AwaitWithTimeout(absl::Condition(&stopping), period);
      if (stopping_) return;
      leases.assign(live_leases_.begin(), live_leases_.end());
    }
    for (const auto& [lease_key, token] : leases) {
      (void)Run({"EVAL", kRenewScript, "1", lease_key, token, Millis(options_.lease_ttl)});
    }
  }
}

RemoteTier::Stats RemoteTier::stats() const {
  Stats stats;
  stats.hits = hits_;
  stats.misses = misses_;
  stats.errors = errors_;
  stats.refused = refused_;
  stats.bytes_read = bytes_read_;
  stats.bytes_written = bytes_written_;
  stats.publishes = publishes_;
  stats.publishes_dropped = publishes_dropped_;
  stats.lease_waits = lease_waits_;
  stats.lease_takeovers = lease_takeovers_;
  stats.available = available_;
  return stats;
}

}  // namespace kiln
