// --mpi-wait (alias --poll-us), the one option by which ec-train and ckpt-train say how their ranks
// wait for MPI (resil::train::Comm::set_poll_us; docs/reference/ec-train.md, "--mpi-wait").
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "resil/app/validators.hpp"
#include "resil/train/comm.hpp"

namespace resil::app {

/// Adds --mpi-wait,--poll-us to `app`, parsed into `target`: auto | yield | backoff | spin | a number of
/// microseconds to sleep between polls (0 = spin). Anything else is a usage error naming the option.
inline CLI::Option* add_mpi_wait(CLI::App& app, int& target) {
  const CLI::Validator us = Decimal(0, 100000);
  return app
      .add_option("--mpi-wait,--poll-us", target,
                  "how ranks wait for MPI: auto (yield when every rank on the node has a CPU, else ec-train sleeps 20 us between "
                  "polls and ckpt-train backs off), yield, backoff (sleep 20 us, doubling up to 160 us), spin, or microseconds to "
                  "sleep between polls (0..100000; 0 = spin)")
      ->transform(CLI::Validator(
          [us](std::string& s) -> std::string {
            if (s == "auto") s = std::to_string(train::poll_auto);
            else if (s == "yield") s = std::to_string(train::poll_yield);
            else if (s == "backoff") s = std::to_string(train::poll_backoff);
            else if (s == "spin") s = "0";
            else if (const auto why = us(s); !why.empty()) return "'" + s + "' is not auto, yield, backoff, spin or a decimal integer in 0..100000";
            return {};
          },
          "auto|yield|backoff|spin|USEC"))
      ->default_str("auto");
}

}  // namespace resil::app
