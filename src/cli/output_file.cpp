// Atomic output files: write to a temporary name, fsync, rename on success; temporaries
// removed by a signal handler when the process is interrupted.
#include "cli/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "cli/value_list.hpp"

namespace streamspark::cli {

namespace fs = std::filesystem;

namespace {

// The temporary files alive now, in a fixed table the signal handler can read without
// allocating or locking: a slot's path is written before the slot is published (state live)
// and the handler only unlinks live slots (unlink is async-signal-safe).
constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096 + 64;  // PATH_MAX plus the ".tmp.<pid>.<n>" suffix
enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };
struct TempSlot {
  std::atomic<int> state{kFree};
  char path[kPathBytes] = {};
};
std::array<TempSlot, kSlots> g_slots;

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int sig) {
  const int saved_errno = errno;
  for (TempSlot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) == kLive) ::unlink(s.path);
  }
  errno = saved_errno;
  // SA_RESETHAND restored the default action; the signal is blocked while this handler runs,
  // so it is delivered, and ends the process as it would have, once the handler returns.
  ::raise(sig);
}

// Off in an embedding whose process handles these signals itself (the Python interpreter
// turns SIGINT into KeyboardInterrupt): its handlers are left in place.
std::atomic<bool> g_signal_cleanup{true};

// Installs the handler for each signal whose disposition is neither "ignore" (a process
// started with SIGINT ignored, as background jobs are, keeps ignoring it) nor already this
// handler; done for each temporary file, so that a handler installed since does not leave it
// unprotected.
void install_handler() {
  if (!g_signal_cleanup.load(std::memory_order_relaxed)) return;
  for (int sig : kSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN ||
        old.sa_handler == remove_temporaries_and_reraise) {
      continue;
    }
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_reraise;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

// Takes a free slot for `path`; -1 when the path is too long or all slots are taken (then
// the caller refuses to write rather than leave a temporary file a signal would not remove).
int claim_slot(const std::string& path) {
  if (path.size() >= kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    TempSlot& s = g_slots[static_cast<size_t>(i)];
    if (s.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(kLive, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void release_slot(int slot) {
  if (slot >= 0) g_slots[static_cast<size_t>(slot)].state.store(kFree, std::memory_order_release);
}

// The file a write to `path` replaces: `path` itself, or the final target of a chain of
// symlinks (relative targets resolved against the link's folder), which may not exist yet.
std::string resolve_symlinks(const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {  // as the kernel's ELOOP limit
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw std::runtime_error("cannot read the symlink " + p.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw std::runtime_error("cannot write " + path + ": too many levels of symbolic links");
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

thread_local OutputCapture* t_capture = nullptr;

}  // namespace

void leave_signal_handlers_alone() {
  g_signal_cleanup.store(false, std::memory_order_relaxed);
}

ScopedOutputCapture::ScopedOutputCapture(OutputCapture* capture) : previous_(t_capture) {
  t_capture = capture;
}

ScopedOutputCapture::~ScopedOutputCapture() {
  t_capture = previous_;
}

void print_message(const std::string& line) {
  if (t_capture && t_capture->message) {
    t_capture->message(line);
  } else {
    fmt::print(stderr, "{}\n", line);
  }
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path.empty() || path == "-") {
    if (t_capture && t_capture->output) {
      capture_ = t_capture;
    } else {
      file_ = stdout;
    }
    return;
  }
  target_ = resolve_symlinks(path);
  std::error_code ec;
  const auto status = fs::status(target_, ec);
  const bool special = fs::exists(status) && !fs::is_regular_file(status);
  if (special) {
    // /dev/null, a FIFO, a terminal: renaming over it would replace the device node.
    file_ = std::fopen(target_.c_str(), "wb");
    if (!file_) fail("cannot create", path);
    owns_file_ = true;
    return;
  }
  install_handler();
  // A fresh name (O_EXCL: never an existing file or a symlink planted there), in the target's
  // folder so that the rename stays on one filesystem.
  static std::atomic<int> counter{0};
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp_path_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    slot_ = claim_slot(temp_path_);
    if (slot_ < 0) {
      temp_path_.clear();
      throw std::runtime_error("cannot write " + path +
                               ": too many output files at once, or a path too long");
    }
    fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      const int error = errno;
      release_slot(slot_);
      slot_ = -1;
      errno = error;
      if (error != EEXIST) {
        const std::string temp = temp_path_;
        temp_path_.clear();
        fail("cannot create", temp);
      }
    }
  }
  if (fd < 0) {
    temp_path_.clear();
    fail("cannot create a temporary file beside", target_);
  }
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp_path_.c_str());
    release_slot(slot_);
    errno = error;
    fail("cannot create", temp_path_);
  }
  owns_file_ = true;
}

OutputFile::~OutputFile() {
  if (owns_file_ && file_) std::fclose(file_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  release_slot(slot_);
}

void OutputFile::write(std::string_view data) {
  if (data.empty()) return;
  if (capture_) {
    capture_->output(data);
    return;
  }
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) fail("cannot write", path_);
}

void OutputFile::commit() {
  if (capture_) {
    committed_ = true;
    return;
  }
  if (std::fflush(file_) != 0) fail("cannot write", path_);
  // The data reaches the disk before the rename makes it the file: a crash after the rename
  // never leaves an empty or partial file under the name.
  if (!temp_path_.empty() && ::fsync(::fileno(file_)) != 0) fail("cannot write", path_);
  if (owns_file_) {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    owns_file_ = false;
    if (rc != 0) fail("cannot write", path_);
  }
  if (!temp_path_.empty()) {
    if (std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
      fail("cannot rename " + temp_path_ + " to", target_);
    }
    committed_ = true;
    release_slot(slot_);
    slot_ = -1;
    // The rename itself reaches the disk with the folder's fsync. Filesystems that cannot
    // fsync a folder say EINVAL; the file is in place either way.
    const fs::path folder = fs::path(target_).parent_path();
    const int dir =
        ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      const int rc = ::fsync(dir);
      const int error = errno;
      ::close(dir);
      if (rc != 0 && error != EINVAL) {
        errno = error;
        fail("cannot sync the folder of", target_);
      }
    }
  }
  committed_ = true;
}

namespace {

// What an output path names: "-" for standard output, else the absolute path with links
// resolved as far as they exist.
std::string output_identity(const std::string& path) {
  if (path.empty() || path == "-") return "-";
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path : p.string();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (output_identity(outputs[i].second) != output_identity(outputs[j].second)) continue;
      const std::string& path = outputs[i].second;
      throw UsageError(fmt::format(
          "{} and {}: both write {}; give each its own file", outputs[j].first, outputs[i].first,
          path.empty() || path == "-" ? std::string("standard output") : "'" + path + "'"));
    }
  }
}

void require_extension(const std::string& option, const std::string& path,
                       std::initializer_list<std::string_view> extensions, const char* format) {
  if (path.empty() || path == "-") return;
  const std::string name = lower(path);
  for (std::string_view e : extensions) {
    if (name.ends_with(e)) return;
  }
  throw UsageError(fmt::format("{}: '{}' would hold {}; name it with {}", option, path, format,
                               *extensions.begin()));
}

void write_outputs(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const auto& [path, text] : files) outputs.emplace_back("output", path);
  check_distinct_outputs(outputs);
  std::vector<std::unique_ptr<OutputFile>> open;
  for (const auto& [path, text] : files) {
    open.push_back(std::make_unique<OutputFile>(path));
    open.back()->write(text);
  }
  for (auto& f : open) f->commit();
}

}  // namespace streamspark::cli
