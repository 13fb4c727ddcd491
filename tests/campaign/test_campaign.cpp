// The campaign engine end to end with small deterministic commands (sh): every outcome class,
// restore-by-revert verified after every trial, an interrupted campaign resumed, and shards merged
// into exactly the records and statistics of a single-process run.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/campaign/campaign.hpp"
#include "resil/campaign/report.hpp"

using namespace resil;
using namespace resil::inject;
using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

stdfs::path scratch_dir(const std::string& name) {
  const auto d = stdfs::temp_directory_path() / ("resil-campaign-" + name + "-" + std::to_string(::getpid()));
  stdfs::remove_all(d);
  stdfs::create_directories(d);
  return d;
}

/// /model/w (f32, 64 values of `value`) and /optimizer/w/m (f32, 32 values).
void write_ckpt(const stdfs::path& p, float value) {
  auto f = ckpt::h5::create_file(p.string());
  std::vector<float> w(64, value), m(32, 0.125f);
  ckpt::write_tensor(f, "/model/w", ckpt::Tensor::from<float>({64}, w));
  ckpt::write_tensor(f, "/optimizer/w/m", ckpt::Tensor::from<float>({32}, m));
}

std::map<std::string, std::uint64_t> checksums(const stdfs::path& p) {
  std::map<std::string, std::uint64_t> m;
  auto f = ckpt::h5::open_file(p.string(), ckpt::h5::Mode::read);
  for (const auto& d : ckpt::list_datasets(f)) m[d.path] = ckpt::dataset_checksum(f, d.path);
  return m;
}

/// The trial's class is chosen by trial id mod 8 (the golden run prints 0.5 and names the golden
/// checkpoint as its final checkpoint, so "bit_masked" trials can do the same).
std::string dispatch_command(const stdfs::path& golden) {
  const std::string g = golden.string();
  return "t={trial}; if [ $t = golden ]; then echo '{\"test_accuracy\": 0.5, \"last_checkpoint\": \"" + g + "\"}' > {out}; exit 0; fi; "
         "case $((t % 8)) in "
         "0) exit 4;; "
         "1) sleep 100;; "
         "2) kill -SEGV $$;; "
         "3) echo '{\"test_accuracy\": null, \"nan_detected\": true}' > {out}; exit 6;; "
         "4) echo '{\"test_accuracy\": 0.1}' > {out};; "
         "5) echo '{\"test_accuracy\": 0.495}' > {out};; "
         "6) echo '{\"test_accuracy\": 0.5}' > {out};; "
         "7) echo '{\"test_accuracy\": 0.5, \"last_checkpoint\": \"" + g + "\"}' > {out};; "
         "esac";
}

CampaignConfig base_config(const stdfs::path& golden, std::uint64_t trials) {
  CampaignConfig c;
  c.name = "test";
  c.checkpoint = golden.string();
  c.command = {dispatch_command(golden)};
  c.timeout_s = 0.5;
  c.trials = trials;
  c.seed = 42;
  c.tolerance = 0.01;
  return c;
}

json strip(json r) {
  r.erase("wall_seconds");
  r.erase("cpu_seconds");
  r.erase("shard");
  r.erase("output_tail");
  return r;
}

std::vector<json> stripped_records(const stdfs::path& out) {
  std::vector<json> v;
  for (auto& r : merged_records(out)) v.push_back(strip(r));
  return v;
}

/// Processes of process group `pgid` that are not zombies (a zombie waits for a reaper, it runs nothing).
int live_members(pid_t pgid) {
  int n = 0;
  for (const auto& e : stdfs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat;
    if (!std::getline(f, stat)) continue;
    // pid (comm) state ppid pgrp ...: comm may hold spaces, so parse after the last ')'.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("every outcome class from deterministic commands; revert restores after every trial", "[campaign][integration]") {
  const auto dir = scratch_dir("classes");
  const auto golden = dir / "golden.h5";
  write_ckpt(golden, 0.75f);
  const auto before = checksums(golden);
  const std::string golden_sha = ckpt::sha256_file(golden);
  auto c = base_config(golden, 8);
  RunOptions o;
  o.out = dir / "out";
  o.keep_work = true;
  const auto work = o.out / "work" / "shard-0-of-1" / "ckpt" / "golden.h5";
  std::vector<std::string> classes;
  const auto rs = run_campaign(c, o, [&](const json& rec, std::uint64_t done, std::uint64_t total, const std::map<std::string, std::uint64_t>&) {
    classes.push_back(rec.at("class").get<std::string>());
    CHECK(rec.at("restore") == "reverted");
    CHECK(done == classes.size());
    CHECK(total == 8);
    // The private copy is checksum-identical to the golden checkpoint after every trial.
    CHECK(checksums(work) == before);
    CHECK(ckpt::verify(work.string()).ok());
  });
  CHECK(rs.ran == 8);
  CHECK(classes == std::vector<std::string>{"load_failure", "hang", "crash", "nan_later", "critical_sdc", "tolerable_sdc", "masked", "bit_masked"});
  CHECK(ckpt::sha256_file(golden) == golden_sha);  // the user's golden file is never touched
  const auto recs = merged_records(o.out);
  REQUIRE(recs.size() == 8);
  for (const auto& r : recs) {
    CHECK(r.at("n_flips") == 1);
    CHECK(r.at("flips").at(0).contains("dataset"));
    CHECK(r.at("strata").contains("field"));
    CHECK(r.at("trial_seed") == derive_seed(42, r.at("trial").get<std::uint64_t>()));
  }
  CHECK(recs[2].at("signal") == 11);
  CHECK(recs[1].at("exit_code").is_null());
  CHECK(recs[4].at("delta").get<double>() == Approx(-0.4));

  SECTION("nan_at_load: a flip that itself makes a NaN") {
    // 2e38 has exponent field 254: flipping exponent bit 23 makes 255 (NaN/Inf).
    const auto g2 = dir / "huge.h5";
    write_ckpt(g2, 2e38f);
    auto c2 = base_config(g2, 4);
    c2.bits = "23";
    c2.role = Role::model;
    c2.command = {"t={trial}; if [ $t = golden ]; then echo '{\"test_accuracy\": 0.5}' > {out}; exit 0; fi; exit 6"};
    RunOptions o2;
    o2.out = dir / "out2";
    run_campaign(c2, o2);
    for (const auto& r : merged_records(o2.out)) {
      CHECK(r.at("class") == "nan_at_load");
      CHECK(r.at("injected_nonfinite") == true);
    }
  }
  SECTION("a command that rewrites the checkpoint is caught by the checksum check and the copy restored") {
    auto c3 = base_config(golden, 3);
    const auto other = dir / "other.h5";
    write_ckpt(other, 9.0f);
    c3.command = {"t={trial}; if [ $t = golden ]; then echo '{\"test_accuracy\": 0.5}' > {out}; exit 0; fi; cp " + other.string() +
                  " {ckpt}; echo '{\"test_accuracy\": 0.5}' > {out}"};
    RunOptions o3;
    o3.out = dir / "out3";
    o3.keep_work = true;
    run_campaign(c3, o3);
    for (const auto& r : merged_records(o3.out)) CHECK(r.at("restore") == "recopied");
    CHECK(checksums(o3.out / "work" / "shard-0-of-1" / "ckpt" / "golden.h5") == before);
  }
  SECTION("copies instead of revert") {
    auto c4 = base_config(golden, 8);
    c4.copies = true;
    RunOptions o4;
    o4.out = dir / "out4";
    run_campaign(c4, o4);
    std::vector<std::string> cls;
    for (const auto& r : merged_records(o4.out)) {
      cls.push_back(r.at("class").get<std::string>());
      CHECK(r.at("restore") == "copy");
    }
    CHECK(cls == classes);
  }
  SECTION("a different configuration cannot reuse the directory") {
    auto c5 = base_config(golden, 9);
    CHECK_THROWS_AS(run_campaign(c5, o), UsageError);
  }
  stdfs::remove_all(dir);
}

TEST_CASE("resume of an interrupted campaign and shard merge equal the single run", "[campaign][integration]") {
  const auto dir = scratch_dir("merge");
  const auto golden = dir / "golden.h5";
  write_ckpt(golden, 0.75f);
  auto c = base_config(golden, 24);
  c.strata = Strata::field;
  // Avoid the 0.5 s hangs here: trials 1 mod 8 exit 0 with the golden metric instead.
  c.command = {std::string(c.command[0]).replace(c.command[0].find("sleep 100"), 9, "echo '{\"test_accuracy\": 0.5}' > {out}")};

  RunOptions single;
  single.out = dir / "single";
  run_campaign(c, single);
  const auto want = stripped_records(single.out);
  REQUIRE(want.size() == 24);
  // Field strata: trial t samples stratum t mod 3 (sign, exponent, mantissa of f32).
  for (const auto& r : want) {
    static const char* order[] = {"sign", "exponent", "mantissa"};
    CHECK(r.at("stratum") == order[r.at("trial").get<std::uint64_t>() % 3]);
    CHECK(r.at("strata").at("field") == r.at("stratum"));
  }

  // Interrupted: 5 trials, then a torn record (killed mid-write), then the rest.
  RunOptions part;
  part.out = dir / "resumed";
  part.max_trials = 5;
  CHECK(run_campaign(c, part).ran == 5);
  {
    std::ofstream f(part.out / "results" / "shard-0-of-1.jsonl", std::ios::app);
    f << "{\"trial\": 5, \"class\": \"mas";
  }
  CHECK(read_results(part.out).size() == 5);
  part.max_trials.reset();
  const auto rs = run_campaign(c, part);
  CHECK(rs.skipped == 5);
  CHECK(rs.ran == 19);
  CHECK(stripped_records(part.out) == want);
  CHECK(run_campaign(c, part).ran == 0);  // nothing left

  // Three shards (one of them run in two pieces).
  RunOptions sh;
  sh.out = dir / "sharded";
  for (std::uint64_t i = 0; i < 3; ++i) {
    sh.shard = {i, 3};
    sh.max_trials = i == 1 ? std::optional<std::uint64_t>(2) : std::nullopt;
    run_campaign(c, sh);
  }
  sh.shard = {1, 3};
  sh.max_trials.reset();
  run_campaign(c, sh);
  CHECK(stripped_records(sh.out) == want);
  auto a = build_report(single.out), b = build_report(sh.out);
  a.erase("timing");
  b.erase("timing");
  CHECK(a == b);
  CHECK(a.at("trials").at("done") == 24);
  // The field dimension was the sampling strata: the reweighted estimate covers the whole space.
  CHECK(a.at("reweighted").at("field").at("coverage").get<double>() == Approx(1.0));
  CHECK(a.at("by").at("field").at("exponent").at("space_bits").get<double>() == Approx(8 * 96));
  CHECK_FALSE(report_text(a).empty());
  CHECK(report_markdown(a, {"plot.png"}).find("![plot.png](plot.png)") != std::string::npos);
  stdfs::remove_all(dir);
}

// Hostile configurations, commands and records, in process.
TEST_CASE("a command that truncates, deletes or replaces {ckpt} is recorded and the copy restored from golden", "[campaign][integration]") {
  const auto dir = scratch_dir("damage");
  const auto golden = dir / "golden.h5";
  write_ckpt(golden, 0.75f);
  const auto before = checksums(golden);
  const std::string golden_sha = ckpt::sha256_file(golden);
  auto c = base_config(golden, 8);
  c.timeout_s = 30;
  c.command = {"t={trial}; if [ $t = golden ]; then echo '{\"test_accuracy\": 0.5}' > {out}; exit 0; fi; "
               "case $((t % 4)) in 0) : > {ckpt};; 1) rm -f {ckpt};; 2) ln -sf " + golden.string() + " {ckpt}.l; mv -f {ckpt}.l {ckpt};; "
               "3) rm -f {ckpt}; mkdir {ckpt};; esac; echo '{\"test_accuracy\": 0.5}' > {out}"};
  RunOptions o;
  o.out = dir / "out";
  o.keep_work = true;
  const auto rs = run_campaign(c, o);
  CHECK(rs.ran == 8);
  for (const auto& r : merged_records(o.out)) {
    CHECK(r.at("restore") == "recopied");
    CHECK(r.at("class") == "masked");
    CHECK(r.at("note").get<std::string>().find("{ckpt}") != std::string::npos);
  }
  CHECK(checksums(o.out / "work" / "shard-0-of-1" / "ckpt" / "golden.h5") == before);
  CHECK(ckpt::sha256_file(golden) == golden_sha);
  stdfs::remove_all(dir);
}

TEST_CASE("1e15 planned trials: --max-trials runs its slice without listing the trials", "[campaign][integration]") {
  const auto dir = scratch_dir("huge");
  const auto golden = dir / "golden.h5";
  write_ckpt(golden, 0.75f);
  auto c = base_config(golden, 1'000'000'000'000'000ull);
  c.command = {"echo '{\"test_accuracy\": 0.5}' > {out}"};
  RunOptions o;
  o.out = dir / "out";
  o.max_trials = 3;
  o.shard = {1, 7};
  const auto rs = run_campaign(c, o);  // listing 1.4e14 trial ids up front would need ~1 PB
  CHECK(rs.ran == 3);
  CHECK(rs.planned == ShardSpec{1, 7}.trials_of(c.trials));
  std::vector<std::uint64_t> ids;
  for (const auto& r : merged_records(o.out)) ids.push_back(r.at("trial").get<std::uint64_t>());
  CHECK(ids == std::vector<std::uint64_t>{1, 8, 15});
  CHECK(run_campaign(c, o).skipped == 3);
  CHECK(ShardSpec{0, 1}.trials_of(~std::uint64_t{0}) == ~std::uint64_t{0});
  CHECK(ShardSpec{3, 4}.trials_of(3) == 0);
  CHECK(ShardSpec{3, 4}.trials_of(4) == 1);
  stdfs::remove_all(dir);
}

TEST_CASE("records that are not this campaign's are refused, not counted or dropped", "[campaign][integration]") {
  const auto dir = scratch_dir("records");
  const auto golden = dir / "golden.h5";
  write_ckpt(golden, 0.75f);
  auto c = base_config(golden, 14);
  c.command = {"echo '{\"test_accuracy\": 0.5}' > {out}"};
  RunOptions o;
  o.out = dir / "out";
  run_campaign(c, o);
  const auto res = o.out / "results" / "shard-0-of-1.jsonl";
  const std::string good = ckpt::fs::read_file(res);
  for (const std::string bad : {R"({"trial": 99, "class": "masked"})", R"({"trial": -1, "class": "masked"})", R"({"trial": 2.5, "class": "masked"})",
                                R"({"trial": 3, "class": "mystery"})", R"({"trial": 3})", "garbage"}) {
    ckpt::fs::write_file_atomic(res, good + bad + "\n");
    CHECK_THROWS_AS(build_report(o.out), CorruptInputError);
    CHECK_THROWS_AS(run_campaign(c, o), CorruptInputError);
  }
  ckpt::fs::write_file_atomic(res, good + R"({"trial": 3, "cl)");  // torn last line: ignored
  CHECK(build_report(o.out).at("trials").at("done") == 14);
  stdfs::remove_all(dir);
}

TEST_CASE("the trial's process group dies with a campaign process killed by SIGKILL", "[campaign][integration]") {
  const auto dir = scratch_dir("kill9");
  const auto marker = dir / "marker", started = dir / "started";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the "campaign": runs a trial that sleeps, then writes a marker from a background child
    try {
      run_command({"echo $$ > " + started.string() + "; (sleep 2; touch " + marker.string() + ") & sleep 2; touch " + marker.string() + "; wait"}, 60,
                  dir / "log");
    } catch (...) {
    }
    ::_exit(0);
  }
  for (int i = 0; i < 400 && !(stdfs::exists(started) && stdfs::file_size(started) > 0); ++i) ::usleep(10'000);
  REQUIRE(stdfs::exists(started));
  const pid_t sh = std::stoi(ckpt::fs::read_file(started));
  const pid_t group = ::getpgid(sh);
  REQUIRE(group > 0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::usleep(3'000'000);
  CHECK(live_members(group) == 0);  // no process left in the trial's group
  CHECK_FALSE(stdfs::exists(marker));
  stdfs::remove_all(dir);
}

TEST_CASE("a command's CPU time: its whole process tree, not its wall time", "[campaign][integration]") {
  // What the campaign reaps is what getrusage(RUSAGE_CHILDREN) of this process gains: the
  // supervisor, the shell and the shell's busy subshell. A sleeping command costs no CPU.
  const auto dir = scratch_dir("cpu");
  auto children_cpu = [] {
    struct rusage u {};
    ::getrusage(RUSAGE_CHILDREN, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  const double before = children_cpu();
  const auto busy = run_command({"(i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done); true"}, 60, dir / "log");
  const double reaped = children_cpu() - before;
  REQUIRE(busy.cpu_seconds);
  CHECK(*busy.cpu_seconds > 0.05);
  CHECK(std::abs(*busy.cpu_seconds - reaped) < 0.02);
  const auto idle = run_command({"sleep", "0.5"}, 60, dir / "log");
  REQUIRE(idle.cpu_seconds);
  CHECK(idle.wall_seconds >= 0.5);
  CHECK(*idle.cpu_seconds < 0.1);
  stdfs::remove_all(dir);
}

TEST_CASE("processes per trial: the rank count of an MPI launcher's command, else 1", "[campaign][unit]") {
  // --jobs defaults to the usable CPUs divided by this, so that the trials at once fit the cores.
  auto per = [](std::vector<std::string> cmd) {
    CampaignConfig c;
    c.command = std::move(cmd);
    return c.processes_per_trial();
  };
  CHECK(per({"mpiexec", "-n", "4", "ckpt-train", "resume", "--from", "{ckpt}"}) == 4);
  CHECK(per({"/usr/bin/mpirun", "-np", "3", "ec-train"}) == 3);
  CHECK(per({"mpiexec.hydra", "--np", "2", "x"}) == 2);
  CHECK(per({"srun", "--ntasks=8", "x"}) == 8);
  CHECK(per({"srun", "--ntasks", "6", "x"}) == 6);
  CHECK(per({"mpiexec", "-n8", "x"}) == 8);
  CHECK(per({"mpiexec", "-n=5", "x"}) == 5);
  CHECK(per({"mpiexec", "-hosts", "a,b", "-n", "2", "x"}) == 2);  // an option's value is not the program
  // The program's own -n, after the program, is not the launcher's.
  CHECK(per({"mpiexec", "ckpt-train", "-n", "9"}) == 1);
  CHECK(per({"ckpt-train", "eval", "-n", "4"}) == 1);
  CHECK(per({"sh -c 'mpiexec -n 4 x'"}) == 1);
  CHECK(per({"mpiexec", "-n", "0", "x"}) == 1);
  CHECK(per({"mpiexec", "-n", "four", "x"}) == 1);
  CHECK(per({"mpiexec", "-n"}) == 1);
  CHECK(per({}) == 1);
}
