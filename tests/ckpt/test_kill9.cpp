// A writer killed with SIGKILL at arbitrary points must never leave a checkpoint that latest()
// picks but cannot read: the commit protocol is tmp -> fsync -> rename -> fsync dir -> marker.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/h5.hpp"
#include "resil/core/rng.hpp"
#include "resil_test/tmpdir.hpp"

using namespace resil::ckpt;
using resil::test::TempDir;
namespace stdfs = std::filesystem;

namespace {
[[noreturn]] void writer_loop(const stdfs::path& dir) {
  std::vector<float> w(std::size_t{2} << 20);  // 8 MiB per tensor, two tensors per checkpoint
  for (std::int64_t step = 1;; ++step) {
    for (std::size_t i = 0; i < w.size(); i += 4096) w[i] = static_cast<float>(step);
    Checkpoint c;
    c.meta.step = step;
    c.model["a"] = Tensor::from<float>({w.size()}, std::span<const float>(w));
    c.model["b"] = Tensor::from<float>({w.size()}, std::span<const float>(w));
    save(dir / file_name_for_step(step % 3), c);  // reuse names: exercises marker replacement too
  }
}
}  // namespace

TEST_CASE("kill -9 during checkpoint writes never yields a picked-but-broken checkpoint", "[ckpt][integration]") {
  TempDir dir;
  resil::Rng rng(2024, 9);
  int saw_checkpoint = 0, interrupted = 0;
  for (int round = 0; round < 12; ++round) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        writer_loop(dir.path());
      } catch (...) {
        ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng.below(400)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    for (const auto& e : stdfs::directory_iterator(dir.path()))
      if (e.path().filename().string().starts_with(".")) {  // a temporary: the kill hit a write
        ++interrupted;
        stdfs::remove(e.path());
      }
    const auto best = latest(dir.path());
    if (!best) continue;
    ++saw_checkpoint;
    CAPTURE(round, best->string());
    const Checkpoint c = read(*best, /*verify_checksums=*/true);
    CHECK(c.model.at("a").as<float>()[0] == static_cast<float>(c.meta.step));
    CHECK(verify(best->string()).ok());
  }
  CHECK(saw_checkpoint > 0);
  CHECK(interrupted > 0);  // the test really killed writers mid-write
  CHECK(h5::open_object_count() == 0);
}
