#include "codegen/compile/toolchain.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace kiln {
namespace {

constexpr absl::Duration kProbeTimeout = absl::Seconds(30);

// The quoted tokens of a `clang -###` command line.
std::vector<std::string> QuotedTokens(const std::string& line) {
  std::vector<std::string> tokens;
  for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    if (token.size() >= 2 && token.front() == '"' && token.back() == '"') {
      tokens.emplace_back(token.substr(1, token.size() - 2));
    }
  }
  return tokens;
}

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

// "path=build-id" of the driver binary and the libraries that hold the
// compiler and linker ("path=?" for one without a build-id).
std::vector<std::string> BuildIds(const std::string& clang) {
  const std::string binary = RealPath(clang);
  const std::string lib = Dirname(Dirname(binary)) + "/lib";
  std::vector<std::string> ids;
  for (const std::string& path :
       {binary, RealPath(lib + "/libclang-cpp.so.19.1"), RealPath(lib + "/libLLVM.so.19.1"),
        RealPath(Dirname(binary) + "/lld")}) {
    auto id = ElfBuildId(path);
    ids.push_back(id.ok() ? absl::StrCat(path, "=", *id) : absl::StrCat(path, "=?"));
  }
  return ids;
}

// What DetectToolchains' answers depend on, hashed: see
// DetectToolchainsRemembered.
std::string ProbeFingerprint(const std::string& clang) {
  std::string facts = absl::StrCat("kiln toolchain memo 2\n", clang, "\n");
  for (const std::string& id : BuildIds(clang)) absl::StrAppend(&facts, id, "\n");
  for (kiln::v1::Target target : AllTargets()) {
    absl::StrAppend(&facts, TargetName(target), ": ", absl::StrJoin(CodegenFlags(target), " "),
                    "\n");
  }
  // The first processor's identity and features (-march=native reads them).
  const absl::StatusOr<std::string> cpuinfo = ReadFile("/proc/cpuinfo");
  for (absl::string_view line : absl::StrSplit(cpuinfo.ok() ? *cpuinfo : "", '\n')) {
    if (line.empty()) break;
    for (const char* field :
         {"vendor_id", "cpu family", "model", "model name", "stepping", "microcode", "flags"}) {
      if (absl::StartsWith(line, field)) absl::StrAppend(&facts, line, "\n");
    }
  }
  return Sha256Hex(facts);
}

}  // namespace

std::vector<std::string> CodegenFlags(kiln::v1::Target target) {
  // No full unrolling of constant-trip loops: post-RA scheduling of the
  // unrolled code makes some graphs' compiles tens of times slower. The
  // vectorizer still interleaves.
  std::vector<std::string> flags = {"-std=c++17", "-O3", "-fno-unroll-loops"};
  // In this place for native: its flags (and so its keys) are what they were
  // before targets existed.
  for (std::string& flag : TargetFlags(target)) flags.push_back(std::move(flag));
  for (const char* flag : {"-fPIC", "-fvisibility=hidden", "-fno-math-errno",
                           // Artifacts link nothing: without this, clang turns copy loops
                           // into calls to the host's memcpy.
                           "-ffreestanding", "-ffp-contract=off", "-fno-exceptions", "-fno-rtti",
                           "-fno-asynchronous-unwind-tables", "-nostdlib", "-shared",
                           "-fuse-ld=lld", "-Wno-unused-command-line-argument"}) {
    flags.push_back(flag);
  }
  return flags;
}

absl::StatusOr<std::string> ElfBuildId(const std::string& path) {
  // Reads only the headers and the note segments: libLLVM is 130 MB.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  auto read_at = [fd](void* out, size_t size, off_t offset) {
    return pread(fd, out, size, offset) == static_cast<ssize_t>(size);
  };
  absl::StatusOr<std::string> result =
      absl::NotFoundError(absl::StrCat(path, " has no GNU build-id note"));
  Elf64_Ehdr header;
  if (!read_at(&header, sizeof(header), 0) || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64) {
    result = absl::InvalidArgumentError(absl::StrCat(path, " is not a 64-bit ELF file"));
  } else {
    for (int i = 0; i < header.e_phnum && !result.ok(); ++i) {
      Elf64_Phdr segment;
      if (!read_at(&segment, sizeof(segment), header.e_phoff + i * header.e_phentsize)) break;
      if (segment.p_type != PT_NOTE || segment.p_filesz > (1 << 20)) continue;
      std::string notes(segment.p_filesz, '\0');
      if (!read_at(notes.data(), notes.size(), segment.p_offset)) continue;
      size_t offset = 0;
      while (offset + sizeof(Elf64_Nhdr) <= notes.size()) {
        Elf64_Nhdr note;
        memcpy(&note, notes.data() + offset, sizeof(note));
        const size_t name_at = offset + sizeof(note);
        const size_t desc_at = name_at + ((note.n_namesz + 3) & ~size_t{3});
        if (desc_at + note.n_descsz > notes.size()) break;
        if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
            memcmp(notes.data() + name_at, "GNU", 4) == 0) {
          result = absl::BytesToHexString(absl::string_view(notes.data() + desc_at, note.n_descsz));
          break;
        }
        offset = desc_at + ((note.n_descsz + 3) & ~size_t{3});
      }
    }
  }
  close(fd);
  return result;
}

absl::StatusOr<kiln::v1::Toolchain> DetectToolchain(const std::string& clang,
                                                    kiln::v1::Target target) {
  if (!IsKnownTarget(target)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown ", TargetName(target)));
  }
  const std::vector<std::string> flags = CodegenFlags(target);
  kiln::v1::Toolchain toolchain;
  ASSIGN_OR_RETURN(const ProcessResult version, RunProcess({clang, "--version"}, kProbeTimeout));
  if (version.exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(clang, " --version failed; install clang-19 (scripts/install-deps.sh)"));
  }
  toolchain.set_compiler_version(std::string(absl::StripAsciiWhitespace(
      std::vector<std::string>(absl::StrSplit(version.output, '\n'))[0])));

  std::vector<std::string> probe = {clang};
  for (const std::string& flag : flags) probe.push_back(flag);
  for (const char* arg : {"-###", "-c", "-x", "c++", "/dev/null"}) probe.push_back(arg);
  ASSIGN_OR_RETURN(const ProcessResult driver, RunProcess(probe, kProbeTimeout));
  std::vector<std::string> features;
  for (absl::string_view line : absl::StrSplit(driver.output, '\n')) {
    const std::vector<std::string> tokens = QuotedTokens(std::string(line));
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      if (tokens[i] == "-triple") toolchain.set_target_triple(tokens[i + 1]);
      if (tokens[i] == "-target-cpu") toolchain.set_cpu(tokens[i + 1]);
      if (tokens[i] == "-target-feature") features.push_back(tokens[i + 1]);
    }
  }
  if (toolchain.target_triple().empty() || toolchain.cpu().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the target from `", clang, " -###`: ", driver.output));
  }
  std::sort(features.begin(), features.end());
  features.erase(std::unique(features.begin(), features.end()), features.end());
  toolchain.set_cpu_feature_list(absl::StrJoin(features, ","));
  for (const std::string& flag : flags) toolchain.add_flags(flag);

  for (std::string& id : BuildIds(clang)) toolchain.add_build_ids(std::move(id));
  return toolchain;
}

absl::StatusOr<TargetToolchains> DetectToolchains(const std::string& clang) {
  const std::vector<kiln::v1::Target>& targets = AllTargets();
  std::vector<absl::StatusOr<kiln::v1::Toolchain>> detected(targets.size(),
                                                            absl::UnknownError("not detected"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] { detected[i] = DetectToolchain(clang, targets[i]); });
  }
  for (std::thread& thread : threads) thread.join();
  TargetToolchains toolchains;
  for (size_t i = 0; i < targets.size(); ++i) {
    RETURN_IF_ERROR(detected[i].status());
    toolchains[targets[i]] = *std::move(detected[i]);
  }
  return toolchains;
}

absl::StatusOr<TargetToolchains> DetectToolchainsRemembered(const std::string& memo_path,
                                                            const std::string& clang) {
  const std::string fingerprint = ProbeFingerprint(clang);
  kiln::v1::ToolchainMemo memo;
  if (absl::StatusOr<std::string> bytes = ReadFile(memo_path);
      bytes.ok() && memo.ParseFromString(*bytes) && memo.fingerprint() == fingerprint) {
    TargetToolchains toolchains;
    for (const auto& entry : memo.toolchains()) toolchains[entry.target()] = entry.toolchain();
    if (toolchains.size() == AllTargets().size()) return toolchains;
  }
  ASSIGN_OR_RETURN(TargetToolchains toolchains, DetectToolchains(clang));
  memo.Clear();
  memo.set_fingerprint(fingerprint);
  for (const auto& [target, toolchain] : toolchains) {
    kiln::v1::ToolchainMemo::Entry& entry = *memo.add_toolchains();
    entry.set_target(target);
    *entry.mutable_toolchain() = toolchain;
  }
  if (absl::Status written = WriteFileAtomically(memo_path, memo.SerializeAsString(), 0600);
      !written.ok()) {
    KILN_LOG(WARNING) << "cannot remember the toolchain probes: " << written;
  }
  return toolchains;
}

}  // namespace kiln
