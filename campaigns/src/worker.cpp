// The campaign's side of parallel trials: job processes (--jobs N) and resident trial workers
// (`ckpt-train serve`, "mode": "worker"). Both talk over socketpairs with length-prefixed frames
// (resil/core/frames.hpp); both die with the process that started them (PR_SET_PDEATHSIG), so a
// campaign killed with -9 leaves no job, worker or trial behind.
#include "worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "resil/core/error.hpp"
#include "resil/core/frames.hpp"

namespace resil::inject::detail {

namespace stdfs = std::filesystem;
using nlohmann::json;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Wait until `fd` is readable (or closed) or `timeout_s` passed; true when readable.
bool wait_readable(int fd, double timeout_s) {
  const double end = now() + timeout_s;
  for (;;) {
    const double left = end - now();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000 + 1, 60'000.0)));
    // Before the worker's answer or death, which the same signal (a terminal's ^C) may have caused;
    // the worker and its trial die with this process (PR_SET_PDEATHSIG).
    throw_if_stopped();
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read report the failure
  }
}

std::optional<long long> number_after(const std::string& frame, char tag) {
  if (frame.size() < 2 || frame[0] != tag) return std::nullopt;
  long long v = 0;
  const auto [p, ec] = std::from_chars(frame.data() + 1, frame.data() + frame.size(), v);
  if (ec != std::errc() || p != frame.data() + frame.size()) return std::nullopt;
  return v;
}

/// A socketpair whose ends close on exec (the child's end is dup2'ed where it must survive exec).
std::pair<int, int> socket_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw IoError(std::string("campaign: socketpair failed: ") + std::strerror(errno));
  return {sv[0], sv[1]};
}

// Whether `pid` is a child of `worker` that leads its own process group (/proc/PID/stat: the
// fields after the command's closing parenthesis are state, ppid, pgrp), as a trial it started is.
bool trial_group_of(pid_t pid, pid_t worker) {
  if (pid <= 1 || worker <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  long long ppid = 0, pgrp = 0;
  return static_cast<bool>(rest >> state >> ppid >> pgrp) && ppid == worker && pgrp == pid;
}

/// In a freshly forked child: die with the parent (checked again in case it is already gone).
void die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
}

}  // namespace

// ------------------------------------------------------------------ the resident trial worker
TrialWorker::TrialWorker(std::vector<std::string> program, std::string preload, stdfs::path log, double start_timeout_s)
    : program_(std::move(program)), preload_(std::move(preload)), log_(std::move(log)), start_timeout_s_(start_timeout_s) {
  start();
}

TrialWorker::~TrialWorker() { stop(); }

void TrialWorker::start() {
  std::vector<std::string> args = program_;
  args.push_back("serve");
  if (!preload_.empty()) args.insert(args.end(), {"--preload", preload_});
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  ::unlink(log_.c_str());
  const int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (log_fd < 0) throw IoError(log_.string() + ": cannot create the trial worker's log: " + std::strerror(errno));
  const auto [mine, theirs] = socket_pair();
  const pid_t self = ::getpid();
  std::string shown;  // the worker's command as the messages name it
  for (const auto& w : program_) shown += (shown.empty() ? "" : " ") + w;
  const std::string exec_failed = "campaign: cannot execute " + program_.at(0) + ": ";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(mine);
    ::close(theirs);
    throw IoError(std::string("campaign: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    die_with_parent(self);
    ::dup2(theirs, STDIN_FILENO);  // dup2 clears close-on-exec: the socket survives exec as stdin
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execvp(cargs[0], cargs.data());
    const std::string msg = exec_failed + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(theirs);
  pid_ = pid;
  sock_ = mine;
  const bool readable = wait_readable(sock_, start_timeout_s_);
  const auto hello = readable ? frames::read_frame(sock_) : std::nullopt;
  if (hello && *hello == "ready") return;
  stop();
  throw UsageError("campaign: mode worker: `" + shown + " serve` " + (readable ? "ended" : "was not ready within the timeout") +
                   " before serving a trial (the command must be a ckpt-train or a resil.trial module, which know `serve`); see " + log_.string());
}

void TrialWorker::stop() noexcept {
  if (sock_ >= 0) ::close(sock_);
  sock_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

void TrialWorker::restart() {
  stop();
  start();
}

std::optional<CommandResult> TrialWorker::run(const std::vector<std::string>& argv, double timeout_s, const stdfs::path& log) {
  if (argv.empty()) throw UsageError("campaign: empty command");
  // The log exists before the trial starts, as in command mode (a link left there is not followed).
  ::unlink(log.c_str());
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw IoError(log.string() + ": cannot create the trial's output log: " + std::strerror(errno));
  ::close(fd);
  std::vector<std::string> request = {log.string()};
  request.insert(request.end(), argv.begin(), argv.end());
  CommandResult r;
  const double t0 = now();
  auto left = [&] { return std::max(timeout_s - (now() - t0), 0.0); };
  auto timed_out = [&](std::optional<long long> pid) {
    r.timed_out = true;
    // The trial's group, which the worker reaps before it answers; only a group led by a child of
    // this worker is killed (a worker that named another pid, even 1, would have had us kill it).
    const bool ours = pid && trial_group_of(static_cast<pid_t>(*pid), pid_);
    if (ours) ::kill(-static_cast<pid_t>(*pid), SIGKILL);
    // A worker that did not even start the trial, named no trial of its own, or does not answer
    // after the kill, is replaced.
    if (!ours || !wait_readable(sock_, 30) || !frames::read_frame(sock_)) restart();
    r.wall_seconds = now() - t0;
    r.output_tail = tail_of(log, 400);
    return r;
  };
  if (!frames::write_frame(sock_, frames::encode_strings(request))) return std::nullopt;
  if (!wait_readable(sock_, left())) return timed_out(std::nullopt);
  const auto started = frames::read_frame(sock_);
  if (!started) return std::nullopt;  // the worker died before it started the trial
  if (started->starts_with("F")) throw IoError("campaign: the trial worker cannot fork: " + started->substr(1));
  const auto pid = number_after(*started, 'P');
  if (!pid || *pid <= 0) return std::nullopt;  // not the protocol: as good as dead (the caller restarts it)
  if (!wait_readable(sock_, left())) return timed_out(pid);
  const auto done = frames::read_frame(sock_);
  r.wall_seconds = now() - t0;
  if (!done) return std::nullopt;
  const auto status = number_after(*done, 'S');
  if (!status) return std::nullopt;
  const int st = static_cast<int>(*status);
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  else if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  r.output_tail = tail_of(log, 400);
  return r;
}

// ------------------------------------------------------------------ job processes
namespace {

struct Job {
  pid_t pid = -1;
  int sock = -1;
  bool busy = false;
};

/// Ends every job process still there (on success they have already quit).
struct JobsGuard {
  std::vector<Job>& jobs;
  ~JobsGuard() {
    for (auto& j : jobs) {
      if (j.sock >= 0) ::close(j.sock);
      if (j.pid > 0) {
        ::kill(j.pid, SIGKILL);
        while (::waitpid(j.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    }
  }
};

/// An error raised in a job process, carried to the campaign with its exit code.
class JobError : public Error {
public:
  JobError(const std::string& what, int code) : Error(what), code_(code) {}
  ExitCode exit_code() const noexcept override { return static_cast<ExitCode>(code_); }

private:
  int code_;
};

[[noreturn]] void job_main(int sock, unsigned k, const std::function<TrialRunner(unsigned)>& make_runner) {
  try {
    const TrialRunner run = make_runner(k);
    for (;;) {
      const auto f = frames::read_frame(sock);
      if (!f || *f == "Q") break;
      const auto t = number_after(*f, 'T');
      if (!t || *t < 0) break;
      if (!frames::write_frame(sock, "R" + run(static_cast<std::uint64_t>(*t)).dump())) break;
    }
  } catch (const Error& e) {
    frames::write_frame(sock, "E" + std::to_string(exit_code_of(e)) + " " + e.what());
  } catch (const std::exception& e) {
    frames::write_frame(sock, "E1 " + std::string(e.what()));
  }
  ::_exit(0);  // nothing of the campaign's state is unwound or flushed twice
}

}  // namespace

void run_jobs(unsigned n, const std::function<std::optional<std::uint64_t>()>& next, const std::function<TrialRunner(unsigned)>& make_runner,
              const std::function<void(const json&)>& on_record, const std::function<void()>& in_job) {
  std::vector<Job> jobs(n);
  JobsGuard guard{jobs};
  const pid_t self = ::getpid();
  for (unsigned k = 0; k < n; ++k) {
    const auto [mine, theirs] = socket_pair();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(mine);
      ::close(theirs);
      throw IoError(std::string("campaign: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      die_with_parent(self);
      ::close(mine);
      for (unsigned i = 0; i < k; ++i) ::close(jobs[i].sock);
      if (in_job) in_job();
      job_main(theirs, k, make_runner);
    }
    ::close(theirs);
    jobs[k] = {pid, mine, false};
  }
  auto give = [&](Job& j) {
    const auto t = next();
    j.busy = t.has_value();
    if (!frames::write_frame(j.sock, t ? "T" + std::to_string(*t) : std::string("Q")) && t)
      throw IoError("campaign: job process " + std::to_string(&j - jobs.data()) + " ended unexpectedly");
  };
  for (auto& j : jobs) give(j);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    for (std::size_t k = 0; k < jobs.size(); ++k)
      if (jobs[k].busy) {
        fds.push_back({jobs[k].sock, POLLIN, 0});
        which.push_back(k);
      }
    if (fds.empty()) break;
    throw_if_stopped();  // the guard kills the job processes, and their trials with them
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw IoError(std::string("campaign: poll failed: ") + std::strerror(errno));
    }
    throw_if_stopped();  // before a job's error or death, which the same signal may have caused
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Job& j = jobs[which[i]];
      const auto f = frames::read_frame(j.sock);
      if (f && f->starts_with("R")) {
        on_record(json::parse(f->substr(1)));
        give(j);
        continue;
      }
      if (f && f->starts_with("E")) {
        const auto sp = f->find(' ');
        int code = 1;
        std::from_chars(f->data() + 1, f->data() + (sp == std::string::npos ? f->size() : sp), code);
        throw JobError(sp == std::string::npos ? "a job process failed" : f->substr(sp + 1), code);
      }
      int status = 0;
      std::string how = "ended";
      if (::waitpid(j.pid, &status, 0) == j.pid) {
        j.pid = -1;
        if (WIFSIGNALED(status)) how = "was killed by signal " + std::to_string(WTERMSIG(status));
        else if (WIFEXITED(status)) how = "exited with code " + std::to_string(WEXITSTATUS(status));
      }
      throw IoError("campaign: job process " + std::to_string(which[i]) + " " + how + " in the middle of a trial");
    }
  }
  for (auto& j : jobs) {  // every job got "Q": let them finish their exit
    ::close(j.sock);
    j.sock = -1;
    while (::waitpid(j.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    j.pid = -1;
  }
}

}  // namespace resil::inject::detail
