// Running one trial's command: fork/exec in its own process group, timeout -> SIGKILL the group;
// a supervisor in the group kills it when the campaign process dies (kill -9 included).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/core/fd.hpp"
#include "resil/campaign/campaign.hpp"
#include "targets.hpp"
#include "worker.hpp"

namespace resil::inject {

namespace stdfs = std::filesystem;

std::vector<std::string> substitute(const std::vector<std::string>& argv, const std::map<std::string, std::string>& values) {
  // A string command runs under /bin/sh -c: a value with characters the shell interprets (a space,
  // quotes, $, ;, a glob) would be split or run as code (`--out 'x$(touch y)'` ran touch). Quoting
  // cannot be added for the user (they may have quoted the placeholder already), so such values are
  // refused; an argv command passes any path as it is.
  if (argv.size() == 1)
    for (const auto& [k, v] : values) {
      if (argv[0].find("{" + k + "}") == std::string::npos) continue;
      const auto bad = std::find_if(v.begin(), v.end(), [](unsigned char ch) {
        return !(std::isalnum(ch) || std::strchr("/._-+,:@%=", ch) != nullptr);
      });
      if (bad != v.end())
        throw UsageError("\"command\" is a string run by /bin/sh -c, and {" + k + "} would be " + v + ", with a character the shell interprets ('" +
                         std::string(1, *bad) + "'): give \"command\" as an argv array, or use paths without it");
    }
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

namespace detail {

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

void throw_if_stopped() {
  const int s = stop_signal();
  if (!s) return;
  throw StoppedError(std::string("stopped by ") + (s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : "signal " + std::to_string(s)));
}

}  // namespace detail

namespace {

volatile std::sig_atomic_t stop_requested = 0;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// The supervisor: the first process of the trial's process group. It starts the command in that
/// group and waits for it; when the campaign process dies in any way (kill -9 included: the kernel
/// sends `death_signal` through PR_SET_PDEATHSIG), and when the command ends, it SIGKILLs the whole
/// group, itself included, so nothing the trial started outlives the campaign or its trial.
[[noreturn]] void supervise(char* const* cargs, int log_fd, int status_fd, pid_t campaign, int death_signal, const std::string& exec_failed) {
  ::setpgid(0, 0);
  struct sigaction sa {};
  sa.sa_handler = [](int) { ::kill(0, SIGKILL); };
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(death_signal, &sa, nullptr);
  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, death_signal);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  // PR_SET_PDEATHSIG fires when the thread that forked us ends: run_command is called from the
  // campaign's main thread. If the campaign died before the prctl, our parent is already another.
  ::prctl(PR_SET_PDEATHSIG, death_signal);
  if (::getppid() != campaign) ::kill(0, SIGKILL);
  const pid_t child = ::fork();
  if (child < 0) ::_exit(127);
  if (child == 0) {
    ::signal(death_signal, SIG_DFL);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvp(cargs[0], cargs);
    const std::string msg = exec_failed + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) ::_exit(127);
  (void)!::write(status_fd, &status, sizeof status);
  ::kill(0, SIGKILL);  // stragglers the command left behind in its group, and this process
  ::_exit(0);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { stop_requested = sig; };
  ::sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and looks at the flag
  for (const int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    // A signal the caller ignores stays ignored (a shell's background job, nohup's convention).
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

int stop_signal() noexcept { return stop_requested; }

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, const stdfs::path& log) {
  if (argv.empty()) throw UsageError("campaign: empty command");
  std::vector<std::string> args = argv.size() == 1 ? std::vector<std::string>{"/bin/sh", "-c", argv[0]} : argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // A previous command may have left a link at the log's path: never write through it.
  ::unlink(log.c_str());
  Fd fd{::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)};
  if (!fd) throw IoError(log.string() + ": cannot create the trial's output log: " + std::strerror(errno));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw IoError(std::string("campaign: pipe failed: ") + std::strerror(errno));
  Fd status_in{pipe_fds[0]}, status_out{pipe_fds[1]};
  const int death_signal = SIGRTMIN;  // sent to nobody by accident
  const std::string exec_failed = "campaign: cannot execute " + args[0] + ": ";
  const pid_t self = ::getpid();
  const double t0 = now();
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError(std::string("campaign: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    status_in.reset();
    supervise(cargs.data(), fd.get(), status_out.get(), self, death_signal, exec_failed);  // never returns
  }
  ::setpgid(pid, pid);  // also from the parent: no race with the kill below
  fd.reset();
  status_out.reset();
  CommandResult r;
  int status = 0;
  struct rusage usage {};
  double sleep_s = 0.001;
  for (;;) {
    const pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw IoError(std::string("campaign: waitpid failed: ") + std::strerror(errno));
    // Past its timeout, or a stop signal (the trial is then dropped, not recorded): its group goes now.
    if (stop_signal() || now() - t0 > timeout_s) {
      ::kill(-pid, SIGKILL);
      while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
      }
      detail::throw_if_stopped();
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    sleep_s = std::min(sleep_s * 2, 0.02);
  }
  ::kill(-pid, SIGKILL);  // anything still in the group (ESRCH when none)
  // A stop that came while the command ended (a scheduler signals the whole job: the command may die of
  // the same SIGTERM before the loop looks at the flag): the trial is dropped, not recorded as a crash.
  detail::throw_if_stopped();
  r.wall_seconds = now() - t0;
  // The supervisor's usage holds the command's tree: each process adds the children it reaped.
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  r.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  // The command's own wait status, as the supervisor saw it (nothing when it was killed first).
  int command_status = 0;
  ssize_t got = -1;
  do {
    got = ::read(status_in.get(), &command_status, sizeof command_status);
  } while (got < 0 && errno == EINTR);
  status_in.reset();
  if (!r.timed_out) {
    if (got == static_cast<ssize_t>(sizeof command_status)) status = command_status;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.output_tail = detail::tail_of(log, 400);
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
  // The file's format from its content: a trial may save its final weights in a format other than
  // the golden checkpoint's (train.py --save final.pt). HDF5: the /model datasets, as ever.
  for (const auto& f : files)
    detail::for_each_checksum(f.string(), Format::automatic, [&](const Tensor& t, std::uint64_t c) {
      // The weights and, under mixed precision, their fp32 masters: a fault left in a master can
      // hide below the bf16 rounding of the weights at the end of a run and still be there.
      if (t.role != TensorRole::model && t.role != TensorRole::master) return;
      h.update(std::as_bytes(std::span(t.info.path.data(), t.info.path.size())));
      h.update(std::as_bytes(std::span(&c, 1)));
    });
  return ckpt::hex_u64(h.digest());
}

}  // namespace resil::inject
