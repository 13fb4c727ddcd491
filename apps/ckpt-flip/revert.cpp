#include <iostream>

#include "commands.hpp"
#include "resil/inject/plan.hpp"

namespace resil::flip {

CLI::App* setup_revert(CLI::App& app, RevertOptions& o) {
  auto* c = app.add_subcommand("revert", "Undo the flips of a log exactly (datasets byte-identical to before).");
  c->footer(
      "Examples:\n"
      "  ckpt-flip revert bad.h5 --log flips.jsonl\n"
      "  ckpt-flip revert ckpt.h5 --log flips.jsonl      # after an --in-place run, even one killed midway");
  c->add_option("FILE", o.file, "file the flips were applied to")->required()->check(CLI::ExistingFile);
  c->add_option("--log", o.log, "flip log")->required()->check(CLI::ExistingFile);
  c->add_flag("--force", o.force, "restore the logged old bits even where the file holds unexpected bits");
  return c;
}

int run_revert(const RevertOptions& o) {
  const auto log = inject::read_log(o.log);
  const auto st = inject::apply(o.file, log.records, inject::Direction::revert, o.force);
  std::cout << "reverted " << log.records.size() << " record(s): " << st.changed << " word(s) restored, " << st.unchanged
            << " already original" << (log.complete ? "" : " (the log has no footer: the injection was interrupted)") << "\n";
  return 0;
}

}  // namespace resil::flip
