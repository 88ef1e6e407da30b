// Output that is never half-written: regular files are written to a temporary name beside the
// file (beside a symlink's target: the link stays and its target is written) and renamed into
// place on commit(), after an fsync of the file; the folder is fsynced after the rename. stdout
// ("-") and special files such as /dev/null are written directly. A temporary file is removed
// when the process is ended by SIGINT, SIGTERM or SIGHUP, before the signal's default action.
#pragma once

#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace streamspark::cli {

// Standard output and the messages of the commands run on one thread, taken by an embedding
// (the Python package) instead of the process's stdout and stderr: while a capture is
// installed on a thread, an OutputFile opened there on "-" writes to `output`, and
// print_message() hands its line to `message`. Progress lines stay on stderr.
struct OutputCapture {
  std::function<void(std::string_view)> output;
  std::function<void(const std::string&)> message;
};
class ScopedOutputCapture {
 public:
  explicit ScopedOutputCapture(OutputCapture* capture);  // none: the process's streams
  ~ScopedOutputCapture();
  ScopedOutputCapture(const ScopedOutputCapture&) = delete;
  ScopedOutputCapture& operator=(const ScopedOutputCapture&) = delete;

 private:
  OutputCapture* previous_;
};

// An embedding whose process handles SIGINT, SIGTERM and SIGHUP itself (the Python
// interpreter) keeps its handlers: temporary files are then not removed when such a signal ends
// the process.
void leave_signal_handlers_alone();

// A line a command says beside its output (a warning, what a sweep skipped, why validation
// failed): on stderr, or to this thread's capture.
void print_message(const std::string& line);

class OutputFile {
 public:
  // path "-" or "" means stdout (this thread's capture, when one is installed). Throws
  // std::runtime_error when the file cannot be created.
  explicit OutputFile(const std::string& path);
  ~OutputFile();  // removes the temporary file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);  // throws std::runtime_error on failure
  void commit();                      // flush, fsync, close, rename into place, fsync the folder

 private:
  std::string path_;       // as given, for messages
  std::string target_;     // the file replaced: path_, or the symlink's final target
  std::string temp_path_;  // empty when writing directly
  std::FILE* file_ = nullptr;
  OutputCapture* capture_ = nullptr;  // stdout taken by an embedding
  bool owns_file_ = false;
  bool committed_ = false;
  int slot_ = -1;  // in the table of live temporary files the signal handler removes
};

// The output options' (option name, path) pairs of one command, checked before anything is
// computed: two that name the same file (after resolving "." and "..", links and relative
// paths), or standard output ("-" or "") twice, are refused naming both options. Empty paths of
// options that write nothing unless given are left out by the caller.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

// A file that holds one format is named for it: "--plot: 'p.png' would hold SVG; name it
// p.svg". `extensions` lower case with their dot (".svg"); "-" (standard output) is allowed.
void require_extension(const std::string& option, const std::string& path,
                       std::initializer_list<std::string_view> extensions, const char* format);

// Writes each (path, text) to its temporary file, then renames them into place in the order
// given: a failure while writing replaces none of them. Two entries naming the same file are
// refused (check_distinct_outputs says which options) before any is opened.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& files);
inline void write_output(const std::string& path, const std::string& text) {
  write_outputs({{path, text}});
}

}  // namespace streamspark::cli
