// ckpt-train serve: load what the trials of a campaign share once (the dataset, decoded), then run
// each trial request (the argv of `ckpt-train eval|resume ...`) in a forked child. The child is
// `ckpt-train` with that argv: same parsing, same outputs, same exit codes, so a trial classifies
// exactly as when the campaign starts the command itself; a trial that crashes, hangs or hits NaN
// ends the child, never the worker. Protocol (resil/core/frames.hpp) on the socket at stdin:
//   worker -> "ready" once; campaign -> [log path, argv0, argv1, ...]; worker -> "P<pid>" when the
//   child runs (its own process group: the campaign kills it on timeout), then "S<wait status>".
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "resil/app/main.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/core/frames.hpp"
#include "resil/data/idx.hpp"
#include "resil/train/preempt.hpp"
#include "serve.hpp"

namespace resil::app::ckpt_train {

void setup_serve(CLI::App& app, ServeOptions& o) {
  app.add_option("--preload", o.preload, "checkpoint whose configuration names the dataset to keep decoded (the campaign's golden one)");
  app.add_option("--data", o.data, "dataset directory to keep decoded instead of the checkpoint's");
  app.footer("Started by `ckpt-flip campaign` for a configuration with \"mode\": \"worker\"; stdin is its socket (docs/guide/campaigns.md).");
}

namespace {

/// The trial itself, in the forked child: ckpt-train's eval and resume with the request's argv.
int run_trial(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  CLI::App app{"ckpt-train: deterministic data-/model-parallel training with HDF5 checkpoints"};
  app.require_subcommand(1);
  ResumeOptions resume_o;
  EvalOptions eval_o;
  auto* resume = app.add_subcommand("resume", "continue a run from a checkpoint (file or mp manifest)");
  auto* eval = app.add_subcommand("eval", "evaluate a checkpoint on the test split");
  setup_resume(*resume, resume_o);
  setup_eval(*eval, eval_o);
  const resil::train::Comm comm = resil::train::Comm::world();  // a world of one: no MPI in the worker
  const int code = guarded_main("ckpt-train", app, static_cast<int>(args.size()), argv.data(), [&]() -> int {
    if (*resume) {
      resil::train::install_preempt_handlers();
      return run_resume(resume_o, comm);
    }
    return run_eval(eval_o, comm);
  });
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  return code;
}

/// The forked child: its own process group, ended with the worker (the worker ends with the
/// campaign), output to the trial's log, then the trial.
[[noreturn]] void child(int sock, pid_t worker, const std::string& log, std::vector<std::string> args) {
  ::setpgid(0, 0);
  const int death_signal = SIGRTMIN;
  struct sigaction sa {};
  sa.sa_handler = [](int) { ::kill(0, SIGKILL); };  // the trial's group, stragglers included
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(death_signal, &sa, nullptr);
  ::prctl(PR_SET_PDEATHSIG, death_signal);
  if (::getppid() != worker) ::kill(0, SIGKILL);
  ::close(sock);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string msg = "ckpt-train serve: cannot open the trial's log " + log + ": " + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  ::_exit(run_trial(std::move(args)));
}

/// The dataset the trials share, decoded in the worker on the first request that needs each split:
/// the test split for eval, both splits for resume. An eval-only campaign never decodes the
/// training split (47 MB of images it would not read). Best effort: a split that cannot be kept is
/// read by each trial itself (slower, same results), after one warning.
class Preload {
 public:
  explicit Preload(const ServeOptions& o) {
    if (o.preload.empty() && o.data.empty()) return;
    try {
      std::string dir = o.data;
      auto model = resil::train::ModelKind::mlp;
      if (!o.preload.empty()) {
        std::filesystem::path meta_file = o.preload;
        if (o.preload.ends_with(".manifest.json")) meta_file = meta_file.parent_path() / ckpt::read_manifest(o.preload).shards.at(0);
        const auto cfg = resil::train::TrainConfig::from_json(ckpt::read_meta(meta_file).config, meta_file.string());
        model = cfg.model;
        if (dir.empty()) dir = cfg.data;
      }
      // A DLRM's synthetic data is generated per trial; its Criteo files are not kept, nor a GPT's text.
      if (model != resil::train::ModelKind::dlrm && model != resil::train::ModelKind::gpt) dir_ = dir.empty() ? resil::data::default_fashion_mnist_dir : dir;
    } catch (const std::exception& e) {
      warn(e);
    }
  }

  /// Keep what a trial of `subcommand` (eval, resume) reads, unless already kept.
  void keep_for(const std::string& subcommand) {
    keep(resil::data::Split::test, test_);
    if (subcommand != "eval") keep(resil::data::Split::train, train_);
  }

 private:
  void keep(resil::data::Split split, bool& done) {
    if (done || !dir_) return;
    done = true;
    try {
      resil::data::keep_mnist_decoded(*dir_, split);
      // One line per split in the worker's log (OUT/work/.../worker.log): what this worker holds.
      std::cerr << "ckpt-train serve: kept the " << (split == resil::data::Split::train ? "training" : "test") << " split of " << dir_->string()
                << " decoded" << std::endl;
    } catch (const std::exception& e) {
      warn(e);
    }
  }
  static void warn(const std::exception& e) {
    std::cerr << "ckpt-train serve: warning: nothing kept decoded: " << one_line(e.what()) << std::endl;
  }

  std::optional<std::filesystem::path> dir_;
  bool test_ = false, train_ = false;
};

}  // namespace

int run_serve(const ServeOptions& o) {
  // The socket arrives as stdin; keep it on another descriptor, so the trials see /dev/null on
  // stdin and nothing of the protocol can be read or written by them.
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0 || !S_ISSOCK(st.st_mode))
    throw UsageError("serve: stdin is not a socket; the worker is started by `ckpt-flip campaign` (\"mode\": \"worker\")");
  const int sock = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (sock < 0) throw IoError(std::string("serve: cannot keep the socket: ") + std::strerror(errno));
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) {
    ::dup2(devnull, STDIN_FILENO);
    ::close(devnull);
  }
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  Preload preload(o);
  if (!frames::write_frame(sock, "ready")) return 0;
  const pid_t self = ::getpid();
  for (;;) {
    const auto req = frames::read_frame(sock);
    if (!req) return 0;  // the campaign closed the socket: done
    auto fields = frames::decode_strings(*req);
    if (!fields || fields->size() < 2) throw UsageError("serve: a malformed trial request");
    const std::string log = fields->front();
    fields->erase(fields->begin());
    preload.keep_for(fields->size() > 1 ? (*fields)[1] : std::string());  // before the fork: this and every later child inherit it
    std::cout.flush();
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      frames::write_frame(sock, std::string("F") + std::strerror(errno));
      continue;
    }
    if (pid == 0) child(sock, self, log, std::move(*fields));
    ::setpgid(pid, pid);  // also here: the campaign may kill the group as soon as it has the pid
    if (!frames::write_frame(sock, "P" + std::to_string(pid))) {
      ::kill(-pid, SIGKILL);
      return 0;
    }
    // Wait for the end without reaping, so the group id cannot be reused while its stragglers are killed.
    siginfo_t info {};
    while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    ::kill(-pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!frames::write_frame(sock, "S" + std::to_string(status))) return 0;
  }
}

}  // namespace resil::app::ckpt_train
