// Backend selection without a registered CUDA provider, the per-epoch learning-rate decay, and the
// preemption flag set by a real signal.
#include <catch2/catch.hpp>

#include <cmath>
#include <csignal>

#include "resil/core/error.hpp"
#include "resil/train/device.hpp"
#include "resil/train/optimizer.hpp"
#include "resil/train/preempt.hpp"

using namespace resil::train;

TEST_CASE("device names resolve; cuda without a provider is a usage error", "[train][unit]") {
  // This test executable does not link resil::train_cuda, so no provider is registered.
  REQUIRE_FALSE(cuda_built());
  CHECK(resolve_device("cpu") == "cpu");
  CHECK(resolve_device("auto") == "cpu");
  CHECK_THROWS_AS(resolve_device("cuda"), resil::UsageError);
  CHECK_THROWS_AS(resolve_device("tpu"), resil::UsageError);
  std::string desc;
  auto be = make_backend("cpu", 1, 0, &desc);
  CHECK(be->name().size() > 0);
  CHECK((desc == "cpu (avx2 FMA, 1 thread)" || desc == "cpu (scalar, 1 thread)"));
  CHECK_THROWS_AS(make_backend("cuda", 1, 0), resil::UsageError);
}

TEST_CASE("lr decay is lr * decay^epoch, and 1 leaves the rate alone", "[train][unit]") {
  auto be = make_cpu_backend(1);
  OptimizerConfig c;
  c.lr = 1e-3f;
  c.lr_decay = 0.75f;
  Optimizer opt(*be, c);
  CHECK(opt.lr() == 1e-3f);
  for (int e : {0, 1, 2, 9}) {
    opt.set_epoch(e);
    CHECK(opt.lr() == static_cast<float>(1e-3f * std::pow(0.75, e)));
  }
  c.lr_decay = 1.0f;
  Optimizer flat(*be, c);
  flat.set_epoch(7);
  CHECK(flat.lr() == 1e-3f);
  c.lr_decay = 0.0f;
  CHECK_THROWS_AS(Optimizer(*be, c), resil::UsageError);
}

TEST_CASE("SIGTERM and SIGUSR1 set the preemption flag instead of ending the process", "[train][unit]") {
  install_preempt_handlers();
  clear_preempt();
  CHECK(preempt_signal() == 0);
  SECTION("SIGTERM") {
    std::raise(SIGTERM);
    CHECK(preempt_signal() == SIGTERM);
    CHECK(std::string(preempt_signal_name(preempt_signal())) == "SIGTERM");
  }
  SECTION("SIGUSR1") {
    std::raise(SIGUSR1);
    CHECK(preempt_signal() == SIGUSR1);
    CHECK(std::string(preempt_signal_name(preempt_signal())) == "SIGUSR1");
  }
  clear_preempt();
  CHECK(preempt_signal() == 0);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGUSR1, SIG_DFL);
}
