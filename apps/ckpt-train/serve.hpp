// ckpt-train serve: the resident trial worker of campaigns ("mode": "worker", docs/design/campaigns.md).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace resil::app::ckpt_train {

struct ServeOptions {
  std::string preload;  // a checkpoint whose configuration names the dataset to keep decoded
  std::string data;     // the dataset directory instead of the checkpoint's
};
void setup_serve(CLI::App& app, ServeOptions& o);
/// Serve trial requests on the socket at stdin until the campaign closes it. Runs without MPI
/// (main does not start it for serve): each trial is a forked child of one process.
int run_serve(const ServeOptions& o);

}  // namespace resil::app::ckpt_train
