// //tools/bench:store — the store, the local index and the admin CLI when
// the cache is full. A cache of N entries is written straight into the
// store and the index (no compiles): copies of the metadata of a real
// compile (the traced transformer layer, so every record has the size a
// real one has), each with its own key, request alias and 1 KiB object.
// At N = 100 and N = --entries (100,000):
//   store_lookup_ns, index_hit_ns   a store Lookup of a random key, and a
//                                   local-index hit's reads (FindAlias and
//                                   Find), medians of batches, once every
//                                   entry has been read (steady state);
//   lookup_100k_vs_100              the worse of their ratios, N over 100;
//   rocksdb_get_ns                  RocksDB's own Get of a random entry
//                                   (no parse, no checks): the floor
//                                   under a store lookup;
//   hash_floor_ns                   a find in an in-memory hash table of
//                                   every entry's stored bytes and the
//                                   parse: the floor under any lookup
//                                   structure, whose ratio bounds
//                                   lookup_100k_vs_100 from below;
//   startup_ms                      kilnd from spawn to answering;
//   settle_ms                       from spawn until its background work
//                                   after a start is done (reconciling the
//                                   local index, reading its uses);
//   stats_ms, ls_ms                 `kiln stats` and `kiln ls` (every
//                                   entry, a table into a pipe), whole
//                                   processes as a user runs them, once
//                                   kilnd settled (_busy_: at once after
//                                   its start);
// and at N only:
//   gc_entries_per_s                `kiln gc --max_bytes` evicting half;
//   export_import_mb_s              `kiln export` of every remaining entry
//                                   and `kiln import` of the bundle into an
//                                   empty cache, bundle bytes over the sum
//                                   of both times.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/local_index.h"
#include "cache/rocksdb_store.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "proto/graph_file.h"
#include "rocksdb/db.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, entries, 100000, "Entries in the full cache.");
ABSL_FLAG(int, repetitions, 5, "Rounds of each timed figure.");
ABSL_FLAG(bool, lookups_only, false,
          "Time only the store's and the index's lookups (no kilnd, gc, export or import).");

namespace kiln::bench {
namespace {

constexpr char kTarget[] = "//tools/bench:store";
constexpr char kGraph[] = "tests/workloads/transformer_layer.json";
constexpr int kObjectBytes = 1024;
constexpr int kSmall = 100;

std::string KeyOf(int i) { return Sha256Hex(absl::StrCat("bench-key-", i)); }
std::string AliasOf(int i) { return Sha256Hex(absl::StrCat("bench-request-", i)); }

// Writes `n` entries like `model` into the cache directory `cache_dir`.
absl::Status Fill(const std::string& cache_dir, int n, const kiln::v1::ArtifactMetadata& model) {
  if (mkdir(cache_dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("mkdir ", cache_dir, ": ", strerror(errno)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStore> store, RocksDbStore::Open(cache_dir + "/db"));
  const LocalIndex index(cache_dir);
  constexpr int kBatch = 1000;
  for (int start = 0; start < n; start += kBatch) {
    std::vector<std::pair<kiln::v1::ArtifactMetadata, std::string>> batch;
    for (int i = start; i < std::min(n, start + kBatch); ++i) {
      std::string object = absl::StrCat("object ", i, " ");
      object.resize(kObjectBytes, '.');
      kiln::v1::ArtifactMetadata metadata = model;
      metadata.set_key(KeyOf(i));
      metadata.set_digest(Sha256Hex(object));
      metadata.set_object_bytes(kObjectBytes);
      batch.emplace_back(std::move(metadata), std::move(object));
    }
    RETURN_IF_ERROR(store->PutAll(batch));
    for (int i = start; i < std::min(n, start + kBatch); ++i) {
      RETURN_IF_ERROR(index.Publish(batch[i - start].first, /*synced=*/false));
      RETURN_IF_ERROR(index.PublishAlias(AliasOf(i), KeyOf(i)));
    }
  }
  RETURN_IF_ERROR(SyncFileSystem(cache_dir));
  // Settled, as a store that has served a while: no compaction left to run
  // while the lookups are timed.
  return store->CompactForTesting();
}

// One cache of the bench: its directory and entry count.
struct Cache {
  std::string dir;
  int n;
  std::string label;
};

// Times `lookup(c, i)` (true when it found entry i of cache c) on random
// entries of every cache, into samples[figure + "_" + label]: medians of
// batches, once every entry has been looked up (steady state, as on a host
// that has served a while: the kernel's inode and dentry caches, RocksDB's
// block cache). Batches alternate between the caches within each round,
// so that what a shared VM's neighbours do to one round's speed hits every
// cache alike (the ratios are per round); round 0 warms.
template <typename Lookup>
absl::Status TimeAlternating(const std::vector<Cache>& caches, const std::string& figure,
                             Samples& samples, Lookup&& lookup) {
  std::mt19937 random(caches.size());
  bool all_found = true;
  for (size_t c = 0; c < caches.size(); ++c) {
    for (int i = 0; i < caches[c].n; ++i) all_found &= lookup(c, i);
  }
  for (int round = 0; round <= absl::GetFlag(FLAGS_repetitions); ++round) {
    for (size_t c = 0; c < caches.size(); ++c) {
      std::uniform_int_distribution<int> pick(0, caches[c].n - 1);
      const Batch batch = TimeBatch(2000, [&] { all_found &= lookup(c, pick(random)); });
      if (round > 0) samples[figure + "_" + caches[c].label].push_back(batch.median_ns);
    }
  }
  if (!all_found) return absl::InternalError(figure + ": a lookup of a written entry missed");
  return absl::OkStatus();
}

// The index's and the store's lookups. The index is read as a client reads
// it, in a process that has no store open (a store's block cache shapes
// the process's heap); then the stores.
absl::Status TimeLookups(const std::vector<Cache>& caches, Samples& samples) {
  std::vector<LocalIndex> indexes;
  for (const Cache& cache : caches) indexes.emplace_back(cache.dir);
  RETURN_IF_ERROR(TimeAlternating(caches, "index_hit_ns", samples, [&](size_t c, int i) {
    const auto key = indexes[c].FindAlias(AliasOf(i));
    return key.ok() && key->has_value() && indexes[c].Find(**key).ok();
  }));
  std::vector<std::unique_ptr<RocksDbStore>> stores;
  for (const Cache& cache : caches) {
    ASSIGN_OR_RETURN(stores.emplace_back(), RocksDbStore::Open(cache.dir + "/db"));
  }
  return TimeAlternating(caches, "store_lookup_ns", samples, [&](size_t c, int i) {
    const auto entry = stores[c]->Lookup(KeyOf(i));
    return entry.ok() && entry->has_value();
  });
}

absl::Status FromRocksDb(const rocksdb::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(status.ToString());
}

// Two floors under a store lookup, on each cache's entries: RocksDB's own
// Get with the options the store gives its entries (the store adds the
// parse of the metadata and its checks), and a lookup in an in-memory hash
// table of every entry's stored bytes followed by the same parse (what any
// structure that finds a record in one probe would cost: its growth with N
// is the floor under lookup_100k_vs_100).
absl::Status TimeFloors(const std::vector<Cache>& caches, Samples& samples) {
  const rocksdb::ColumnFamilyOptions entry_options = RocksDbStore::LookupFamilyOptions({});
  struct Opened {
    std::unique_ptr<rocksdb::DB> db;
    std::vector<rocksdb::ColumnFamilyHandle*> families;
    rocksdb::ColumnFamilyHandle* entries = nullptr;
  };
  std::vector<Opened> opened(caches.size());
  absl::Cleanup close = [&] {
    for (Opened& one : opened) {
      for (auto* family : one.families) one.db->DestroyColumnFamilyHandle(family);
    }
  };
  for (size_t c = 0; c < caches.size(); ++c) {
    const std::string path = caches[c].dir + "/db";
    std::vector<std::string> names;
    RETURN_IF_ERROR(FromRocksDb(rocksdb::DB::ListColumnFamilies({}, path, &names)));
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) {
      descriptors.emplace_back(name,
                               name == "entries" ? entry_options : rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DB* db = nullptr;
    RETURN_IF_ERROR(
        FromRocksDb(rocksdb::DB::OpenForReadOnly({}, path, descriptors, &opened[c].families, &db)));
    opened[c].db.reset(db);
    for (size_t f = 0; f < names.size(); ++f) {
      if (names[f] == "entries") opened[c].entries = opened[c].families[f];
    }
    if (opened[c].entries == nullptr) return absl::InternalError(path + " has no entries");
  }
  RETURN_IF_ERROR(TimeAlternating(caches, "rocksdb_get_ns", samples, [&](size_t c, int i) {
    rocksdb::PinnableSlice value;
    return opened[c].db->Get({}, opened[c].entries, KeyOf(i), &value).ok();
  }));
  std::vector<absl::flat_hash_map<std::string, std::string>> tables(caches.size());
  for (size_t c = 0; c < caches.size(); ++c) {
    const std::unique_ptr<rocksdb::Iterator> entry(
        opened[c].db->NewIterator({}, opened[c].entries));
    for (entry->SeekToFirst(); entry->Valid(); entry->Next()) {
      tables[c].emplace(entry->key().ToString(), entry->value().ToString());
    }
    RETURN_IF_ERROR(FromRocksDb(entry->status()));
  }
  return TimeAlternating(caches, "hash_floor_ns", samples, [&](size_t c, int i) {
    const auto found = tables[c].find(KeyOf(i));
    kiln::v1::ArtifactMetadata metadata;
    return found != tables[c].end() && metadata.ParseFromString(found->second);
  });
}

// Runs the kiln CLI against `daemon`; its wall time in ms.
absl::StatusOr<double> TimeKiln(const std::string& kiln, const Daemon& daemon,
                                std::vector<std::string> args) {
  args.insert(args.begin(), {kiln, "--socket=" + daemon.socket_path(), "--start=false"});
  const int64_t start = NowNs();
  ASSIGN_OR_RETURN(const ProcessResult result, RunProcess(args, absl::Minutes(10)));
  const double ms = MsSince(start);
  if (result.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(args, " "), " failed: ", result.output.substr(0, 2000)));
  }
  return ms;
}

// Until `pid` has used under 20 ms of CPU in half a second (at most 5 min).
absl::Status WaitUntilIdle(pid_t pid) {
  ASSIGN_OR_RETURN(int64_t ticks, CpuTicks(pid));
  for (int i = 0; i < 600; ++i) {
    absl::SleepFor(absl::Milliseconds(500));
    ASSIGN_OR_RETURN(const int64_t now, CpuTicks(pid));
    if (now - ticks < 2) return absl::OkStatus();
    ticks = now;
  }
  return absl::DeadlineExceededError("kilnd was still busy 5 minutes after its start");
}

// A kilnd on the cache `cache_dir`, its socket and log in a directory of
// their own under `root`.
absl::StatusOr<std::unique_ptr<Daemon>> StartOn(const KilndBinary& kilnd, const std::string& root,
                                                const std::string& cache_dir) {
  static int starts = 0;
  return Daemon::Start(kilnd, absl::StrCat(root, "/run", ++starts), "worker", cache_dir);
}

// startup, stats and ls on a cache of `n` entries.
absl::Status TimeDaemon(const KilndBinary& kilnd, const std::string& kiln, const std::string& root,
                        const std::string& label, Samples& samples) {
  // The first start of a cache probes the toolchain (then remembered), as
  // kilnd's first start on any cache does: not what is measured.
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> first, StartOn(kilnd, root, root + "/cache"));
  RETURN_IF_ERROR(first->Stop());
  for (int round = 0; round < absl::GetFlag(FLAGS_repetitions); ++round) {
    const int64_t start = NowNs();
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, StartOn(kilnd, root, root + "/cache"));
    samples["startup_ms_" + label].push_back(MsSince(start));
    // kilnd's work after a start (reconciling the local index, its uses)
    // runs in the background; stats and ls are timed both during it, as a
    // user running them at once meets them, and after it.
    ASSIGN_OR_RETURN(const double stats_busy, TimeKiln(kiln, *daemon, {"stats"}));
    samples["stats_busy_ms_" + label].push_back(stats_busy);
    ASSIGN_OR_RETURN(const double ls_busy, TimeKiln(kiln, *daemon, {"ls"}));
    samples["ls_busy_ms_" + label].push_back(ls_busy);
    RETURN_IF_ERROR(WaitUntilIdle(daemon->pid()));
    samples["settle_ms_" + label].push_back(MsSince(start));
    ASSIGN_OR_RETURN(const double stats, TimeKiln(kiln, *daemon, {"stats"}));
    samples["stats_ms_" + label].push_back(stats);
    ASSIGN_OR_RETURN(const double ls, TimeKiln(kiln, *daemon, {"ls"}));
    samples["ls_ms_" + label].push_back(ls);
    RETURN_IF_ERROR(daemon->Stop());
  }
  return absl::OkStatus();
}

// The metadata of a real compile, to copy.
absl::StatusOr<kiln::v1::ArtifactMetadata> ModelMetadata(const KilndBinary& kilnd) {
  ASSIGN_OR_RETURN(const std::string graph_path, Runfile(kGraph, kTarget));
  ASSIGN_OR_RETURN(ScratchDirectory scratch, ScratchDirectory::Make());
  ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, Daemon::Start(kilnd, scratch.path(), "worker"));
  kiln::v1::CompileRequest request;
  ASSIGN_OR_RETURN(*request.mutable_graph(), ReadGraphFile(graph_path));
  ASSIGN_OR_RETURN(const kiln::v1::CompileResponse response, daemon->client().Compile(request));
  RETURN_IF_ERROR(daemon->Stop());
  return response.artifact();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(const KilndBinary kilnd, FindKilnd(kTarget));
  ASSIGN_OR_RETURN(const std::string kiln, Runfile("tools/kiln/kiln", kTarget));
  ASSIGN_OR_RETURN(const kiln::v1::ArtifactMetadata model, ModelMetadata(kilnd));
  const int full = absl::GetFlag(FLAGS_entries);
  const bool lookups_only = absl::GetFlag(FLAGS_lookups_only);
  Samples samples;
  ASSIGN_OR_RETURN(ScratchDirectory scratch, ScratchDirectory::Make());
  std::vector<Cache> caches;
  for (const auto& [n, label] : {std::pair<int, std::string>{kSmall, "100"}, {full, "full"}}) {
    const std::string root = absl::StrCat(scratch.path(), "/", label);
    if (mkdir(root.c_str(), 0700) != 0) return absl::InternalError("mkdir " + root);
    const int64_t start = NowNs();
    RETURN_IF_ERROR(Fill(root + "/cache", n, model));
    fprintf(stderr, "store: wrote %d entries in %.1f s\n", n, MsSince(start) / 1e3);
    caches.push_back({root + "/cache", n, label});
  }
  RETURN_IF_ERROR(TimeLookups(caches, samples));
  RETURN_IF_ERROR(TimeFloors(caches, samples));
  if (!lookups_only) {
    for (const Cache& cache : caches) {
      RETURN_IF_ERROR(TimeDaemon(kilnd, kiln, Dirname(cache.dir), cache.label, samples));
    }
  }
  for (const char* figure :
       {"store_lookup_ns", "index_hit_ns", "rocksdb_get_ns", "hash_floor_ns"}) {
    const std::string name = figure;
    const std::vector<double>& small = samples[name + "_100"];
    const std::vector<double>& large = samples[name + "_full"];
    for (size_t i = 0; i < small.size(); ++i) {
      samples[name + "_ratio"].push_back(large[i] / small[i]);
    }
  }
  for (size_t i = 0; i < samples["store_lookup_ns_ratio"].size(); ++i) {
    samples["lookup_100k_vs_100"].push_back(
        std::max(samples["store_lookup_ns_ratio"][i], samples["index_hit_ns_ratio"][i]));
  }

  // gc, export and import at N.
  if (!lookups_only) {
    const std::string root = absl::StrCat(scratch.path(), "/full");
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, StartOn(kilnd, root, root + "/cache"));
    const int64_t keep_bytes = int64_t{full / 2} * kObjectBytes;
    ASSIGN_OR_RETURN(const double gc_ms,
                     TimeKiln(kiln, *daemon, {"gc", absl::StrCat("--max_bytes=", keep_bytes)}));
    ASSIGN_OR_RETURN(const kiln::v1::StatsResponse after, daemon->client().Stats());
    if (after.entries() * 2 > full || after.entries() * 3 < full) {
      return absl::InternalError(
          absl::StrCat("kiln gc kept ", after.entries(), " entries of ", full, ", not half"));
    }
    samples["gc_entries_per_s"].push_back((full - after.entries()) / (gc_ms / 1e3));
    const std::string bundle = scratch.path() + "/cache.kiln";
    ASSIGN_OR_RETURN(const double export_ms, TimeKiln(kiln, *daemon, {"export", "-o", bundle}));
    RETURN_IF_ERROR(daemon->Stop());
    const std::string empty = absl::StrCat(scratch.path(), "/empty");
    if (mkdir(empty.c_str(), 0700) != 0) return absl::InternalError("mkdir " + empty);
    ASSIGN_OR_RETURN(std::unique_ptr<Daemon> fresh, StartOn(kilnd, empty, empty + "/cache"));
    ASSIGN_OR_RETURN(const double import_ms, TimeKiln(kiln, *fresh, {"import", bundle}));
    ASSIGN_OR_RETURN(const kiln::v1::StatsResponse imported, fresh->client().Stats());
    if (imported.entries() != after.entries()) {
      return absl::InternalError(
          absl::StrCat("imported ", imported.entries(), " entries of ", after.entries()));
    }
    struct stat info;
    if (stat(bundle.c_str(), &info) != 0) return absl::InternalError("no bundle at " + bundle);
    samples["bundle_mb"].push_back(info.st_size / 1e6);
    samples["export_ms"].push_back(export_ms);
    samples["import_ms"].push_back(import_ms);
    samples["export_import_mb_s"].push_back(info.st_size / 1e6 / ((export_ms + import_ms) / 1e3));
  }

  printf("Store and index at %d entries vs %d (%d rounds)\n", full, kSmall,
         absl::GetFlag(FLAGS_repetitions));
  const std::vector<std::string> keys = {"lookup_100k_vs_100",
                                         "store_lookup_ns_100",
                                         "store_lookup_ns_full",
                                         "store_lookup_ns_ratio",
                                         "index_hit_ns_100",
                                         "index_hit_ns_full",
                                         "index_hit_ns_ratio",
                                         "rocksdb_get_ns_100",
                                         "rocksdb_get_ns_full",
                                         "rocksdb_get_ns_ratio",
                                         "hash_floor_ns_100",
                                         "hash_floor_ns_full",
                                         "hash_floor_ns_ratio",
                                         "startup_ms_100",
                                         "startup_ms_full",
                                         "settle_ms_100",
                                         "settle_ms_full",
                                         "stats_busy_ms_100",
                                         "stats_busy_ms_full",
                                         "stats_ms_100",
                                         "stats_ms_full",
                                         "ls_busy_ms_100",
                                         "ls_busy_ms_full",
                                         "ls_ms_100",
                                         "ls_ms_full",
                                         "gc_entries_per_s",
                                         "bundle_mb",
                                         "export_ms",
                                         "import_ms",
                                         "export_import_mb_s"};
  Samples named = samples;  // the names for the figures at N
  named["ls_100k_ms"] = samples["ls_ms_full"];
  named["stats_100k_ms"] = samples["stats_ms_full"];
  named["startup_100k_ms"] = samples["startup_ms_full"];
  std::vector<std::string> json_keys = keys;
  json_keys.insert(json_keys.end(), {"ls_100k_ms", "stats_100k_ms", "startup_100k_ms"});
  PrintFigures(named, keys,
               {{"entries", absl::StrCat(full)},
                {"metadata_bytes", absl::StrCat(model.ByteSizeLong())},
                {"cpu", CpuModel()},
                {"load", LoadAverage()}},
               absl::GetFlag(FLAGS_json), json_keys);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times the store, the local index and the kiln CLI at 100 entries and when full.");
  absl::ParseCommandLine(argc, argv);
  return kiln::bench::ExitStatus("store", kiln::bench::Run());
}
