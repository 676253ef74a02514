#include "cache/remote/remote_tier.h"

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"

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

// Takes the lease KEYS[1] for the owner ARGV[1] for ARGV[2] ms: 1 when it
// was free, 2 when it had no TTL (every holder sets one, so it was planted
// or left by hand, and would never lapse), 0 when another machine holds it.
constexpr char kLeaseScript[] =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "if redis.call('pttl', KEYS[1]) ~= -1 then return 0 end "
    "redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "return 2";

// The entry KEYS[1]: nil when there is none; else {identity, length}, and
// its value third unless it is longer than ARGV[1] bytes or its identity
// is ARGV[2] (refused before). The identity is the length and the SHA-1 of
// the first and last 4 KiB: every publish changes both (the signed
// metadata comes first, its signature last), and it costs Redis the same
// for any length.
constexpr char kFetchScript[] =
    "local length = redis.call('strlen', KEYS[1]) "
    "if length == 0 then return false end "
    "local identity = length .. ':' .. redis.sha1hex(redis.call('getrange', KEYS[1], 0, 4095) .. "
    "redis.call('getrange', KEYS[1], -4096, -1)) "
    "if identity == ARGV[2] or length > tonumber(ARGV[1]) then return {identity, length} end "
    "return {identity, length, redis.call('get', KEYS[1])}";

// Values up to this size come with the first reply of a fetch; a larger
// one is sent again, while no other large one is (kilnd's entries are tens
// of KB: a large one is rare, or hostile).
constexpr int64_t kInlineValueBytes = int64_t{1} << 20;

// Whether `value` holds RemoteEntry's fields and no others. Parsed as a
// message, junk would keep an unknown field (tens of bytes) for every byte
// or two of it; a new field makes a new format (kSignedPrefix).
bool HasOnlyEntryFields(const std::string& value) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(value.data()),
                                               static_cast<int>(value.size()));
  while (const uint32_t tag = input.ReadTag()) {
    // A tag is (field number << 3) | wire type; every field is wire type 2,
    // a length and its bytes.
    uint32_t length = 0;
    if ((tag & 7) != 2 ||
        kiln::v1::RemoteEntry::descriptor()->FindFieldByNumber(static_cast<int>(tag >> 3)) ==
            nullptr ||
        !input.ReadVarint32(&length) || !input.Skip(static_cast<int>(length))) {
      return false;
    }
  }
  return input.ConsumedEntireMessage();
}

// Looks while another machine holds a lease are this far apart, doubling.
constexpr absl::Duration kFirstPoll = absl::Milliseconds(5);
constexpr absl::Duration kLastPoll = absl::Milliseconds(100);

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
  if (!HasOnlyEntryFields(value) || !entry.ParseFromString(value)) {
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

absl::StatusOr<RemoteTier::Leased> RemoteTier::TryLease(const std::string& lease_key,
                                                        const std::string& token) {
  ASSIGN_OR_RETURN(RedisReply reply,
                   Run({"EVAL", kLeaseScript, "1", lease_key, token, Millis(options_.lease_ttl)}));
  switch (reply.integer) {
    case 1:
      return Leased::kTaken;
    case 2:
      return Leased::kTakenOver;
    default:
      return Leased::kHeld;
  }
}

void RemoteTier::Release(const std::string& lease_key, const std::string& token) {
  // A lease we fail to release lapses after lease_ttl.
  (void)Run({"EVAL", kReleaseScript, "1", lease_key, token});
}

absl::StatusOr<std::optional<RemoteTier::Fetched>> RemoteTier::Fetch(const std::string& key,
                                                                     Wait* wait) {
  auto run_script = [&](int64_t max_value_bytes) {
    return Run(
        {"EVAL", kFetchScript, "1", EntryKey(key), absl::StrCat(max_value_bytes), wait->refused});
  };
  ASSIGN_OR_RETURN(RedisReply reply,
                   run_script(std::min(kInlineValueBytes, options_.max_entry_bytes)));
  const bool held_back = reply.type == RedisReply::Type::kArray && reply.elements.size() == 2 &&
                         reply.elements[0].str != wait->refused &&
                         reply.elements[1].integer <= options_.max_entry_bytes;
  if (held_back) {
    // Concurrent misses hold one large value at a time.
    absl::MutexLock lock(&large_fetch_mutex_);
    ASSIGN_OR_RETURN(reply, run_script(options_.max_entry_bytes));
    return Accept(key, reply, wait);
  }
  return Accept(key, reply, wait);
}

absl::StatusOr<std::optional<RemoteTier::Fetched>> RemoteTier::Accept(const std::string& key,
                                                                      const RedisReply& reply,
                                                                      Wait* wait) {
  if (reply.type == RedisReply::Type::kNil) return std::nullopt;
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < 2 ||
      reply.elements[0].type != RedisReply::Type::kString ||
      reply.elements[1].type != RedisReply::Type::kInteger) {
    return absl::InternalError("redis answered the fetch script with another shape of reply");
  }
  const std::string& identity = reply.elements[0].str;
  if (identity == wait->refused) return std::nullopt;
  absl::Status refusal;
  if (reply.elements.size() < 3) {
    refusal = absl::ResourceExhaustedError(
        absl::StrCat("it is ", reply.elements[1].integer, " bytes, over the cap of ",
                     options_.max_entry_bytes, " (--remote_max_entry_bytes); not fetched"));
  } else {
    absl::StatusOr<Fetched> fetched = DecodeEntry(key, reply.elements[2].str);
    if (fetched.ok()) {
      bytes_read_ += static_cast<int64_t>(reply.elements[2].str.size());
      return *std::move(fetched);
    }
    refusal = fetched.status();
  }
  ++refused_;
  KILN_LOG(WARNING) << "refused the fleet tier's entry for " << key << ": " << refusal.message();
  wait->refused = identity;
  return std::nullopt;
}

RemoteTier::Claim RemoteTier::Look(const std::string& key, Wait* wait) {
  const absl::Time now = absl::Now();
  if (wait->poll == absl::ZeroDuration()) {
    wait->deadline = now + options_.max_lease_wait;
    wait->poll = kFirstPoll;
  }
  const std::string lease_key = LeaseKey(key);
  Claim claim;
  while (true) {
    absl::StatusOr<std::optional<Fetched>> fetched = Fetch(key, wait);
    if (!fetched.ok()) break;
    if (fetched->has_value()) {
      ++hits_;
      claim.entry = **std::move(fetched);
      return claim;
    }
    if (!keys_.can_sign()) {
      // A reader cannot publish, so it takes no lease; it still waits for
      // a machine that holds one (-2: none; -1: no TTL, so no holder).
      absl::StatusOr<RedisReply> ttl = Run({"PTTL", lease_key});
      if (!ttl.ok() || ttl->integer < 0) break;
    } else {
      const std::string token = absl::StrCat(token_prefix_, next_token_++);
      absl::StatusOr<Leased> leased = TryLease(lease_key, token);
      if (!leased.ok()) break;
      if (*leased != Leased::kHeld) {
        auto lease = std::unique_ptr<Lease>(new Lease(this, lease_key, token));
        // A holder may have published and released between our fetch and
        // our SET: look once more before compiling.
        if (wait->refused.empty()) {
          absl::StatusOr<RedisReply> again = Run({"EXISTS", EntryKey(key)});
          if (again.ok() && again->integer == 1) continue;  // `lease` is released
        }
        if (*leased == Leased::kTakenOver) {
          KILN_LOG(WARNING) << "took over the fleet tier's lease on " << key
                            << ", which had no TTL";
        }
        if (wait->waited || *leased == Leased::kTakenOver) ++lease_takeovers_;
        claim.lease = std::move(lease);
        break;
      }
    }
    if (!wait->waited) ++lease_waits_;
    wait->waited = true;
    if (stop_waiting_) break;
    if (now + wait->poll > wait->deadline) {
      KILN_LOG(WARNING) << "waited " << options_.max_lease_wait
                        << " for another machine to compile " << key << "; compiling here";
      break;
    }
    claim.look_again_after = wait->poll;
    wait->poll = std::min(wait->poll * 2, kLastPoll);
    return claim;
  }
  ++misses_;
  return claim;
}

RemoteTier::Claim RemoteTier::FetchOrLease(const std::string& key) {
  Wait wait;
  while (true) {
    Claim claim = Look(key, &wait);
    if (claim.look_again_after == absl::ZeroDuration()) return claim;
    absl::SleepFor(claim.look_again_after);
  }
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
    } else if (static_cast<int64_t>(value->size()) > options_.max_entry_bytes) {
      // Every machine would refuse it.
      KILN_LOG(WARNING) << "not publishing " << write.metadata.key() << ": its entry is "
                        << value->size() << " bytes, over the cap of " << options_.max_entry_bytes
                        << " (--remote_max_entry_bytes)";
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
