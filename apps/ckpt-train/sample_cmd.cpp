#include <iostream>

#include "commands.hpp"
#include "resil/app/validators.hpp"
#include "resil/ckpt/fs.hpp"

namespace resil::app::ckpt_train {

void setup_sample(CLI::App& app, SampleOptions& o) {
  app.add_option("--from", o.from, "gpt checkpoint file")->required()->check(NonEmptyPath());
  app.add_option("--prompt", o.prompt, "text to continue (default: the start of a fortune)");
  app.add_option("--length", o.length, "bytes to generate")->transform(Decimal(0, 1 << 20));
  app.add_option("--temperature", o.temperature, "divides the logits (below 1: more likely bytes, above: more varied)")
      ->check(Real(1e-3, 100.0));
  app.add_option("--seed", o.seed, "seed of the draws (the same seed gives the same text)")->transform(Decimal());
  add_choice<resil::train::DeviceKind>(app, "--device", o.device, "cpu | cuda | auto (default: the checkpoint's device)");
}

int run_sample(const SampleOptions& o) {
  resil::ckpt::fs::require_input_file(o.from, "--from");
  std::cout << resil::train::sample(o.from, o.prompt, o.length, o.temperature, o.seed, o.device) << std::endl;
  return 0;
}

}  // namespace resil::app::ckpt_train
