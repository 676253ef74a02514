// The fleet tier: artifacts shared by the kilnds of a fleet through Redis
// (redis_client.h), so that a model started on a hundred machines compiles
// once. The fleet tier (fleet_tier.h) asks it on a local miss, one look
// at a time:
//
//   Look(key, wait):
//     EVAL fetch NS:a:KEY -> nothing; or the value's length and identity,
//                     and the value itself unless it is larger than
//                     max_entry_bytes or is the one this wait refused
//                     (one over 1 MiB comes in a second reply, fetched
//                     while no other miss fetches a large one)
//     an entry      -> check its signature (signing.h), its key and its
//                     object's digest -> the caller stores it locally
//     none, refused -> EVAL lease: SET NS:l:KEY TOKEN NX PX lease_ttl, or
//                     take over a lease that has no TTL
//                     -> got it: the caller compiles (the lease is renewed
//                        meanwhile), then PublishBehind
//                     -> another machine holds it: the caller looks again
//                        after look_again_after, holding no thread
//                        meanwhile, until the entry appears, the lease
//                        lapses (its holder died: take it over) or
//                        max_lease_wait passes (compile anyway)
//   PublishBehind: a writer thread signs the entry, SETs it with the entry
//     TTL and then releases the lease; the compile's reply does not wait.
//
// A lease's value is its owner (host, pid, tier and a counter), and it
// always has a TTL: a holder that dies lets it lapse. One without a TTL
// was not set by a kilnd and would never lapse, so it is taken over at
// once (readers ignore it).
//
// The Redis key is the local cache key under a namespace, and the local key
// already covers the toolchain, codegen version and target CPU: machines
// that could not load each other's code never share an entry.
//
// Faults never fail a request: Redis down, slow or refusing is a local
// compile, counted (Stats) and logged once per outage. An entry that fails
// its checks or is larger than max_entry_bytes is refused, counted, not
// fetched again during that wait, and overwritten by the local compile's
// publish. Machines without a signing key only read (and never lease).
//
// Thread-safe.
#ifndef KILN_CACHE_REMOTE_REMOTE_TIER_H_
#define KILN_CACHE_REMOTE_REMOTE_TIER_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/remote/redis_client.h"
#include "cache/remote/signing.h"
#include "proto/artifact.pb.h"

namespace kiln {

class RemoteTier {
 public:
  struct Options {
    std::string url;  // for logs and stats
    std::string key_namespace = "kiln";
    absl::Duration entry_ttl =
        absl::Hours(24 * 30);                      // refreshed by nothing: a month from its compile
    absl::Duration lease_ttl = absl::Seconds(15);  // renewed every third of it while compiling
    absl::Duration max_lease_wait = absl::Minutes(2);
    size_t max_pending_writes = 256;  // past it a publish is dropped (counted)
    // A larger value is refused without being read, and a larger entry of
    // this machine's is not published.
    int64_t max_entry_bytes = int64_t{16} << 20;
  };
  struct Stats {
    int64_t hits = 0;        // entries fetched, checked and handed over
    int64_t misses = 0;      // misses answered without an entry
    int64_t errors = 0;      // commands that failed (Redis down, slow, refusing)
    int64_t refused = 0;     // entries that failed their checks or were too large
    int64_t bytes_read = 0;  // of entries fetched
    int64_t bytes_written = 0;
    int64_t publishes = 0;          // entries written
    int64_t publishes_dropped = 0;  // writes given up (queue full, or Redis failed)
    int64_t lease_waits = 0;        // misses that waited on another machine's compile
    int64_t lease_takeovers = 0;    // leases taken from a lapsed holder, or without a TTL
    bool available = true;          // the last command reached Redis
  };

  // A claim on compiling one key fleet-wide: renewed while it lives,
  // released (only if still ours) when destroyed. It must not outlive its
  // tier.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    friend class RemoteTier;
    Lease(RemoteTier* tier, std::string redis_key, std::string token);
    RemoteTier* const tier_;
    const std::string redis_key_;
    const std::string token_;
  };

  struct Fetched {
    kiln::v1::ArtifactMetadata metadata;
    std::string object;
  };
  struct Claim {
    std::optional<Fetched> entry;  // another machine's artifact: store and answer it
    std::unique_ptr<Lease> lease;  // otherwise compile (null: without a fleet-wide claim)
    // Positive while another machine holds the lease: Look again after it.
    absl::Duration look_again_after = absl::ZeroDuration();
  };
  // What one miss remembers from one look to the next. Callers only keep
  // it: a fresh one per miss, passed to each of its looks.
  struct Wait {
    absl::Time deadline = absl::InfiniteFuture();  // set by the first look
    absl::Duration poll = absl::ZeroDuration();    // between looks; zero before the first
    bool waited = false;                           // counted in lease_waits
    std::string refused;  // the identity of the value refused: not fetched again
  };

  RemoteTier(std::unique_ptr<RedisClient> redis, SigningKeys keys, Options options);
  // Writes what is queued (each command bounded by the client's timeout)
  // and releases the leases that came with it.
  ~RemoteTier();

  // One look for a local miss (see above): an entry, a lease, neither
  // (compile without a fleet-wide claim), or look_again_after. Never fails.
  // One `wait` serves one caller at a time.
  Claim Look(const std::string& key, Wait* wait);
  // Looks until there is an answer, sleeping in between (tests, tools).
  Claim FetchOrLease(const std::string& key);
  // Queues the entry for Redis and releases `lease` once it is written
  // (or dropped). Without a signing key it only releases the lease.
  void PublishBehind(const kiln::v1::ArtifactMetadata& metadata, std::string object,
                     std::unique_ptr<Lease> lease);
  // Waits until every queued publish is written or dropped.
  void Flush();
  // FetchOrLease calls waiting on another machine's lease return at once,
  // and later ones do not wait (kilnd is shutting down).
  void StopWaiting() { stop_waiting_ = true; }

  Stats stats() const;
  const Options& options() const { return options_; }
  bool can_publish() const { return keys_.can_sign(); }

  // The value PublishBehind writes for an entry, and the checks a fetch
  // makes of one (exposed for tests, which forge and damage values).
  absl::StatusOr<std::string> EncodeEntry(const kiln::v1::ArtifactMetadata& metadata,
                                          const std::string& object) const;
  absl::StatusOr<Fetched> DecodeEntry(const std::string& key, const std::string& value) const;
  std::string EntryKey(const std::string& key) const;  // NS:a:KEY
  std::string LeaseKey(const std::string& key) const;  // NS:l:KEY

 private:
  struct PendingWrite {
    kiln::v1::ArtifactMetadata metadata;
    std::string object;
    std::unique_ptr<Lease> lease;
  };
  enum class Leased { kHeld, kTaken, kTakenOver };

  // Runs a command; a failure is counted and logged once per outage.
  absl::StatusOr<RedisReply> Run(std::initializer_list<std::string> args);
  // The entry for `key` if Redis has one that passes its checks; nullopt
  // when there is none, or it is refused (counted, logged, and its
  // identity kept in `wait`) or was refused before.
  absl::StatusOr<std::optional<Fetched>> Fetch(const std::string& key, Wait* wait);
  // Fetch's part after the fetch script answered `reply`.
  absl::StatusOr<std::optional<Fetched>> Accept(const std::string& key, const RedisReply& reply,
                                                Wait* wait);
  // kTaken: the lease was free and is ours; kTakenOver: it had no TTL and
  // is ours; kHeld: another machine holds it.
  absl::StatusOr<Leased> TryLease(const std::string& lease_key, const std::string& token);
  void Release(const std::string& lease_key, const std::string& token);
  void WriterLoop();
  void RenewerLoop();

  const std::unique_ptr<RedisClient> redis_;
  const SigningKeys keys_;
  const Options options_;
  const std::string token_prefix_;  // host, pid and tier: who holds a lease

  std::atomic<int64_t> hits_{0}, misses_{0}, errors_{0}, refused_{0}, bytes_read_{0},
      bytes_written_{0}, publishes_{0}, publishes_dropped_{0}, lease_waits_{0}, lease_takeovers_{0},
      next_token_{0};
  std::atomic<bool> available_{true};
  std::atomic<bool> stop_waiting_{false};

  absl::Mutex large_fetch_mutex_;  // held while a value over kInlineValueBytes is fetched
  mutable absl::Mutex mutex_;
  std::deque<PendingWrite> pending_ ABSL_GUARDED_BY(mutex_);
  int writing_ ABSL_GUARDED_BY(mutex_) = 0;
  std::set<std::pair<std::string, std::string>> live_leases_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread writer_;
  std::thread renewer_;
};

}  // namespace kiln

#endif  // KILN_CACHE_REMOTE_REMOTE_TIER_H_
