// What the operating system says of this machine: cache levels (sysfs, or the
// STREAMSPARK_CPU_CACHES override), memory, the CPU's model name.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "runtime/probe.hpp"

namespace streamspark::runtime {

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

int64_t parse_size(const std::string& text) {  // "32K", "512K", "32768K", "8M"
  if (text.empty()) return 0;
  int64_t v = std::atoll(text.c_str());
  const char unit = text.back();
  if (unit == 'K') v *= 1024;
  if (unit == 'M') v *= 1024 * 1024;
  if (unit == 'G') v *= int64_t{1} << 30;
  return v;
}

int64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit) {
    if (name == key + ":") return kb * 1024;
  }
  return 0;
}

}  // namespace

namespace {
// "l1=48K,l2=2M,l3=32M" or "none": the STREAMSPARK_CPU_CACHES override.
std::vector<CacheLevel> caches_from_text(const std::string& text) {
  std::vector<CacheLevel> out;
  if (text == "none") return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const int64_t bytes = eq == std::string::npos ? 0 : parse_size(item.substr(eq + 1));
    if (bytes <= 0) {
      throw std::invalid_argument(
          "STREAMSPARK_CPU_CACHES: expected none or l1=48K,l2=2M,... (K, "
          "M or G), got '" +
          text + "'");
    }
    out.push_back({item.substr(0, eq), bytes, 1});
  }
  std::sort(out.begin(), out.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  return out;
}
}  // namespace

std::vector<CacheLevel> cpu_caches() {
  if (const char* text = std::getenv("STREAMSPARK_CPU_CACHES"); text && *text) {
    return caches_from_text(text);
  }
  // Instances of each cache: distinct shared_cpu_list values across CPUs, per level and size
  // (a hybrid CPU has cores with different caches at the same level).
  std::map<int, std::map<std::string, std::set<std::string>>> instances;  // level, size
  std::error_code ec;
  for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(name[3]))) {
      continue;
    }
    for (const auto& index : fs::directory_iterator(cpu.path() / "cache", ec)) {
      const std::string type = read_file(index.path() / "type");
      if (type != "Data" && type != "Unified") continue;
      const int level = std::atoi(read_file(index.path() / "level").c_str());
      instances[level][read_file(index.path() / "size")].insert(
          read_file(index.path() / "shared_cpu_list"));
    }
  }
  std::vector<CacheLevel> out;
  for (const auto& [level, by_size] : instances) {
    CacheLevel c{fmt::format("l{}", level), 0, 0};
    for (const auto& [size, shared] : by_size) {
      c.bytes += parse_size(size) * static_cast<int64_t>(shared.size());
      c.instances += static_cast<int64_t>(shared.size());
    }
    if (c.bytes > 0) out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  return out;
}

int64_t total_memory_bytes() {
  return meminfo("MemTotal");
}
int64_t available_memory_bytes() {
  return meminfo("MemAvailable");
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

}  // namespace streamspark::runtime
