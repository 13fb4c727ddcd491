#include <iostream>

#include "commands.hpp"
#include "resil/app/validators.hpp"
#include "resil/ckpt/fs.hpp"

namespace resil::app::ckpt_train {

void setup_eval(CLI::App& app, EvalOptions& o) {
  app.add_option("--from", o.from, "checkpoint file, or mp manifest (*.manifest.json)")->required()->check(NonEmptyPath());
  app.add_option("--summary", o.summary, "JSON summary (test_accuracy, nan_detected, ...), written also on failure")->check(NonEmptyPath());
  app.add_option("--data", o.data, "override the stored data location")->check(NonEmptyPath());
  app.add_option("--test-limit", o.test_limit, "evaluate on the first N test samples")->transform(Decimal());
  add_choice<resil::train::DeviceKind>(app, "--device", o.device, "cpu | cuda | auto (default: the checkpoint's device)");
}

int run_eval(const EvalOptions& o, const resil::train::Comm& comm) {
  // Refused paths write nothing, not even the summary (it may be the refused path, or the input).
  resil::ckpt::fs::require_input_file(o.from, "--from");  // exit 3 (CLI11's existence check made it 2)
  auto in = resil::train::checkpoint_inputs(o.from);
  if (!o.data.empty()) in.push_back({"--data", o.data});
  resil::train::check_paths({{"--summary", o.summary, false}}, in);
  resil::train::Summary s;
  try {
    s = resil::train::evaluate(o.from, o.data.empty() ? std::nullopt : std::optional<std::string>(o.data),
                               o.test_limit ? std::optional<std::uint64_t>(o.test_limit) : std::nullopt, o.device);
  } catch (const resil::Error& e) {
    s.command = "eval";
    s.world_size = comm.size();
    s.error = e.what();
    s.exit_code = resil::exit_code_of(e);
    resil::train::write_summary(o.summary, s);
    throw;
  }
  if (s.nan_detected) {
    s.exit_code = static_cast<int>(resil::ExitCode::numeric);
    s.error = "NaN/Inf in the weights or the test loss of " + o.from;
  }
  resil::train::write_summary(o.summary, s);
  std::cout << "eval " << o.from << ": model " << s.model << ", step " << s.steps << ", test loss " << s.test_loss << ", test accuracy "
            << s.test_accuracy;
  if (s.test_auc >= 0) std::cout << ", test AUC " << s.test_auc;
  std::cout << (s.nan_detected ? ", NaN/Inf detected" : "") << std::endl;
  if (s.nan_detected) throw resil::NumericError(s.error);
  return 0;
}

}  // namespace resil::app::ckpt_train
