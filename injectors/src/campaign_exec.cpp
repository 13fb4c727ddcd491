// Running one trial's command: fork/exec in its own process group, timeout -> SIGKILL the group.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/campaign.hpp"

namespace resil::inject {

namespace stdfs = std::filesystem;

std::vector<std::string> substitute(const std::vector<std::string>& argv, const std::map<std::string, std::string>& values) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (std::string a : argv) {
    for (const auto& [k, v] : values) {
      const std::string key = "{" + k + "}";
      for (std::size_t pos = a.find(key); pos != std::string::npos; pos = a.find(key, pos + v.size())) a.replace(pos, key.size(), v);
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string tail_of(const stdfs::path& p, std::size_t n) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return "";
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(f.tellg());
  const std::size_t from = size > n ? size - n : 0;
  f.seekg(static_cast<std::streamoff>(from));
  std::string s(size - from, '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, const stdfs::path& log) {
  if (argv.empty()) throw UsageError("campaign: empty command");
  std::vector<std::string> args = argv.size() == 1 ? std::vector<std::string>{"/bin/sh", "-c", argv[0]} : argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(log.string() + ": cannot create the trial's output log: " + std::strerror(errno));
  const double t0 = now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw IoError(std::string("campaign: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: own process group (so a timeout kills everything it started), output to the log.
    ::setpgid(0, 0);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvp(cargs[0], cargs.data());
    const std::string msg = std::string("campaign: cannot execute ") + cargs[0] + ": " + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with the kill below
  ::close(fd);
  CommandResult r;
  int status = 0;
  double sleep_s = 0.001;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw IoError(std::string("campaign: waitpid failed: ") + std::strerror(errno));
    if (now() - t0 > timeout_s) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    sleep_s = std::min(sleep_s * 2, 0.02);
  }
  ::kill(-pid, SIGKILL);  // stragglers the command left behind (ESRCH when none)
  r.wall_seconds = now() - t0;
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.output_tail = tail_of(log, 400);
  return r;
}

std::string model_weights_hash(const stdfs::path& ckpt_path) {
  std::vector<stdfs::path> files;
  if (ckpt_path.string().ends_with(".manifest.json")) {
    const auto m = ckpt::read_manifest(ckpt_path);
    for (const auto& s : m.shards) files.push_back(ckpt_path.parent_path() / s);
  } else {
    files.push_back(ckpt_path);
  }
  ckpt::Xxh64 h;
  for (const auto& f : files) {
    auto file = ckpt::h5::open_file(f.string(), ckpt::h5::Mode::read);
    for (const auto& d : ckpt::list_datasets(file)) {
      if (!d.path.starts_with("/model/") || !d.dtype) continue;
      const std::uint64_t c = ckpt::dataset_checksum(file, d.path);
      h.update(std::as_bytes(std::span(d.path.data(), d.path.size())));
      h.update(std::as_bytes(std::span(&c, 1)));
    }
  }
  return ckpt::hex_u64(h.digest());
}

}  // namespace resil::inject
