#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "resil/app/validators.hpp"
#include "resil/ckpt/checkpoint.hpp"

namespace resil::app::ckpt_train {

void setup_latest(CLI::App& app, LatestOptions& o) {
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory")->required()->check(NonEmptyPath());
}

int run_latest(const LatestOptions& o) {
  std::error_code ec;
  if (!std::filesystem::is_directory(o.ckpt_dir, ec))
    throw resil::IoError("--ckpt-dir " + o.ckpt_dir + ": " + (std::filesystem::exists(o.ckpt_dir, ec) ? "not a directory" : "no such directory"));
  const auto p = resil::ckpt::latest(o.ckpt_dir);
  if (!p) throw resil::NothingSelectedError(o.ckpt_dir + ": no complete checkpoint");
  std::cout << p->string() << std::endl;
  return 0;
}

}  // namespace resil::app::ckpt_train
