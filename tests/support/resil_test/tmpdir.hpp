// Test support: a fresh temporary directory removed at scope exit, and a function to run a
// command (python interop scripts) and get its exit status.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace resil::test {

class TempDir {
public:
  explicit TempDir(const std::string& tag = "resil") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (tag + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

/// Run a shell command; return its exit status (or 128+signal).
inline int run(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  if (rc == -1) return -1;
  if (WIFEXITED(rc)) return WEXITSTATUS(rc);
  if (WIFSIGNALED(rc)) return 128 + WTERMSIG(rc);
  return rc;
}

/// The source tree (for test scripts), from the environment CTest sets (RESIL_SOURCE_DIR).
inline std::filesystem::path source_dir() {
  const char* s = std::getenv("RESIL_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path(RESIL_TEST_SOURCE_DIR);
}

inline std::string python() { return "/usr/bin/python3"; }

}  // namespace resil::test
