#include "cache/remote/redis_client.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cache/remote/redis_cluster.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// More than this many MOVED/ASK for one command means the cluster is in
// flux (or a loop): give up with Unavailable rather than chase it.
constexpr int kMaxRedirects = 5;
// A MOVED or an unreachable master asks for a fresh slot map (CLUSTER
// SLOTS); at most this often, so a resharding is not a storm of them.
constexpr absl::Duration kMinRefreshInterval = absl::Seconds(1);

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// hiredis writes with write(2): a server that went away would raise
// SIGPIPE and kill a process that does not ignore it. Blocked in this
// thread while hiredis runs; one raised meanwhile is consumed.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &old_mask_);
  }
  ~SigpipeBlock() {
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now = {0, 0};
      sigtimedwait(&sigpipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t sigpipe_;
  sigset_t old_mask_;
  bool was_pending_ = false;
};

RedisReply CopyReply(const redisReply& reply) {
  RedisReply copy;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
      copy.type = RedisReply::Type::kString;
      break;
    case REDIS_REPLY_STATUS:
      copy.type = RedisReply::Type::kStatus;
      break;
    case REDIS_REPLY_ERROR:
      copy.type = RedisReply::Type::kError;
      break;
    case REDIS_REPLY_INTEGER:
      copy.type = RedisReply::Type::kInteger;
      copy.integer = reply.integer;
      return copy;
    case REDIS_REPLY_ARRAY:
      copy.type = RedisReply::Type::kArray;
      copy.elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i) {
        copy.elements.push_back(reply.element[i] ? CopyReply(*reply.element[i]) : RedisReply());
      }
      return copy;
    default:
      return copy;  // nil
  }
  copy.str.assign(reply.str, reply.len);
  return copy;
}

// An error reply as a status; its first word is Redis's error code.
absl::Status ErrorReplyStatus(absl::string_view error, const RedisEndpoint& node) {
  const std::string message = absl::StrCat("redis ", node.ToString(), ": ", error);
  const absl::string_view code = error.substr(0, error.find(' '));
  if (code == "NOAUTH" || code == "WRONGPASS" || code == "NOPERM") {
    return absl::PermissionDeniedError(message);
  }
  if (code == "CLUSTERDOWN" || code == "TRYAGAIN" || code == "LOADING" || code == "MASTERDOWN") {
    return absl::UnavailableError(message);
  }
  return absl::FailedPreconditionError(message);
}

// One server and the one connection to it, reopened on demand.
class Node {
 public:
  Node(RedisEndpoint endpoint, const RedisClient::Options& options)
      : endpoint_(std::move(endpoint)), options_(options) {}

  const RedisEndpoint& endpoint() const { return endpoint_; }

  // The reply, kError for an error reply (the caller looks for redirects),
  // or why there is none. `asking`: ASKING first (an ASK redirect).
  absl::StatusOr<RedisReply> Execute(absl::Span<const std::string> args, bool asking) {
    SigpipeBlock sigpipe_block;
    absl::MutexLock lock(&mu_);
    if (context_ == nullptr) RETURN_IF_ERROR(ConnectLocked());
    if (asking) {
      ASSIGN_OR_RETURN(RedisReply ok, SendLocked({"ASKING"}));
      if (ok.type == RedisReply::Type::kError) return ErrorReplyStatus(ok.str, endpoint_);
    }
    return SendLocked(args);
  }

 private:
  // Opens the connection unless the node is in backoff. A node that cannot
  // be reached or did not answer in time backs off (doubling until a
  // command succeeds); one that refuses the password does not.
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (const absl::Time now = absl::Now(); now < retry_at_) {
      return absl::UnavailableError(
          absl::StrCat(unreachable_, "; tried again in ", absl::FormatDuration(retry_at_ - now)));
    }
    const absl::Status opened = OpenLocked();
    if (absl::IsUnavailable(opened)) {
      BackOffLocked(opened.message());
      return absl::UnavailableError(
          absl::StrCat(unreachable_, "; tried again in ", absl::FormatDuration(backoff_)));
    }
    return opened;
  }

  void BackOffLocked(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    backoff_ = backoff_ == absl::ZeroDuration() ? options_.min_backoff
                                                : std::min(2 * backoff_, options_.max_backoff);
    retry_at_ = absl::Now() + backoff_;
    unreachable_ = std::string(why);
  }

  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const timeval timeout = absl::ToTimeval(options_.timeout);
    ContextPtr context(
        endpoint_.unix_path.empty()
            ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, timeout)
            : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), timeout));
    if (context == nullptr || context->err != 0 ||
        redisSetTimeout(context.get(), timeout) != REDIS_OK) {
      return absl::UnavailableError(absl::StrCat(
          "redis ", endpoint_.ToString(),
          " is unreachable: ", context == nullptr ? "out of memory" : context->errstr));
    }
    context_ = std::move(context);
    if (options_.password.empty()) return absl::OkStatus();
    std::vector<std::string> auth = {"AUTH"};
    if (!options_.username.empty()) auth.push_back(options_.username);
    auth.push_back(options_.password);
    ASSIGN_OR_RETURN(const RedisReply reply, SendLocked(auth));
    if (reply.type == RedisReply::Type::kError) {
      context_.reset();
      return ErrorReplyStatus(reply.str, endpoint_);
    }
    return absl::OkStatus();
  }

  // One round trip on the open connection; drops it on any failure (its
  // state is unknown: a late reply would answer the next command). The
  // reply is read as hiredis's redisGetReply reads it, but counted:
  // hiredis itself would buffer whatever length a bulk string announces.
  absl::StatusOr<RedisReply> SendLocked(absl::Span<const std::string> args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    redisContext* const context = context_.get();
    errno = 0;
    bool failed = redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                                         lengths.data()) != REDIS_OK;
    for (int written = 0; !failed && !written;) {
      failed = redisBufferWrite(context, &written) != REDIS_OK;
    }
    void* raw_reply = nullptr;
    size_t received = 0;
    while (!failed) {
      failed = redisGetReplyFromReader(context, &raw_reply) != REDIS_OK;
      if (failed || raw_reply != nullptr) break;
      const size_t buffered = context->reader->len;
      failed = redisBufferRead(context) != REDIS_OK;
      // A read appends to the buffer, which is empty or was emptied first.
      received += context->reader->len - std::min(buffered, context->reader->len);
      if (received > options_.max_reply_bytes) {
        context_.reset();
        return absl::ResourceExhaustedError(
            absl::StrCat("redis ", endpoint_.ToString(), ": the reply to ", args[0],
                         " is larger than the cap of ", options_.max_reply_bytes,
                         " bytes (max_reply_bytes); not read further"));
      }
    }
    const int error_number = errno;
    if (!failed) {
      const ReplyPtr reply(static_cast<redisReply*>(raw_reply));
      backoff_ = absl::ZeroDuration();
      return CopyReply(*reply);
    }
    // A read that hit SO_RCVTIMEO fails with EAGAIN.
    const bool timed_out =
        context->err == REDIS_ERR_IO && (error_number == EAGAIN || error_number == EWOULDBLOCK);
    const std::string why = context->errstr;
    context_.reset();
    if (timed_out) {
      // A slow node is treated as a down one: each miss must not wait the
      // whole timeout on it.
      const std::string message =
          absl::StrCat("redis ", endpoint_.ToString(), " did not answer ", args[0], " within ",
                       absl::FormatDuration(options_.timeout));
      BackOffLocked(message);
      return absl::DeadlineExceededError(message);
    }
    return absl::UnavailableError(absl::StrCat("redis ", endpoint_.ToString(), ": ", why));
  }

  const RedisEndpoint endpoint_;
  const RedisClient::Options& options_;  // the client's, which outlives its nodes
  absl::Mutex mu_;
  ContextPtr context_ ABSL_GUARDED_BY(mu_);
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string unreachable_ ABSL_GUARDED_BY(mu_);  // why the last connect failed
};

class RedisClientImpl final : public RedisClient {
 public:
  explicit RedisClientImpl(Options options) : options_(std::move(options)) {}

  absl::StatusOr<RedisReply> Command(absl::Span<const std::string> args, size_t key_arg) override {
    if (args.empty()) return absl::InvalidArgumentError("redis command without arguments");
    Node* standalone = nullptr;
    bool discovered = false;
    {
      absl::MutexLock lock(&mu_);
      standalone = standalone_;
      discovered = standalone_ != nullptr || cluster_;
    }
    if (!discovered) {
      ASSIGN_OR_RETURN(standalone, Discover());
    }
    if (standalone == nullptr) {
      return ClusterCommand(args, key_arg < args.size() ? KeySlot(args[key_arg]) : 0);
    }
    ASSIGN_OR_RETURN(RedisReply reply, standalone->Execute(args, /*asking=*/false));
    if (reply.type == RedisReply::Type::kError) {
      return ErrorReplyStatus(reply.str, standalone->endpoint());
    }
    return reply;
  }

  bool cluster() const override {
    absl::MutexLock lock(&mu_);
    return cluster_;
  }

 private:
  // Asks the seeds in turn for CLUSTER SLOTS: a map makes this a cluster
  // client, "cluster support disabled" a standalone one (the node
  // returned). Any other answer is the command's.
  absl::StatusOr<Node*> Discover() {
    absl::Status failure = absl::UnavailableError("no redis seed answered");
    for (const RedisEndpoint& seed : options_.seeds) {
      Node* node = NodeFor(seed);
      absl::StatusOr<RedisReply> reply = node->Execute({"CLUSTER", "SLOTS"}, /*asking=*/false);
      if (absl::IsUnavailable(reply.status()) || absl::IsDeadlineExceeded(reply.status())) {
        failure = reply.status();
        continue;
      }
      if (!reply.ok()) return reply.status();
      absl::MutexLock lock(&mu_);
      if (reply->type == RedisReply::Type::kError) {
        // An ACL user without CLUSTER permission is served as standalone
        // (a cluster would then answer MOVED, reported as an error).
        if (!absl::StrContains(reply->str, "cluster support disabled") &&
            !absl::StartsWith(reply->str, "NOPERM")) {
          return ErrorReplyStatus(reply->str, seed);
        }
        standalone_ = node;
        return node;
      }
      ASSIGN_OR_RETURN(slot_map_, RedisSlotMap::Parse(*reply, seed));
      cluster_ = true;
      last_refresh_ = absl::Now();
      return nullptr;
    }
    return failure;
  }

  absl::StatusOr<RedisReply> ClusterCommand(absl::Span<const std::string> args, int slot) {
    std::optional<RedisEndpoint> target = MasterOf(slot);
    if (!target && RefreshSlotMap(RedisEndpoint())) target = MasterOf(slot);
    if (!target) {
      return absl::UnavailableError(absl::StrCat("no redis cluster node serves slot ", slot));
    }
    bool asking = false;
    bool refreshed = false;
    for (int redirects = 0;;) {
      absl::StatusOr<RedisReply> reply = NodeFor(*target)->Execute(args, asking);
      if (!reply.ok()) {
        // After a failover another node serves the slot: a fresh map says
        // which (once per command; the map is refreshed at most so often).
        if (absl::IsUnavailable(reply.status()) && !asking && !refreshed &&
            RefreshSlotMap(*target)) {
          refreshed = true;
          std::optional<RedisEndpoint> master = MasterOf(slot);
          if (master && *master != *target) {
            target = std::move(master);
            continue;
          }
        }
        return reply.status();
      }
      if (reply->type != RedisReply::Type::kError) return reply;
      std::optional<RedisRedirect> redirect = ParseRedirect(reply->str, *target);
      if (!redirect) return ErrorReplyStatus(reply->str, *target);
      if (++redirects > kMaxRedirects) {
        return absl::UnavailableError(absl::StrCat("redis cluster: more than ", kMaxRedirects,
                                                   " redirects for slot ", slot,
                                                   "; the last: ", reply->str));
      }
      // ASK is for this command only; MOVED is the slot's new master.
      asking = redirect->kind == RedisRedirect::Kind::kAsk;
      if (!asking) {
        {
          absl::MutexLock lock(&mu_);
          slot_map_.Set(redirect->slot, redirect->endpoint);
        }
        // Slots seldom move alone (a resharding, a failover).
        RefreshSlotMap(RedisEndpoint());
      }
      target = redirect->endpoint;
    }
  }

  std::optional<RedisEndpoint> MasterOf(int slot) {
    absl::MutexLock lock(&mu_);
    const RedisEndpoint* master = slot_map_.Find(slot);
    return master ? std::optional<RedisEndpoint>(*master) : std::nullopt;
  }

  // Replaces the slot map with the first one a node (a master, then a
  // seed; not `down`) answers. False when one was fetched less than
  // kMinRefreshInterval ago, or no node answered.
  bool RefreshSlotMap(const RedisEndpoint& down) {
    std::vector<RedisEndpoint> candidates;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      if (now - last_refresh_ < kMinRefreshInterval) return false;
      last_refresh_ = now;  // claimed: concurrent callers do not pile on
      candidates = slot_map_.masters();
    }
    candidates.insert(candidates.end(), options_.seeds.begin(), options_.seeds.end());
    for (const RedisEndpoint& candidate : candidates) {
      if (candidate == down) continue;
      absl::StatusOr<RedisReply> reply =
          NodeFor(candidate)->Execute({"CLUSTER", "SLOTS"}, /*asking=*/false);
      if (!reply.ok()) continue;
      absl::StatusOr<RedisSlotMap> map = RedisSlotMap::Parse(*reply, candidate);
      if (!map.ok()) continue;
      absl::MutexLock lock(&mu_);
      slot_map_ = *std::move(map);
      return true;
    }
    return false;
  }

  // Nodes live as long as the client: pointers to them stay valid.
  Node* NodeFor(const RedisEndpoint& endpoint) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Node>& node = nodes_[endpoint.ToString()];
    if (node == nullptr) node = std::make_unique<Node>(endpoint, options_);
    return node.get();
  }

  const Options options_;
  mutable absl::Mutex mu_;
  // Set once by Discover: a standalone server's node, or cluster_.
  Node* standalone_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cluster_ ABSL_GUARDED_BY(mu_) = false;
  RedisSlotMap slot_map_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::flat_hash_map<std::string, std::unique_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);
};

// "HOST:PORT" of a redis:// URL; "[v6]:PORT" for IPv6 hosts.
absl::StatusOr<RedisEndpoint> ParseHostPort(absl::string_view url, absl::string_view part) {
  absl::string_view host_port = part;
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("redis URL \"", url, "\": ", what));
  };
  if (!absl::ConsumePrefix(&host_port, "redis://")) {
    return bad(absl::StrCat("\"", part, "\" does not start with redis:// or unix://"));
  }
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) {
    return bad(absl::StrCat("\"", part, "\" has no :PORT"));
  }
  RedisEndpoint endpoint;
  absl::string_view host = host_port.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return bad(absl::StrCat("host \"[", host, "\" has no closing ]"));
  }
  if (host.empty()) return bad(absl::StrCat("\"", part, "\" has no host"));
  endpoint.host = std::string(host);
  const absl::string_view port = host_port.substr(colon + 1);
  if (!absl::SimpleAtoi(port, &endpoint.port) || endpoint.port <= 0 || endpoint.port > 65535) {
    return bad(absl::StrCat("port \"", port, "\" is not a number in 1-65535"));
  }
  return endpoint;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  if (!unix_path.empty()) return absl::StrCat("unix://", unix_path);
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool operator==(const RedisEndpoint& a, const RedisEndpoint& b) {
  return a.host == b.host && a.port == b.port && a.unix_path == b.unix_path;
}

absl::StatusOr<std::vector<RedisEndpoint>> ParseRedisUrl(absl::string_view url) {
  if (url.empty()) return absl::InvalidArgumentError("redis URL is empty");
  if (absl::string_view path = url; absl::ConsumePrefix(&path, "unix://")) {
    if (!absl::StartsWith(path, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis URL \"", url, "\": the socket path \"", path, "\" is not absolute"));
    }
    RedisEndpoint endpoint;
    endpoint.unix_path = std::string(path);
    return std::vector<RedisEndpoint>{endpoint};
  }
  std::vector<RedisEndpoint> seeds;
  for (const absl::string_view part : absl::StrSplit(url, ',')) {
    ASSIGN_OR_RETURN(RedisEndpoint seed, ParseHostPort(url, part));
    seeds.push_back(std::move(seed));
  }
  return seeds;
}

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(Options options) {
  if (options.seeds.empty()) return absl::InvalidArgumentError("redis client without seeds");
  if (options.timeout <= absl::ZeroDuration() || options.min_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.min_backoff || options.max_reply_bytes == 0) {
    return absl::InvalidArgumentError(
        "redis client: timeout, min_backoff and max_reply_bytes must be positive, max_backoff >= "
        "min_backoff");
  }
  return std::unique_ptr<RedisClient>(new RedisClientImpl(std::move(options)));
}

}  // namespace kiln
