// Another local user plants sockets, directories, index records and objects
// where a Kiln client looks: none of it is connected to or loaded.
//
// Needs root (to act as the other user and to give files away) outside
// Bazel's sandbox, whose user namespace maps no other uid: the target is
// tagged no-sandbox, and scripts/test.sh creates the user `kiln-stranger`
// when it runs as root. Elsewhere each test says why it did not run.
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/key.h"
#include "cache/local_index.h"
#include "cache/request_digest.h"
#include "cache/request_key.h"
#include "client/client.h"
#include "codegen/guards.h"
#include "codegen/prepare.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph_file.h"
#include "tests/daemon_fixture.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr char kStrangerName[] = "kiln-stranger";

// A process running as another uid that listens on a Unix socket and counts
// the connections it accepts.
class StrangerListener {
 public:
  // Forks a child that becomes `uid`, creates `directory` mode 0777 (when
  // not empty), binds `socket_path` and listens.
  StrangerListener(uid_t uid, const std::string& directory, const std::string& socket_path) {
    int ready[2], stop[2], count[2];
    if (pipe(ready) != 0 || pipe(stop) != 0 || pipe(count) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {  // only system calls from here on
      close(ready[0]);
      close(stop[1]);
      close(count[0]);
      if (setgid(uid) != 0 || setuid(uid) != 0) _exit(2);
      umask(0);
      if (!directory.empty() && mkdir(directory.c_str(), 0777) != 0) _exit(3);
      const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un address = {};
      address.sun_family = AF_UNIX;
      strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
      if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
          listen(listener, 16) != 0) {
        _exit(4);
      }
      (void)!write(ready[1], "r", 1);
      int accepted = 0;
      pollfd fds[2] = {{listener, POLLIN, 0}, {stop[0], POLLIN, 0}};
      while (poll(fds, 2, 30000) > 0 && (fds[1].revents & (POLLIN | POLLHUP)) == 0) {
        if (fds[0].revents & POLLIN) {
          if (accept(listener, nullptr, nullptr) >= 0) ++accepted;
        }
      }
      // Connections still in the backlog count too.
      fcntl(listener, F_SETFL, O_NONBLOCK);
      while (accept(listener, nullptr, nullptr) >= 0) ++accepted;
      (void)!write(count[1], &accepted, sizeof(accepted));
      _exit(0);
    }
    close(ready[1]);
    close(stop[0]);
    close(count[1]);
    stop_fd_ = stop[1];
    count_fd_ = count[0];
    char byte;
    ready_ = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
  }
  ~StrangerListener() { Stop(); }

  bool ready() const { return ready_; }

  // Stops the child; the number of connections it accepted.
  int Stop() {
    if (pid_ <= 0) return accepted_;
    close(stop_fd_);
    if (read(count_fd_, &accepted_, sizeof(accepted_)) != sizeof(accepted_)) accepted_ = -1;
    close(count_fd_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return accepted_;
  }

 private:
  pid_t pid_ = -1;
  int stop_fd_ = -1, count_fd_ = -1, accepted_ = 0;
  bool ready_ = false;
};

class HostileUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
    const passwd* stranger = getpwnam(kStrangerName);
    if (stranger == nullptr) {
      GTEST_SKIP() << "no user " << kStrangerName
                   << ": scripts/test.sh creates it when run as root";
    }
    stranger_ = stranger->pw_uid;
    // Stands for /tmp: sticky and open to all, so the stranger can plant.
    root_ = *MakeTempDirectory("/tmp/kiln-hostileXXXXXX");
    ASSERT_EQ(chmod(root_.c_str(), 01777), 0);
  }
  void TearDown() override {
    if (!root_.empty()) RemoveRecursively(root_).IgnoreError();
  }

  ClientOptions Options(const std::string& socket_path, const std::string& cache_dir) const {
    ClientOptions options;
    options.socket_path = socket_path;
    options.cache_dir = cache_dir;
    options.daemon_path = kKilndPath;
    options.start_timeout = absl::Seconds(5);
    return options;
  }

  uid_t stranger_ = 0;
  std::string root_;
};

TEST_F(HostileUserTest, APlantedSocketDirectoryGetsNoConnection) {
  // As /tmp/kiln-$UID, made first by someone else, with their socket in it.
  const std::string planted = root_ + "/kiln-0";
  StrangerListener listener(stranger_, planted, planted + "/kilnd.sock");
  ASSERT_TRUE(listener.ready());

  for (bool auto_start : {false, true}) {
    ClientOptions options = Options(planted + "/kilnd.sock", root_ + "/cache");
    options.auto_start = auto_start;
    auto client = Client::Connect(options);
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(client.status().message(),
                HasSubstr(absl::StrCat("refusing socket directory ", planted, " is owned by uid ",
                                       stranger_)));
  }
  EXPECT_EQ(listener.Stop(), 0) << "the client connected to the planted socket";
}

TEST_F(HostileUserTest, ADaemonRunningAsAnotherUserIsRefused) {
  // The socket sits in a directory of ours (moved there by root), but the
  // process behind it is the stranger's.
  const std::string theirs = root_ + "/theirs";
  StrangerListener listener(stranger_, theirs, theirs + "/s.sock");
  ASSERT_TRUE(listener.ready());
  const std::string ours = root_ + "/ours";
  ASSERT_EQ(mkdir(ours.c_str(), 0700), 0);
  ASSERT_EQ(rename((theirs + "/s.sock").c_str(), (ours + "/kilnd.sock").c_str()), 0);

  ClientOptions options = Options(ours + "/kilnd.sock", root_ + "/cache");
  options.auto_start = false;
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("refusing kilnd on ", ours, "/kilnd.sock: it runs as uid ",
                                     stranger_)));
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("set KILN_DAEMON_UID=", stranger_)));
}

// A shared object whose constructor leaves `marker` behind: proof that it
// was loaded.
std::string BuildPlantedObject(const std::string& dir, const std::string& marker) {
  const std::string source = dir + "/planted.c";
  EXPECT_TRUE(
      WriteFileAtomically(source,
                          absl::StrCat("#include <fcntl.h>\n"
                                       "__attribute__((constructor)) static void run(void) {"
                                       " open(\"",
                                       marker, "\", O_CREAT | O_WRONLY, 0600); }\n"),
                          0600)
          .ok());
  const std::string object = dir + "/planted.so";
  auto built = RunProcess({"/usr/bin/clang-19", "-shared", "-fPIC", "-o", object, source},
                          absl::Seconds(60));
  EXPECT_TRUE(built.ok() && built->exit_code == 0) << (built.ok() ? built->output : "");
  return *ReadFile(object);
}

// Everything FindLocal reads, for `graph`, pointing at `object`.
void PlantCache(const std::string& cache_dir, const kiln::v1::Graph& graph,
                const std::string& object) {
  ASSERT_TRUE(MakeDirectories(cache_dir, 0700).ok());
  const LocalIndex index(cache_dir);
  kiln::v1::CacheDescriptor descriptor;
  descriptor.set_protocol_version(kProtocolVersion);
  descriptor.set_abi_version(KILN_ABI_VERSION);
  descriptor.set_machine_id(MachineId());
  kiln::v1::TargetToolchainDigest* planted = descriptor.add_toolchain_digests();
  planted->set_target(kiln::v1::TARGET_NATIVE);
  planted->set_digest(std::string(64, 'a'));
  SetDescriptorToolchainDigests({{kiln::v1::TARGET_NATIVE, planted->digest()}}, descriptor);
  ASSERT_TRUE(index.WriteDescriptor(descriptor).ok());

  auto prepared = PrepareGraph(graph);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  auto guards = ResolveGuards(*prepared, kiln::v1::Guards());
  ASSERT_TRUE(guards.ok()) << guards.status();
  CodegenInputs inputs;
  inputs.graph = *std::move(prepared);
  inputs.guards = *std::move(guards);
  inputs.toolchain_digest = planted->digest();
  kiln::v1::ArtifactMetadata metadata;
  metadata.set_key(ComputeCacheKey(inputs).key);
  metadata.set_digest(Sha256Hex(object));
  ASSERT_TRUE(index.Publish(metadata).ok());
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = graph;
  auto request_digest = RequestDigest(request, DescriptorRequestSalts(descriptor));
  ASSERT_TRUE(request_digest.ok()) << request_digest.status();
  ASSERT_TRUE(index.PublishAlias(*request_digest, metadata.key()).ok());
  const std::string path = cache_dir + "/objects/" + metadata.digest().substr(0, 2);
  ASSERT_TRUE(MakeDirectories(path, 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(path + "/" + metadata.digest() + ".so", object, 0444).ok());
}

void ChownTree(const std::string& path, uid_t uid) {
  auto result =
      RunProcess({"/bin/chown", "-R", absl::StrCat(uid, ":", uid), path}, absl::Seconds(30));
  ASSERT_TRUE(result.ok() && result->exit_code == 0);
}

TEST_F(HostileUserTest, APlantedCacheIsNeverLoaded) {
  const std::string marker = root_ + "/loaded";
  const std::string object = BuildPlantedObject(root_, marker);
  const std::string cache_dir = root_ + "/kiln-cache-0";  // as with HOME unset
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok());
  PlantCache(cache_dir, *graph, object);
  kiln::v1::CompileRequest request;
  *request.mutable_graph() = *graph;
  const std::string no_daemon = root_ + "/run/kilnd.sock";

  {  // Ours, the plant is a local hit, and loading it runs its code.
    auto client = Client::Open(Options(no_daemon, cache_dir));
    auto found = client->FindLocal(request);
    ASSERT_TRUE(found.has_value()) << "the plant must be a hit for this test to mean anything";
    auto loaded = client->OpenArtifact(*found, Client::Source::kLocalIndex);
    EXPECT_THAT(loaded.status().message(), HasSubstr("does not export kiln_info"));
    ASSERT_EQ(access(marker.c_str(), F_OK), 0);
    unlink(marker.c_str());
  }
  // The stranger's: not read, not loaded.
  ChownTree(cache_dir, stranger_);
  auto client = Client::Open(Options(no_daemon, cache_dir));
  EXPECT_FALSE(client->FindLocal(request).has_value());
  kiln::v1::CompileResponse response;
  response.mutable_artifact()->set_digest(Sha256Hex(object));
  auto loaded = client->OpenArtifact(response, Client::Source::kLocalIndex);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat("refusing cache directory ", cache_dir, " is owned by uid ",
                                     stranger_)));
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the planted object's code ran";

  // Ours again, but left open to everyone: as bad.
  ChownTree(cache_dir, 0);
  ASSERT_EQ(chmod(cache_dir.c_str(), 0777), 0);
  auto open_client = Client::Open(Options(no_daemon, cache_dir));
  EXPECT_FALSE(open_client->FindLocal(request).has_value());
  EXPECT_THAT(open_client->OpenArtifact(response, Client::Source::kLocalIndex).status().message(),
              HasSubstr("is writable by other users (mode 0777)"));
  EXPECT_NE(access(marker.c_str(), F_OK), 0);
}

TEST_F(HostileUserTest, AnObjectPlantedInOurCacheByAnotherUserIsRefused) {
  // A trusted directory holding a file someone else owns (root gave it
  // away, as a careless copy might): the walk to the object checks it.
  const std::string marker = root_ + "/loaded";
  const std::string object = BuildPlantedObject(root_, marker);
  const std::string cache_dir = root_ + "/cache";
  auto graph = ReadGraphFile("examples/f.json");
  ASSERT_TRUE(graph.ok());
  PlantCache(cache_dir, *graph, object);
  const std::string digest = Sha256Hex(object);
  const std::string path = cache_dir + "/objects/" + digest.substr(0, 2) + "/" + digest + ".so";
  ASSERT_EQ(chown(path.c_str(), stranger_, stranger_), 0);
  auto client = Client::Open(Options(root_ + "/run/kilnd.sock", cache_dir));
  kiln::v1::CompileResponse response;
  response.mutable_artifact()->set_digest(digest);
  EXPECT_THAT(client->OpenArtifact(response, Client::Source::kLocalIndex).status().message(),
              HasSubstr(absl::StrCat("refusing file ", path, " is owned by uid ", stranger_)));
  EXPECT_NE(access(marker.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace kiln
